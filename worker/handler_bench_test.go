package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/errlog"
	"gw/internal/race"
	"gw/plugins"
	_ "gw/plugins/all" // limit-count and prometheus, as the benchmark's second scenario
	"gw/shm"
	"gw/worker/accesslog"
	"gw/worker/proxy"
)

// stubResponse is what the benchmark upstream (benchmark/upstream) answers: APISIX's
// benchmark body, 10 bytes, on a keep-alive connection.
var stubResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n1234567890")

// startStubUpstream answers every request on a loopback port with stubResponse. It does
// not allocate per request, so AllocsPerRun counts the handler's allocations alone (it
// counts every goroutine's). Requests must be bodiless, as the benchmark's GETs are.
func startStubUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveStub(c)
		}
	}()
	return ln.Addr().String()
}

func serveStub(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16<<10)
	end := []byte("\r\n\r\n")
	filled := 0
	for {
		n, err := c.Read(buf[filled:])
		if err != nil {
			return
		}
		filled += n
		for {
			i := bytes.Index(buf[:filled], end)
			if i < 0 {
				break
			}
			if _, err := c.Write(stubResponse); err != nil {
				return
			}
			filled = copy(buf, buf[i+len(end):filled])
		}
		if filled == len(buf) {
			return // a header larger than the buffer: not a benchmark request
		}
	}
}

// benchWorker is a worker with one compiled route, as a master would have sent it, and
// the shared-memory segments and access log the default configuration gives it.
func benchWorker(tb testing.TB, upstream string, routePlugins string) *Worker {
	tb.Helper()
	return benchWorkerFor(tb, fmt.Appendf(nil,
		`{"uri":"/hello","plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, routePlugins, upstream))
}

// benchWorkerFor is benchWorker with routeJSON as its one route.
func benchWorkerFor(tb testing.TB, routeJSON []byte) *Worker {
	tb.Helper()
	cfg := conf.Default()
	shared := &plugins.Shared{Segments: map[string]*shm.Segment{}, Config: cfg, Logf: func(string, ...any) {}}
	for name, spec := range plugins.Segments() {
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
		if err != nil {
			tb.Fatalf("segment %s: %v", name, err)
		}
		tb.Cleanup(func() { seg.Close() })
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				tb.Fatalf("segment %s: %v", name, err)
			}
		}
		shared.Segments[name] = seg
	}
	route, err := conf.DecodeRoute(routeJSON)
	if err != nil {
		tb.Fatal(err)
	}
	route.ID = "1"
	if err := plugins.ValidateAll(route.Plugins); err != nil {
		tb.Fatal(err)
	}
	consumer, err := conf.DecodeConsumer([]byte(benchConsumer))
	if err != nil {
		tb.Fatal(err)
	}
	pools := proxy.NewPools()
	tb.Cleanup(pools.Close)
	t, leftOut, err := compile(&conf.Snapshot{Version: 1, Routes: []conf.Route{*route}, Consumers: []conf.Consumer{*consumer}}, pools, shared)
	if err != nil || leftOut != nil {
		tb.Fatal(err, leftOut)
	}
	w := &Worker{log: errlog.New(io.Discard, "bench"), pools: pools, shared: shared, conns: newConnTracker(), cfg: *cfg, edge: newEdge(cfg)}
	w.table.Store(t)
	if cfg.AccessLog.Enabled {
		logPath := filepath.Join(tb.TempDir(), "access.log")
		w.accessLog, err = accesslog.Open(cfg.AccessLog, logPath)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { w.accessLog.Close() })
	}
	return w
}

// benchPlugins is the seeds' second scenario: limit-count with a count never reached,
// and prometheus.
const benchPlugins = `{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}}`

// benchChain is benchmark/run.sh --chain's route (issue 22): the plugins a typical API
// route carries, key-auth, limit-req with a rate the benchmark never reaches, cors,
// request-id and prometheus. The requests carry the consumer's key and an Origin.
const benchChain = `{"key-auth":{},"limit-req":{"rate":10000000,"burst":1000000,"nodelay":true,"key":"consumer_name"},` +
	`"cors":{},"request-id":{},"prometheus":{}}`

// benchConsumer is the consumer whose key the chain's requests carry.
const benchConsumer = `{"username":"bench","plugins":{"key-auth":{"key":"bench-key"}}}`

// benchChainHeaders are the headers wrk sends in run.sh --chain, to every scenario.
const benchChainHeaders = "apikey: bench-key\r\nOrigin: http://bench.test\r\n"

// requestRunner replays one wrk-like request through w.handle on a reused RequestCtx, as
// fasthttp's server reuses one per connection.
type requestRunner struct {
	w        *Worker
	template fasthttp.Request
	ctx      fasthttp.RequestCtx
}

func newRequestRunner(w *Worker, headers string) *requestRunner {
	r := &requestRunner{w: w}
	// Parsed from the wire as the server does, so that the request keeps its raw header
	// block and goes out pristine, as wrk's do.
	raw := "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: wrk\r\n" + headers + "\r\n"
	if err := r.template.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		panic(err)
	}
	r.ctx.Init(&r.template, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return r
}

// once handles one request and returns its status.
func (r *requestRunner) once() int {
	r.template.CopyTo(&r.ctx.Request) // proxying rewrote the headers in place
	r.ctx.Response.Reset()
	r.w.handle(&r.ctx)
	return r.ctx.Response.StatusCode()
}

var handlerScenarios = []struct {
	name    string
	plugins string
	headers string
}{
	{"no-plugin", `{}`, ""},
	{"limit-count+prometheus", benchPlugins, ""},
	{"no-plugin-chain-headers", `{}`, benchChainHeaders},
	{"chain", benchChain, benchChainHeaders},
}

// BenchmarkHandle is one proxied request through the whole worker handler: router,
// plugin chain, proxy over a kept-alive loopback connection, access log. The upstream's
// round trip is in the figure, so compare the two scenarios, not the absolute ns/op.
func BenchmarkHandle(b *testing.B) {
	upstream := startStubUpstream(b)
	for _, sc := range handlerScenarios {
		b.Run(sc.name, func(b *testing.B) {
			r := newRequestRunner(benchWorker(b, upstream, sc.plugins), sc.headers)
			if status := r.once(); status != fasthttp.StatusOK {
				b.Fatalf("status %d, body %q", status, r.ctx.Response.Body())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r.once()
			}
		})
	}
}

// TestHandleAllocs checks the style rule that a proxied request allocates nothing with the
// benchmark's plugins on, and that the plugins ran (the metric and the limit headers are
// the evidence a regression would remove).
func TestHandleAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	upstream := startStubUpstream(t)
	for _, sc := range handlerScenarios {
		t.Run(sc.name, func(t *testing.T) {
			w := benchWorker(t, upstream, sc.plugins)
			r := newRequestRunner(w, sc.headers)
			for range 100 { // warm the pools, the upstream connection and the metric series
				if status := r.once(); status != fasthttp.StatusOK {
					t.Fatalf("status %d, body %q", status, r.ctx.Response.Body())
				}
			}
			if got := string(r.ctx.Response.Body()); got != "1234567890" {
				t.Fatalf("body %q, want the upstream's", got)
			}
			if sc.plugins == benchChain {
				// cors and request-id answered: the chain ran (key-auth's refusal of a
				// request without the key is TestHandleRunsPlugins's).
				h := &r.ctx.Response.Header
				if len(h.Peek("X-Request-Id")) != 36 || string(h.Peek("Access-Control-Allow-Origin")) != "*" {
					t.Fatalf("the chain's headers are missing: %s", h.Header())
				}
			}
			allocs := testing.AllocsPerRun(1000, func() { r.once() })
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
		})
	}
}

// TestHandleRunsPlugins guards the allocation test against passing because the chain was
// silently empty: with a count of 2 the third request must be refused.
func TestHandleRunsPlugins(t *testing.T) {
	upstream := startStubUpstream(t)
	limited, err := json.Marshal(map[string]any{
		"limit-count": map[string]any{"count": 2, "time_window": 60, "rejected_code": 503, "key": "remote_addr"},
		"prometheus":  map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRequestRunner(benchWorker(t, upstream, string(limited)), "")
	want := []int{200, 200, 503}
	for i, code := range want {
		if got := r.once(); got != code {
			t.Fatalf("request %d: status %d, want %d", i+1, got, code)
		}
	}
	// The chain's key-auth refuses a request without the consumer's key.
	if got := newRequestRunner(benchWorker(t, upstream, benchChain), "").once(); got != 401 {
		t.Fatalf("the chain without a key: status %d, want 401", got)
	}
}

// A request traffic-split sends to an upstream of its own, compiled with the route
// (route.proxyChosen), allocates nothing either: half the requests go to the inline
// upstream, half to the route's (integration/plugin_trafficsplit_test.go shows which
// answers).
func TestHandleAllocsTrafficSplit(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	own, other := startStubUpstream(t), startStubUpstream(t)
	split := fmt.Sprintf(`{"traffic-split":{"rules":[{"weighted_upstreams":[{"upstream":{"nodes":{%q:1}},"weight":1},{"weight":1}]}]}}`, other)
	w := benchWorker(t, own, split)
	r := newRequestRunner(w, "")
	for range 100 { // warm both upstreams' connections
		if status := r.once(); status != fasthttp.StatusOK {
			t.Fatalf("status %d, body %q", status, r.ctx.Response.Body())
		}
	}
	if set := w.table.Load().routes[0].chosen; len(set) != 1 || len(set[0].upstreams) != 2 || set[0].upstreams[0] == set[0].upstreams[1] {
		t.Fatalf("the route's chosen upstreams: %+v", set)
	}
	allocs := testing.AllocsPerRun(1000, func() { r.once() })
	if allocs != 0 {
		t.Errorf("%v allocations per request, want 0", allocs)
	}
}
