package pollorder

import (
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		ran  []int
		want Order
	}{
		{[]int{0, 1, 2, 3}, Readiness},
		{[]int{3, 2, 1, 0}, Reversed},
		{[]int{3, 0, 1, 2}, Mixed},
		{[]int{1, 0, 2, 3}, Mixed},
	} {
		if got := classify(c.ran); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.ran, got, c.want)
		}
	}
}

// The test binary is built by plain `go test`, without tools/netpoll-overlay.sh, so it
// has Go's own order: reversed, in every Go release this was written against. A Go that
// serves in readiness order by itself no longer needs the overlay, and this test says so.
// (integration's TestVersionReportsReadinessOrder checks the built gwctl.)
func TestStockGoRunsABatchReversed(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue")
	}
	got, err := Settled()
	if err != nil {
		t.Fatal(err)
	}
	if got != Reversed {
		t.Fatalf("a batch of ready goroutines ran in %v; if this Go keeps readiness order itself, tools/netpoll-overlay.sh is no longer needed", got)
	}
}
