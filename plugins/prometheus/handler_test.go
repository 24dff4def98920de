package prometheus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/internal/textparse"
	"gw/plugins"
	"gw/shm"
)

func buildRecorder(tb testing.TB, seg *shm.Segment, raw string, route *plugins.RouteInfo) *recorder {
	tb.Helper()
	env := &plugins.Env{Route: route, Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: seg}}}
	inst, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		tb.Fatal(err)
	}
	return inst.(*recorder)
}

// request prepares a finished request for /hello as the worker hands it to the log phase,
// matched by route1's path and host.
func request(status int, body string, node string, total, upstream time.Duration) (*fasthttp.RequestCtx, func(r *recorder)) {
	return requestMatching("/hello", "example.com", status, body, node, total, upstream)
}

// requestMatching is request for a route whose path uri and host host matched it.
func requestMatching(uri, host string, status int, body string, node string, total, upstream time.Duration) (*fasthttp.RequestCtx, func(r *recorder)) {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/hello")
	ctx.Response.SetStatusCode(status)
	ctx.Response.SetBodyString(body)
	return &ctx, func(r *recorder) {
		c := plugins.AcquireCtx(&ctx, nil, time.Now().UnixNano()-int64(total))
		c.MatchedURI, c.MatchedHost = uri, host
		c.UpstreamNanos = int64(upstream)
		if upstream < 0 {
			c.UpstreamNanos = -1
		}
		c.Node = append(c.Node[:0], node...)
		r.Log(c)
		plugins.ReleaseCtx(c)
	}
}

func scrape(tb testing.TB, tab *Table) map[string]*textparse.Family {
	tb.Helper()
	var b bytes.Buffer
	NewExporter(tab, ExporterOptions{Hostname: "h", Version: "v"}).WritePrometheus(&b, plugins.HostFacts{})
	fams, err := textparse.Parse(b.String())
	if err != nil {
		tb.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	return fams
}

var route1 = &plugins.RouteInfo{ID: "1", Name: "hello", ServiceID: "s1", ServiceName: "svc"}

func TestLogRecordsStatusLatencyAndBandwidth(t *testing.T) {
	tab, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, route1)
	_, logOK := request(200, "hello", "10.0.0.1:8080", 7*time.Millisecond, 3*time.Millisecond)
	_, logNoUpstream := request(503, "x", "", 1500*time.Microsecond, -1)
	for range 3 {
		logOK(r)
	}
	logNoUpstream(r)

	fams := scrape(t, tab)
	status := fams["apisix_http_status"]
	for _, tt := range []struct {
		match map[string]string
		want  float64
	}{
		{map[string]string{"code": "200", "route": "1", "matched_uri": "/hello", "matched_host": "example.com", "service": "s1", "consumer": "", "node": "10.0.0.1"}, 3},
		{map[string]string{"code": "503", "node": ""}, 1},
		{nil, 4},
	} {
		if got := status.Sum("apisix_http_status", tt.match); got != tt.want {
			t.Errorf("apisix_http_status%v = %g, want %g", tt.match, got, tt.want)
		}
	}
	lat := fams["apisix_http_latency"]
	for _, tt := range []struct {
		typ, le, node string
		want          float64
	}{
		{"request", "5", "10.0.0.1", 0},
		{"request", "10", "10.0.0.1", 3},
		{"request", "2", "", 1},
		{"upstream", "2", "10.0.0.1", 0},
		{"upstream", "5", "10.0.0.1", 3},
		{"apisix", "5", "10.0.0.1", 3}, // 7 - 3 = 4 ms
		{"apisix", "1", "10.0.0.1", 0},
		{"request", "+Inf", "10.0.0.1", 3},
	} {
		m := map[string]string{"type": tt.typ, "le": tt.le, "node": tt.node, "route": "1", "service": "s1"}
		if got := lat.Sum("apisix_http_latency_bucket", m); got != tt.want {
			t.Errorf("latency bucket %v = %g, want %g", m, got, tt.want)
		}
	}
	if got := lat.Sum("apisix_http_latency_count", map[string]string{"type": "upstream"}); got != 3 {
		t.Errorf("upstream count = %g, want 3: a request without upstream adds no upstream sample", got)
	}
	if got := lat.Sum("apisix_http_latency_count", map[string]string{"type": "request"}); got != 4 {
		t.Errorf("request count = %g, want 4", got)
	}
	if sum := lat.Sum("apisix_http_latency_sum", map[string]string{"type": "request", "node": "10.0.0.1"}); sum < 21 || sum > 25 {
		t.Errorf("request latency sum = %g ms, want about 3 × 7", sum)
	}
	bw := fams["apisix_bandwidth"]
	ctx, _ := request(200, "hello", "", 0, 0)
	wantIn := float64(len("GET /hello HTTP/1.1\r\n")+len(ctx.Request.Header.RawHeaders())) * 3
	if got := bw.Sum("apisix_bandwidth", map[string]string{"type": "ingress", "node": "10.0.0.1"}); got != wantIn {
		t.Errorf("ingress = %g, want %g", got, wantIn)
	}
	egress := bw.Sum("apisix_bandwidth", map[string]string{"type": "egress", "node": "10.0.0.1"})
	if min := float64(3 * (len("HTTP/1.1 200 OK\r\n") + len("hello"))); egress < min {
		t.Errorf("egress = %g, want at least %g", egress, min)
	}
}

// A streamed body counts in the egress bandwidth as what the worker says went out
// (Ctx.BodySent), not as the Content-Length the response was meant to have.
func TestLogCountsTheStreamedBytesSent(t *testing.T) {
	egress := func(bodySent int64) float64 {
		tab, seg := newTable(t, 100)
		r := buildRecorder(t, seg, `{}`, route1)
		ctx, _ := request(200, "", "10.0.0.1:8080", 0, 0)
		ctx.Response.SetBodyStream(bytes.NewReader(nil), 100000)
		c := plugins.AcquireCtx(ctx, nil, time.Now().UnixNano())
		c.BodySent = bodySent
		c.Node = append(c.Node[:0], "10.0.0.1:8080"...)
		r.Log(c)
		plugins.ReleaseCtx(c)
		return scrape(t, tab)["apisix_bandwidth"].Sum("apisix_bandwidth", map[string]string{"type": "egress"})
	}
	cut, uncounted := egress(1234), egress(-1)
	if uncounted-cut != 100000-1234 {
		t.Errorf("egress %g with 1234 of 100000 body bytes sent, %g uncounted: want them %d apart", cut, uncounted, 100000-1234)
	}
}

// The log phase takes the time the worker says the response was whole for now, as nginx
// takes its cached time, and reads the clock only without one.
func TestLogTakesTheAnswerTimeForNow(t *testing.T) {
	tab, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, route1)
	ctx, _ := request(200, "hello", "10.0.0.1:8080", 0, 0)
	start := time.Now().Add(-time.Hour).UnixNano() // a clock read would make it an hour
	c := plugins.AcquireCtx(ctx, nil, start)
	c.UpstreamNanos = int64(2 * time.Millisecond)
	c.AnsweredNanos = start + int64(7*time.Millisecond)
	c.Node = append(c.Node[:0], "10.0.0.1:8080"...)
	r.Log(c)
	plugins.ReleaseCtx(c)

	lat := scrape(t, tab)["apisix_http_latency"]
	if sum := lat.Sum("apisix_http_latency_sum", map[string]string{"type": "request"}); sum < 6.999 || sum > 7.001 {
		t.Errorf("request latency = %g ms, want 7 (AnsweredNanos - StartNanos)", sum)
	}
	if sum := lat.Sum("apisix_http_latency_sum", map[string]string{"type": "apisix"}); sum < 4.999 || sum > 5.001 {
		t.Errorf("apisix latency = %g ms, want 5", sum)
	}
}

func TestPreferName(t *testing.T) {
	for _, tt := range []struct {
		name, raw      string
		route          *plugins.RouteInfo
		wantRoute, svc string
	}{
		{"ids by default", `{}`, route1, "1", "s1"},
		{"names", `{"prefer_name": true}`, route1, "hello", "svc"},
		{"id when there is no name", `{"prefer_name": true}`, &plugins.RouteInfo{ID: "7", ServiceID: "s"}, "7", "s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab, seg := newTable(t, 10)
			_, log := request(200, "", "10.0.0.1:80", time.Millisecond, -1)
			log(buildRecorder(t, seg, tt.raw, tt.route))
			fams := scrape(t, tab)
			m := map[string]string{"route": tt.wantRoute, "service": tt.svc}
			if got := fams["apisix_http_status"].Sum("apisix_http_status", m); got != 1 {
				t.Errorf("status%v = %g, want 1", m, got)
			}
		})
	}
}

func TestDisabledBuildsNothing(t *testing.T) {
	_, seg := newTable(t, 10)
	env := &plugins.Env{Route: route1, Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: seg}}}
	if inst, err := plugins.BuildInstance(Name, json.RawMessage(`{"disable": true}`), env); inst != nil || err != nil {
		t.Errorf("disabled plugin built %v, %v", inst, err)
	}
	env.Shared.Segments = nil
	if _, err := plugins.BuildInstance(Name, json.RawMessage(`{}`), env); err == nil {
		t.Error("build without a segment succeeded")
	}
}

func TestNodeIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:80": "10.0.0.1", "[::1]:8080": "::1", "example.com:443": "example.com", "": "", "[::1]": "::1",
	} {
		if got := nodeIP([]byte(in)); got != want {
			t.Errorf("nodeIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// Past the cap, new label sets count in the overflow series, so sums stay exact.
func TestOverflowKeepsSumsExact(t *testing.T) {
	tab, seg := newTable(t, 2)
	r := buildRecorder(t, seg, `{}`, route1)
	for i := 0; i < 10; i++ {
		_, log := request(200+i, "", fmt.Sprintf("10.0.0.%d:80", i), time.Millisecond, -1)
		log(r)
	}
	fams := scrape(t, tab)
	if got := fams["apisix_http_status"].Sum("apisix_http_status", nil); got != 10 {
		t.Errorf("status sum = %g, want 10", got)
	}
	if got := fams["apisix_http_status"].Sum("apisix_http_status", map[string]string{"code": "", "route": ""}); got != 8 {
		t.Errorf("overflow series = %g, want 8", got)
	}
	if got := fams["gw_metrics_overflow_total"].Sum("gw_metrics_overflow_total", nil); got != 8 {
		t.Errorf("gw_metrics_overflow_total = %g, want 8", got)
	}
	if got := fams["apisix_nginx_metric_errors_total"].Sum("apisix_nginx_metric_errors_total", nil); got != 8 {
		t.Errorf("apisix_nginx_metric_errors_total = %g, want 8", got)
	}
	if got := fams["apisix_http_latency"].Sum("apisix_http_latency_count", map[string]string{"type": "request"}); got != 10 {
		t.Errorf("latency count = %g, want 10", got)
	}
}

func TestLogDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	_, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, route1)
	_, log := request(200, "hello", "10.0.0.1:8080", 7*time.Millisecond, 3*time.Millisecond)
	log(r)
	if allocs := testing.AllocsPerRun(1000, func() { log(r) }); allocs != 0 {
		t.Errorf("recording allocates %.1f times per request, want 0", allocs)
	}
	// Requests matching the route by turns under two of its paths miss the last-entry
	// shortcut every time and find their entries in the cache.
	_, logFoo := requestMatching("/foo*", "foo.com", 200, "", "10.0.0.1:8080", time.Millisecond, -1)
	_, logBar := requestMatching("/bar*", "bar.com", 200, "", "10.0.0.1:8080", time.Millisecond, -1)
	logFoo(r)
	logBar(r)
	if allocs := testing.AllocsPerRun(1000, func() { logFoo(r); logBar(r) }); allocs != 0 {
		t.Errorf("recording alternate matched paths allocates %.1f times per pair, want 0", allocs)
	}
}

// One route counts each request under the path and host it matched, not under its first
// ones: t/plugin/prometheus2.t TEST 8 (route 9: uris ["/foo*", "/bar*"], hosts
// ["foo.com", "bar.com"]) and TEST 12-15 (GET /foo1 with Host: foo.com counts under
// matched_uri="/foo*", matched_host="foo.com"; GET /bar1 with Host: bar.com under "/bar*"
// and "bar.com"). TEST 11: a request no route matched has both empty.
func TestLogCountsTheMatchedPathAndHost(t *testing.T) {
	tab, seg := newTable(t, 100)
	r := buildRecorder(t, seg, `{}`, &plugins.RouteInfo{ID: "9"})
	_, logFoo := requestMatching("/foo*", "foo.com", 404, "", "127.0.0.1:1980", time.Millisecond, -1)
	_, logBar := requestMatching("/bar*", "bar.com", 404, "", "127.0.0.1:1980", time.Millisecond, -1)
	_, logNoHost := requestMatching("/bar*", "", 404, "", "127.0.0.1:1980", time.Millisecond, -1)
	logFoo(r)
	for range 2 {
		logBar(r)
	}
	for range 3 {
		logNoHost(r)
	}
	unmatched := buildRecorder(t, seg, `{}`, &plugins.RouteInfo{})
	_, logUnmatched := requestMatching("", "", 404, "", "", time.Millisecond, -1)
	logUnmatched(unmatched)

	status := scrape(t, tab)["apisix_http_status"]
	for _, tt := range []struct {
		route, uri, host string
		want             float64
	}{
		{"9", "/foo*", "foo.com", 1},
		{"9", "/bar*", "bar.com", 2},
		{"9", "/bar*", "", 3},
		{"9", "/foo*", "bar.com", 0},
		{"", "", "", 1},
	} {
		match := map[string]string{"code": "404", "route": tt.route, "matched_uri": tt.uri, "matched_host": tt.host}
		if got := status.Sum("apisix_http_status", match); got != tt.want {
			t.Errorf("apisix_http_status%v = %g, want %g", match, got, tt.want)
		}
	}
}

// BenchmarkLog is the whole log phase of one request: clock, cache lookup, 9 atomic adds
// and the bandwidth sizes.
func BenchmarkLog(b *testing.B) {
	_, seg := newTable(b, 100)
	r := buildRecorder(b, seg, `{}`, route1)
	ctx, _ := request(200, "hello", "10.0.0.1:8080", 0, 0)
	// A typical upstream response's header fields.
	ctx.Response.Header.SetContentType("application/json")
	for _, kv := range [][2]string{{"Cache-Control", "no-cache"}, {"Vary", "Accept-Encoding"},
		{"X-Request-Id", "0f8fad5b-d9cb-469f-a165-70867728950e"}, {"Etag", `"33a64df551425fcc55e4d42a148795d9f25f89d4"`},
		{"Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"}} {
		ctx.Response.Header.Set(kv[0], kv[1])
	}
	c := plugins.AcquireCtx(ctx, route1, time.Now().UnixNano())
	c.MatchedURI, c.MatchedHost = "/hello", "example.com"
	c.UpstreamNanos = int64(time.Millisecond)
	c.Node = append(c.Node, "10.0.0.1:8080"...)
	// A proxied request: the worker says when the answer was whole. A plugin's own answer
	// leaves it to the clock.
	b.Run("proxied", func(b *testing.B) {
		c.AnsweredNanos = c.StartNanos + int64(2*time.Millisecond)
		b.ReportAllocs()
		for b.Loop() {
			r.Log(c)
		}
	})
	b.Run("clock", func(b *testing.B) {
		c.AnsweredNanos = 0
		b.ReportAllocs()
		for b.Loop() {
			r.Log(c)
		}
	})
}

// BenchmarkLogParallel is BenchmarkLog from every core into the same series, the worst
// case for cache-line sharing between workers.
func BenchmarkLogParallel(b *testing.B) {
	_, seg := newTable(b, 100)
	r := buildRecorder(b, seg, `{}`, route1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx, _ := request(200, "hello", "10.0.0.1:8080", 0, 0)
		c := plugins.AcquireCtx(ctx, route1, time.Now().UnixNano())
		c.MatchedURI, c.MatchedHost = "/hello", "example.com"
		c.UpstreamNanos = int64(time.Millisecond)
		c.Node = append(c.Node, "10.0.0.1:8080"...)
		for pb.Next() {
			r.Log(c)
		}
	})
}
