package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// serveOnFreePort runs an upstream with the given body on a free loopback port.
func serveOnFreePort(t *testing.T, body []byte) string {
	t.Helper()
	s, err := newServer(netip.MustParseAddrPort("127.0.0.1:0"), body)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(s.listener)
	if err != nil {
		t.Fatal(err)
	}
	go s.serve()
	return "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

func TestPipelinedRequestsWithBodiesAreAnsweredInOrder(t *testing.T) {
	addr := serveOnFreePort(t, makeBody(10))
	c := dial(t, addr)
	// A body split from its header, and a request split mid-line, across writes.
	parts := []string{
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello",
		" world",
		"GET /c HTTP/1.1\r\nHo",
		"st: x\r\n\r\n",
	}
	for _, p := range parts {
		if _, err := io.WriteString(c, p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := bufio.NewReader(c)
	for i := range 3 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "1234567890" || resp.Close {
			t.Fatalf("response %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
}

func TestCloseIsHonoured(t *testing.T) {
	addr := serveOnFreePort(t, makeBody(3))
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		c := dial(t, addr)
		io.WriteString(c, req)
		all, err := io.ReadAll(c) // ends only when the server closes
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(all, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(all, []byte("Connection: close\r\n\r\n123")) {
			t.Fatalf("%q: got %q", req, all)
		}
	}
	// HTTP/1.0 with keep-alive stays open for a second request.
	c := dial(t, addr)
	r := bufio.NewReader(c)
	for range 2 {
		io.WriteString(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
	}
}

// A body larger than the socket's buffer is written across EPOLLOUT waits, and the
// connection reads the next request afterwards.
func TestLargeBodyIsWrittenWhole(t *testing.T) {
	const size = 8 << 20
	addr := serveOnFreePort(t, makeBody(size))
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(c)
	for i := range 2 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || len(body) != size || !bytes.Equal(body[:20], []byte("12345678901234567890")) {
			t.Fatalf("response %d: %d bytes, %v", i, len(body), err)
		}
	}
}

func TestBadRequestsAreRefusedAndClosed(t *testing.T) {
	addr := serveOnFreePort(t, makeBody(10))
	for req, status := range map[string]string{
		"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n":            "400",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n":   "501",
		"GET /" + strings.Repeat("a", maxHeader+10) + " HTTP/1.1": "400",
	} {
		c := dial(t, addr)
		io.WriteString(c, req)
		all, _ := io.ReadAll(c)
		if !bytes.HasPrefix(all, []byte("HTTP/1.1 "+status)) {
			t.Errorf("%.40q: got %q, want %s and a close", req, all, status)
		}
	}
}
