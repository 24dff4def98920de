package integration

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gw/internal/testnet"
)

// otlpCollector is an OTLP/HTTP receiver started by the test: it decodes every POST to
// /v1/traces with the OpenTelemetry proto package and keeps the spans.
type otlpCollector struct {
	addr  string
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // the last batch's resource attributes
}

func startOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &otlpCollector{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var data tracepb.TracesData
		if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("collector got %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := proto.Unmarshal(body, &data); err != nil {
			t.Errorf("collector: the body does not decode: %v", err)
			w.WriteHeader(400)
			return
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, rs := range data.ResourceSpans {
			col.attrs = map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				col.attrs[kv.Key] = kv.Value.GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				col.spans = append(col.spans, ss.Spans...)
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return col
}

// span waits up to 10 s for the span of traceID and returns it, nil when none came.
func (col *otlpCollector) span(traceID string) *tracepb.Span {
	var found *tracepb.Span
	waitFor(10*time.Second, func() bool {
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, s := range col.spans {
			if hex.EncodeToString(s.TraceId) == traceID {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func (col *otlpCollector) count() int {
	col.mu.Lock()
	defer col.mu.Unlock()
	return len(col.spans)
}

func spanAttrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
			continue
		}
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

// startTraceEcho is an upstream that answers with the traceparent and tracestate it got.
func startTraceEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(502)
		}
		// Every traceparent, joined: one that the gateway failed to replace would show.
		fmt.Fprintf(w, "%s|%s", strings.Join(r.Header.Values("traceparent"), ","), r.Header.Get("tracestate"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

var upstreamTraceparent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])\|(.*)$`)

// opentelemetry through the binary: spans reach a real OTLP receiver with APISIX's
// fields; the client's traceparent becomes the span's trace and parent, and the upstream
// gets a traceparent of the same trace naming the span; the samplers decide as APISIX's;
// the metrics page counts what was exported.
func TestPluginOpenTelemetry(t *testing.T) {
	col := startOTLPCollector(t)
	up := startTraceEcho(t)
	in := newInstance(t, fmt.Sprintf(`plugin_attr:
  opentelemetry:
    resource: {service.name: gw-test, tenant: acme}
    collector: {address: %q, request_timeout: 3, request_headers: {Authorization: t}}
    batch_span_processor: {max_queue_size: 64, max_export_batch_size: 1, inactive_timeout: 0.1}
`, col.addr))
	in.start("--workers", "1")
	routes := map[string]string{ // id: name, uri and plugins
		"1": `"name":"traced","uri":"/traced*","plugins":{"opentelemetry":{"sampler":{"name":"always_on"},"additional_attributes":["arg_user"],"additional_header_prefix_attributes":["X-Tenant-*"]}}`,
		"2": `"uri":"/off","plugins":{"opentelemetry":{}}`,
		"3": `"uri":"/parent","plugins":{"opentelemetry":{"sampler":{"name":"parent_base","options":{"root":{"name":"always_off"}}}}}`,
		"4": `"uri":"/fail","plugins":{"opentelemetry":{"sampler":{"name":"trace_id_ratio","options":{"fraction":1}}}}`,
	}
	for id, r := range routes {
		in.mustPut("/apisix/admin/routes/"+id, fmt.Sprintf(`{%s,"upstream":{"nodes":{%q:1}}}`, r, up))
	}

	// The client's trace is continued: trace id kept, the client's span the parent.
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, body := in.get("/traced/a?user=ann", "traceparent", "00-"+clientTrace+"-"+clientSpan+"-01",
		"tracestate", "congo=t61rcWkgMzE", "X-Tenant-Id", "acme", "User-Agent", "it/1")
	m := upstreamTraceparent.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil || m[1] != clientTrace || m[2] == clientSpan || m[3] != "01" || m[4] != "congo=t61rcWkgMzE" {
		t.Fatalf("upstream got %q (status %d)", body, resp.StatusCode)
	}
	s := col.span(clientTrace)
	if s == nil {
		t.Fatalf("no span of trace %s reached the collector; error.log:\n%s", clientTrace, lastLines(in.errorLog(), 20))
	}
	if hex.EncodeToString(s.SpanId) != m[2] || hex.EncodeToString(s.ParentSpanId) != clientSpan || s.TraceState != "congo=t61rcWkgMzE" ||
		s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Name != "GET /traced*" || s.EndTimeUnixNano < s.StartTimeUnixNano ||
		time.Since(time.Unix(0, int64(s.StartTimeUnixNano))).Abs() > time.Hour {
		t.Errorf("span %v; upstream's span id %s", s, m[2])
	}
	attrs := spanAttrs(s)
	for k, want := range map[string]string{
		"http.method": "GET", "http.scheme": "http", "http.target": "/traced/a?user=ann", "http.user_agent": "it/1",
		"apisix.route_id": "1", "apisix.route_name": "traced", "http.route": "/traced*", "http.status_code": "200",
		"gw.upstream.address": up, "arg_user": "ann", "x-tenant-id": "acme",
	} {
		if attrs[k] != want {
			t.Errorf("span attribute %s = %q, want %q", k, attrs[k], want)
		}
	}
	col.mu.Lock()
	if col.attrs["service.name"] != "gw-test" || col.attrs["tenant"] != "acme" || col.attrs["hostname"] == "" {
		t.Errorf("resource %v", col.attrs)
	}
	col.mu.Unlock()

	// Without a traceparent: a new trace, the span a root; a stray tracestate is dropped.
	_, body = in.get("/traced/b", "tracestate", "orphan=1")
	m = upstreamTraceparent.FindStringSubmatch(body)
	if m == nil || m[3] != "01" || m[4] != "" {
		t.Fatalf("upstream got %q", body)
	}
	if s := col.span(m[1]); s == nil || len(s.ParentSpanId) != 0 || hex.EncodeToString(s.SpanId) != m[2] {
		t.Errorf("root span %v, upstream's %s", s, m[2])
	}

	// Every traceparent the client sent is replaced by the one naming the span, for a
	// request whose header block goes upstream as it came (GET) as for one the proxy
	// writes again (with a body).
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, "http://"+in.data+"/traced/dup", strings.NewReader("body"))
		if method == "GET" {
			req.Body, req.ContentLength = nil, 0
		}
		req.Header["traceparent"] = []string{"00-" + clientTrace + "-" + clientSpan + "-01", "00-" + strings.Repeat("d", 32) + "-" + clientSpan + "-01"}
		req.Header["tracestate"] = []string{"congo=t61rcWkgMzE"}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := upstreamTraceparent.FindStringSubmatch(string(page)); m == nil || m[1] != clientTrace || m[2] == clientSpan {
			t.Errorf("%s with two traceparents: upstream got %q", method, page)
		}
	}

	// A 5xx from the upstream is the span's error status.
	_, body = in.get("/fail")
	if m = upstreamTraceparent.FindStringSubmatch(body); m == nil {
		t.Fatalf("upstream got %q", body)
	} else if s := col.span(m[1]); s == nil || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "upstream response status: 502" {
		t.Errorf("span of a 502: %v", s)
	}

	// Unsampled requests still propagate (flags 00) and record nothing: always_off, and
	// parent_base behind an unsampled parent or (root always_off) none.
	var unsampled []string
	for _, req := range [][]string{
		{"/off"},
		{"/off", "traceparent", "00-" + strings.Repeat("a", 32) + "-" + clientSpan + "-01"},
		{"/parent", "traceparent", "00-" + strings.Repeat("b", 32) + "-" + clientSpan + "-00"},
		{"/parent"},
	} {
		_, body := in.get(req[0], req[1:]...)
		m := upstreamTraceparent.FindStringSubmatch(body)
		if m == nil || m[3] != "00" || m[2] == clientSpan {
			t.Fatalf("%v: upstream got %q", req, body)
		}
		unsampled = append(unsampled, m[1])
	}
	// parent_base behind a sampled parent records.
	sampledParent := strings.Repeat("c", 32)
	_, body = in.get("/parent", "traceparent", "00-"+sampledParent+"-"+clientSpan+"-01")
	if m = upstreamTraceparent.FindStringSubmatch(body); m == nil || m[1] != sampledParent || m[3] != "01" {
		t.Fatalf("upstream got %q", body)
	}
	if col.span(sampledParent) == nil {
		t.Fatal("parent_base: the span behind a sampled parent did not arrive")
	}
	// One worker sends in order: the unsampled requests, sent before, would be here now.
	col.mu.Lock()
	for _, s := range col.spans {
		for _, id := range unsampled {
			if hex.EncodeToString(s.TraceId) == id {
				t.Errorf("an unsampled request's span (trace %s) was exported", id)
			}
		}
	}
	col.mu.Unlock()

	exported := col.count()
	if !waitFor(10*time.Second, func() bool {
		_, page := call(t, "GET", "http://"+in.metrics+"/apisix/prometheus/metrics", "")
		return strings.Contains(page, fmt.Sprintf(`gw_opentelemetry_spans_total{result="exported"} %d`, exported))
	}) {
		_, page := call(t, "GET", "http://"+in.metrics+"/apisix/prometheus/metrics", "")
		t.Errorf("metrics do not count %d exported spans:\n%s", exported, grepLines(page, "opentelemetry"))
	}
}

// A collector that accepts connections and never answers, and one that is not there,
// cost the client nothing: each request through an always_on route answers well within
// the export timeout (10 s), spans past the small queue are dropped and counted, and a
// refused export is counted as failed.
func TestPluginOpenTelemetryDeadCollector(t *testing.T) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	var held sync.WaitGroup
	go func() {
		for {
			conn, err := hang.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { defer held.Done(); io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	// Not a port closed after a listen: the trace echo below could be given it, and
	// take the exports.
	refusedAddr := fmt.Sprintf("127.0.0.1:%d", testnet.RefusedPort(t))

	up := startTraceEcho(t)
	for _, tc := range []struct{ name, address, counter string }{
		{"hanging", hang.Addr().String(), "dropped"},
		{"refusing", refusedAddr, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t, fmt.Sprintf(`plugin_attr:
  opentelemetry:
    collector: {address: %q, request_timeout: 10}
    batch_span_processor: {max_queue_size: 4, max_export_batch_size: 2, inactive_timeout: 0.1}
`, tc.address))
			in.start("--workers", "1")
			in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/t","plugins":{"opentelemetry":{"sampler":{"name":"always_on"}}},"upstream":{"nodes":{%q:1}}}`, up))
			var slowest time.Duration
			for range 50 {
				start := time.Now()
				resp, body := in.get("/t")
				if took := time.Since(start); took > slowest {
					slowest = took
				}
				if resp.StatusCode != 200 || !upstreamTraceparent.MatchString(body) {
					t.Fatalf("status %d, upstream got %q", resp.StatusCode, body)
				}
			}
			// A request that waited on the export would take its 10 s timeout.
			if slowest > 5*time.Second {
				t.Errorf("the slowest of 50 requests took %v with the collector %s", slowest, tc.name)
			}
			want := regexp.MustCompile(`gw_opentelemetry_spans_total\{result="` + tc.counter + `"\} ([1-9][0-9]*)`)
			if !waitFor(15*time.Second, func() bool {
				_, page := call(t, "GET", "http://"+in.metrics+"/apisix/prometheus/metrics", "")
				return want.MatchString(page)
			}) {
				_, page := call(t, "GET", "http://"+in.metrics+"/apisix/prometheus/metrics", "")
				t.Errorf("no %s spans counted:\n%s", tc.counter, grepLines(page, "opentelemetry"))
			}
		})
	}
}
