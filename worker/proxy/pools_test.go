package proxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestUpConnSendAndAwait drives upConn's send-then-wait path on a loopback pair: the whole
// request reaches the node whatever its size (past the socket buffer, the rest goes the
// ordinary way), the answer is then read as usual, and a node that does not answer makes
// the first Read fail with the read timeout.
func TestUpConnSendAndAwait(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		answer   bool
		wantRead string // "" for a timeout
	}{
		{name: "small request, answered", size: 100, answer: true, wantRead: "HTTP/1.1 200 OK"},
		{name: "request past the socket buffer, answered", size: 8 << 20, answer: true, wantRead: "HTTP/1.1 200 OK"},
		{name: "small request, no answer", size: 100, answer: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			received := make(chan int, 1)
			go func() {
				node, err := ln.Accept()
				if err != nil {
					received <- -1
					return
				}
				defer node.Close()
				// Read slowly at first so that a large request fills the socket buffers.
				time.Sleep(50 * time.Millisecond)
				n, _ := io.CopyN(io.Discard, node, int64(tt.size))
				received <- int(n)
				if tt.answer {
					node.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) //nolint:errcheck
				}
				io.Copy(io.Discard, node) //nolint:errcheck
			}()

			np := &nodePool{}
			c, err := np.dialPlain(ln.Addr().(*net.TCPAddr).AddrPort(), time.Now().Add(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			c.readTimeout, c.writeTimeout = 300*time.Millisecond, 5*time.Second
			defer c.close()

			req := bytes.Repeat([]byte("x"), tt.size)
			c.awaitReply = true
			n, err := c.Write(req)
			if err != nil || n != tt.size {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, tt.size)
			}
			if got := <-received; got != tt.size {
				t.Fatalf("node received %d bytes, want %d", got, tt.size)
			}
			line, err := c.br.ReadString('\n')
			if tt.wantRead == "" {
				if !isTimeout(err) {
					t.Fatalf("read = %q, %v; want a timeout", line, err)
				}
				return
			}
			if err != nil || line != tt.wantRead+"\r\n" {
				t.Fatalf("read = %q, %v; want %q", line, err, tt.wantRead)
			}
		})
	}
}
