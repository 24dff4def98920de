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
func TestTheFlushWaitsForGoroutinesReadyToRun(t *testing.T) {
	// The order is exact on one P, as in a worker.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var (
		mu      sync.Mutex
		f       Flusher
		flushed = make(chan int, 4)
		pending int
	)
	done := make(chan struct{})
	defer close(done)
	f.Start(&mu, done, func() {
		flushed <- pending
		pending = 0
	})
	// One flush first, so that the flusher's goroutine waits in its select, as it does
	// on a connection that has flushed before.
	mu.Lock()
	f.FlushLaterLocked()
	mu.Unlock()
	waitFlush(t, flushed)

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
	if got := waitFlush(t, flushed); got != 2 {
		t.Fatalf("the flush wrote %d pending writes, want 2 (both streams')", got)
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
