package testnet

import (
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
)

func TestServeRunsHandleForEachConnection(t *testing.T) {
	addr := Serve(t, func(c net.Conn) { io.WriteString(c, "hi") }) //nolint:errcheck
	for range 2 {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c) // to EOF: Serve closes the connection after handle
		c.Close()
		if err != nil || string(got) != "hi" {
			t.Fatalf("read %q, %v; want hi and then EOF", got, err)
		}
	}
}

// A refused port refuses, and stays taken: no listener can be given it meanwhile.
func TestRefusedPortRefusesAndStaysTaken(t *testing.T) {
	port := RefusedPort(t)
	for _, host := range []string{"127.0.0.1", "127.1.0.7"} {
		c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			c.Close()
			t.Fatalf("%s:%d accepted a connection", host, port)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s:%d: %v, want connection refused", host, port, err)
		}
	}
	if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		ln.Close()
		t.Errorf("a listener was given the refused port %d", port)
	}
}
