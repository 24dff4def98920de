package responserewrite

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
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

// upstreamAnswer is the response a node gave: whole, or streamed (its body then read
// through a reader that says when it is closed).
type upstreamAnswer struct {
	status  int
	headers []string
	body    string
	stream  bool
}

type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func serve(t *testing.T, cfg string, up upstreamAnswer) (*fasthttp.Response, *closeTracker) {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/with_header")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	ctx.Response.SetStatusCode(up.status)
	for i := 0; i+1 < len(up.headers); i += 2 {
		ctx.Response.Header.Add(up.headers[i], up.headers[i+1])
	}
	var tracker *closeTracker
	if up.stream {
		tracker = &closeTracker{Reader: strings.NewReader(up.body)}
		ctx.Response.SetBodyStream(tracker, -1)
	} else {
		ctx.Response.SetBodyString(up.body)
	}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	instance(t, cfg).Response(c)
	return &ctx.Response, tracker
}

func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	io.WriteString(w, s)
	w.Close()
	return b.String()
}

func TestResponse(t *testing.T) {
	hello := upstreamAnswer{status: 200, body: "hello world\n", headers: []string{"Content-Type", "text/plain", "X-Upstream", "1", "ETag", `"abc"`}}
	cases := []struct {
		name, cfg string
		up        upstreamAnswer
		status    int
		body      string
		headers   map[string]string // "" means absent
		streamed  bool              // the body still streams
	}{
		// t/plugin/response-rewrite.t TEST 4/5 "set header(rewrite header and body)":
		// an empty value removes the field.
		{name: "headers and body", cfg: `{"headers":{"X-Server-id":3,"X-Server-status":"on","Content-Type":""},"body":"new body\n"}`,
			up: hello, status: 200, body: "new body\n",
			headers: map[string]string{"X-Server-id": "3", "X-Server-status": "on", "Content-Type": "", "ETag": "", "X-Upstream": "1"}},
		// TEST 6/7 "set body only and keep header the same".
		{name: "body only", cfg: `{"body":"new body2\n"}`, up: hello, status: 200, body: "new body2\n",
			headers: map[string]string{"Content-Type": "text/plain", "X-Upstream": "1"}},
		// TEST 8/9 "set location header with 302 code".
		{name: "redirect", cfg: `{"headers":{"Location":"https://example.com"},"status_code":302}`, up: hello,
			status: 302, body: "hello world\n", headers: map[string]string{"Location": "https://example.com"}},
		// TEST 13 "check base64 content".
		{name: "base64", cfg: `{"body":"SGVsbG8K","body_base64":true}`, up: hello, status: 200, body: "Hello\n"},
		// TEST 24 "hit": variables in values.
		{name: "variables", cfg: `{"headers":{"X-A":"$remote_addr","X-B":"from $remote_addr to $route_id"}}`, up: hello,
			status: 200, body: "hello world\n", headers: map[string]string{"X-A": "127.0.0.1", "X-B": "from 127.0.0.1 to 1"}},
		// TEST 26 "hit set empty body".
		{name: "empty body", cfg: `{"body":""}`, up: hello, status: 200, body: ""},
		// TEST 27: add, set, remove in that order.
		{name: "add set remove", cfg: `{"headers":{"add":["X-Upstream: 2"],"set":{"X-Set":"s"},"remove":["ETag"]}}`, up: hello,
			status: 200, body: "hello world\n", headers: map[string]string{"X-Set": "s", "ETag": ""}},
		// response-rewrite2.t "filters": once and global.
		{name: "filter once", cfg: `{"filters":[{"regex":"l","replace":"L"}]}`, up: hello, status: 200, body: "heLlo world\n",
			headers: map[string]string{"ETag": "", "Content-Type": "text/plain"}},
		{name: "filter global", cfg: `{"filters":[{"regex":"l","scope":"global","replace":"L"}]}`, up: hello, status: 200, body: "heLLo worLd\n"},
		{name: "filter captures", cfg: `{"filters":[{"regex":"(\\w+) (\\w+)","replace":"$2 $1x"}]}`, up: hello, status: 200, body: "world hellox\n"},
		{name: "filters in turn", cfg: `{"filters":[{"regex":"hello","replace":"bye"},{"regex":"bye world","replace":"done"}]}`, up: hello, status: 200, body: "done\n"},
		{name: "filter no match", cfg: `{"filters":[{"regex":"nope","replace":"x"}]}`, up: hello, status: 200, body: "hello world\n"},
		// A streamed body: read whole for a filter, truncated at max_resp_body_size
		// (response-rewrite.t TEST 29), left streaming for headers alone.
		{name: "streamed filter", cfg: `{"filters":[{"regex":"world","replace":"gw"}]}`,
			up: upstreamAnswer{status: 200, body: "hello world\n", stream: true}, status: 200, body: "hello gw\n"},
		{name: "streamed truncated", cfg: `{"filters":[{"regex":"h","replace":"H"}],"max_resp_body_size":5}`,
			up: upstreamAnswer{status: 200, body: "hello world\n", stream: true}, status: 200, body: "Hello"},
		{name: "streamed headers", cfg: `{"headers":{"X-A":"1"},"status_code":201}`,
			up: upstreamAnswer{status: 200, body: "hello world\n", stream: true}, status: 201, headers: map[string]string{"X-A": "1"}, streamed: true},
		{name: "streamed replaced", cfg: `{"body":"new"}`,
			up: upstreamAnswer{status: 200, body: "hello world\n", stream: true}, status: 200, body: "new"},
		// A gzip body is filtered as text and sent plain; another encoding is left alone.
		{name: "gzip filtered", cfg: `{"filters":[{"regex":"world","replace":"gw"}]}`,
			up:     upstreamAnswer{status: 200, body: gzipped("hello world\n"), headers: []string{"Content-Encoding", "gzip"}},
			status: 200, body: "hello gw\n", headers: map[string]string{"Content-Encoding": ""}},
		{name: "br untouched", cfg: `{"filters":[{"regex":"world","replace":"gw"}]}`,
			up:     upstreamAnswer{status: 200, body: "\x0bbrotli", headers: []string{"Content-Encoding", "br"}},
			status: 200, body: "\x0bbrotli", headers: map[string]string{"Content-Encoding": "br"}},
		{name: "body replaces encoded", cfg: `{"body":"plain"}`,
			up:     upstreamAnswer{status: 200, body: gzipped("x"), headers: []string{"Content-Encoding", "gzip"}},
			status: 200, body: "plain", headers: map[string]string{"Content-Encoding": ""}},
		// vars: response-rewrite.t TEST 18-20, the rewrite only where the status matches;
		// response-rewrite3.t's with status 200; the response's headers and the
		// request's variables.
		{name: "vars status matches", cfg: `{"body":"new body3\n","status_code":403,"vars":[["status","==",500]]}`,
			up: upstreamAnswer{status: 500, body: "boom"}, status: 403, body: "new body3\n"},
		{name: "vars status differs", cfg: `{"body":"new body3\n","status_code":403,"vars":[["status","==",500]]}`,
			up: hello, status: 200, body: "hello world\n", headers: map[string]string{"ETag": `"abc"`}},
		{name: "vars header", cfg: `{"headers":{"set":{"X-Text":"yes"}},"vars":[["sent_http_content_type","~~","^text/"]]}`,
			up: hello, status: 200, body: "hello world\n", headers: map[string]string{"X-Text": "yes"}},
		{name: "vars header absent", cfg: `{"headers":{"set":{"X-Text":"yes"}},"vars":[["sent_http_x_missing","==","a"]]}`,
			up: hello, status: 200, body: "hello world\n", headers: map[string]string{"X-Text": ""}},
		{name: "vars request and response", cfg: `{"body":"x","vars":["OR",["status",">=",500],["uri","==","/with_header"]]}`,
			up: hello, status: 200, body: "x"},
		{name: "vars negated", cfg: `{"body":"x","vars":[["status","!","==",200]]}`,
			up: hello, status: 200, body: "hello world\n"},
		// Another plugin's answer is rewritten too (APISIX's header_filter runs for it).
		{name: "a 401", cfg: `{"status_code":403,"body":"no\n"}`, up: upstreamAnswer{status: 401, body: `{"message":"Missing API key in request"}`},
			status: 403, body: "no\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, tracker := serve(t, tc.cfg, tc.up)
			if resp.StatusCode() != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode(), tc.status)
			}
			if resp.IsBodyStream() != tc.streamed {
				t.Fatalf("streamed %v, want %v", resp.IsBodyStream(), tc.streamed)
			}
			if !tc.streamed {
				if string(resp.Body()) != tc.body {
					t.Errorf("body %q, want %q", resp.Body(), tc.body)
				}
				if tracker != nil && !tracker.closed {
					t.Error("the node's stream was left open")
				}
			}
			for name, want := range tc.headers {
				got := resp.Header.Peek(name)
				if string(got) != want { // "" is absent: fasthttp peeks some absent fields as empty
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
		})
	}
}

// A rewrite of headers and status allocates nothing.
func TestResponseAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	r := instance(t, `{"status_code":201,"headers":{"add":["X-Add: a"],"set":{"X-A":"$remote_addr","X-Route":"route $route_id"},"remove":["Server"]},`+
		`"vars":[["status","==",200],["sent_http_content_type","~~","text/"]]}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/a")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	route := &plugins.RouteInfo{ID: "1"}
	c := plugins.AcquireCtx(ctx, route, 0)
	allocs := testing.AllocsPerRun(200, func() {
		c.End()
		ctx.Response.Reset()
		ctx.Response.Header.SetContentType("text/plain")
		c.Begin(ctx, route, 0)
		r.Response(c)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per response, want 0", allocs)
	}
	if got := string(ctx.Response.Header.Peek("X-Route")); got != "route 1" {
		t.Errorf("X-Route %q", got)
	}
}

func BenchmarkResponse(b *testing.B) {
	for _, tc := range []struct{ name, cfg string }{
		{"headers", `{"headers":{"set":{"X-A":"$remote_addr","X-B":"b"}}}`},
		{"filter", `{"filters":[{"regex":"world","scope":"global","replace":"gw"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := instance(b, tc.cfg)
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/a")
			ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
			route := &plugins.RouteInfo{ID: "1"}
			c := plugins.AcquireCtx(ctx, route, 0)
			body := bytes.Repeat([]byte("hello world "), 100)
			b.ReportAllocs()
			for b.Loop() {
				c.End()
				ctx.Response.Reset()
				ctx.Response.SetBody(body)
				c.Begin(ctx, route, 0)
				r.Response(c)
			}
		})
	}
}
