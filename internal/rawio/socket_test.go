package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// acceptedPair accepts one connection with an Acceptor and returns the client's end, the
// Socket and a Stream that owns it, as a worker's edgeListener sets them up.
func acceptedPair(t *testing.T) (*net.TCPConn, *Socket, *Stream, *net.TCPListener) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	a, err := NewAcceptor(ln)
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	sock := new(Socket)
	if err := a.Accept(sock); err != nil {
		t.Fatalf("Accept = %v", err)
	}
	raw, _ := sock.SyscallConn()
	s := new(Stream)
	s.Init(raw, nil)
	if !s.Own(sock.Close) {
		t.Fatal("the Stream could not own the Socket's descriptor")
	}
	t.Cleanup(func() { s.Close() })
	return client, sock, s, ln
}

// The Socket knows both ends as net would, without asking the kernel for the peer, and
// carries bytes both ways through its Stream.
func TestSocketAddressesAndBytes(t *testing.T) {
	client, sock, s, ln := acceptedPair(t)
	if got, want := sock.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Errorf("RemoteAddr = %s, want the client's %s", got, want)
	}
	if got, want := sock.LocalAddr().String(), ln.Addr().String(); got != want {
		t.Errorf("LocalAddr = %s, want the listener's %s", got, want)
	}
	if sock.RemoteAddr() != sock.RemoteAddr() {
		t.Error("RemoteAddr gave a new address on each call: a request would allocate")
	}
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("Read = %q, %v; want ping", buf[:n], err)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err = io.ReadFull(client, buf[:4]); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("the client read %q, %v; want pong", buf[:n], err)
	}
	// No TCP_NODELAY until asked (net sets it on every connection), then on.
	nodelay := func() int {
		v := -1
		raw, _ := sock.SyscallConn()
		_ = raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
		return v
	}
	if v := nodelay(); v != 0 {
		t.Errorf("TCP_NODELAY = %d before NoDelay, want 0", v)
	}
	sock.NoDelay()
	if v := nodelay(); v != 1 {
		t.Errorf("TCP_NODELAY = %d after NoDelay, want 1", v)
	}
	// The socket answered data just received by writing, which puts the kernel's
	// acknowledgements in delayed ("pingpong") mode; QuickAck takes it out of it, which
	// getsockopt(TCP_QUICKACK) reports as 1.
	sock.QuickAck()
	var quick int
	raw, _ := sock.SyscallConn()
	_ = raw.Control(func(fd uintptr) { quick, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK) })
	if quick != 1 {
		t.Errorf("TCP_QUICKACK = %d after QuickAck, want 1", quick)
	}
}

// A listener on a wildcard address leaves the local address to the kernel, asked once.
func TestSocketLocalAddrOfWildcard(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := NewAcceptor(ln)
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	client, err := net.DialTCP("tcp", nil, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var sock Socket
	if err := a.Accept(&sock); err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	local, ok := sock.LocalAddr().(*net.TCPAddr)
	if !ok || !local.IP.Equal(net.IPv4(127, 0, 0, 1)) || local.Port != port {
		t.Fatalf("LocalAddr = %v, want 127.0.0.1:%d", sock.LocalAddr(), port)
	}
	if sock.LocalAddr() != net.Addr(local) {
		t.Error("LocalAddr asked the kernel again")
	}
}

// A read deadline ends a parked read with os.ErrDeadlineExceeded, as net's does.
func TestSocketReadDeadline(t *testing.T) {
	_, sock, _, _ := acceptedPair(t)
	if err := sock.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	raw, _ := sock.SyscallConn()
	start := time.Now()
	err := raw.Read(func(fd uintptr) bool {
		_, err := unix.Read(int(fd), make([]byte, 1))
		return err != unix.EAGAIN
	})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline returned %v, want os.ErrDeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the read waited %v for a 50ms deadline", waited)
	}
}

// A Close from another goroutine wakes a read parked on the poller; the peer sees the end,
// and the Socket refuses every call after.
func TestSocketCloseWakesParkedRead(t *testing.T) {
	client, sock, s, _ := acceptedPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it park
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the parked read returned no error after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the parked read")
	}
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the client read %v after the close, want io.EOF", err)
	}
	if err := sock.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a second Close = %v, want net.ErrClosed", err)
	}
	if err := sock.SetReadDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("SetReadDeadline after Close = %v, want net.ErrClosed", err)
	}
}

// Closing the listener ends an Accept parked on it with net.ErrClosed, as net's does.
func TestAcceptEndsWithListener(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAcceptor(ln)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Accept(new(Socket)) }()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept on a closed listener = %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the listener did not end the Accept")
	}
}

// Waited says whether an Accept found the queue empty and parked: not for a connection
// already queued, and for one that came while it waited.
func TestAcceptorWaited(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := NewAcceptor(ln)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	time.Sleep(20 * time.Millisecond) // in the accept queue
	var first Socket
	if err := a.Accept(&first); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if a.Waited() {
		t.Error("Waited after accepting a queued connection")
	}
	accepted := make(chan error, 1)
	var second Socket
	go func() { accepted <- a.Accept(&second) }()
	waitParkedInAccept(t) // a sleep would not do with both CPUs busy
	later, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not accepted")
	}
	defer second.Close()
	if !a.Waited() {
		t.Error("not Waited after an Accept that parked until a connection came")
	}
}

// A connection whose reads find their bytes and whose writes fit the socket's buffer never
// joins the poller (no epoll_ctl(2) to add it, none to remove it); the first call that has
// to wait registers it, and then waits as before.
func TestSocketJoinsPollerOnlyToWait(t *testing.T) {
	client, sock, s, _ := acceptedPair(t)
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	deadline := time.Now().Add(10 * time.Second)
	// The bytes may still be on their way: read until they are there, without waiting.
	raw, _ := sock.SyscallConn()
	for {
		var n int
		_ = raw.Control(func(fd uintptr) { n, _ = unix.Read(int(fd), buf) })
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's bytes never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if pd := sock.pd.Load(); pd != 0 {
		t.Fatal("a read that found its bytes and a write that fit registered the socket with the poller")
	}
	done := make(chan error, 1)
	go func() {
		n, err := s.Read(buf)
		if err == nil && string(buf[:n]) != "again" {
			err = errors.New("read " + string(buf[:n]) + ", want again")
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it find nothing and park
	if _, err := client.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the read that had to wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read that had to wait was never woken: the registration lost its readiness")
	}
	if sock.pd.Load() == 0 {
		t.Error("a read that waited left the socket unregistered")
	}
}

// Bytes that arrive between a read that found nothing and the registration that follows
// wake the wait: epoll_ctl(2) reports the readiness a socket has when it is added.
func TestSocketRegistrationKeepsReadiness(t *testing.T) {
	client, sock, _, _ := acceptedPair(t)
	raw, _ := sock.SyscallConn()
	tries := 0
	done := make(chan error, 1)
	go func() {
		done <- raw.Read(func(fd uintptr) bool {
			tries++
			if tries == 1 {
				// Nothing yet, as far as this call knows: the bytes come before the
				// registration that follows.
				if _, err := client.Write([]byte("x")); err != nil {
					t.Error(err)
				}
				time.Sleep(20 * time.Millisecond)
				return false
			}
			var b [1]byte
			_, err := unix.Read(int(fd), b[:])
			return err != unix.EAGAIN
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("raw Read = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bytes that came before the registration never woke the wait")
	}
}

// A Close racing with a first wait's registration never leaves the wait parked, and
// never makes the runtime free a poll descriptor it was not told was closing (it would
// throw).
func TestSocketCloseRacesRegistration(t *testing.T) {
	for i := range 200 {
		_, sock, s, _ := acceptedPair(t)
		done := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 8)) // nothing comes: registers, then parks
			done <- err
		}()
		if i%2 == 0 {
			runtime.Gosched()
		}
		_ = sock.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a read closed under it returned no error")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a Close racing with the registration left the read parked", i)
		}
	}
}

// waitParkedInAccept returns once a goroutine is parked on the poller inside an
// Acceptor's accept (its stack says "[IO wait]" with accept on it), or fails after 10 s.
func waitParkedInAccept(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "rawio.(*Acceptor).accept") {
				return
			}
		}
	}
	t.Fatal("no Accept parked on the poller within 10 s")
}
