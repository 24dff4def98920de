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
	keepAlive, noDelay := -1, -1
	_ = raw.Control(func(fd uintptr) {
		keepAlive, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		noDelay, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY)
	})
	if keepAlive != 0 {
		t.Errorf("SO_KEEPALIVE = %d on a dialed connection, want 0", keepAlive)
	}
	if noDelay != 1 {
		t.Errorf("TCP_NODELAY = %d, want 1 (set by the dial, as net sets it; it also shows the options are read right)", noDelay)
	}
}
