package runtimepatch

import (
	"testing"

	"gw/internal/race"
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

// The test binary is built by plain `go test`, without tools/runtime-overlay.sh, so it
// has Go's own order: reversed, in every Go release this was written against. A Go that
// serves in readiness order by itself no longer needs the overlay, and this test says so.
// (integration's TestVersionReportsTheRuntimeChanges checks the built gwctl.)
func TestStockGoRunsABatchReversed(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector shuffles the run queue")
	}
	got, err := SettledOrder()
	if err != nil {
		t.Fatal(err)
	}
	if got != Reversed {
		t.Fatalf("a batch of ready goroutines ran in %v; if this Go keeps readiness order itself, tools/runtime-overlay.sh no longer needs to change the poller", got)
	}
}

// As for the order: plain `go test` has Go's own monitor, which restarts fast; a Go that
// keeps the pace by itself no longer needs that change.
func TestStockGoRestartsTheMonitorAfterASystemCall(t *testing.T) {
	got, woke, err := SettledPace()
	if err != nil {
		t.Fatal(err)
	}
	// Unclear is let through: on a busy machine the monitor's thread may not get the CPU
	// often enough to show its pace. Kept is what this test is for.
	if got == PaceKept {
		t.Fatalf("the monitor %v (%d wake-ups in %v); if this Go keeps its pace itself, tools/runtime-overlay.sh no longer needs to change proc.go", got, woke, PaceWindow)
	}
}
