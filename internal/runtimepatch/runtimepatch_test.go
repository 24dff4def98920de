package runtimepatch

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
		t.Fatalf("a batch of ready goroutines ran in %v; if this Go keeps readiness order itself, drop tools/goruntime/netpoll-order.patch (benchmark/README.md, section Where the CPU goes)", got)
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
		t.Fatalf("the monitor %v (%d wake-ups in %v); if this Go keeps its pace itself, drop tools/goruntime/sysmon-pace.patch (benchmark/README.md, section Where the CPU goes)", got, woke, PaceWindow)
	}
}

// MeasurePace holds the processor for most of its 110 ms, and `gwctl --version` runs it:
// holding it must not spend the CPU, as the busy loop it replaced did.
func TestHoldingTheProcessorSpendsNoCPU(t *testing.T) {
	runtime.LockOSThread() // so that the thread's usage is the goroutine's
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Skipf("getrusage: %v", err)
	}
	start := time.Now()
	holdProcessor(50 * time.Millisecond)
	held := time.Since(start)
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(after.Utime.Nano() - before.Utime.Nano() + after.Stime.Nano() - before.Stime.Nano())
	if held < 50*time.Millisecond || cpu > held/4 {
		t.Fatalf("holding the processor for %v took %v of CPU; want at least 50ms held and under a quarter of it spent", held, cpu)
	}
}
