package opentelemetry

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

// collector is an OTLP/HTTP receiver: it decodes each POST to /v1/traces.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	headers []http.Header
	got     chan struct{}
}

func newCollector(t *testing.T) *collector {
	col := &collector{got: make(chan struct{}, 100)}
	col.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var data tracepb.TracesData
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &data) != nil {
			t.Errorf("collector got %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			w.WriteHeader(400)
			return
		}
		col.mu.Lock()
		for _, rs := range data.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				col.spans = append(col.spans, ss.Spans...)
			}
		}
		col.headers = append(col.headers, r.Header.Clone())
		col.mu.Unlock()
		col.got <- struct{}{}
	}))
	t.Cleanup(col.Close)
	return col
}

func testAttr(address string) conf.OpenTelemetryAttr {
	a := conf.Default().PluginAttr.OpenTelemetry
	a.Collector.Address = address
	a.Collector.RequestHeaders = []conf.KeyValue{{Key: "Authorization", Value: "Bearer t"}}
	a.Batch.MaxExportBatchSize = 1
	a.Batch.InactiveTimeout = 50 * time.Millisecond
	return a
}

func newHandler(t *testing.T, raw string, exp *exporter) *handler {
	t.Helper()
	cfg, err := Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return &handler{cfg: cfg, exp: exp, fromRequestID: exp.fromRequestID}
}

// serve runs Access, then Log as the worker does once the response is final, and
// returns the traceparent and tracestate sent upstream.
func serve(h *handler, reqHeaders ...string) (traceparent, tracestate string, tc plugins.TraceContext) {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello?x=1")
	ctx.Request.Header.SetHost("example.com:9080")
	ctx.Request.Header.Set("User-Agent", "test/1")
	for i := 0; i+1 < len(reqHeaders); i += 2 {
		ctx.Request.Header.Set(reqHeaders[i], reqHeaders[i+1])
	}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "r1", Name: "hello", ServiceID: "s1", ServiceName: "svc"}, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	c.MatchedURI = "/hello"
	if err := h.Access(c); err != nil {
		panic(err)
	}
	tc = c.Trace
	c.UpstreamNanos = int64(3 * time.Millisecond)
	c.Node = append(c.Node, "127.0.0.1:1980"...)
	ctx.Response.SetStatusCode(503)
	h.Log(c)
	return string(ctx.Request.Header.Peek("traceparent")), string(ctx.Request.Header.Peek("tracestate")), tc
}

func TestSpanReachesTheCollector(t *testing.T) {
	col := newCollector(t)
	exp := newExporter(testAttr(strings.TrimPrefix(col.URL, "http://")), localCounters(), nil)
	defer exp.stop()
	h := newHandler(t, `{"sampler":{"name":"always_on"},"additional_attributes":["route_id","arg_x","http_x_none"],"additional_header_prefix_attributes":["X-Tenant-*","User-Agent"]}`, exp)

	const client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	sent, state, tc := serve(h, "traceparent", client, "tracestate", "vendor=1", "X-Tenant-Id", "acme")
	p, ok := ParseTraceparent([]byte(sent))
	if !ok || hex.EncodeToString(p.TraceID[:]) != "0af7651916cd43dd8448eb211c80319c" || p.SpanID != tc.SpanID || p.SpanID == [8]byte{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31} || !p.Sampled() {
		t.Fatalf("upstream got traceparent %q (span %x)", sent, tc.SpanID)
	}
	if state != "vendor=1" {
		t.Fatalf("upstream got tracestate %q, want the client's", state)
	}
	select {
	case <-col.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no export within 10s")
	}
	col.mu.Lock()
	if len(col.spans) != 1 {
		t.Fatalf("collector got %d spans", len(col.spans))
	}
	s := col.spans[0]
	if hex.EncodeToString(s.TraceId) != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(s.ParentSpanId) != "b7ad6b7169203331" ||
		string(s.SpanId) != string(tc.SpanID[:]) || s.TraceState != "vendor=1" || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		s.Name != "GET /hello" || s.EndTimeUnixNano < s.StartTimeUnixNano || s.StartTimeUnixNano == 0 {
		t.Fatalf("span %v", s)
	}
	if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "upstream response status: 503" {
		t.Fatalf("status %v", s.Status)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		v := kv.Value.GetStringValue()
		if _, isInt := kv.Value.Value.(*commonpb.AnyValue_IntValue); isInt {
			v = strconv.FormatInt(kv.Value.GetIntValue(), 10)
		}
		attrs[kv.Key] = v
	}
	for k, want := range map[string]string{
		"net.host.name": "example.com", "http.method": "GET", "http.scheme": "http", "http.target": "/hello?x=1",
		"http.user_agent": "test/1", "apisix.route_id": "r1", "apisix.route_name": "hello", "http.route": "/hello",
		"apisix.service_id": "s1", "apisix.service_name": "svc", "route_id": "r1", "arg_x": "1",
		"x-tenant-id": "acme", "User-Agent": "test/1", "http.status_code": "503", "gw.upstream.address": "127.0.0.1:1980",
	} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	if _, ok := attrs["http_x_none"]; ok {
		t.Errorf("a variable without a value became an attribute")
	}
	if col.headers[0].Get("Authorization") != "Bearer t" {
		t.Errorf("collector.request_headers not sent: %v", col.headers[0])
	}
	col.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); exp.counters.exported.Load() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("exported = %d after 10s", exp.counters.exported.Load())
		}
	}
}

func TestUnsampledRequestPropagatesAndRecordsNothing(t *testing.T) {
	exp := newExporter(testAttr("127.0.0.1:1"), localCounters(), nil)
	exp.start.Do(func() {}) // no loop: nothing may be queued
	h := newHandler(t, `{"sampler":{"name":"parent_base","options":{"root":{"name":"always_on"}}}}`, exp)
	sent, state, tc := serve(h, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
	if sent != "00-0af7651916cd43dd8448eb211c80319c-"+hex.EncodeToString(tc.SpanID[:])+"-00" || state != "" {
		t.Fatalf("upstream got %q %q", sent, state)
	}
	if exp.queued != 0 {
		t.Fatalf("an unsampled span was queued")
	}
	// Without a parent, the root sampler records it; a stray tracestate is removed.
	sent, state, tc = serve(h, "tracestate", "orphan=1")
	if p, ok := ParseTraceparent([]byte(sent)); !ok || !p.Sampled() || p.TraceID != tc.TraceID || state != "" || exp.queued != 1 {
		t.Fatalf("upstream got %q %q, queued %d", sent, state, exp.queued)
	}
}

func TestTraceIDFromXRequestID(t *testing.T) {
	attr := testAttr("127.0.0.1:1")
	attr.TraceIDSource = conf.TraceIDFromRequestID
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	h := newHandler(t, `{}`, exp)
	sent, _, _ := serve(h, "X-Request-Id", "0af76519-16cd-43dd-8448-eb211c80319c")
	if !strings.HasPrefix(sent, "00-0af7651916cd43dd8448eb211c80319c-") || !strings.HasSuffix(sent, "-00") {
		t.Fatalf("upstream got %q", sent)
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 2, 2
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {}) // nothing empties the queue
	h := newHandler(t, `{"sampler":{"name":"always_on"}}`, exp)
	for range 5 {
		serve(h)
	}
	if exp.queued != 2 || exp.counters.dropped.Load() != 3 {
		t.Fatalf("queued %d, dropped %d; want 2 and 3", exp.queued, exp.counters.dropped.Load())
	}
}

func TestDeadCollectorCountsFailures(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	address := strings.TrimPrefix(dead.URL, "http://")
	dead.Close()
	exp := newExporter(testAttr(address), localCounters(), nil)
	defer exp.stop()
	h := newHandler(t, `{"sampler":{"name":"always_on"}}`, exp)
	serve(h)
	deadline := time.Now().Add(10 * time.Second)
	for exp.counters.failed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("failed = %d after 10s", exp.counters.failed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBuildThroughTheRegistry(t *testing.T) {
	built, err := plugins.BuildInstance(Name, json.RawMessage(`{"sampler":{"name":"always_on"}}`), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := built.(plugins.AccessPhase); !ok {
		t.Fatalf("instance %T has no access phase", built)
	}
}

// TestRequestPathAllocatesNothing holds Access and Log (the span's copy into the queue)
// to zero allocations, with APISIX's attributes and additional ones.
func TestRequestPathAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 4, 4
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	h := newHandler(t, `{"sampler":{"name":"always_on"},"additional_attributes":["route_id","arg_x"],"additional_header_prefix_attributes":["User-Agent"]}`, exp)
	route := &plugins.RouteInfo{ID: "1"}
	// Each request fresh from its template: with the client's traceparent (replaced) and
	// without one (added), with a tracestate to remove.
	for _, traceHeaders := range [][2]string{
		{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"tracestate", "v=1"},
	} {
		var template fasthttp.Request
		template.SetRequestURI("/hello?x=1")
		template.Header.Set(traceHeaders[0], traceHeaders[1])
		ctx := &fasthttp.RequestCtx{}
		allocs := testing.AllocsPerRun(200, func() {
			template.CopyTo(&ctx.Request)
			exp.drain()
			c := plugins.AcquireCtx(ctx, route, 1)
			if err := h.Access(c); err != nil {
				panic(err)
			}
			h.Log(c)
			plugins.ReleaseCtx(c)
		})
		if allocs != 0 {
			t.Fatalf("Access+Log with the client's %s allocate %.1f times per request", traceHeaders[0], allocs)
		}
	}
}

func BenchmarkAccessAndLog(b *testing.B) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 4, 4
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	cfg, _ := Parse(json.RawMessage(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	ctx.Request.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	route := &plugins.RouteInfo{ID: "1"}
	b.ReportAllocs()
	for b.Loop() {
		exp.drain()
		c := plugins.AcquireCtx(ctx, route, 1)
		_ = h.Access(c)
		h.Log(c)
		plugins.ReleaseCtx(c)
	}
}

// BenchmarkAccessAndLogNewTrace is BenchmarkAccessAndLog for a client that sends no trace
// headers (wrk's), each request fresh from its template.
func BenchmarkAccessAndLogNewTrace(b *testing.B) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 4, 4
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	cfg, _ := Parse(json.RawMessage(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	var template fasthttp.Request
	template.SetRequestURI("/hello")
	template.Header.Set("User-Agent", "wrk")
	ctx := &fasthttp.RequestCtx{}
	route := &plugins.RouteInfo{ID: "1"}
	b.ReportAllocs()
	for b.Loop() {
		template.CopyTo(&ctx.Request)
		exp.drain()
		c := plugins.AcquireCtx(ctx, route, 1)
		_ = h.Access(c)
		h.Log(c)
		plugins.ReleaseCtx(c)
	}
}
