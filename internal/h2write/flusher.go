package h2write

import (
	"runtime"
	"sync"
)

// Flusher batches the writes of an HTTP/2 connection shared by many goroutines.
//
// Each stream's goroutine writes its frames into the connection's buffer under the
// connection's lock. Flushing there would cost a system call per stream; leaving the
// flush to whichever stream writes last needs someone to know it is last. A Flusher is
// asked for a flush instead, and its own goroutine does it once the goroutines ready to
// run have had their turn (runtime.Gosched): answers of several streams whose nodes
// answered together go out in one write. With GOMAXPROCS=1, as in a worker, nearly every
// goroutine made runnable before the flush was asked for runs first (the scheduler takes
// the global queue, where Gosched puts the flusher, first once every 61 turns): a flush
// that comes early costs a write, never a frame.
//
// The zero value is not usable: call Start.
type Flusher struct {
	// queued is set, under the connection's lock, while a flush has been asked for and
	// has not run yet: asking again costs nothing until it has.
	queued bool
	wake   chan struct{}
}

// Start runs the flusher's goroutine until done closes. flushLocked is called with mu
// held for each flush asked for; it decides whether there is anything to write and what a
// failed write means for the connection.
func (f *Flusher) Start(mu sync.Locker, done <-chan struct{}, flushLocked func()) {
	f.wake = make(chan struct{}, 1)
	go f.run(mu, done, flushLocked)
}

// FlushLaterLocked asks for a flush once the goroutines ready to run have had their turn.
// The caller holds the connection's lock (the mu given to Start).
func (f *Flusher) FlushLaterLocked() {
	if f.queued {
		return
	}
	f.queued = true
	select {
	case f.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (f *Flusher) run(mu sync.Locker, done <-chan struct{}, flushLocked func()) {
	for {
		select {
		case <-f.wake:
		case <-done:
			return
		}
		runtime.Gosched() // the other streams' frames first
		mu.Lock()
		f.queued = false
		flushLocked()
		mu.Unlock()
	}
}
