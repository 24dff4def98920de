package rawio

import (
	"net"
	"testing"

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
