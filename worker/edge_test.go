package worker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
)

// parsed reads raw the way the server does, so RawHeaders holds the wire bytes.
func parsed(t testing.TB, raw string) *fasthttp.RequestHeader {
	t.Helper()
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("fasthttp refuses %q: %v", raw, err)
	}
	return &h
}

func TestCheckHeaderBlock(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want []byte
	}{
		{"plain", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\r\n", nil},
		{"content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", nil},
		{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", nil},
		{"chunked any case", "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: Chunked\r\n\r\n", nil},
		{"token characters", "GET / HTTP/1.1\r\nHost: a\r\nX!#$%&'*+-.^_`|~9: b\r\n\r\n", nil},
		{"empty value", "GET / HTTP/1.1\r\nHost: a\r\nX-A:\r\n\r\n", nil},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", badFramingBody},
		{"TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\ncontent-length: 3\r\n\r\n", badFramingBody},
		{"TE identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", badFramingBody},
		{"bare LF", "GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", badHeaderLineBody},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", badHeaderLineBody},
		{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", badHeaderLineBody},
		{"space in name", "GET / HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n", badHeaderLineBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := parsed(t, tt.raw)
			if got := checkHeaderBlock(h.RawHeaders()); string(got) != string(tt.want) {
				t.Fatalf("checkHeaderBlock = %q, want %q", got, tt.want)
			}
		})
	}
	// Lines fasthttp itself refuses, checked directly: the edge must not depend on it.
	for _, raw := range []string{
		"X-A: b\rc\r\n\r\n", "X-A\r: b\r\n\r\n", ": b\r\n\r\n", "no colon\r\n\r\n", "X-A: b\n\r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "X-A: b", "\n",
	} {
		if checkHeaderBlock([]byte(raw)) == nil {
			t.Errorf("checkHeaderBlock(%q) accepted", raw)
		}
	}
	if got := checkHeaderBlock(nil); got != nil {
		t.Errorf("checkHeaderBlock(nil) = %q: a request not read from the wire has nothing to check", got)
	}
}

func TestTargetMatchesHost(t *testing.T) {
	tests := []struct {
		target, host string
		want         bool
	}{
		{"/r", "a", true},
		{"*", "a", true},
		{"http://a/r", "a", true},
		{"HTTP://A:80/r?x", "a:80", true},
		{"https://a?x", "a", true},
		{"http://a", "a", true},
		{"http://other/r", "a", false},
		{"http://a:81/r", "a", false},
		{"http://a/r", "", false},
		{"http://u@a/r", "a", false},
		{"ftp://a/r", "a", false},
		{"http:///r", "", false},
		{"a:443", "a:443", false},
	}
	for _, tt := range tests {
		if got := targetMatchesHost([]byte(tt.target), []byte(tt.host)); got != tt.want {
			t.Errorf("targetMatchesHost(%q, %q) = %v, want %v", tt.target, tt.host, got, tt.want)
		}
	}
}

func TestSetRealIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name      string
		header    string
		recursive bool
		values    []string
		want      string // "" leaves the TCP peer
	}{
		{"x-real-ip", "X-Real-IP", false, []string{"203.0.113.9"}, "203.0.113.9"},
		{"ipv6", "X-Real-IP", false, []string{"2001:db8::1"}, "2001:db8::1"},
		{"v4-mapped", "X-Real-IP", false, []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"spaces", "X-Real-IP", false, []string{"  203.0.113.9 "}, "203.0.113.9"},
		{"absent", "X-Real-IP", false, nil, ""},
		{"not an address", "X-Real-IP", false, []string{"somebody"}, ""},
		{"with a port", "X-Real-IP", false, []string{"203.0.113.9:80"}, ""},
		{"zone", "X-Real-IP", false, []string{"fe80::1%eth0"}, ""},
		{"xff last", "X-Forwarded-For", false, []string{"198.51.100.1, 203.0.113.9, 10.1.1.1"}, "10.1.1.1"},
		{"xff recursive", "X-Forwarded-For", true, []string{"198.51.100.1, 203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"xff recursive all trusted", "X-Forwarded-For", true, []string{"10.0.0.1, 10.1.1.1"}, "10.0.0.1"},
		{"xff recursive over lines", "X-Forwarded-For", true, []string{"203.0.113.9", "10.1.1.1"}, "203.0.113.9"},
		{"xff recursive stops at junk", "X-Forwarded-For", true, []string{"203.0.113.9, junk, 10.1.1.1"}, "10.1.1.1"},
		{"xff empty items", "X-Forwarded-For", false, []string{"203.0.113.9, ,"}, "203.0.113.9"},
	}
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &edge{trusted: trusted, realIPName: tt.header, recursive: tt.recursive}
			var req fasthttp.Request
			req.SetRequestURI("/")
			for _, v := range tt.values {
				req.Header.Add(tt.header, v)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, peer, nil)
			ec := &edgeConn{}
			// A previous request's address must not survive into this one.
			ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1)})
			e.setRealIP(&ctx, ec)
			want := tt.want
			if want == "" {
				want = "127.0.0.1"
			}
			if got := ctx.RemoteIP().String(); got != want {
				t.Fatalf("RemoteIP = %s, want %s", got, want)
			}
		})
	}
}

func TestLimitedBody(t *testing.T) {
	var b limitedBody
	b.reset(strings.NewReader("abcdef"), 4)
	buf := make([]byte, 3)
	if n, err := b.Read(buf); n != 3 || err != nil {
		t.Fatalf("first read %d %v", n, err)
	}
	if _, err := b.Read(buf); err != errBodyTooLarge || !b.tooBig {
		t.Fatalf("past the limit: %v, tooBig %v", err, b.tooBig)
	}
	if _, err := b.Read(buf); err != errBodyTooLarge {
		t.Fatalf("after the limit: %v", err)
	}
	b.reset(strings.NewReader("abcdef"), 0)
	var all []byte
	for {
		n, err := b.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			break
		}
	}
	if string(all) != "abcdef" || b.broken || b.tooBig {
		t.Fatalf("no limit: read %q, broken %v, tooBig %v", all, b.broken, b.tooBig)
	}
}

// The listener holds at most worker_connections: the next Accept waits until one closes,
// and Close wakes a waiting Accept.
func TestEdgeListenerLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newEdgeListener(inner, &edge{}, 2)
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("a third connection was accepted (%v) with a limit of 2", err)
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // twice returns one slot, not two
	if err := <-third; err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if len(ln.slots) != 1 {
		t.Fatalf("%d slots taken, want 1 (the second connection)", len(ln.slots))
	}

	blocked := make(chan error, 1)
	go func() {
		// Fill the free slot, then wait on the full listener.
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, err = ln.Accept()
		}
		blocked <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	if err := <-blocked; err == nil {
		t.Fatal("Accept after Close succeeded")
	}
}

// admit on a request as read from the wire, with a trusted peer naming the client:
// it allocates nothing.
func TestAdmitAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	ctx, ec, e := admitFixture(t)
	allocs := testing.AllocsPerRun(1000, func() {
		if !e.admit(ctx, ec) {
			t.Fatal("refused")
		}
		e.finish(ctx, ec)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
	if got := ctx.RemoteIP().String(); got != "203.0.113.9" {
		t.Fatalf("RemoteIP = %s, want the X-Forwarded-For client", got)
	}
}

func admitFixture(tb testing.TB) (*fasthttp.RequestCtx, *edgeConn, *edge) {
	tb.Helper()
	raw := "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: wrk\r\nAccept: */*\r\n" +
		"X-Forwarded-For: 198.51.100.1, 203.0.113.9, 10.1.1.1\r\n\r\n"
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 40000}, nil)
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatal(err)
	}
	if len(ctx.Request.Header.RawHeaders()) == 0 {
		tb.Fatal("no raw headers: the fixture would not exercise the header scan")
	}
	e := &edge{
		maxBody: 1 << 20, bodyTimeout: time.Minute,
		trusted:    []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		realIPName: "X-Forwarded-For", recursive: true,
	}
	return ctx, &edgeConn{trusted: true}, e
}

// BenchmarkAdmit is the edge's per-request cost: the header-block scan, the target check
// and a recursive X-Forwarded-For walk.
func BenchmarkAdmit(b *testing.B) {
	ctx, ec, e := admitFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		e.admit(ctx, ec)
		e.finish(ctx, ec)
	}
}

// A request past the read buffer is 414 when its request line alone is, else 431, on a
// fresh connection and on a kept-alive one (where the previous request's lines were read).
func TestErrorHandlerTellsLongLineFromLongHeaders(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newEdgeListener(inner, &edge{}, 16)
	srv := &fasthttp.Server{
		Handler:        func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") },
		ErrorHandler:   errorHandler,
		ReadBufferSize: 1024,
	}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })

	long := strings.Repeat("a", 2000)
	good := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	tests := []struct {
		name, first, raw string
		want             int
	}{
		{"long request line", "", "GET /?" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"long target without a version", "", "GET /" + long, 414},
		{"long method", "", long + " / HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"long header", "", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + long + "\r\n\r\n", 431},
		{"many headers", "", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: b\r\n", 300) + "\r\n", 431},
		{"request line at the buffer's end", "", "GET /?" + strings.Repeat("a", 1024-len("GET /? HTTP/1.1\r\n")) + " HTTP/1.1\r\nHost: a\r\n\r\n", 431},
		{"long request line after a request", good, "GET /?" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"long header after a request", good, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + long + "\r\n\r\n", 431},
		{"fits", good, good, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", inner.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			if tt.first != "" {
				// Answered before the next request is sent: not pipelined.
				if _, err := c.Write([]byte(tt.first)); err != nil {
					t.Fatal(err)
				}
				var resp fasthttp.Response
				if err := resp.Read(br); err != nil || resp.StatusCode() != 200 {
					t.Fatalf("first request: %d %v", resp.StatusCode(), err)
				}
			}
			if _, err := c.Write([]byte(tt.raw)); err != nil {
				t.Fatal(err)
			}
			var resp fasthttp.Response
			if err := resp.Read(br); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != tt.want {
				t.Fatalf("status %d %q, want %d", resp.StatusCode(), resp.Body(), tt.want)
			}
		})
	}
}

// BenchmarkEdgeConnRead is a request's read through edgeConn: the look for the request
// line's end, then the response's write that resets it.
func BenchmarkEdgeConnRead(b *testing.B) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := newEdgeListener(inner, &edge{}, 1)
	defer ln.Close()
	client, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer server.Close()
	req := []byte("GET /hello HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Write(req); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(req); {
			n, err := server.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		if _, err := server.Write(resp); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf[:len(resp)]); err != nil {
			b.Fatal(err)
		}
	}
}

// A client that half-closes after its requests gets their answers and then the close, at
// once: the read that finds its FIN must not be skipped for a wait on the poller, which
// would last until keepalive_timeout (none here) since the FIN is not announced again.
func TestEdgeClosesAfterTheClientsFIN(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newEdgeListener(inner, &edge{}, 16)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })

	const request = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	tests := []struct {
		name string
		// before is sent and answered first, so that the last request is read by a
		// keep-alive wait.
		before, last string
		answers      int
	}{
		{"one request", "", request, 1},
		{"two pipelined", "", request + request, 2},
		{"after a keep-alive request", request, request, 1},
		{"after two", request, request + request, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // the FIN's event may or may not be seen before the read
				c, err := net.Dial("tcp", inner.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				br := bufio.NewReader(c)
				readAnswer := func() {
					t.Helper()
					var resp fasthttp.Response
					if err := resp.Read(br); err != nil || resp.StatusCode() != 200 {
						t.Fatalf("answer: %d %v", resp.StatusCode(), err)
					}
				}
				if tt.before != "" {
					c.Write([]byte(tt.before)) //nolint:errcheck
					readAnswer()
					time.Sleep(time.Millisecond) // the server is waiting again
				}
				c.Write([]byte(tt.last)) //nolint:errcheck
				c.(*net.TCPConn).CloseWrite()
				for range tt.answers {
					readAnswer()
				}
				start := time.Now()
				if n, err := br.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("after the answers: %d bytes, %v; want the server's close (io.EOF) after %v", n, err, time.Since(start))
				}
				c.Close()
			}
		})
	}
}

// peerText formats the TCP peer once per connection, an IPv4-mapped peer (a dual-stack
// listener's) as IPv4, as nginx's $remote_addr.
func TestPeerText(t *testing.T) {
	for _, tt := range []struct{ listen, dial, want string }{
		{"tcp4", "127.0.0.1", "127.0.0.1"},
		{"tcp", "127.0.0.1", "127.0.0.1"}, // dual-stack when the machine has IPv6
		{"tcp6", "::1", "::1"},
	} {
		ln, err := net.Listen(tt.listen, net.JoinHostPort(map[string]string{"tcp4": "127.0.0.1", "tcp": "", "tcp6": "::1"}[tt.listen], "0"))
		if err != nil {
			t.Logf("%s: %v (skipped)", tt.listen, err)
			continue
		}
		c, err := net.Dial("tcp", net.JoinHostPort(tt.dial, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)))
		if err != nil {
			ln.Close()
			t.Logf("%s to %s: %v (skipped)", tt.listen, tt.dial, err)
			continue
		}
		accepted, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		ec := &edgeConn{socket: accepted.(*net.TCPConn)}
		if got := string(ec.peerText()); got != tt.want {
			t.Errorf("%s from %s: peerText = %q, want %q", tt.listen, tt.dial, got, tt.want)
		}
		if got := string(ec.peerText()); got != tt.want {
			t.Errorf("%s from %s: second peerText = %q, want %q", tt.listen, tt.dial, got, tt.want)
		}
		accepted.Close()
		c.Close()
	}
}
