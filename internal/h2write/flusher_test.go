package h2write

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// A burst of requests made before the flusher runs is one flush, and a request made after
// it ran is another.
func TestRequestsBeforeTheFlushRunAreOneFlush(t *testing.T) {
	var (
		mu      sync.Mutex
		f       Flusher
		flushed = make(chan int, 16)
		pending int
	)
	done := make(chan struct{})
	defer close(done)
	f.Start(&mu, done, func() {
		flushed <- pending
		pending = 0
	})

	mu.Lock()
	for i := 0; i < 10; i++ {
		pending++
		f.FlushLaterLocked()
	}
	mu.Unlock()
	if got := waitFlush(t, flushed); got != 10 {
		t.Fatalf("first flush wrote %d pending writes, want all 10 in one flush", got)
	}

	mu.Lock()
	pending++
	f.FlushLaterLocked()
	mu.Unlock()
	if got := waitFlush(t, flushed); got != 1 {
		t.Fatalf("second flush wrote %d pending writes, want 1", got)
	}
	select {
	case n := <-flushed:
		t.Fatalf("an extra flush ran (%d pending): one was asked for", n)
	case <-time.After(50 * time.Millisecond):
	}
}

// The flush waits for the goroutines that were ready to run when it was asked for: a
// stream that becomes runnable together with the one asking gets its frames in first.
// Not always: the scheduler takes a goroutine from the global queue (where Gosched puts
// the flusher) before the local ones once every 61 turns, and the system monitor may
// preempt a goroutine descheduled by the OS. So the test counts: over 50 tries, with the
// yield nearly every flush carries both streams' writes; without it none does.
func TestTheFlushWaitsForGoroutinesReadyToRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as in a worker
	var (
		mu      sync.Mutex
		f       Flusher
		flushed = make(chan int, 4)
		pending int
	)
	done := make(chan struct{})
	defer close(done)
	f.Start(&mu, done, func() {
		if pending > 0 {
			flushed <- pending
		}
		pending = 0
	})
	// One flush first, so that the flusher's goroutine waits in its select, as it does
	// on a connection that has flushed before.
	mu.Lock()
	pending++
	f.FlushLaterLocked()
	mu.Unlock()
	waitFlush(t, flushed)

	const tries = 50
	together := 0
	for range tries {
		var ready sync.WaitGroup
		ready.Add(1)
		go func() { // runnable before the flush is asked for
			defer ready.Done()
			mu.Lock()
			pending++
			f.FlushLaterLocked()
			mu.Unlock()
		}()
		mu.Lock()
		pending++
		f.FlushLaterLocked()
		mu.Unlock()
		ready.Wait()
		switch waitFlush(t, flushed) {
		case 2:
			together++
		case 1:
			waitFlush(t, flushed) // the other stream's, in a flush of its own
		}
	}
	if together < tries*4/5 {
		t.Fatalf("%d of %d flushes carried both streams' writes, want nearly all", together, tries)
	}
}

// Closing done ends the flusher's goroutine.
func TestDoneEndsTheFlusher(t *testing.T) {
	var (
		mu sync.Mutex
		f  = Flusher{wake: make(chan struct{}, 1)}
	)
	done, returned := make(chan struct{}), make(chan struct{})
	go func() {
		f.run(&mu, done, func() {})
		close(returned)
	}()
	close(done)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the flusher's goroutine still runs 5 s after done closed")
	}
}

func waitFlush(t *testing.T, flushed <-chan int) int {
	t.Helper()
	select {
	case n := <-flushed:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no flush within 5 s")
		return 0
	}
}
