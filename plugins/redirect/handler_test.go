package redirect

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string, config *conf.Config) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Shared: &plugins.Shared{Config: config}})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

func request(method, uri string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("foo.com")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	return ctx
}

func TestAccess(t *testing.T) {
	tls9443 := &conf.Config{SSL: conf.TLSListener{Enabled: true, Listen: []string{"0.0.0.0:9443", "9444"}}}
	tls443 := &conf.Config{SSL: conf.TLSListener{Enabled: true, Listen: []string{"443"}}}
	for _, tc := range []struct {
		name, cfg    string
		config       *conf.Config
		method, uri  string
		headers      []string
		wantStatus   int // 0: let through
		wantLocation string
	}{
		// t/plugin/redirect.t TEST 4, 6, 8, 10, 12.
		{"fixed", `{"uri":"/test/add","ret_code":301}`, nil, "GET", "/hello", nil, 301, "/test/add"},
		{"uri variable", `{"uri":"$uri/test/add","ret_code":301}`, nil, "GET", "/hello", nil, 301, "/hello/test/add"},
		{"argument", `{"uri":"$uri/test/a${arg_name}c"}`, nil, "GET", "/hello?name=json", nil, 302, "/hello/test/ajsonc"},
		{"double dollar", `{"uri":"/foo$$uri"}`, nil, "GET", "/hello?name=json", nil, 302, "/foo$/hello"},
		{"escaped dollar", `{"uri":"\\$uri/foo$uri\\$uri/bar","ret_code":301}`, nil, "GET", "/hello", nil, 301, `\$uri/foo/hello\$uri/bar`},
		// TEST 16, 22: http_to_https without a TLS listener, or on 443.
		{"to https", `{"http_to_https":true}`, nil, "GET", "/hello", nil, 301, "https://foo.com/hello"},
		{"to https 443", `{"http_to_https":true}`, tls443, "GET", "/hello?a=1", nil, 301, "https://foo.com/hello?a=1"},
		// TEST 24: ret_code does not apply; the TLS listener's port.
		{"to https port", `{"http_to_https":true,"ret_code":302}`, tls9443, "GET", "/hello", nil, 301, "https://foo.com:9443/hello"},
		// TEST 31-33: POST is 308, GET and HEAD 301.
		{"post", `{"http_to_https":true}`, nil, "POST", "/hello", nil, 308, "https://foo.com/hello"},
		{"head", `{"http_to_https":true}`, nil, "HEAD", "/hello", nil, 301, "https://foo.com/hello"},
		// TEST 46, 47: X-Forwarded-Proto decides the scheme.
		{"forwarded http", `{"http_to_https":true}`, tls9443, "GET", "/hello", []string{"X-Forwarded-Proto", "http"}, 301, "https://foo.com:9443/hello"},
		{"forwarded any", `{"http_to_https":true}`, tls9443, "GET", "/hello", []string{"X-Forwarded-Proto", "any"}, 301, "https://foo.com:9443/hello"},
		{"forwarded https", `{"http_to_https":true}`, nil, "GET", "/hello", []string{"X-Forwarded-Proto", "https"}, 0, ""},
		{"host lower-cased, port dropped", `{"http_to_https":true}`, nil, "GET", "/a", []string{"Host", "Foo.COM:8080"}, 301, "https://foo.com/a"},
		// TEST 35, 36: regex_uri, matching and not.
		{"regex", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`, nil, "GET", "/test/1", nil, 301, "http://test.com/1"},
		{"regex miss", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`, nil, "GET", "/hello", nil, 0, ""},
		{"regex keeps the rest", `{"regex_uri":["(b+)","/<$1>$$"]}`, nil, "GET", "/abbc/bb", nil, 302, "/a/<bb>$c/bb"},
		// TEST 38, 40: encode_uri.
		{"regex encoded", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301,"encode_uri":true}`, nil, "GET", "/test/with%20space", nil, 301, "http://test.com/with%20space"},
		{"uri encoded", `{"uri":"$uri","ret_code":301,"encode_uri":true}`, nil, "GET", "/hello/with%20space", nil, 301, "/hello/with%20space"},
		{"encoded keeps the query", `{"uri":"$uri?x=a b","encode_uri":true}`, nil, "GET", "/a%23b", nil, 302, "/a%23b?x=a b"},
		{"not encoded", `{"uri":"$uri"}`, nil, "GET", "/hello/with%20space", nil, 302, "/hello/with space"},
		// TEST 42, 44: append_query_string.
		{"append query", `{"uri":"$uri","ret_code":302,"append_query_string":true}`, nil, "GET", "/hello?name=json", nil, 302, "/hello?name=json"},
		{"append to query", `{"uri":"$uri?type=string","ret_code":302,"append_query_string":true}`, nil, "GET", "/hello?name=json", nil, 302, "/hello?type=string&name=json"},
		{"append nothing", `{"uri":"$uri","append_query_string":true}`, nil, "GET", "/hello", nil, 302, "/hello"},
		// A decoded line break never reaches the header.
		{"control characters", `{"uri":"/a/${arg_next}"}`, nil, "GET", "/x?next=%0D%0ASet-Cookie:%20a=1", nil, 302, "/a/%0D%0ASet-Cookie: a=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.method, tc.uri, tc.headers...)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg, tc.config).Access(c); err != nil {
				t.Fatal(err)
			}
			c.ApplyResponseHeaders()
			if tc.wantStatus == 0 {
				if c.Answered() {
					t.Fatalf("answered %d, want let through", ctx.Response.StatusCode())
				}
				return
			}
			if got := string(ctx.Response.Header.Peek("Location")); !c.Answered() || ctx.Response.StatusCode() != tc.wantStatus || got != tc.wantLocation {
				t.Fatalf("answered %v %d Location %q, want %d %q", c.Answered(), ctx.Response.StatusCode(), got, tc.wantStatus, tc.wantLocation)
			}
		})
	}
}

// uri and http_to_https allocate nothing; a matching regex_uri allocates the one slice of
// indexes Go's regexp returns (FindSubmatchIndex), as proxy-rewrite's does.
func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct{ cfg, uri string }{
		{`{"uri":"$uri/test/a${arg_name}c","append_query_string":true,"encode_uri":true}`, "/hello?name=json"},
		{`{"http_to_https":true}`, "/hello?a=1"},
	} {
		p := instance(t, tc.cfg, &conf.Config{SSL: conf.TLSListener{Enabled: true, Listen: []string{"9443"}}})
		ctx := request("GET", tc.uri)
		route := &plugins.RouteInfo{}
		c := plugins.AcquireCtx(ctx, route, 0)
		p.Access(c) // the buffers grow once
		allocs := testing.AllocsPerRun(200, func() {
			c.End()
			c.Begin(ctx, route, 0)
			if p.Access(c) != nil || !c.Answered() {
				t.Fatal("no redirect")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", tc.cfg, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{"uri":"$uri/test/a${arg_name}c","append_query_string":true}`, nil)
	ctx := request("GET", "/hello?name=json")
	route := &plugins.RouteInfo{}
	c := plugins.AcquireCtx(ctx, route, 0)
	b.ReportAllocs()
	for b.Loop() {
		c.End()
		c.Begin(ctx, route, 0)
		p.Access(c)
	}
}
