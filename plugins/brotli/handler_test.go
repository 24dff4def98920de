package brotli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
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

func serve(t *testing.T, cfg, method, protocol string, request, response []string, status int, body string) *fasthttp.Response {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI("/echo")
	if protocol != "" {
		ctx.Request.Header.SetProtocol(protocol)
	}
	for i := 0; i+1 < len(request); i += 2 {
		ctx.Request.Header.Set(request[i], request[i+1])
	}
	ctx.Response.SetStatusCode(status)
	for i := 0; i+1 < len(response); i += 2 {
		ctx.Response.Header.Add(response[i], response[i+1])
	}
	ctx.Response.SetBodyString(body)
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	instance(t, cfg).Response(c)
	resp := &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	return resp
}

func TestResponse(t *testing.T) {
	body := strings.Repeat("0123456789", 5)
	html := []string{"Content-Type", "text/html", "ETag", `"v1"`}
	br := []string{"Accept-Encoding", "gzip, br"}
	cases := []struct {
		name, cfg, method, protocol string
		request, response           []string
		status                      int
		compressed                  bool
		vary                        string
	}{
		// t/plugin/brotli.t TEST 2 "hit".
		{name: "hit", cfg: `{}`, request: br, response: html, status: 200, compressed: true},
		{name: "any status", cfg: `{}`, request: br, response: html, status: 500, compressed: true},
		{name: "quality 11", cfg: `{"comp_level":11,"lgwin":24}`, request: br, response: html, status: 200, compressed: true},
		{name: "no br", cfg: `{"vary":true}`, request: []string{"Accept-Encoding", "gzip"}, response: html, status: 200},
		{name: "br q=0", cfg: `{}`, request: []string{"Accept-Encoding", "br;q=0, gzip"}, response: html, status: 200},
		{name: "star", cfg: `{}`, request: []string{"Accept-Encoding", "*"}, response: html, status: 200, compressed: true},
		{name: "encoded", cfg: `{}`, request: br, response: append([]string{"Content-Encoding", "gzip"}, html...), status: 200},
		{name: "type", cfg: `{"types":["text/plain"]}`, request: br, response: html, status: 200},
		{name: "every type", cfg: `{"types":"*"}`, request: br, response: []string{"Content-Type", "image/svg+xml"}, status: 200, compressed: true},
		{name: "too short", cfg: `{"min_length":51}`, request: br, response: html, status: 200},
		{name: "HTTP/1.0", cfg: `{}`, protocol: "HTTP/1.0", request: br, response: html, status: 200},
		{name: "HTTP/1.0 allowed", cfg: `{"http_version":1.0}`, protocol: "HTTP/1.0", request: br, response: html, status: 200, compressed: true},
		{name: "HEAD", cfg: `{}`, method: "HEAD", request: br, response: html, status: 200},
		{name: "vary", cfg: `{"vary":true}`, request: br, response: append([]string{"Vary", "upstream"}, html...), status: 200, compressed: true, vary: "upstream,Accept-Encoding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.method == "" {
				tc.method = "GET"
			}
			resp := serve(t, tc.cfg, tc.method, tc.protocol, tc.request, tc.response, tc.status, body)
			if got := string(resp.Header.Peek("Content-Encoding")); tc.compressed {
				if got != "br" {
					t.Fatalf("Content-Encoding %q, want br", got)
				}
				plain, err := io.ReadAll(brotli.NewReader(bytes.NewReader(resp.Body())))
				if err != nil || string(plain) != body {
					t.Fatalf("body decodes to %q (%v)", plain, err)
				}
				if etag := string(resp.Header.Peek("ETag")); etag != `W/"v1"` && tc.name != "every type" {
					t.Errorf("ETag %s, want W/\"v1\"", etag)
				}
			} else if got == "br" || (tc.method != "HEAD" && string(resp.Body()) != body) {
				t.Fatalf("compressed: Content-Encoding %q", got)
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

func TestResponseAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	b := instance(t, `{"types":"*"}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/a")
	ctx.Request.Header.Set("Accept-Encoding", "gzip, deflate, br")
	body := bytes.Repeat([]byte(`{"id":1,"name":"user"},`), 400)
	route := &plugins.RouteInfo{}
	c := plugins.AcquireCtx(ctx, route, 0)
	run := func() {
		c.End()
		ctx.Response.Reset()
		ctx.Response.SetBody(body)
		c.Begin(ctx, route, 0)
		b.Response(c)
	}
	run()
	if string(ctx.Response.Header.Peek("Content-Encoding")) != "br" {
		t.Fatal("not compressed")
	}
	if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
		t.Errorf("%.1f allocations per response, want 0", allocs)
	}
}

func BenchmarkResponse(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":1234,"name":"user 1234","email":"user1234@example.com","active":true},`), 220) // 16 KiB
	for _, level := range []string{"1", "6"} {
		b.Run("level "+level, func(b *testing.B) {
			r := instance(b, `{"types":"*","comp_level":`+level+`}`)
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/a")
			ctx.Request.Header.Set("Accept-Encoding", "br")
			route := &plugins.RouteInfo{}
			c := plugins.AcquireCtx(ctx, route, 0)
			b.SetBytes(int64(len(body)))
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
