package rawio

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A goroutine whose socket became ready before a Wait has run by the time the waiter runs
// again after it: the Wait let the runtime poll. A yield alone would not, on one processor
// with nothing else runnable: the scheduler runs the yielding goroutine again first.
func TestPollerTurnLetsThePollRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // a worker's
	turn, err := NewPollerTurn()
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for round := range 20 {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var read atomic.Bool
		parked := make(chan struct{})
		go func() {
			close(parked)
			var b [1]byte
			_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, _ := server.Read(b[:]); n == 1 {
				read.Store(true)
			}
		}()
		<-parked
		time.Sleep(5 * time.Millisecond) // the reader parks on the poller
		if _, err := client.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		// Loopback may deliver the byte after the write returned (softirq): wait until the
		// socket is readable, which is when the poller was told.
		raw, _ := server.(*net.TCPConn).SyscallConn()
		_ = raw.Control(func(fd uintptr) {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10000)
		})
		if !turn.Wait() {
			t.Fatal("Wait did not wait")
		}
		// The poll that woke this goroutine took the reader's socket too (or an earlier
		// one did): the reader is runnable, and runs before this goroutine has yielded
		// twice (one in 61 turns the scheduler takes its global queue first, where a
		// yield puts this goroutine).
		for range 3 {
			runtime.Gosched()
		}
		if !read.Load() {
			t.Fatalf("round %d: the goroutine whose socket was ready had not run after the poller's turn", round)
		}
		client.Close()
		server.Close()
	}
}

// Wait returns at once while another Wait is in progress and after Close, and Close ends a
// Wait in progress.
func TestPollerTurnConcurrentWaitAndClose(t *testing.T) {
	turn, err := NewPollerTurn()
	if err != nil {
		t.Fatal(err)
	}
	// Many waiters at once: only one waits on the descriptor at a time (the poller allows
	// one), the others return false; none hangs.
	done := make(chan bool, 16)
	for range 16 {
		go func() { done <- turn.Wait() }()
	}
	waited := 0
	for range 16 {
		select {
		case w := <-done:
			if w {
				waited++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Wait did not return")
		}
	}
	if waited == 0 {
		t.Error("no Wait waited")
	}
	if err := turn.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if turn.Wait() {
		t.Error("Wait after Close waited")
	}
	if turn.Close() == nil {
		t.Error("a second Close succeeded")
	}
}
