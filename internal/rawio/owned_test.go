package rawio

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// closeCounter is an owned Stream's close: it counts the closes and records any that came
// while a call held a reference, which would let a read use a freed descriptor number.
type closeCounter struct {
	s        *Stream
	c        net.Conn
	closes   atomic.Int32
	underUse atomic.Int32
}

func (cc *closeCounter) close() error {
	cc.closes.Add(1)
	if cc.s.state.Load() >= stateRef {
		cc.underUse.Add(1)
	}
	return cc.c.Close()
}

// ownedPair is waitingPair with Own, its close counted.
func ownedPair(t *testing.T) (*net.TCPConn, *Stream, *closeCounter) {
	t.Helper()
	c, peer, s := pair(t)
	cc := &closeCounter{s: s, c: c}
	if !s.WaitBeforeReads(true) || !s.Own(cc.close) {
		t.Fatal("the Stream could not own its descriptor (no poll descriptor found, or no TCP_INQ)")
	}
	return peer, s, cc
}

// expectPeerSeesTheEnd reads peer until it ends, which it must within a second.
func expectPeerSeesTheEnd(t *testing.T, peer *net.TCPConn) {
	t.Helper()
	peer.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := io.Copy(io.Discard, peer); err != nil && !errors.Is(err, net.ErrClosed) {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the peer saw no end: the connection was not closed")
		}
	}
}

// With no call in progress, Close closes at once, and once; calls after it fail.
func TestOwnedCloseIdle(t *testing.T) {
	peer, s, cc := ownedPair(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if cc.closes.Load() != 1 {
		t.Fatalf("after Close the connection was closed %d times, want 1", cc.closes.Load())
	}
	if err := s.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close = %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
	}
	if _, _, err := s.WriteThenAwait([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WriteThenAwait after Close = %v, want net.ErrClosed", err)
	}
	expectPeerSeesTheEnd(t, peer)
	if cc.closes.Load() != 1 || cc.underUse.Load() != 0 {
		t.Fatalf("closed %d times, %d under a call; want once, never under one", cc.closes.Load(), cc.underUse.Load())
	}
}

// A Close from another goroutine wakes a read or write parked on the poller; the call
// returns net.ErrClosed, and the connection is closed once the call let go of it.
func TestOwnedCloseWakesAParkedCall(t *testing.T) {
	t.Run("read", func(t *testing.T) {
		peer, s, cc := ownedPair(t)
		closed := make(chan struct{})
		go func() {
			time.Sleep(30 * time.Millisecond)
			s.Close()
			close(closed)
		}()
		start := time.Now()
		if _, err := s.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("parked Read closed under it = %v, want net.ErrClosed", err)
		}
		if waited := time.Since(start); waited > 2*time.Second {
			t.Fatalf("the Read ended %v after the Close", waited)
		}
		expectPeerSeesTheEnd(t, peer)
		<-closed // the last reference may be Close's own
		if cc.closes.Load() != 1 || cc.underUse.Load() != 0 {
			t.Fatalf("closed %d times, %d under a call; want once, never under one", cc.closes.Load(), cc.underUse.Load())
		}
	})
	t.Run("write", func(t *testing.T) {
		peer, s, cc := ownedPair(t)
		big := make([]byte, 64<<20) // before the Close is timed: zeroing it may take longer
		closed := make(chan struct{})
		go func() {
			time.Sleep(50 * time.Millisecond)
			s.Close()
			close(closed)
		}()
		// The peer never reads: the write fills both buffers and parks.
		n, err := s.Write(big)
		if !errors.Is(err, net.ErrClosed) || n == 0 {
			t.Fatalf("parked Write closed under it = %d, %v; want part of it and net.ErrClosed", n, err)
		}
		expectPeerSeesTheEnd(t, peer)
		<-closed // the last reference may be Close's own
		if cc.closes.Load() != 1 || cc.underUse.Load() != 0 {
			t.Fatalf("closed %d times, %d under a call; want once, never under one", cc.closes.Load(), cc.underUse.Load())
		}
	})
}

// Many goroutines close while the owner keeps reading and writing: the connection is
// closed exactly once, never while a call holds it, and the owner's calls all end.
func TestOwnedCloseRacesTheCalls(t *testing.T) {
	for round := range 50 {
		peer, s, cc := ownedPair(t)
		go func() { // an echoing peer, until the connection ends
			buf := make([]byte, 64)
			for {
				n, err := peer.Read(buf)
				if err != nil {
					peer.Close()
					return
				}
				if _, err := peer.Write(buf[:n]); err != nil {
					peer.Close()
					return
				}
			}
		}()
		ownerDone := make(chan error, 1)
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := s.Write([]byte("ping")); err != nil {
					ownerDone <- err
					return
				}
				if _, err := s.Read(buf); err != nil {
					ownerDone <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		var closers sync.WaitGroup
		for range 4 {
			closers.Go(func() { s.Close() })
		}
		closers.Wait()
		select {
		case err := <-ownerDone:
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				t.Fatalf("round %d: the owner's call ended with %v, want net.ErrClosed", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the owner's calls went on after Close", round)
		}
		if cc.closes.Load() != 1 || cc.underUse.Load() != 0 {
			t.Fatalf("round %d: closed %d times, %d under a call; want once, never under one", round, cc.closes.Load(), cc.underUse.Load())
		}
	}
}

// sockopt reads an int socket option of c.
func sockopt(t *testing.T, c net.Conn, level, name int) int {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, name) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// An owned Stream reads without TCP_INQ, and so without waiting first, until
// WaitBeforeReads turns it on, which a second call leaves as it is.
func TestOwnWithoutWaitingFirst(t *testing.T) {
	c, peer, s := pair(t)
	if !s.Own(c.Close) {
		t.Fatal("Own could not take the descriptor")
	}
	if got := sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_INQ); got != 0 {
		t.Fatalf("TCP_INQ = %d before WaitBeforeReads, want 0: a connection that serves one request pays for it", got)
	}
	buf := make([]byte, 64)
	peer.Write([]byte("one"))
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "one" {
		t.Fatalf("Read = %q, %v; want one", buf[:n], err)
	}
	if s.drained {
		t.Fatal("a read without TCP_INQ marked the socket drained: the next read could wait on an event already taken")
	}
	if !s.WaitBeforeReads(true) {
		t.Fatal("WaitBeforeReads could not turn on")
	}
	if got := sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_INQ); got != 1 {
		t.Fatalf("TCP_INQ = %d after WaitBeforeReads, want 1", got)
	}
	peer.Write([]byte("two"))
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "two" {
		t.Fatalf("Read = %q, %v; want two", buf[:n], err)
	}
	if !s.drained {
		t.Fatal("a short read with TCP_INQ on did not mark the socket drained")
	}
	if !s.WaitBeforeReads(true) || !s.drained {
		t.Fatal("WaitBeforeReads(true) again forgot that the socket was drained")
	}
	if s.WaitBeforeReads(false) || s.owned || s.inq {
		t.Fatal("WaitBeforeReads(false) left the Stream owned or waiting first")
	}
}
