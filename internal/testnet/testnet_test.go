package testnet

import (
	"io"
	"net"
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
