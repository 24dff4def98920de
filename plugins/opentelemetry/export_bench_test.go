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

// typicalRequests returns a function that records n spans of a typical request into
// exp's queue, its request and handler made once.
func typicalRequests(exp *exporter) func(n int) {
	cfg, _ := Parse([]byte(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	ctx.Request.Header.Set("User-Agent", "wrk")
	route := &plugins.RouteInfo{ID: "1"}
	return func(n int) {
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
}

// fillQueue records n spans of a typical request into exp's queue.
func fillQueue(exp *exporter, n int) { typicalRequests(exp)(n) }

// nextBody takes what the exporter would send next (a full batch, else the one being
// filled) and returns a copy of its body and its spans, giving the batch back.
func nextBody(exp *exporter) ([]byte, int) {
	b := exp.take(true)
	if b == nil {
		return nil, 0
	}
	body, n := bytes.Clone(exp.body(b)), b.n
	exp.giveBack(b)
	return body, n
}

// drain empties the queue, as sending every batch would.
func (e *exporter) drain() {
	for b := e.take(true); b != nil; b = e.take(true) {
		e.giveBack(b)
	}
}

// BenchmarkRecordBatch is the worker's work per batch of 256 spans, without the POST:
// the log phase's encoding of each span into the batch (Access and Log), then the
// batch's front.
func BenchmarkRecordBatch(b *testing.B) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 256, 256
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	record := typicalRequests(exp)
	b.ReportAllocs()
	for b.Loop() {
		record(256)
		batch := exp.take(true)
		exp.body(batch)
		exp.giveBack(batch)
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
	body, n := nextBody(exp)
	var data tracepb.TracesData
	if err := proto.Unmarshal(body, &data); err != nil || n != 3 || exp.queued != 0 {
		t.Fatalf("decode: %v, n %d, left %d", err, n, exp.queued)
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
	body, n := nextBody(exp)
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

// TestQueueHoldsMaxQueueSizeSpans: the queue holds max_queue_size spans across full
// batches and the one being filled, drops the rest, and hands the full batches out
// oldest first, then the partial one; every body decodes, whatever its lengths' sizes
// (the full batches' spans, with targets of up to 2 KiB, need three-byte lengths).
func TestQueueHoldsMaxQueueSizeSpans(t *testing.T) {
	attr := testAttr("127.0.0.1:1")
	attr.Batch.MaxQueueSize, attr.Batch.MaxExportBatchSize = 20, 8
	exp := newExporter(attr, localCounters(), nil)
	exp.start.Do(func() {})
	cfg, _ := Parse([]byte(`{"sampler":{"name":"always_on"}}`))
	h := &handler{cfg: cfg, exp: exp}
	route := &plugins.RouteInfo{ID: "1"}
	for i := range 22 {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.SetRequestURI("/hello?q=" + strings.Repeat("x", 1500+300*i))
		c := plugins.AcquireCtx(ctx, route, 1)
		c.MatchedURI = "/hello"
		_ = h.Access(c)
		h.Log(c)
		plugins.ReleaseCtx(c)
	}
	if exp.queued != 20 || exp.counters.dropped.Load() != 2 || len(exp.full) != 2 {
		t.Fatalf("queued %d, dropped %d, full batches %d; want 20, 2, 2", exp.queued, exp.counters.dropped.Load(), len(exp.full))
	}
	var targets []int
	for _, want := range []int{8, 8, 4, 0} {
		body, n := nextBody(exp)
		if n != want {
			t.Fatalf("batch of %d spans, want %d", n, want)
		}
		if n == 0 {
			break
		}
		var data tracepb.TracesData
		if err := proto.Unmarshal(body, &data); err != nil {
			t.Fatalf("a batch of %d spans (%d bytes) does not decode: %v", n, len(body), err)
		}
		if n == 8 && len(body) < 1<<14 {
			t.Fatalf("a full batch of %d bytes: too short to need three-byte lengths", len(body))
		}
		spans := data.ResourceSpans[0].ScopeSpans[0].Spans
		if len(spans) != n || len(data.ResourceSpans[0].Resource.Attributes) != 2 {
			t.Fatalf("decoded %d spans, want %d; resource %v", len(spans), n, data.ResourceSpans[0].Resource)
		}
		for _, s := range spans {
			for _, kv := range s.Attributes {
				if kv.Key == "http.target" {
					targets = append(targets, len(kv.Value.GetStringValue()))
				}
			}
		}
	}
	// The first twenty requests' targets, in order, cut at maxField.
	for i, got := range targets {
		if want := min(len("/hello?q=")+1500+300*i, maxField); got != want {
			t.Errorf("span %d: http.target of %d bytes, want %d", i, got, want)
		}
	}
	if len(targets) != 20 || exp.queued != 0 || len(exp.free) != cap(exp.free)-1 {
		t.Errorf("%d spans read, %d left, %d of %d batches free", len(targets), exp.queued, len(exp.free), cap(exp.free))
	}
}

// BenchmarkPost is one export of a 64 KiB body to a collector on loopback (a net/http
// server in this process, whose own allocations count here too).
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	exp := newExporter(testAttr(srv.Listener.Addr().String()), localCounters(), nil)
	body := bytes.Repeat([]byte{'x'}, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		if err := exp.post(body); err != nil {
			b.Fatal(err)
		}
	}
}
