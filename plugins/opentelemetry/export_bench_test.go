package opentelemetry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gw/conf"
	"gw/plugins"
)

// fillQueue records n spans of a typical request into exp's queue.
func fillQueue(exp *exporter, n int) {
	cfg, _ := Parse([]byte(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	ctx.Request.Header.Set("User-Agent", "wrk")
	route := &plugins.RouteInfo{ID: "1"}
	for range n {
		c := plugins.AcquireCtx(ctx, route, 1)
		c.MatchedURI = "/hello"
		_ = h.Access(c)
		c.UpstreamNanos = 1000
		c.Node = append(c.Node, "127.0.0.1:1980"...)
		h.Log(c)
		plugins.ReleaseCtx(c)
	}
}

// BenchmarkEncodeBatch is the exporter goroutine's work per span, without the POST: a
// batch of 256 spans encoded as OTLP protobuf.
func BenchmarkEncodeBatch(b *testing.B) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 256, 256
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		exp.count, exp.head = 0, 0
		fillQueue(exp, 256)
		b.StartTimer()
		exp.encodeBatch()
	}
}

// TestEncodeBatchDecodes reads a batch back with the generated OTLP package: the
// resource APISIX reports, the scope, every span whole.
func TestEncodeBatchDecodes(t *testing.T) {
	attr := testAttr("127.0.0.1:1")
	attr.Resource = []conf.KeyValue{{Key: "tenant", Value: "acme"}, {Key: "weight", Value: 2.5}, {Key: "canary", Value: true}}
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 8, 8
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	fillQueue(exp, 3)
	body, n := exp.encodeBatch()
	var data tracepb.TracesData
	if err := proto.Unmarshal(body, &data); err != nil || n != 3 || exp.count != 0 {
		t.Fatalf("decode: %v, n %d, left %d", err, n, exp.count)
	}
	rs := data.ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = fmt.Sprint(kv.Value.Value)
	}
	want := map[string]string{"hostname": fmt.Sprint(&commonpb.AnyValue_StringValue{StringValue: hostname()}),
		"service.name": `&{APISIX}`, "tenant": `&{acme}`, "weight": `&{2.5}`, "canary": `&{true}`}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("resource %v, want %v", res, want)
	}
	if len(rs.ScopeSpans) != 1 || rs.ScopeSpans[0].Scope.GetName() != "gw" || len(rs.ScopeSpans[0].Spans) != 3 {
		t.Fatalf("scope spans %v", rs.ScopeSpans)
	}
	// The first request is a root; the next ones carry the traceparent the previous one
	// left on the reused request, so their parent is remote.
	s, next := rs.ScopeSpans[0].Spans[0], rs.ScopeSpans[0].Spans[1]
	if s.Name != "GET /hello" || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Flags != 0x101 || len(s.TraceId) != 16 ||
		len(s.SpanId) != 8 || len(s.ParentSpanId) != 0 || s.StartTimeUnixNano != 1 || s.Status != nil || len(s.Attributes) != 12 ||
		next.Flags != 0x301 || string(next.ParentSpanId) != string(s.SpanId) || string(next.TraceId) != string(s.TraceId) {
		t.Errorf("span %v", s)
	}
}

// TestPostSendsEachBodyWhole: the lent copies of the body reach the collector with
// their length, each whole, though the exporter's buffer changes between posts and a
// copy's buffer serves again once the transport has closed it.
func TestPostSendsEachBodyWhole(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.ContentLength != int64(len(body)) || len(r.TransferEncoding) != 0 {
			t.Errorf("Content-Length %d, Transfer-Encoding %v for %d bytes", r.ContentLength, r.TransferEncoding, len(body))
		}
		got = append(got, string(body))
	}))
	defer srv.Close()
	exp := newExporter(testAttr(srv.Listener.Addr().String()), localCounters(), nil)
	body := make([]byte, 0, 64<<10)
	var want []string
	for i := range 5 {
		body = append(body[:0], bytes.Repeat([]byte{'a' + byte(i)}, 1000*(5-i))...)
		if err := exp.post(body); err != nil {
			t.Fatal(err)
		}
		want = append(want, string(body))
	}
	if len(got) != len(want) {
		t.Fatalf("%d bodies arrived, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("body %d: %d bytes starting %.8q, want %d starting %.8q", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// TestUnmatchedRequestSpan: a request no route matched (a global rule's instance, the
// worker's unmatched RouteInfo) gets what APISIX's opentelemetry.lua gives one without
// curr_req_matched: the method alone for a name and no route attributes; no
// "no-matched" route id, which is the loggers' (log-util) and not the tracer's.
func TestUnmatchedRequestSpan(t *testing.T) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 4, 4
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	cfg, _ := Parse([]byte(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/nowhere")
	ctx.Response.SetStatusCode(404)
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 1)
	_ = h.Access(c)
	h.Log(c)
	plugins.ReleaseCtx(c)
	body, n := exp.encodeBatch()
	var data tracepb.TracesData
	if err := proto.Unmarshal(body, &data); err != nil || n != 1 {
		t.Fatalf("decode: %v, %d spans", err, n)
	}
	s := data.ResourceSpans[0].ScopeSpans[0].Spans[0]
	if s.Name != "GET" {
		t.Errorf("span name %q, want GET", s.Name)
	}
	for _, kv := range s.Attributes {
		if strings.HasPrefix(kv.Key, "apisix.") || kv.Key == "http.route" {
			t.Errorf("unmatched request's span has %s = %v", kv.Key, kv.Value)
		}
		if kv.Key == "http.status_code" && kv.Value.GetIntValue() != 404 {
			t.Errorf("http.status_code %v, want 404", kv.Value)
		}
	}
}
