package rawio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// pair returns both ends of a loopback TCP connection and a Stream over the first.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn, *Stream) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s := new(Stream)
	s.Init(raw, nil)
	return c.(*net.TCPConn), peer.(*net.TCPConn), s
}

func TestStreamReadWaitsAndWritesAll(t *testing.T) {
	_, peer, s := pair(t)
	go func() {
		time.Sleep(20 * time.Millisecond) // the read parks first
		peer.Write([]byte("hello"))
	}()
	buf := make([]byte, 64)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v; want hello", buf[:n], err)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Fatalf("zero-byte Read = %d, %v; want 0, nil", n, err)
	}

	// 8 MiB is more than the socket buffers hold: Write parks until the peer reads.
	big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	if n, err := s.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("peer read %d bytes, not what was written", len(b))
	}
}

func TestStreamReadEOFAndReset(t *testing.T) {
	_, peer, s := pair(t)
	peer.Write([]byte("x"))
	peer.CloseWrite()
	buf := make([]byte, 8)
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want the byte", n, err)
	}
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer's FIN = %d, %v; want 0, io.EOF", n, err)
	}

	c2, peer2, s2 := pair(t)
	peer2.SetLinger(0) // close with RST
	peer2.Close()
	time.Sleep(20 * time.Millisecond)
	_, err := s2.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after RST: %v, want ECONNRESET", err)
	}
	var op *net.OpError
	if !errors.As(OpError("read", c2, err), &op) || op.Op != "read" {
		t.Fatalf("OpError did not wrap %v as a read *net.OpError", err)
	}
	if OpError("read", c2, io.EOF) != io.EOF || OpError("read", c2, nil) != nil {
		t.Fatal("OpError must pass io.EOF and nil through")
	}
}

func TestStreamKeepsTheDeadlines(t *testing.T) {
	c, _, s := pair(t)
	deadline := time.Now().Add(30 * time.Millisecond)
	c.SetReadDeadline(deadline)
	_, err := s.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
	if early := time.Until(deadline); early > time.Millisecond {
		t.Fatalf("Read gave up %v before its deadline", early)
	}

	// The peer never reads: the write fills the buffers, parks, and the deadline ends it.
	big := make([]byte, 64<<20) // before the deadline: zeroing it may take longer
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := s.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n == 64<<20 {
		t.Fatalf("Write to a stalled peer = %d, %v; want part of it and os.ErrDeadlineExceeded", n, err)
	}
}

// waitingPair is pair with reads that wait first after one that emptied the socket, and,
// with own set, a Stream making its own calls (Own).
func waitingPair(t *testing.T, own bool) (*net.TCPConn, *net.TCPConn, *Stream) {
	t.Helper()
	c, peer, s := pair(t)
	if !s.WaitBeforeReads(true) {
		t.Fatal("WaitBeforeReads could not turn on (no poll descriptor found, or no TCP_INQ): keep-alive reads cost a read(2) more")
	}
	if own && !s.Own(c.Close) {
		t.Fatal("Own could not take the descriptor")
	}
	return c, peer, s
}

// bothWays runs test on a Stream going through net's RawConn and on one that owns its
// descriptor.
func bothWays(t *testing.T, test func(t *testing.T, own bool)) {
	t.Run("through-net", func(t *testing.T) { test(t, false) })
	t.Run("owned", func(t *testing.T) { test(t, true) })
}

// A read after one that emptied the socket waits first, without clearing the readiness:
// bytes that came while nobody read must be found at once, and bytes left behind by a
// full read must be read without waiting for more.
func TestStreamWaitFirstLosesNothing(t *testing.T) { bothWays(t, testWaitFirstLosesNothing) }

func testWaitFirstLosesNothing(t *testing.T, own bool) {
	c, peer, s := waitingPair(t, own)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	// expect reads into size bytes of buf.
	expect := func(size int, want string) {
		t.Helper()
		start := time.Now()
		n, err := s.Read(buf[:size])
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("Read = %q, %v; want %q", buf[:n], err, want)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("Read of %q waited %v for bytes already there", want, waited)
		}
	}
	peer.Write([]byte("first"))
	expect(64, "first") // a short read: the next read waits first
	if !s.drained {
		t.Fatal("a short read did not mark the socket drained")
	}
	// The next bytes arrive, and the poller sees them, before anyone reads again:
	// pipelining. The wait must return at once.
	peer.Write([]byte("second"))
	time.Sleep(50 * time.Millisecond)
	expect(64, "second")

	// A read that fills its buffer may leave bytes behind that no later event announces.
	peer.Write([]byte("0123456789abcdef"))
	time.Sleep(50 * time.Millisecond)
	expect(8, "01234567")
	if s.drained {
		t.Fatal("a read that left bytes behind marked the socket drained")
	}
	expect(8, "89abcdef")
	if !s.drained {
		t.Fatal("a full read that left nothing behind did not mark the socket drained")
	}

	// Bytes that come while the read waits wake it.
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("later"))
	}()
	expect(64, "later")
}

// The kernel ends a read at the peer's FIN, and no event announces the FIN again: a read
// that stopped there must be followed by a read (io.EOF), not a wait. A reset that comes
// while the read waits wakes it.
func TestStreamWaitFirstSeesTheEnd(t *testing.T) { bothWays(t, testWaitFirstSeesTheEnd) }

func testWaitFirstSeesTheEnd(t *testing.T, own bool) {
	c, peer, s := waitingPair(t, own)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	peer.Write([]byte("last"))
	peer.CloseWrite()
	time.Sleep(50 * time.Millisecond) // the data and the FIN are both in, the event seen
	buf := make([]byte, 64)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "last" {
		t.Fatalf("Read = %q, %v; want last", buf[:n], err)
	}
	if s.drained {
		t.Fatal("a read that stopped at the FIN marked the socket drained")
	}
	start := time.Now()
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the FIN = %d, %v; want 0, io.EOF", n, err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("io.EOF came after %v: the read waited for an event that never comes", waited)
	}

	c2, peer2, s2 := waitingPair(t, own)
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	peer2.Write([]byte("x"))
	if n, err := s2.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want the byte", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer2.SetLinger(0) // close with RST
		peer2.Close()
	}()
	if _, err := s2.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read waiting when the peer reset: %v, want ECONNRESET", err)
	}
}

// TCP_INQ says nothing is left after the last bytes when a reset came with them, and the
// reset's event may have been taken with theirs: the read that follows must find the reset
// (an upstream that sends part of a body and resets), not wait for an event that never
// comes. A write in between would have failed on the reset, so after one the read may
// still wait first, as a keep-alive server's does.
func TestStreamWaitFirstSeesAResetThatCameWithTheBytes(t *testing.T) {
	bothWays(t, testWaitFirstSeesAResetThatCameWithTheBytes)
}

func testWaitFirstSeesAResetThatCameWithTheBytes(t *testing.T, own bool) {
	c, peer, s := waitingPair(t, own)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	peer.Write([]byte("last"))
	peer.SetLinger(0) // close with RST
	peer.Close()
	time.Sleep(50 * time.Millisecond) // the bytes and the reset are both in, the event seen
	// The wait for an answer (WriteThenAwait's) takes the one event both made.
	var err error
	if own {
		err = s.waitReadable()
	} else {
		err = s.awaitReadable()
	}
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "last" {
		t.Fatalf("Read = %q, %v; want last", buf[:n], err)
	}
	start := time.Now()
	if _, err := s.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after the bytes the reset came with: %v, want ECONNRESET", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("the reset came after %v: the read waited for an event that never comes", waited)
	}
}

// The wait before a read keeps the deadline, and a Close from another goroutine ends it.
func TestStreamWaitFirstDeadlineAndClose(t *testing.T) { bothWays(t, testWaitFirstDeadlineAndClose) }

func testWaitFirstDeadlineAndClose(t *testing.T, own bool) {
	c, peer, s := waitingPair(t, own)
	buf := make([]byte, 64)
	peer.Write([]byte("x"))
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want the byte", n, err)
	}
	// Held to the deadline itself, not to a clock reading taken after it was set: a
	// preemption between the two would make the read look early.
	deadline := time.Now().Add(30 * time.Millisecond)
	c.SetReadDeadline(deadline)
	_, err := s.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if early := time.Until(deadline); early > time.Millisecond {
		t.Fatalf("Read gave up %v before its deadline", early)
	}

	c.SetReadDeadline(time.Time{})
	peer.Write([]byte("y"))
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read after the timeout = %d, %v; want the byte", n, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		if own {
			s.Close() // an owned Stream's connection closes only through it
		} else {
			c.Close()
		}
	}()
	if _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read when closed under it: %v, want net.ErrClosed", err)
	}
}

// A keep-alive exchange, a message each way and each answered only once it arrived, costs
// the waiting side one read per message, not a read that finds nothing and another after.
func TestStreamWaitFirstReadsOncePerMessage(t *testing.T) {
	bothWays(t, testWaitFirstReadsOncePerMessage)
}

func testWaitFirstReadsOncePerMessage(t *testing.T, own bool) {
	const rounds = 200
	_, peer, s := waitingPair(t, own)
	s.reads = 0
	peerDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for range rounds {
			if _, err := peer.Write([]byte("ping")); err != nil {
				peerDone <- err
				return
			}
			if _, err := io.ReadFull(peer, buf[:4]); err != nil || string(buf[:4]) != "pong" {
				peerDone <- fmt.Errorf("the peer read %q, %v", buf[:4], err)
				return
			}
		}
		peerDone <- nil
	}()
	buf := make([]byte, 64)
	for i := range rounds {
		// The Stream answers, then reads at once: the next ping is not there yet.
		if n, err := s.Read(buf); err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("round %d: Read = %q, %v", i, buf[:n], err)
		}
		if _, err := s.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-peerDone; err != nil {
		t.Fatal(err)
	}
	// One read a round, and now and then one more after a wake for bytes already read; a
	// Stream reading before it waits makes it nearly two.
	if s.reads > rounds+rounds/4 {
		t.Fatalf("%d rounds took %d reads, want about %d", rounds, s.reads, rounds)
	}
}

// A write to a connection the peer reset fails with EPIPE and raises no SIGPIPE: a
// Stream writes with send(2) and MSG_NOSIGNAL, where write(2) would have the kernel
// signal the process on every such write.
func TestStreamWriteToResetPeerRaisesNoSIGPIPE(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		c, peer, s := pair(t)
		if own && !s.Own(c.Close) {
			t.Fatal("Own could not take the descriptor")
		}
		pipes := make(chan os.Signal, 1)
		signal.Notify(pipes, syscall.SIGPIPE)
		defer signal.Stop(pipes)
		peer.SetLinger(0) // close with a reset
		peer.Close()
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			// The first write after the reset may fail with ECONNRESET; the next ones
			// fail with EPIPE, where write(2) raises SIGPIPE.
			if _, err = s.Write([]byte("x")); errors.Is(err, syscall.EPIPE) {
				break
			}
		}
		if !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("Write to a reset peer = %v; want EPIPE", err)
		}
		select {
		case <-pipes:
			t.Fatal("a write to a reset peer raised SIGPIPE")
		case <-time.After(200 * time.Millisecond):
		}
	})
}
