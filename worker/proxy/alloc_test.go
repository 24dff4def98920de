package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
)

// preparedForward returns a function that runs one forward on a RequestCtx prepared as
// the worker's server would hand it over, and checks the response; pristine sends it as
// the worker does for a route whose plugins leave the request alone (Info.Pristine).
func preparedForward(tb testing.TB, path string, wantLen int, pristine bool) func() {
	tb.Helper()
	return preparedForwardWith(tb, path, wantLen, func(port int) *conf.Upstream {
		return &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: port, Weight: 1}}}
	}, pristine)
}

// preparedForwardWith is preparedForward to the upstream that upstream makes for the stub's
// port.
func preparedForwardWith(tb testing.TB, path string, wantLen int, upstream func(port int) *conf.Upstream, pristine bool) func() {
	tb.Helper()
	big := bytes.Repeat([]byte("b"), 64<<10)
	s := startStub(tb, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/chunked" {
			src := sourcePool.Get().(*source)
			src.rest = big
			ctx.SetBodyStream(src, -1)
			return
		}
		ctx.WriteString("hello") //nolint:errcheck
	})
	p := NewPools()
	tb.Cleanup(p.Close)
	up, err := p.Upstream(upstream(s.port), nil)
	if err != nil {
		tb.Fatal(err)
	}

	// Parsed from the wire, as the server would, so that a pristine forward has the
	// client's header block to send.
	var template fasthttp.Request
	raw := "GET " + path + "?q=1 HTTP/1.1\r\nHost: client.example\r\nX-Forwarded-For: 10.0.0.1\r\n" +
		"Connection: keep-alive\r\nUser-Agent: bench\r\n\r\n"
	if err := template.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&template, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	info := Info{Pristine: pristine}
	return func() {
		template.CopyTo(&ctx.Request)
		ctx.Request.URI() // as the router would have parsed it
		up.ForwardInfo(&ctx, &info)
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			tb.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		n := len(ctx.Response.Body())
		if ctx.Response.IsBodyStream() {
			m, _ := io.Copy(io.Discard, ctx.Response.BodyStream())
			n = int(m)
		}
		if n != wantLen {
			tb.Fatalf("body of %d bytes, want %d", n, wantLen)
		}
		ctx.Response.Reset() // closes a body stream, as the server does after writing it
	}
}

// source is a pooled body stream, so that the stub upstream allocates nothing either and
// the counts below are the proxy's alone.
type source struct{ rest []byte }

var sourcePool = sync.Pool{New: func() any { return new(source) }}

func (s *source) Read(p []byte) (int, error) {
	if len(s.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

func (s *source) Close() error {
	sourcePool.Put(s)
	return nil
}

func TestForwardDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled objects are allocated again")
	}
	for _, tt := range []struct {
		path     string
		len      int
		pristine bool
	}{{"/small", 5, false}, {"/chunked", 64 << 10, false}, {"/small", 5, true}, {"/chunked", 64 << 10, true}} {
		t.Run(fmt.Sprintf("%s pristine=%v", tt.path[1:], tt.pristine), func(t *testing.T) {
			run := preparedForward(t, tt.path, tt.len, tt.pristine)
			for range 20 {
				run()
			}
			if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
				t.Errorf("Forward of %s allocates %.1f times per request, want 0", tt.path, allocs)
			}
		})
	}
}

func TestForwardWithEachBalancerDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled objects are allocated again")
	}
	for _, tt := range []struct{ typ, hashOn, key string }{
		{"chash", "header", "User-Agent"},
		{"chash", "vars_combinations", "$remote_addr $arg_q"},
		{"least_conn", "", ""},
		{"ewma", "", ""},
	} {
		for _, path := range []string{"/small", "/chunked"} {
			t.Run(tt.typ+tt.hashOn+path, func(t *testing.T) {
				want := 5
				if path == "/chunked" {
					want = 64 << 10
				}
				run := preparedForwardWith(t, path, want, func(port int) *conf.Upstream {
					return &conf.Upstream{Type: tt.typ, HashOn: tt.hashOn, Key: tt.key, Nodes: conf.Nodes{
						{Host: "127.0.0.1", Port: port, Weight: 1}, {Host: "127.0.0.1", Port: port, Weight: 2},
					}}
				}, false)
				for range 20 {
					run()
				}
				if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
					t.Errorf("Forward allocates %.1f times per request, want 0", allocs)
				}
			})
		}
	}
}

// BenchmarkForwardPrepared is one forward on a prepared RequestCtx to a loopback stub, its
// header re-serialised or sent pristine.
func BenchmarkForwardPrepared(b *testing.B) {
	for _, pristine := range []bool{false, true} {
		b.Run(fmt.Sprintf("pristine=%v", pristine), func(b *testing.B) {
			run := preparedForward(b, "/small", 5, pristine)
			run()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
		})
	}
}

// BenchmarkForward is one request from a fasthttp client through the proxy's fasthttp
// server to a stub upstream, all on loopback; allocations are the whole process's.
func BenchmarkForward(b *testing.B) {
	s := startStub(b, func(ctx *fasthttp.RequestCtx) { ctx.WriteString("hello") }) //nolint:errcheck
	p := NewPools()
	b.Cleanup(p.Close)
	up, err := p.Upstream(&conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: s.port, Weight: 1}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	proxy := startProxy(b, up)
	c := &fasthttp.HostClient{Addr: proxy}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + proxy + "/hello")
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d", err, resp.StatusCode())
		}
	}
}
