package httplogger

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

// receiver is an HTTP collector that keeps each POST's body and headers.
type receiver struct {
	mu     sync.Mutex
	bodies []string
	heads  []http.Header
	srv    *httptest.Server
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.heads = append(r.heads, req.Header.Clone())
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) wait(t *testing.T, n int) ([]string, []http.Header) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		if len(r.bodies) >= n {
			defer r.mu.Unlock()
			return append([]string(nil), r.bodies...), r.heads
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the collector got %d posts in 10s, want %d", len(r.bodies), n)
	return nil, nil
}

func build(t testing.TB, raw string, snap *conf.Snapshot) plugins.LogPhase {
	t.Helper()
	if snap == nil {
		snap = &conf.Snapshot{}
	}
	env := plugins.NewSnapshotBuild(snap, &plugins.Shared{Version: "9.9"}).Env(&plugins.RouteInfo{ID: "1", ServiceID: "s1"}, "")
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		t.Fatal(err)
	}
	return instance.(plugins.LogPhase)
}

func request() *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/hello?a=1&b=x%20y&a=2&flag")
	ctx.Request.Header.SetHost("gw.test:9080")
	ctx.Request.Header.Set("X-Trace", "t1")
	ctx.Response.SetStatusCode(201)
	ctx.Response.Header.Set("X-Up", "yes")
	ctx.Response.SetBodyString("hello world")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5000})
	return ctx
}

func logOnce(h plugins.LogPhase, ctx *fasthttp.RequestCtx) {
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1", ServiceID: "s1"}, time.Now().UnixNano()-5e6)
	c.UpstreamNanos = 3e6
	c.Node = append(c.Node, "127.0.0.1:1980"...)
	c.Consumer = "jack"
	h.Log(c)
	plugins.ReleaseCtx(c)
}

// The default entry holds APISIX's fields; two entries go as one JSON array.
func TestDefaultEntry(t *testing.T) {
	r := newReceiver(t)
	h := build(t, `{"uri":"`+r.srv.URL+`/log","batch_max_size":2,"auth_header":"Bearer k","include_resp_body":true}`, nil)
	logOnce(h, request())
	logOnce(h, request())
	bodies, heads := r.wait(t, 1)
	if heads[0].Get("Content-Type") != "application/json" || heads[0].Get("Authorization") != "Bearer k" {
		t.Errorf("headers = %v", heads[0])
	}
	var batch []map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &batch); err != nil || len(batch) != 2 {
		t.Fatalf("body %s: %v, want an array of 2 entries", bodies[0], err)
	}
	e := batch[0]
	req, resp := e["request"].(map[string]any), e["response"].(map[string]any)
	checks := map[string]any{
		"url": req["url"], "uri": req["uri"], "method": req["method"],
		"header": req["headers"].(map[string]any)["x-trace"], "host": req["headers"].(map[string]any)["host"],
		"qa": req["querystring"].(map[string]any)["a"], "qb": req["querystring"].(map[string]any)["b"],
		"qflag": req["querystring"].(map[string]any)["flag"], "status": resp["status"],
		"resp header": resp["headers"].(map[string]any)["x-up"], "resp body": resp["body"],
		"upstream": e["upstream"], "route_id": e["route_id"], "service_id": e["service_id"],
		"consumer": e["consumer"], "client_ip": e["client_ip"], "upstream_latency": e["upstream_latency"],
	}
	want := map[string]any{
		"url": "http://gw.test:0/hello?a=1&b=x%20y&a=2&flag", "uri": "/hello?a=1&b=x%20y&a=2&flag", "method": "GET",
		"header": "t1", "host": "gw.test:9080", "qa": []any{"1", "2"}, "qb": "x y", "qflag": true, "status": 201.0,
		"resp header": "yes", "resp body": "hello world", "upstream": "127.0.0.1:1980", "route_id": "1",
		"service_id": "s1", "consumer": map[string]any{"username": "jack"}, "client_ip": "127.0.0.2",
		"upstream_latency": 3.0,
	}
	for k, w := range want {
		if g, _ := json.Marshal(checks[k]); string(g) != mustJSON(w) {
			t.Errorf("%s = %s, want %s", k, g, mustJSON(w))
		}
	}
	for _, k := range []string{"latency", "apisix_latency", "start_time"} {
		if v, ok := e[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, e[k])
		}
	}
	if lat := e["latency"].(float64); lat < 5 || lat > 5000 {
		t.Errorf("latency = %v ms, want about 5", lat)
	}
	for _, k := range []string{"size"} {
		if v, ok := req[k].(float64); !ok || v <= 0 {
			t.Errorf("request.%s = %v", k, req[k])
		}
		if v, ok := resp[k].(float64); !ok || v <= 0 {
			t.Errorf("response.%s = %v", k, resp[k])
		}
	}
	if s := e["server"].(map[string]any); s["hostname"] == "" || s["version"] != "9.9" {
		t.Errorf("server = %v", s)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A batch of one is the entry itself; new_line sends entries a line each; the route's
// log_format wins over the metadata's, which wins over the default entry.
func TestConcatAndFormats(t *testing.T) {
	r := newReceiver(t)
	meta := &conf.Snapshot{PluginMetadata: []conf.PluginMetadata{{Name: Name, Value: json.RawMessage(`{"log_format":{"client_ip":"$remote_addr","m":"meta"}}`)}}}
	logOnce(build(t, `{"uri":"`+r.srv.URL+`","batch_max_size":1}`, meta), request())
	bodies, _ := r.wait(t, 1)
	if bodies[0] != `{"client_ip":"127.0.0.2","m":"meta","route_id":"1","service_id":"s1"}` {
		t.Errorf("metadata's log_format: %s", bodies[0])
	}
	logOnce(build(t, `{"uri":"`+r.srv.URL+`","batch_max_size":1,"log_format":{"h":"$host","none":"$http_x_none"}}`, meta), request())
	bodies, _ = r.wait(t, 2)
	if bodies[1] != `{"h":"gw.test","route_id":"1","service_id":"s1"}` {
		t.Errorf("route's log_format: %s", bodies[1])
	}
	h := build(t, `{"uri":"`+r.srv.URL+`","batch_max_size":2,"concat_method":"new_line","log_format":{"a":"b"}}`, nil)
	logOnce(h, request())
	logOnce(h, request())
	bodies, heads := r.wait(t, 3)
	want := `{"a":"b","route_id":"1","service_id":"s1"}`
	if bodies[2] != want+"\n"+want || heads[2].Get("Content-Type") != "text/plain" {
		t.Errorf("new_line: %q (%s)", bodies[2], heads[2].Get("Content-Type"))
	}
	if !strings.Contains(mustJSON(DefaultFormatEntry(t)), "@timestamp") {
		t.Error("the metadata's default log_format has no @timestamp")
	}
}

// DefaultFormatEntry is the entry of a plugin_metadata without log_format: APISIX's
// default format (host, @timestamp, client_ip).
func DefaultFormatEntry(t *testing.T) map[string]any {
	r := newReceiver(t)
	meta := &conf.Snapshot{PluginMetadata: []conf.PluginMetadata{{Name: Name, Value: json.RawMessage(`{}`)}}}
	logOnce(build(t, `{"uri":"`+r.srv.URL+`","batch_max_size":1}`, meta), request())
	bodies, _ := r.wait(t, 1)
	var e map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &e); err != nil || e["host"] != "gw.test" || e["client_ip"] != "127.0.0.2" {
		t.Errorf("default format entry %s: %v", bodies[0], err)
	}
	return e
}

// The log phase allocates nothing once its pools and the processor's buffers are warm.
func TestLogAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	r := newReceiver(t)
	h := build(t, `{"uri":"`+r.srv.URL+`","batch_max_size":300,"inactive_timeout":3600}`, nil)
	ctx := request()
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	for range 300 {
		h.Log(c)
	}
	r.wait(t, 1)
	time.Sleep(50 * time.Millisecond) // the sender back to waiting
	if allocs := testing.AllocsPerRun(200, func() { h.Log(c) }); allocs != 0 {
		t.Errorf("Log: %.1f allocations per request", allocs)
	}
}

func BenchmarkLog(b *testing.B) {
	r := newReceiver(b)
	h := build(b, `{"uri":"`+r.srv.URL+`"}`, nil)
	c := plugins.AcquireCtx(request(), &plugins.RouteInfo{ID: "1"}, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		h.Log(c)
	}
}

func senderOf(t *testing.T, raw string) *sender {
	t.Helper()
	cfg, err := Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return newSender(cfg)
}

// The POSTs go over one kept-alive connection, to the URI's path and query, with the
// Host of the URI.
func TestSenderKeepsTheConnection(t *testing.T) {
	var mu sync.Mutex
	var conns int
	var targets, hosts []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targets, hosts = append(targets, r.RequestURI), append(hosts, r.Host)
		mu.Unlock()
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	s := senderOf(t, `{"uri":"`+srv.URL+`/in?k=v","batch_max_size":1}`)
	for range 3 {
		if err := s.send([]byte(`[{}]`)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	host := strings.TrimPrefix(srv.URL, "http://")
	if conns != 1 || len(targets) != 3 || targets[2] != "/in?k=v" || hosts[2] != host {
		t.Errorf("%d connections for %d POSTs to %v (Host %v), want 1 for 3 to /in?k=v (Host %s)", conns, len(targets), targets, hosts, host)
	}
	if s := senderOf(t, `{"uri":"http://127.0.0.1:1"}`); s.client.Addr != "127.0.0.1:1" || string(s.req.URI().RequestURI()) != "/" {
		t.Errorf("a URI without a path: %s %s", s.client.Addr, s.req.URI().RequestURI())
	}
	if s := senderOf(t, `{"uri":"https://log.example/x"}`); s.client.Addr != "log.example:443" || !s.client.IsTLS {
		t.Errorf("https without a port: %s, TLS %v", s.client.Addr, s.client.IsTLS)
	}
}

// An https collector's certificate is checked only with ssl_verify; a status of 400 or
// more, and a collector slower than timeout, fail the batch (the processor retries it).
func TestSenderFailures(t *testing.T) {
	var got atomic.Int32
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	defer tlsSrv.Close()
	if err := senderOf(t, `{"uri":"`+tlsSrv.URL+`"}`).send([]byte(`[{}]`)); err != nil || got.Load() != 1 {
		t.Errorf("https, ssl_verify false: %v (%d received)", err, got.Load())
	}
	err := senderOf(t, `{"uri":"`+tlsSrv.URL+`","ssl_verify":true}`).send([]byte(`[{}]`))
	if err == nil || !strings.Contains(err.Error(), "error while sending data to ["+tlsSrv.URL+"]") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("https, ssl_verify true, an unknown CA: %v", err)
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer failing.Close()
	err = senderOf(t, `{"uri":"`+failing.URL+`/x"}`).send([]byte(`[{}]`))
	if want := "server returned status code[503] host[" + failing.URL + "/x]"; err == nil || err.Error() != want {
		t.Errorf("a 503: %v, want %s", err, want)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	start := time.Now()
	err = senderOf(t, `{"uri":"`+slow.URL+`","timeout":1}`).send([]byte(`[{}]`))
	if took := time.Since(start); err == nil || took > 20*time.Second {
		t.Errorf("a collector that never answers: %v after %v, want an error after the 1 s timeout", err, took)
	}
}

// A collector that ends each connection after its answer, without saying so (its
// keep-alive timeout passed): the next POST finds the connection closed and goes again
// on a new one, and no batch is lost.
func TestSenderRetriesAClosedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var posts atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				posts.Add(1)
				_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
			}()
		}
	}()
	s := senderOf(t, `{"uri":"http://`+ln.Addr().String()+`/log"}`)
	for i := range 3 {
		if err := s.send([]byte(`[{}]`)); err != nil {
			t.Fatalf("POST %d: %v", i+1, err)
		}
		time.Sleep(50 * time.Millisecond) // the collector's close arrives
	}
	if n := posts.Load(); n != 3 {
		t.Errorf("the collector got %d POSTs, want 3", n)
	}
}
