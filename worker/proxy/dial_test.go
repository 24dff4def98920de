package proxy

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gw/conf"
)

// A connection to a node has no TCP keep-alive probes, as nginx's have none unless
// proxy_socket_keepalive is on: four setsockopt(2) calls a dial, and an idle pooled
// connection is bounded by keepalive_pool.idle_timeout, a busy one by the read timeout.
// TCP_NODELAY and TCP_INQ come with its second write, not with the dial: a connection
// dialled for one exchange, past the keepalive pool, never needs them.
func TestADialSetsNoKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	up := build(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: port, Weight: 1}}}, nil)
	c, err := up.nodes[0].pool.dial(5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	raw, err := c.conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	options := func() (keepAlive, noDelay, inq int) {
		keepAlive, noDelay, inq = -1, -1, -1
		_ = raw.Control(func(fd uintptr) {
			keepAlive, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
			noDelay, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY)
			inq, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_INQ)
		})
		return keepAlive, noDelay, inq
	}
	for write, want := range []struct{ noDelay, inq int }{{0, 0}, {0, 0}, {1, 1}, {1, 1}} {
		if write > 0 {
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
				t.Fatal(err)
			}
		}
		keepAlive, noDelay, inq := options()
		if keepAlive != 0 {
			t.Errorf("after %d writes: SO_KEEPALIVE = %d, want 0", write, keepAlive)
		}
		if noDelay != want.noDelay || inq != want.inq {
			t.Errorf("after %d writes: TCP_NODELAY = %d, TCP_INQ = %d, want %d and %d (on from the second write)",
				write, noDelay, inq, want.noDelay, want.inq)
		}
	}
}
