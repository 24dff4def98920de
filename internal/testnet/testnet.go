// Package testnet serves test connections on loopback: a node that misbehaves on purpose,
// written as what it does with one connection, and a port that refuses every connection.
package testnet

import (
	"net"
	"syscall"
	"testing"
)

// Serve listens on a free 127.0.0.1 port until t ends, and runs handle in a goroutine of
// its own for each connection, closing the connection when handle returns. It returns the
// address.
func Serve(t testing.TB, handle func(c net.Conn)) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

// RefusedPort returns a TCP port on which every connection, to any loopback address, is
// refused at once, until t ends. The port is bound and never listened on: one merely
// closed after a listen may be handed to the next listener that asks for a free port (a
// test's own upstream, a gateway's), which would then answer in its place.
func RefusedPort(t testing.TB) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	// The wildcard address holds the port on every loopback address (127.0.0.0/8), for
	// tests that spread nodes over several; nothing listens, so nothing is exposed.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
