package rawio

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// acceptOne dials ln and returns the connection it accepted.
func acceptOne(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close() })
	return accepted
}

// A listener given KeepAliveOff accepts connections without SO_KEEPALIVE (and so without
// the three options that tune it), where net's default turns it on.
func TestKeepAliveOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if off && !KeepAliveOff(ln.(*net.TCPListener)) {
			t.Fatal("KeepAliveOff found no ListenConfig in net.TCPListener: every accepted connection costs four setsockopt(2) calls more")
		}
		want := 1 // net's default, which shows that the option is read right
		if off {
			want = 0
		}
		if got := sockopt(t, acceptOne(t, ln), unix.SOL_SOCKET, unix.SO_KEEPALIVE); got != want {
			t.Errorf("KeepAliveOff %v: SO_KEEPALIVE = %d, want %d", off, got, want)
		}
	}
	if KeepAliveOff(nil) {
		t.Error("KeepAliveOff(nil) reported success")
	}
}

// With DeferAccept a connection that has sent nothing is not handed to Accept; one whose
// first bytes came is, and its first read finds them.
func TestDeferAcceptWaitsForTheFirstBytes(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !DeferAccept(ln, 30*time.Second) {
		t.Fatal("DeferAccept could not set TCP_DEFER_ACCEPT")
	}
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = ln.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("a connection that sent nothing was accepted")
	}
	talking, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer talking.Close()
	if _, err := talking.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	_ = ln.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("the connection that sent its bytes was not accepted: %v", err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != talking.LocalAddr().String() {
		t.Fatalf("accepted %s, want the connection that sent its bytes, %s", c.RemoteAddr(), talking.LocalAddr())
	}
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var n int
	_ = raw.Control(func(fd uintptr) { n, _ = unix.Read(int(fd), make([]byte, 8)) })
	if n != 3 {
		t.Errorf("the first read found %d bytes, want the 3 sent", n)
	}
}
