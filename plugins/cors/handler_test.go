package cors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

// serve runs cors on one request whose upstream answers with upstreamHeaders, and returns
// the response as the client gets it and whether cors answered itself.
func serve(t *testing.T, h plugins.AccessPhase, method string, headers []string, upstreamHeaders ...string) (*fasthttp.Response, bool) {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI("/hello")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	if err := h.Access(c); err != nil {
		t.Fatal(err)
	}
	answered := c.Answered()
	if !answered {
		ctx.Response.SetBodyString("hello world")
		for i := 0; i+1 < len(upstreamHeaders); i += 2 {
			ctx.Response.Header.Add(upstreamHeaders[i], upstreamHeaders[i+1])
		}
	}
	c.ApplyResponseHeaders()
	resp := &fasthttp.Response{}
	ctx.Response.CopyTo(resp)
	return resp, answered
}

// absent marks a header the response must not have.
const absent = "<absent>"

func TestAccess(t *testing.T) {
	cases := []struct {
		name, cfg, method string
		headers           []string
		upstream          []string
		want              map[string]string
		wantVary          []string
		answered          bool
	}{
		// t/plugin/cors.t TEST 7 "cors default".
		{name: "default", cfg: `{}`, method: "GET", want: map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5",
			"Access-Control-Expose-Headers": absent, "Access-Control-Allow-Credentials": absent}},
		// TEST 9 "cors specified".
		{name: "listed origin", method: "GET",
			cfg:     `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","expose_headers":"ex-headr1,ex-headr2","max_age":50,"allow_credential":true}`,
			headers: []string{"Origin", "http://sub2.domain.com"},
			want: map[string]string{"Access-Control-Allow-Origin": "http://sub2.domain.com", "Access-Control-Allow-Methods": "GET,POST",
				"Access-Control-Allow-Headers": "headr1,headr2", "Access-Control-Expose-Headers": "ex-headr1,ex-headr2",
				"Access-Control-Max-Age": "50", "Access-Control-Allow-Credentials": "true"},
			wantVary: []string{"Origin"}},
		// TEST 10 "cors specified no match origin".
		{name: "unlisted origin", method: "GET",
			cfg:     `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","allow_credential":true}`,
			headers: []string{"Origin", "http://sub3.domain.com"},
			want: map[string]string{"Access-Control-Allow-Origin": absent, "Access-Control-Allow-Methods": absent,
				"Access-Control-Allow-Credentials": absent},
			wantVary: []string{"Origin"}},
		{name: "one origin, other request", method: "GET", cfg: `{"allow_origins":"http://a.com"}`,
			headers: []string{"Origin", "http://b.com"}, want: map[string]string{"Access-Control-Allow-Origin": absent}, wantVary: []string{"Origin"}},
		{wantVary: []string{"Origin"}, name: "one origin", method: "GET", cfg: `{"allow_origins":"http://a.com"}`,
			headers: []string{"Origin", "http://a.com"}, want: map[string]string{"Access-Control-Allow-Origin": "http://a.com"}},
		// TEST 12 "cors force wildcard".
		{name: "force wildcard", method: "GET", cfg: `{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`,
			headers: []string{"Origin", "https://sub.domain.com", "Access-Control-Request-Headers", "req-header1,req-header2"},
			want: map[string]string{"Access-Control-Allow-Origin": "https://sub.domain.com",
				"Access-Control-Allow-Methods": "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE",
				"Access-Control-Allow-Headers": "req-header1,req-header2", "Access-Control-Expose-Headers": "*",
				"Access-Control-Max-Age": "5", "Access-Control-Allow-Credentials": absent},
			wantVary: []string{"Origin"}},
		// TEST 13 "cors force wildcard no origin".
		{wantVary: []string{"Origin"}, name: "force wildcard, no origin", method: "GET", cfg: `{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`,
			want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": absent}},
		// TEST 14 "options return directly": every OPTIONS, with the headers.
		{name: "preflight", method: "OPTIONS", cfg: `{}`, headers: []string{"Origin", "http://a.com", "Access-Control-Request-Method", "PUT"},
			want: map[string]string{"Access-Control-Allow-Origin": "*"}, answered: true},
		{name: "options without origin", method: "OPTIONS", cfg: `{}`, answered: true,
			want: map[string]string{"Access-Control-Allow-Origin": "*"}},
		// TEST 18-23 "overwrite upstream": cors's values replace the upstream's.
		{name: "overwrite upstream", method: "GET",
			cfg:      `{"allow_origins":"**","allow_methods":"**","allow_headers":"request-h","expose_headers":"expose-h","allow_credential":true}`,
			headers:  []string{"Origin", "https://sub.domain.com"},
			upstream: []string{"Access-Control-Allow-Origin", "https://other.com", "Access-Control-Max-Age", "10", "Access-Control-Allow-Credentials", "false", "Vary", "Accept-Encoding"},
			want: map[string]string{"Access-Control-Allow-Origin": "https://sub.domain.com", "Access-Control-Max-Age": "5",
				"Access-Control-Allow-Headers": "request-h", "Access-Control-Expose-Headers": "expose-h", "Access-Control-Allow-Credentials": "true"},
			wantVary: []string{"Accept-Encoding", "Origin"}},
		// TEST 29 "regex specified": the regexes decide alone.
		{wantVary: []string{"Origin"}, name: "regex", method: "GET",
			cfg:     `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","allow_credential":true,"allow_origins_by_regex":[".*\\.test.com$"]}`,
			headers: []string{"Origin", "http://a.test.com"},
			want:    map[string]string{"Access-Control-Allow-Origin": "http://a.test.com", "Access-Control-Allow-Credentials": "true"}},
		// TEST 30 "regex specified not match".
		{wantVary: []string{"Origin"}, name: "regex no match", method: "GET",
			cfg:     `{"allow_origins":"http://sub.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","allow_credential":true,"allow_origins_by_regex":[".*\\.test.com$"]}`,
			headers: []string{"Origin", "http://a.test2.com"},
			want:    map[string]string{"Access-Control-Allow-Origin": absent}},
		{wantVary: []string{"Origin"}, name: "regex listed origin does not count", method: "GET",
			cfg:     `{"allow_origins":"http://sub.domain.com","allow_methods":"GET","allow_headers":"x","allow_credential":true,"allow_origins_by_regex":["^http://b"]}`,
			headers: []string{"Origin", "http://sub.domain.com"},
			want:    map[string]string{"Access-Control-Allow-Origin": absent}},
		{name: "second regex", method: "GET", cfg: `{"allow_origins_by_regex":["^http://a\\.com$","^http://b\\.com$"]}`,
			headers: []string{"Origin", "http://b.com"}, want: map[string]string{"Access-Control-Allow-Origin": "http://b.com"}},
		{name: "regex without origin", method: "GET", cfg: `{"allow_origins_by_regex":[".*"]}`,
			want: map[string]string{"Access-Control-Allow-Origin": absent}},
		// t/plugin/cors3.t: Timing-Allow-Origin only for the allowed origin.
		{name: "timing", method: "GET", cfg: `{"timing_allow_origins":"http://a.com,http://b.com"}`,
			headers: []string{"Origin", "http://b.com"}, want: map[string]string{"Timing-Allow-Origin": "http://b.com"}},
		{name: "timing other origin", method: "GET", cfg: `{"timing_allow_origins":"http://a.com"}`,
			headers: []string{"Origin", "http://b.com"}, want: map[string]string{"Timing-Allow-Origin": absent}},
		{name: "timing regex", method: "GET", cfg: `{"timing_allow_origins_by_regex":["\\.a\\.com$"]}`,
			headers: []string{"Origin", "http://x.a.com"}, want: map[string]string{"Timing-Allow-Origin": "http://x.a.com"}},
		{name: "no timing", method: "GET", cfg: `{}`, headers: []string{"Origin", "http://x.a.com"},
			want: map[string]string{"Timing-Allow-Origin": absent}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, answered := serve(t, instance(t, tc.cfg), tc.method, tc.headers, tc.upstream...)
			if answered != tc.answered {
				t.Fatalf("answered %v, want %v", answered, tc.answered)
			}
			if answered && (resp.StatusCode() != 200 || len(resp.Body()) != 0) {
				t.Errorf("preflight answered %d %q, want 200 and no body", resp.StatusCode(), resp.Body())
			}
			for name, want := range tc.want {
				got := resp.Header.Peek(name)
				switch {
				case want == absent && got != nil:
					t.Errorf("%s: %q, want none", name, got)
				case want != absent && string(got) != want:
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			var vary []string
			for _, v := range resp.Header.PeekAll("Vary") {
				vary = append(vary, string(v))
			}
			if strings.Join(vary, "|") != strings.Join(tc.wantVary, "|") {
				t.Errorf("Vary: %q, want %q", vary, tc.wantVary)
			}
		})
	}
}

// A request that a later plugin refuses still carries the headers, since the queue is
// applied to whatever answer the request gets (t/plugin/cors.t TEST 16 "auth failed
// still work").
func TestHeadersOnAnotherPluginsAnswer(t *testing.T) {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	ctx.Request.Header.Set("Origin", "https://sub.domain.com")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(c)
	if err := instance(t, `{"allow_origins":"**","allow_methods":"**","allow_headers":"*"}`).Access(c); err != nil || c.Answered() {
		t.Fatalf("cors answered a GET (%v)", err)
	}
	c.Respond(401, nil, []byte(`{"message":"Missing API key in request"}`))
	c.ApplyResponseHeaders()
	if got := string(ctx.Response.Header.Peek("Access-Control-Allow-Origin")); got != "https://sub.domain.com" || ctx.Response.StatusCode() != 401 {
		t.Fatalf("%d with Access-Control-Allow-Origin %q", ctx.Response.StatusCode(), got)
	}
}

func TestAccessAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, cfg := range []string{
		`{}`,
		`{"allow_origins":"http://a.com,http://b.com","allow_methods":"GET","allow_headers":"**","expose_headers":"x","allow_credential":true,"timing_allow_origins":"http://b.com"}`,
		`{"allow_origins_by_regex":["\\.b\\.com$"]}`,
	} {
		h := instance(t, cfg)
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.SetRequestURI("/hello")
		ctx.Request.Header.Set("Origin", "http://x.b.com")
		ctx.Request.Header.Set("Access-Control-Request-Headers", "a,b")
		route := &plugins.RouteInfo{}
		c := plugins.AcquireCtx(ctx, route, 0)
		allocs := testing.AllocsPerRun(200, func() {
			c.End()
			ctx.Response.Reset()
			c.Begin(ctx, route, 0)
			if h.Access(c) != nil {
				t.Fatal("fault")
			}
			c.ApplyResponseHeaders()
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", cfg, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	for name, cfg := range map[string]string{
		// APISIX's defaults, as on the benchmark's chain: nothing depends on the Origin.
		"default": `{}`,
		"list":    `{"allow_origins":"http://a.com,http://b.com","allow_methods":"GET,POST","allow_headers":"x","expose_headers":"x","allow_credential":true}`,
	} {
		b.Run(name, func(b *testing.B) {
			h := instance(b, cfg)
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.SetRequestURI("/hello")
			ctx.Request.Header.Set("apikey", "bench-key")
			ctx.Request.Header.Set("Origin", "http://b.com")
			route := &plugins.RouteInfo{}
			c := plugins.AcquireCtx(ctx, route, 0)
			b.ReportAllocs()
			for b.Loop() {
				c.End()
				ctx.Response.Reset()
				c.Begin(ctx, route, 0)
				_ = h.Access(c)
				c.ApplyResponseHeaders()
			}
		})
	}
}

// allow_origins_by_metadata, as t/plugin/cors3.t: the metadata's named lists first, then
// allow_origins unless it is "*".
func TestAllowOriginsByMetadata(t *testing.T) {
	md := &conf.Snapshot{PluginMetadata: []conf.PluginMetadata{{Name: Name, Value: json.RawMessage(
		`{"allow_origins":{"key_1":"https://domain.com","key_2":"https://sub.domain.com,https://sub2.domain.com","key_3":"*"}}`)}}}
	build := func(cfg string, snap *conf.Snapshot) plugins.AccessPhase {
		t.Helper()
		built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		return built.(plugins.AccessPhase)
	}
	cases := []struct {
		name, cfg, origin string
		snap              *conf.Snapshot
		want              string // Access-Control-Allow-Origin, "" for none
	}{
		{"TEST 4 origin not match", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, "http://foo.example.org", md, ""},
		{"TEST 5 allow_origins", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, "https://test.com", md, "https://test.com"},
		{"TEST 6 metadata", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, "https://domain.com", md, "https://domain.com"},
		{"TEST 9 first of two", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1","key_2"]}`, "https://domain.com", md, "https://domain.com"},
		{"TEST 10 second of two", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1","key_2"]}`, "https://sub.domain.com", md, "https://sub.domain.com"},
		{"TEST 12 wildcard echoes", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_3"]}`, "http://foo.example.org", md, "http://foo.example.org"},
		{"TEST 14 star allow_origins left out", `{"allow_origins":"*","allow_origins_by_metadata":["key_1"]}`, "http://foo.example.org", md, ""},
		{"TEST 15 star, metadata matches", `{"allow_origins":"*","allow_origins_by_metadata":["key_1"]}`, "https://domain.com", md, "https://domain.com"},
		{"regex fallback", `{"allow_origins":"https://test.com","allow_origins_by_regex":["\\.example\\.org$"],"allow_origins_by_metadata":["key_1"]}`, "http://foo.example.org", md, "http://foo.example.org"},
		{"no Origin", `{"allow_origins_by_metadata":["key_3"]}`, "", md, ""},
		{"key the metadata lacks", `{"allow_origins_by_metadata":["key_9"]}`, "https://domain.com", md, ""},
		{"no metadata stored", `{"allow_origins_by_metadata":["key_1"]}`, "https://domain.com", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.origin != "" {
				headers = []string{"Origin", tc.origin}
			}
			resp, _ := serve(t, build(tc.cfg, tc.snap), "GET", headers)
			if got := string(resp.Header.Peek("Access-Control-Allow-Origin")); got != tc.want {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.want)
			}
			if tc.want != "" && string(resp.Header.Peek("Access-Control-Max-Age")) != "5" {
				t.Errorf("allowed without the other headers: %s", resp.Header.String())
			}
		})
	}
}
