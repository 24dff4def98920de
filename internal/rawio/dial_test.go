package rawio

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gw/internal/race"
)

// dialedStream dials addr with Socket.Dial and returns the Socket and a Stream that owns
// it, as the proxy sets up a connection to a node.
func dialedStream(t *testing.T, addr netip.AddrPort) (*Socket, *Stream) {
	t.Helper()
	sock := new(Socket)
	if err := sock.Dial(addr, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("Dial(%s) = %v", addr, err)
	}
	raw, _ := sock.SyscallConn()
	s := new(Stream)
	s.Init(raw, nil)
	s.Own(nil)
	t.Cleanup(func() { s.Close() })
	return sock, s
}

// A dialled Socket reaches the listener, knows its peer without asking the kernel, has
// TCP_NODELAY on as net's dial does, and carries bytes both ways.
func TestDialConnects(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "[::1]"
			}
			ln, err := net.Listen(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer ln.Close()
			addr := ln.Addr().(*net.TCPAddr).AddrPort()
			sock, s := dialedStream(t, addr)
			if got := sock.RemoteAddr().String(); got != addr.String() {
				t.Errorf("RemoteAddr = %s, want %s", got, addr)
			}
			accepted, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer accepted.Close()
			if got, want := sock.LocalAddr().String(), accepted.RemoteAddr().String(); got != want {
				t.Errorf("LocalAddr = %s, want what the listener saw, %s", got, want)
			}
			noDelay := func() int {
				v := -1
				raw, _ := sock.SyscallConn()
				_ = raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
				return v
			}
			if got := noDelay(); got != 0 {
				t.Errorf("TCP_NODELAY = %d after the dial, want 0 (left to NoDelay)", got)
			}
			sock.NoDelay()
			if got := noDelay(); got != 1 {
				t.Errorf("TCP_NODELAY = %d after NoDelay, want 1", got)
			}
			if _, err := s.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			_ = accepted.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(accepted, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("the listener read %q, %v; want ping", buf, err)
			}
			if _, err := accepted.Write([]byte("pong")); err != nil {
				t.Fatal(err)
			}
			_ = sock.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := s.Read(buf); err != nil || string(buf[:n]) != "pong" {
				t.Fatalf("Read = %q, %v; want pong", buf[:n], err)
			}
		})
	}
}

// An IPv4-mapped address is dialled as IPv4, as net dials it.
func TestDialMappedAddress(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	sock, _ := dialedStream(t, netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), port))
	if got, want := sock.RemoteAddr().String(), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String(); got != want {
		t.Errorf("RemoteAddr = %s, want %s", got, want)
	}
}

// A port nobody listens on refuses the connect, with net's kind of error, which the proxy
// answers with its next node or a 502.
func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	var sock Socket
	err = sock.Dial(addr, time.Now().Add(10*time.Second))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a closed port = %v, want ECONNREFUSED", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || op.Addr.String() != addr.String() {
		t.Errorf("Dial's error %#v is not net's dial error for %s", err, addr)
	}
	if op, ok := err.(interface{ Timeout() bool }); ok && op.Timeout() {
		t.Error("a refused connect says it timed out: the proxy would answer 504")
	}
}

// fullBacklog returns the address of a listener whose accept queue is full: the kernel
// drops the SYN of every further connect (a listener over its backlog does, cookies or
// not), so a dial there waits until its deadline, as one to a black-holed node.
func fullBacklog(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil { // a queue of one
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.AddrFrom4(sa.(*unix.SockaddrInet4).Addr), uint16(sa.(*unix.SockaddrInet4).Port))
	// Fill the queue: connects complete until it is full, never accepted.
	for range 4 {
		var sock Socket
		if err := sock.Dial(addr, time.Now().Add(200*time.Millisecond)); err != nil {
			return addr
		}
		t.Cleanup(func() { sock.Close() })
	}
	t.Fatal("four connects to a listener with a backlog of 0 all completed: no queue to fill")
	return addr
}

// A dial that gets no answer ends at its deadline with a timeout error, which the proxy
// answers with a 504 (or its next node); and a deadline already passed dials nothing.
func TestDialDeadline(t *testing.T) {
	addr := fullBacklog(t)
	const timeout = 300 * time.Millisecond
	var sock Socket
	start := time.Now()
	err := sock.Dial(addr, start.Add(timeout))
	took := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Dial to a full backlog = %v, want a deadline exceeded", err)
	}
	if te, ok := err.(interface{ Timeout() bool }); !ok || !te.Timeout() {
		t.Errorf("Dial's error %v does not say Timeout(), which the proxy looks for", err)
	}
	if took < timeout-10*time.Millisecond || took > timeout+5*time.Second {
		t.Errorf("Dial gave up after %v, want about %v", took, timeout)
	}
	if err := sock.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Close after a failed Dial = %v, want net.ErrClosed: Dial closed it already", err)
	}
	if err := sock.Dial(addr, time.Now().Add(-time.Second)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Dial with a deadline passed = %v, want a deadline exceeded", err)
	}
}

// A zero deadline is none: the dial waits as long as the kernel's handshake does.
func TestDialWithoutDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var sock Socket
	if err := sock.Dial(ln.Addr().(*net.TCPAddr).AddrPort(), time.Time{}); err != nil {
		t.Fatalf("Dial with no deadline = %v", err)
	}
	sock.Close()
}

// The dial allocates nothing: net.Dialer's allocates its address string, a netFD and its
// wrappers, a finalizer's record and both addresses.
func TestDialAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts are off under -race")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	// A queue long enough for every dial below: nothing accepts (an accepting goroutine's
	// allocations would be counted too), and each dial closes its end at once.
	if err := unix.Listen(fd, 1024); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	in := sa.(*unix.SockaddrInet4)
	addr := netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
	var sock Socket
	deadline := time.Now().Add(time.Minute)
	allocs := testing.AllocsPerRun(200, func() {
		if err := sock.Dial(addr, deadline); err != nil {
			t.Fatal(err)
		}
		sock.Close()
	})
	netAllocs := testing.AllocsPerRun(200, func() {
		d := net.Dialer{Deadline: deadline, KeepAlive: -1}
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	t.Logf("allocations per dial and close: rawio %.0f, net.Dialer %.0f", allocs, netAllocs)
	if allocs != 0 {
		t.Errorf("Socket.Dial and Close allocate %.0f times, want 0", allocs)
	}
}

// benchListener is a loopback listener with a long queue that a goroutine empties with
// raw accept4 and close, so that the dials measured never wait for a full queue.
func benchListener(b *testing.B) netip.AddrPort {
	b.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	a, err := NewAcceptor(ln)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		var s Socket
		for a.Accept(&s) == nil {
			s.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// BenchmarkDial is a dial and close of a loopback connection with Socket.Dial.
func BenchmarkDial(b *testing.B) {
	addr := benchListener(b)
	var sock Socket
	b.ReportAllocs()
	for b.Loop() {
		if err := sock.Dial(addr, time.Now().Add(10*time.Second)); err != nil {
			b.Fatal(err)
		}
		sock.Close()
	}
}

// BenchmarkDialNet is the same with net.Dialer, as the proxy dialled before (the address
// formatted to a string, as it had to be).
func BenchmarkDialNet(b *testing.B) {
	addr := benchListener(b)
	b.ReportAllocs()
	for b.Loop() {
		d := net.Dialer{Deadline: time.Now().Add(10 * time.Second), KeepAlive: -1}
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
