package proxyrewrite

import (
	"bufio"
	"bytes"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

// serverRequest makes a RequestCtx as the worker has it: parsed from the wire, with the
// router having read the (normalised) path.
func serverRequest(t testing.TB, raw string) *fasthttp.RequestCtx {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000})
	_ = ctx.Path()
	return ctx
}

// sent is the request as the proxy writes it upstream.
func sent(t testing.TB, ctx *fasthttp.RequestCtx) string {
	t.Helper()
	ctx.Request.UseHostHeader = true
	ctx.Request.URI().DisablePathNormalizing = true
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := ctx.Request.Write(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return buf.String()
}

func run(t testing.TB, cfg string, ctx *fasthttp.RequestCtx) {
	t.Helper()
	c, err := Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(pc)
	if err := c.Access(pc); err != nil || pc.Answered() {
		t.Fatalf("proxy-rewrite answered the request (%v)", err)
	}
	// The proxy sends UpstreamHost as the Host header (worker/proxy tests that part).
	if pc.UpstreamHost != nil {
		ctx.Request.Header.SetHostBytes(pc.UpstreamHost)
	}
}

func TestAccess(t *testing.T) {
	cases := []struct {
		name, cfg, request string
		// want are lines the upstream request must hold; notWant lines it must not.
		want, notWant []string
	}{
		{"ocelot: uri", `{"uri":"/api/values"}`, "GET /api1/values HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /api/values HTTP/1.1"}, nil},
		{"uri keeps the client's query", `{"uri":"/api/values"}`, "GET /api1/values?a=1&b=%2F HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /api/values?a=1&b=%2F HTTP/1.1"}, nil},
		{"uri with its own query joins with &", `{"uri":"/v?x=1"}`, "GET /p?a=1 HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /v?x=1&a=1 HTTP/1.1"}, nil},
		{"uri with its own query, none from the client", `{"uri":"/v?x=1"}`, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /v?x=1 HTTP/1.1"}, nil},
		{"uri with variables", `{"uri":"/u/$arg_id/${http_x_user}$uri"}`, "GET /p/q?id=7 HTTP/1.1\r\nHost: gw\r\nX-User: ann\r\n\r\n",
			[]string{"GET /u/7/ann/p/q?id=7 HTTP/1.1"}, nil},
		{"a variable's '?' stays in the path", `{"uri":"/u/$http_x"}`, "GET /p HTTP/1.1\r\nHost: gw\r\nX: a?b c\r\n\r\n",
			[]string{"GET /u/a%253Fb%20c HTTP/1.1"}, nil},
		{"uri is percent-encoded", `{"uri":"/a b#c%"}`, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /a%20b%23c%25 HTTP/1.1"}, nil},
		{"kong: regex_uri strips the prefix", `{"regex_uri":["^/hello/(.*)","/$1"]}`, "GET /hello/hello HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /hello HTTP/1.1"}, nil},
		{"regex_uri keeps the query", `{"regex_uri":["^/hello/(.*)","/$1"]}`, "GET /hello/a/b?x=1 HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /a/b?x=1 HTTP/1.1"}, nil},
		{"regex_uri first match only", `{"regex_uri":["a","X"]}`, "GET /banana HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /bXnana HTTP/1.1"}, nil},
		{"regex_uri first matching pair wins", `{"regex_uri":["^/x/(.*)","/1/$1","^/(.*)","/2/$1","^/","/3/"]}`, "GET /y/z HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /2/y/z HTTP/1.1"}, nil},
		{"regex_uri without a match leaves the uri", `{"regex_uri":["^/nope/(.*)","/$1"]}`, "GET /a//b%41?q HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /a//b%41?q HTTP/1.1"}, nil},
		{"regex_uri works on the decoded, normalised path", `{"regex_uri":["^/a/(.*)","/b/$1"]}`, "GET /a/./x%20y HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /b/x%20y HTTP/1.1"}, nil},
		{"regex_uri ${1}, $0 and $$", `{"regex_uri":["^/(\\w+)","/${1}_$$-$0"]}`, "GET /ab/c HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /ab_$-/ab/c HTTP/1.1"}, nil},
		{"regex_uri replacement may start a query", `{"regex_uri":["^/item/(\\d+)","/item?id=$1"]}`, "GET /item/42?x=1 HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /item?id=42&x=1 HTTP/1.1"}, nil},
		{"an encoded '?' in the path stays encoded", `{"regex_uri":["^/a(.*)","/b$1"]}`, "GET /a%3Fx HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"GET /b%3Fx HTTP/1.1"}, nil},
		{"host", `{"host":"backend.local:8080"}`, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"Host: backend.local:8080"}, []string{"Host: gw"}},
		{"host leaves $host the client's", `{"host":"backend","headers":{"X-Host":"$host"}}`, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"Host: backend", "X-Host: gw"}, nil},
		{"method", `{"method":"POST"}`, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n",
			[]string{"POST /p HTTP/1.1"}, nil},
		{"flat headers set", `{"headers":{"X-Api-Version":"v2","X-Num":3}}`, "GET /p HTTP/1.1\r\nHost: gw\r\nX-Api-Version: v1\r\n\r\n",
			[]string{"X-Api-Version: v2", "X-Num: 3"}, []string{"X-Api-Version: v1"}},
		{"add, set, remove", `{"headers":{"add":{"X-Add":["a","b"]},"set":{"X-Set":["1","2"],"X-Old":"new"},"remove":["User-Agent","X-Gone"]}}`,
			"GET /p HTTP/1.1\r\nHost: gw\r\nX-Add: orig\r\nX-Old: old\r\nUser-Agent: curl\r\nX-Gone: 1\r\n\r\n",
			[]string{"X-Add: orig", "X-Add: a", "X-Add: b", "X-Set: 1", "X-Set: 2", "X-Old: new"},
			[]string{"User-Agent", "X-Gone", "X-Old: old"}},
		{"header values with captures and variables", `{"regex_uri":["^/u/(\\w+)","/user"],"headers":{"set":{"X-User":"$1@$remote_addr ${1}","X-Missing":"[$2]","X-Host":"$host"}}}`,
			"GET /u/ann HTTP/1.1\r\nHost: GW.Example:9080\r\n\r\n",
			[]string{"GET /user HTTP/1.1", "X-User: ann@10.0.0.7 ann", "X-Missing: []", "X-Host: gw.example"}, nil},
		{"captures are empty without a match", `{"regex_uri":["^/u/(\\w+)","/user"],"headers":{"X-User":"<$1>"}}`,
			"GET /other HTTP/1.1\r\nHost: gw\r\n\r\n", []string{"GET /other HTTP/1.1", "X-User: <>"}, nil},
		// t/plugin/proxy-rewrite.t TEST 38 "set route(nginx variable does not exist)" and
		// TEST 39 "hit route(get nginx variable is nil)".
		{"apisix: a header naming an unknown or unset variable is dropped",
			`{"uri":"/uri","headers":{"x-api":"$helle","name":"$arg_world","x-key":"$http_key","Version":"nginx_var_does_not_exist"}}`,
			"GET /hello HTTP/1.1\r\nHost: gw\r\nX-Api: client\r\nName: client\r\n\r\n",
			[]string{"GET /uri HTTP/1.1", "Version: nginx_var_does_not_exist"}, []string{"X-Api:", "Name:", "X-Key:"}},
		// t/plugin/proxy-rewrite.t TEST 19 and TEST 20 "remove header".
		{"apisix: an empty header value removes the header", `{"uri":"/u","headers":{"X-Api-Engine":"APISIX","X-Api-Test":""}}`,
			"GET /hello HTTP/1.1\r\nHost: gw\r\nX-Api-Test: foo\r\nX-Api-Engine: bar\r\n\r\n",
			[]string{"X-Api-Engine: APISIX"}, []string{"X-Api-Test", "X-Api-Engine: bar"}},
		// t/plugin/proxy-rewrite.t TEST 13 "set route(rewrite empty headers)" and TEST 14
		// "rewrite empty headers": "headers.set" with "" removes, as the flat form does.
		{"apisix: headers.set with an empty value removes the header", `{"headers":{"set":{"X-Api-Test":""}}}`,
			"GET /p HTTP/1.1\r\nHost: gw\r\nX-Api-Test: hello\r\n\r\n", nil, []string{"X-Api-Test"}},
		{"set skips empty values, add adds none", `{"headers":{"set":{"X-S":"","X-T":["","$http_none","t"]},"add":{"X-A":"$http_none"}}}`,
			"GET /p HTTP/1.1\r\nHost: gw\r\nX-S: s\r\nX-T: old\r\nX-A: a\r\n\r\n",
			[]string{"X-T: t", "X-A: a"}, []string{"X-S", "X-T: old", "X-T: \r\n", "X-A: \r\n"}},
		{"a fallback stands in for a missing variable", `{"headers":{"X-U":"${http_x_user ?? anonymous}","X-V":"${http_x_user ?? anonymous}"}}`,
			"GET /p HTTP/1.1\r\nHost: gw\r\n\r\n", []string{"X-U: anonymous", "X-V: anonymous"}, nil},
		{"arguments are read as sent: the query goes upstream unchanged", `{"headers":{"X-Q":"$arg_q|$arg_e"}}`,
			"GET /p?q=a+b%7e&e HTTP/1.1\r\nHost: gw\r\n\r\n", []string{"GET /p?q=a+b%7e&e HTTP/1.1", "X-Q: a b~|"}, nil},
		{"everything at once", `{"uri":"/new","host":"h","method":"PUT","headers":{"X-A":"1"}}`,
			"GET /old?k=v HTTP/1.1\r\nHost: gw\r\n\r\n", []string{"PUT /new?k=v HTTP/1.1", "Host: h", "X-A: 1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := serverRequest(t, tc.request)
			run(t, tc.cfg, ctx)
			out := sent(t, ctx)
			lines := strings.Split(out, "\r\n")
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("upstream request lacks %q:\n%s", w, out)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(out, nw) {
					t.Errorf("upstream request still holds %q:\n%s", nw, out)
				}
			}
		})
	}
}

// The route, service and consumer variables read what the worker learnt: the matched
// route and the consumer an auth plugin named.
func TestRouteAndConsumerVariables(t *testing.T) {
	c, err := Parse([]byte(`{"uri":"/$route_id/$service_name","headers":{"X-Who":"$consumer_name@$route_name","X-Svc":"$service_id"}}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := serverRequest(t, "GET /p HTTP/1.1\r\nHost: gw\r\n\r\n")
	pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "r1", Name: "orders", ServiceID: "s1", ServiceName: "shop"}, 0)
	defer plugins.ReleaseCtx(pc)
	pc.Consumer = "jack"
	c.Access(pc)
	out := sent(t, ctx)
	lines := strings.Split(out, "\r\n")
	for _, want := range []string{"GET /r1/shop HTTP/1.1", "X-Who: jack@orders", "X-Svc: s1"} {
		if !containsLine(lines, want) {
			t.Errorf("upstream request lacks %q:\n%s", want, out)
		}
	}
}

func TestEscapeQuestionMarks(t *testing.T) {
	for _, tt := range []struct{ prefix, value, want string }{
		{"/u/", "a?b", "/u/a%3Fb"},
		{"", "??", "%3F%3F"},
		{"/x?", "plain", "/x?plain"}, // a '?' before start is the template's own
		{"/", "", "/"},
	} {
		dst := append([]byte(tt.prefix), tt.value...)
		if got := string(escapeQuestionMarks(dst, len(tt.prefix))); got != tt.want {
			t.Errorf("escapeQuestionMarks(%q after %q) = %q, want %q", tt.value, tt.prefix, got, tt.want)
		}
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// key-auth (earlier in the chain) may have removed its argument; a uri with its own query
// must join the arguments as they are now.
func TestJoinsCurrentArguments(t *testing.T) {
	ctx := serverRequest(t, "GET /p?apikey=secret&a=1 HTTP/1.1\r\nHost: gw\r\n\r\n")
	ctx.Request.URI().QueryArgs().Del("apikey")
	run(t, `{"uri":"/v?x=1"}`, ctx)
	if out := sent(t, ctx); !strings.HasPrefix(out, "GET /v?x=1&a=1 HTTP/1.1") {
		t.Errorf("upstream request:\n%s", out)
	}
}

func TestAccessAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	cases := []struct {
		cfg  string
		want float64
	}{
		{`{"uri":"/api/values","host":"h","headers":{"set":{"X-A":"$arg_a"},"remove":["X-B"]}}`, 0},
		{`{"uri":"/v?x=$http_x"}`, 0},
		{`{"uri":"/v?x=1","use_real_request_uri_unsafe":true}`, 0},
		{`{"headers":{"set":{"X-Forwarded-Proto":"https","X-Forwarded-Port":"1"},"add":{"X-Forwarded-Host":"h"}}}`, 0},
		// A literal prefix and the rest is matched without the regexp.
		{`{"regex_uri":["^/api1/(.*)","/api/$1"],"headers":{"X-C":"$1"}}`, 0},
		// Any other regex through Go's regexp, which returns a fresh slice of indexes.
		{`{"regex_uri":["^/api(\\d)/(.*)","/api/$2"],"headers":{"X-C":"$1"}}`, 1},
	}
	for _, tc := range cases {
		c, err := Parse([]byte(tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		template := serverRequest(t, "GET /api1/values?a=1 HTTP/1.1\r\nHost: gw\r\nX: y\r\n\r\n")
		ctx := &fasthttp.RequestCtx{}
		pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		allocs := testing.AllocsPerRun(200, func() {
			template.Request.CopyTo(&ctx.Request)
			c.Access(pc)
		})
		if allocs > tc.want {
			t.Errorf("%s: %.1f allocations per request, want %v", tc.cfg, allocs, tc.want)
		}
	}
}

func benchmark(b *testing.B, cfg string) {
	c, err := Parse([]byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	template := serverRequest(b, "GET /api1/values?a=1 HTTP/1.1\r\nHost: gw\r\n\r\n")
	ctx := &fasthttp.RequestCtx{}
	pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		template.Request.CopyTo(&ctx.Request)
		c.Access(pc)
	}
}

func BenchmarkURI(b *testing.B)      { benchmark(b, `{"uri":"/api/values"}`) }
func BenchmarkRegexURI(b *testing.B) { benchmark(b, `{"regex_uri":["^/api1/(.*)","/api/$1"]}`) }

// A regex that is not a literal prefix, which Go's regexp matches.
func BenchmarkRegexURIRegexp(b *testing.B) {
	benchmark(b, `{"regex_uri":["^/api(\\d)/(.*)","/api/$2"]}`)
}
func BenchmarkHostAndHeaders(b *testing.B) {
	benchmark(b, `{"host":"backend","headers":{"set":{"X-A":"1"},"add":{"X-B":"$arg_a"},"remove":["User-Agent"]}}`)
}

// The X-Forwarded-* headers the proxy sets from the connection are set before the
// plugin's header operations apply, so the plugin wins and can remove them
// (plugins.Ctx.TakeForwarded; the proxy leaves the ones taken, worker/proxy tests that).
func TestForwardedHeadersAreTheProxysThenThePlugins(t *testing.T) {
	cases := []struct {
		name, cfg string
		want      []string
		notWant   []string
		taken     plugins.Forwarded
	}{
		// t/plugin/proxy-rewrite2.t TEST 4 "customize X-Forwarded-Proto".
		{"set proto", `{"headers":{"X-Forwarded-Proto":"https"}}`,
			[]string{"X-Forwarded-Proto: https"}, []string{"grpc"}, plugins.ForwardedProto},
		// t/plugin/proxy-rewrite2.t TEST 7 "customize X-Forwarded-Port"; proxy-rewrite3.t
		// TEST 34 "test if X-Forwarded-Port can be set before proxy".
		{"set port", `{"headers":{"X-Forwarded-Port":10080}}`,
			[]string{"X-Forwarded-Port: 10080"}, []string{"8080"}, plugins.ForwardedPort},
		// t/plugin/proxy-rewrite2.t TEST 11 "customize X-Forwarded-Host"; proxy-rewrite3.t
		// TEST 13 "rewrite X-Forwarded-Host".
		{"set host", `{"headers":{"set":{"x-forwarded-host":"my-upstream.example.com"}}}`,
			[]string{"X-Forwarded-Host: my-upstream.example.com"}, []string{"client.example.com"}, plugins.ForwardedHost},
		// t/plugin/proxy-rewrite2.t TEST 9 and TEST 10 "remove X-Forwarded-Host".
		{"remove host", `{"headers":{"remove":["X-Forwarded-Host"]}}`,
			nil, []string{"X-Forwarded-Host"}, plugins.ForwardedHost},
		// add comes on top of the proxy's value, never the client's.
		{"add proto", `{"headers":{"add":{"X-Forwarded-Proto":"h2"}}}`,
			[]string{"X-Forwarded-Proto: http", "X-Forwarded-Proto: h2"}, []string{"grpc"}, plugins.ForwardedProto},
		// An empty value removes, as for any header.
		{"set port empty", `{"headers":{"X-Forwarded-Port":"$http_none"}}`,
			nil, []string{"X-Forwarded-Port"}, plugins.ForwardedPort},
		{"other headers take nothing", `{"headers":{"X-Forwarded-For":"22.22.22.22"}}`,
			[]string{"X-Forwarded-For: 22.22.22.22"}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := serverRequest(t, "GET /echo HTTP/1.1\r\nHost: gw\r\nX-Forwarded-Proto: grpc\r\n"+
				"X-Forwarded-Port: 8080\r\nX-Forwarded-Host: client.example.com\r\n\r\n")
			c, err := Parse([]byte(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
			defer plugins.ReleaseCtx(pc)
			c.Access(pc)
			if got := pc.TakenForwarded(); got != tc.taken {
				t.Errorf("taken over: %b, want %b", got, tc.taken)
			}
			out := sent(t, ctx)
			lines := strings.Split(out, "\r\n")
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("upstream request lacks %q:\n%s", w, out)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(out, nw) {
					t.Errorf("upstream request still holds %q:\n%s", nw, out)
				}
			}
		})
	}
}

// use_real_request_uri_unsafe sends the client's target as it was sent; the upstream's
// echo of its request line in APISIX's tests is the request line here.
func TestRealRequestURI(t *testing.T) {
	cases := []struct{ name, cfg, request, want string }{
		// t/plugin/proxy-rewrite.t TEST 45 "set route(rewrite uri args with unsafe
		// allowed)" and TEST 46 "rewrite uri args".
		{"uri keeps the client's query", `{"uri":"/plugin_proxy_rewrite_args","use_real_request_uri_unsafe":true}`,
			"/hello?q=apisix&a=iresty", "/plugin_proxy_rewrite_args?q=apisix&a=iresty"},
		// TEST 47 and TEST 48 "rewrite uri empty args".
		{"uri without a client query", `{"uri":"/plugin_proxy_rewrite_args","use_real_request_uri_unsafe":true}`,
			"/hello", "/plugin_proxy_rewrite_args"},
		// TEST 49 and TEST 50 "merge conf.uri query with incoming query (use '&', not
		// double '?')".
		{"uri's query and the client's joined by &", `{"uri":"/plugin_proxy_rewrite_args?x=1","use_real_request_uri_unsafe":true}`,
			"/hello?q=apisix", "/plugin_proxy_rewrite_args?x=1&q=apisix"},
		// TEST 51 and TEST 52 "query string reaches upstream exactly once without conf.uri".
		{"alone: the client's target", `{"use_real_request_uri_unsafe":true}`,
			"/plugin_proxy_rewrite_args?q=apisix", "/plugin_proxy_rewrite_args?q=apisix"},
		// TEST 53 and TEST 54 "query with special characters passed through unchanged
		// (unsafe)".
		{"query bytes unchanged", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":true}`,
			"/hello?name=a%20b&x=%E4%B8%AD", "/print_uri_detailed?name=a%20b&x=%E4%B8%AD"},
		// TEST 55 "query with multiple '?' passed through unchanged (unsafe)".
		{"several '?' unchanged", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":true}`,
			"/hello?a=1?b=2", "/print_uri_detailed?a=1?b=2"},
		// TEST 57, for contrast: without it, the same query is kept too.
		{"disabled: the query is still kept", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":false}`,
			"/hello?name=a%20b&x=1", "/print_uri_detailed?name=a%20b&x=1"},
		// t/plugin/proxy-rewrite3.t TEST 8 and TEST 9 "unsafe uri not normalized at
		// request".
		{"alone: the path is not normalised", `{"use_real_request_uri_unsafe":true}`,
			"/print%5Furi%5Fdetailed", "/print%5Furi%5Fdetailed"},
		// t/plugin/proxy-rewrite3.t TEST 42 and TEST 43 differ on purpose (README, "Where gw
		// answers differently"): a target no uri or regex_uri rewrote goes as it was sent,
		// where APISIX sends the normalised path.
		{"without it and without uri the target is the client's", `{"use_real_request_uri_unsafe":false,"headers":{"X":"1"}}`,
			"/print%5Furi%5Fdetailed", "/print%5Furi%5Fdetailed"},
		// t/plugin/proxy-rewrite3.t TEST 40 "use regex uri with unsafe allowed" and TEST 41.
		{"regex_uri on the raw target", `{"regex_uri":["/hello/(.+)","/hello?unsafe_variable=$1"],"use_real_request_uri_unsafe":true}`,
			"/hello/%ED%85%8C%EC%8A%A4%ED%8A%B8", "/hello?unsafe_variable=%ED%85%8C%EC%8A%A4%ED%8A%B8"},
		{"regex_uri sees the query", `{"regex_uri":["a=(\\d)","b=$1"],"use_real_request_uri_unsafe":true}`,
			"/p//./x?a=1&c", "/p//./x?b=1&c"},
		{"regex_uri without a match", `{"regex_uri":["^/nope","/"],"use_real_request_uri_unsafe":true}`,
			"/a/../b?%zz", "/a/../b?%zz"},
		{"an empty query's '?' is kept", `{"use_real_request_uri_unsafe":true}`, "/p?", "/p?"},
		{"a template cannot break the request line", `{"uri":"/u/$http_x","use_real_request_uri_unsafe":true}`,
			"/p?q", "/u/a%20b%3F?q"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := serverRequest(t, "GET "+tc.request+" HTTP/1.1\r\nHost: gw\r\nX: a b?\r\n\r\n")
			run(t, tc.cfg, ctx)
			out := sent(t, ctx)
			if line, _, _ := strings.Cut(out, "\r\n"); line != "GET "+tc.want+" HTTP/1.1" {
				t.Errorf("request line %q, want %q", line, "GET "+tc.want+" HTTP/1.1")
			}
		})
	}
}

// An argument key-auth removed (hide_credentials) stays removed with
// use_real_request_uri_unsafe.
func TestRealRequestURIKeepsRemovedArguments(t *testing.T) {
	ctx := serverRequest(t, "GET /p?apikey=secret&a=%41 HTTP/1.1\r\nHost: gw\r\n\r\n")
	c, err := Parse([]byte(`{"use_real_request_uri_unsafe":true}`))
	if err != nil {
		t.Fatal(err)
	}
	pc := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	defer plugins.ReleaseCtx(pc)
	pc.DelQueryArg([]byte("apikey"))
	c.Access(pc)
	if out := sent(t, ctx); !strings.HasPrefix(out, "GET /p?a=A HTTP/1.1") {
		t.Errorf("upstream request:\n%s", out)
	}
}
func BenchmarkRealRequestURI(b *testing.B) {
	benchmark(b, `{"uri":"/api/values?x=1","use_real_request_uri_unsafe":true}`)
}
func BenchmarkForwardedHeaders(b *testing.B) {
	benchmark(b, `{"headers":{"set":{"X-Forwarded-Proto":"https"},"remove":["X-Forwarded-Host"]}}`)
}

// A regex that is a literal prefix and a capture of the rest is matched by comparing bytes,
// with the regexp's result: the same indexes, or none, for every subject, newlines and bytes
// that are not UTF-8 included.
func TestLiteralPrefixMatchesAsTheRegexp(t *testing.T) {
	fast := []string{`^/api1/(.*)`, `^/(.*)`, `^/a\.b/(.*)`, `(?s)^/api/(.*)`, `^/héllo/(.*)`}
	slow := []string{`^/api1/(.*?)`, `(?i)^/api/(.*)`, `^/a(.*)b`, `/api/(.*)`, `^/api/(.+)`, `^/api/(.*)$`,
		`^/a|b(.*)`, `(?m)^/api/(.*)`, `^/\x{FFFD}/(.*)`, `^/api/((.*))`, `^/api/(?:.*)`, `^(.*)`}
	subjects := []string{"", "/", "/api1/", "/api1/values", "/api1/a\nb", "/api1", "/API1/x", "/api/x/y",
		"/a.b/c", "/axb/c", "/héllo/w", "/h\xc3/w", "/\xff/x", "\n/api/x", "/api/\n", "/api/x\ny\nz"}
	for _, pattern := range append(fast, slow...) {
		rw := regexRewrite{re: regexp.MustCompile(pattern)}
		rw.prefix, rw.dotAll, rw.prefixOnly = literalPrefix(pattern)
		if want := slices.Contains(fast, pattern); rw.prefixOnly != want {
			t.Errorf("%s: taken as a literal prefix %v, want %v", pattern, rw.prefixOnly, want)
		}
		for _, subject := range subjects {
			var dst [4]int
			got, want := rw.find([]byte(subject), &dst), rw.re.FindSubmatchIndex([]byte(subject))
			if !slices.Equal(got, want) {
				t.Errorf("%s on %q: %v, the regexp says %v", pattern, subject, got, want)
			}
		}
	}
}
