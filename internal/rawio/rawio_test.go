package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
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
	c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := s.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a net.Error timeout", err)
	}
	if waited := time.Since(start); waited < 25*time.Millisecond {
		t.Fatalf("Read gave up after %v, before its deadline", waited)
	}

	// The peer never reads: the write fills the buffers, parks, and the deadline ends it.
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := s.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n == 64<<20 {
		t.Fatalf("Write to a stalled peer = %d, %v; want part of it and os.ErrDeadlineExceeded", n, err)
	}
}
