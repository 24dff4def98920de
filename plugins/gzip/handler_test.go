package gzip

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string) plugins.ResponsePhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.ResponsePhase)
}

type exchange struct {
	method, protocol string
	request          []string // request headers
	status           int
	response         []string // response headers
	body             string
	stream           bool
}

func serve(t *testing.T, cfg string, x exchange) *fasthttp.Response {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(x.method)
	ctx.Request.SetRequestURI("/echo")
	if x.protocol != "" {
		ctx.Request.Header.SetProtocol(x.protocol)
	}
	for i := 0; i+1 < len(x.request); i += 2 {
		ctx.Request.Header.Set(x.request[i], x.request[i+1])
	}
	ctx.Response.SetStatusCode(x.status)
	for i := 0; i+1 < len(x.response); i += 2 {
		ctx.Response.Header.Add(x.response[i], x.response[i+1])
	}
	if x.stream {
		ctx.Response.SetBodyStream(strings.NewReader(x.body), -1)
	} else {
		ctx.Response.SetBodyString(x.body)
	}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	instance(t, cfg).Response(c)
	resp := &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	return resp
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	r, err := stdgzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(plain)
}

func TestResponse(t *testing.T) {
	// t/plugin/gzip.t TEST 2's request: 21 bytes of text/html.
	html := exchange{method: "POST", request: []string{"Accept-Encoding", "gzip"}, status: 200,
		response: []string{"Content-Type", "text/html"}, body: "0123456789\n012345678\n"}
	with := func(f func(*exchange)) exchange {
		x := html
		x.request = append([]string(nil), html.request...)
		f(&x)
		return x
	}
	cases := []struct {
		name, cfg  string
		x          exchange
		compressed bool
		vary       string
	}{
		// TEST 2 "hit": and no Vary without vary.
		{name: "hit", cfg: `{}`, x: html, compressed: true},
		// TEST 5 "hit" at another level.
		{name: "level 9", cfg: `{"comp_level":9}`, x: html, compressed: true},
		// TEST 6/7 "min length": 21 bytes < 22.
		{name: "too short", cfg: `{"min_length":22}`, x: html},
		{name: "just long enough", cfg: `{"min_length":21}`, x: html, compressed: true},
		// TEST 8-10 "http version".
		{name: "HTTP/1.0 under 1.1", cfg: `{}`, x: with(func(x *exchange) { x.protocol = "HTTP/1.0" })},
		{name: "HTTP/1.0 allowed", cfg: `{"http_version":1.0}`, x: with(func(x *exchange) { x.protocol = "HTTP/1.0" }), compressed: true},
		// TEST 11-14 "types", with a charset.
		{name: "type not listed", cfg: `{"types":["text/plain"]}`, x: html},
		{name: "type listed", cfg: `{"types":["text/plain","text/html"]}`, x: html, compressed: true},
		{name: "type with charset", cfg: `{"types":["text/html"]}`, x: with(func(x *exchange) { x.response = []string{"Content-Type", "text/html; charset=utf-8"} }), compressed: true},
		{name: "type case", cfg: `{}`, x: with(func(x *exchange) { x.response = []string{"Content-Type", "Text/HTML"} }), compressed: true},
		// TEST 16 "match all types".
		{name: "every type", cfg: `{"types":"*"}`, x: with(func(x *exchange) { x.response = []string{"Content-Type", "application/octet-stream"} }), compressed: true},
		// TEST 18: vary added beside the upstream's.
		{name: "vary", cfg: `{"vary":true}`, x: with(func(x *exchange) { x.response = append(x.response, "Vary", "upstream") }), compressed: true, vary: "upstream,Accept-Encoding"},
		{name: "vary without accept", cfg: `{"vary":true}`, x: with(func(x *exchange) { x.request = nil }), vary: "Accept-Encoding"},
		// Never what is encoded already, nor for a client that does not accept it.
		{name: "already encoded", cfg: `{}`, x: with(func(x *exchange) { x.response = append(x.response, "Content-Encoding", "br") })},
		{name: "no accept-encoding", cfg: `{}`, x: with(func(x *exchange) { x.request = nil })},
		{name: "identity only", cfg: `{}`, x: with(func(x *exchange) { x.request = []string{"Accept-Encoding", "br, identity"} })},
		{name: "gzip q=0", cfg: `{}`, x: with(func(x *exchange) { x.request = []string{"Accept-Encoding", "br, gzip;q=0"} })},
		{name: "gzip q=0.000", cfg: `{}`, x: with(func(x *exchange) { x.request = []string{"Accept-Encoding", "gzip; q=0.000"} })},
		{name: "gzip q=0.5", cfg: `{}`, x: with(func(x *exchange) { x.request = []string{"Accept-Encoding", "br;q=1, GZIP;q=0.5"} }), compressed: true},
		{name: "star", cfg: `{}`, x: with(func(x *exchange) { x.request = []string{"Accept-Encoding", "*"} }), compressed: true},
		// nginx's statuses: 200, 403, 404.
		{name: "404", cfg: `{}`, x: with(func(x *exchange) { x.status = 404 }), compressed: true},
		{name: "500", cfg: `{}`, x: with(func(x *exchange) { x.status = 500 })},
		{name: "206", cfg: `{}`, x: with(func(x *exchange) { x.status = 206 })},
		{name: "HEAD", cfg: `{}`, x: with(func(x *exchange) { x.method = "HEAD" })},
		// A stream gw cannot take over (not the proxy's) goes as it comes: plugins/encoding's TestCompressStream.
		{name: "streamed", cfg: `{}`, x: with(func(x *exchange) { x.stream = true })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := serve(t, tc.cfg, tc.x)
			encoding := string(resp.Header.Peek("Content-Encoding"))
			if tc.compressed {
				if encoding != "gzip" {
					t.Fatalf("Content-Encoding %q, want gzip", encoding)
				}
				if got := gunzip(t, resp.Body()); got != tc.x.body {
					t.Fatalf("body unzips to %q, want %q", got, tc.x.body)
				}
			} else if encoding == "gzip" || (!tc.x.stream && string(resp.Body()) != tc.x.body) {
				t.Fatalf("compressed: Content-Encoding %q, body %q", encoding, resp.Body())
			}
			var vary []string
			for _, v := range resp.Header.PeekAll("Vary") {
				vary = append(vary, string(v))
			}
			if strings.Join(vary, ",") != tc.vary {
				t.Errorf("Vary %q, want %q", vary, tc.vary)
			}
		})
	}
}

// A strong ETag becomes weak on the compressed body, as nginx makes it.
func TestETagWeakened(t *testing.T) {
	for etag, want := range map[string]string{`"v1"`: `W/"v1"`, `W/"v1"`: `W/"v1"`} {
		resp := serve(t, `{}`, exchange{method: "GET", request: []string{"Accept-Encoding", "gzip"}, status: 200,
			response: []string{"Content-Type", "text/html", "ETag", etag}, body: strings.Repeat("x", 100)})
		if got := string(resp.Header.Peek("ETag")); got != want {
			t.Errorf("ETag %s: %s, want %s", etag, got, want)
		}
	}
}

func TestResponseAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	g := instance(t, `{"types":"*","vary":true}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/a")
	ctx.Request.Header.Set("Accept-Encoding", "gzip, deflate, br")
	body := bytes.Repeat([]byte(`{"id":1,"name":"user"},`), 400)
	route := &plugins.RouteInfo{}
	c := plugins.AcquireCtx(ctx, route, 0)
	run := func() {
		c.End()
		ctx.Response.Reset()
		ctx.Response.Header.Set("ETag", `"v1"`)
		ctx.Response.SetBody(body)
		c.Begin(ctx, route, 0)
		g.Response(c)
	}
	run()
	if string(ctx.Response.Header.Peek("Content-Encoding")) != "gzip" {
		t.Fatal("not compressed")
	}
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Errorf("%.1f allocations per response, want 0", allocs)
	}
}

func BenchmarkResponse(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":1234,"name":"user 1234","email":"user1234@example.com","active":true},`), 220) // 16 KiB
	for _, level := range []string{"1", "6"} {
		b.Run("level "+level, func(b *testing.B) {
			g := instance(b, `{"types":"*","comp_level":`+level+`}`)
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/a")
			ctx.Request.Header.Set("Accept-Encoding", "gzip")
			route := &plugins.RouteInfo{}
			c := plugins.AcquireCtx(ctx, route, 0)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				c.End()
				ctx.Response.Reset()
				ctx.Response.SetBody(body)
				c.Begin(ctx, route, 0)
				g.Response(c)
			}
		})
	}
}

// BenchmarkStream compresses a 188 KB page streaming from a node, at level 1: the
// plugin's cost per streamed response, the node's reads aside.
func BenchmarkStream(b *testing.B) {
	page := strings.Repeat("<p>a streamed page, compressed as it goes</p>\n", 4000)
	g := instance(b, `{}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.Header.Set("Accept-Encoding", "gzip")
	src := &benchStream{}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		ctx.Response.Header.Set("Content-Type", "text/html")
		src.Reader.Reset(page)
		ctx.Response.SetBodyStream(src, -1)
		c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		g.Response(c)
		plugins.ReleaseCtx(c)
		if _, err := io.Copy(io.Discard, ctx.Response.BodyStream()); err != nil {
			b.Fatal(err)
		}
		_ = ctx.Response.CloseBodyStream()
	}
}

// benchStream is a detachable node stream over a strings.Reader, for BenchmarkStream.
type benchStream struct{ strings.Reader }

func (*benchStream) Detach()                    {}
func (*benchStream) CloseWithError(error) error { return nil }
