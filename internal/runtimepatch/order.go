// Package runtimepatch measures the two things gwctl's build changes in Go's runtime
// (tools/runtime-overlay.sh), since only running a binary can tell whether it has them:
//
//   - Order: the order in which the scheduler runs goroutines whose descriptors became
//     ready in one poll. A worker serves each connection on a goroutine, so this is the
//     order in which a batch of ready connections is served. Stock Go runs a batch from
//     the last ready to the first, which widens the latency tail; gwctl keeps readiness
//     order, as nginx's event loop does.
//   - Pace: what the runtime's monitor thread does when a system call wakes it from its
//     deep sleep. Stock Go restarts it at a 20 µs period; gwctl keeps its pace.
package runtimepatch

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// Order is how one poll's ready goroutines are run.
type Order int

const (
	// Mixed: neither order, as when something else polled in between; measure again.
	Mixed Order = iota
	// Readiness: first ready, first run (nginx's event loop, and gwctl's build).
	Readiness
	// Reversed: last ready, first run (stock Go).
	Reversed
)

func (o Order) String() string {
	switch o {
	case Readiness:
		return "readiness order"
	case Reversed:
		return "reversed (stock Go)"
	}
	return "mixed"
}

// waiters is how many goroutines wait in one measurement: enough that an accident does
// not look like either order.
const waiters = 8

// settle is how long the waiters get to block on the poller: they run as soon as the
// measuring goroutine sleeps, and need microseconds.
const settle = 20 * time.Millisecond

// MeasureOrder makes waiters goroutines block reading pipes, makes every pipe readable in turn
// without letting them run, then records the order they run in. It runs with GOMAXPROCS
// at 1, as a worker does, so that one scheduler takes the whole batch from one poll; the
// previous setting is restored. It takes about settle, and is not meant to run
// beside other work of the process.
func MeasureOrder() (Order, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var readers, writers [waiters]*os.File
	defer func() {
		for i := range waiters {
			if readers[i] != nil {
				readers[i].Close()
				writers[i].Close()
			}
		}
	}()
	for i := range waiters {
		r, w, err := os.Pipe()
		if err != nil {
			return Mixed, fmt.Errorf("runtimepatch: %w", err)
		}
		readers[i], writers[i] = r, w
	}
	var (
		mu  sync.Mutex // uncontended with one P; for the race detector's sake
		ran []int
	)
	done := make(chan error, waiters)
	for i := range waiters {
		go func() {
			var b [1]byte
			_, err := readers[i].Read(b[:])
			mu.Lock()
			ran = append(ran, i)
			mu.Unlock()
			done <- err
		}()
	}
	time.Sleep(settle)
	for i := range waiters {
		// A write to a pipe with room returns without blocking, so no reader runs
		// before the last write: they all wait for the next poll.
		if _, err := writers[i].Write([]byte{1}); err != nil {
			return Mixed, fmt.Errorf("runtimepatch: %w", err)
		}
	}
	for range waiters {
		if err := <-done; err != nil {
			return Mixed, fmt.Errorf("runtimepatch: %w", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return classify(ran), nil
}

// classify names the order of ran, a permutation of 0..len(ran)-1.
func classify(ran []int) Order {
	inOrder, reversed := true, true
	for i, v := range ran {
		inOrder = inOrder && v == i
		reversed = reversed && v == len(ran)-1-i
	}
	switch {
	case inOrder:
		return Readiness
	case reversed:
		return Reversed
	}
	return Mixed
}

// SettledOrder measures up to three times, until a measurement is not Mixed.
func SettledOrder() (Order, error) {
	for range 2 {
		if o, err := MeasureOrder(); err != nil || o != Mixed {
			return o, err
		}
	}
	return MeasureOrder()
}
