// Package testnet serves test connections on loopback: a node that misbehaves on purpose,
// written as what it does with one connection.
package testnet

import (
	"net"
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
