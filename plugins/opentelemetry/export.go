package opentelemetry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"gw/conf"
	"gw/plugins"
)

// exporter is a worker's span queue and the goroutine that empties it: spans are
// recorded into a ring of max_queue_size slots under a mutex held for the copy only, and
// sent as OTLP/HTTP protobuf in batches of max_export_batch_size, never on a request's
// time. One per worker process, shared by every route's instance.
type exporter struct {
	attr          conf.OpenTelemetryAttr
	fromRequestID bool
	url           string
	resource      *resourcepb.Resource
	client        *http.Client
	counters      *counters
	logf          func(format string, args ...any)

	start sync.Once
	wake  chan struct{}
	done  chan struct{}

	mu          sync.Mutex
	slots       []spanRecord
	head, count int

	lastLog atomic.Int64 // Unix seconds of the last export error logged
}

// counters are the spans' fates, in the plugin's shared-memory segment so that the
// master's metrics page sums every worker's (or local, outside a worker).
type counters struct {
	exported, dropped, failed *atomic.Uint64
}

func newExporter(attr conf.OpenTelemetryAttr, ctrs *counters, logf func(string, ...any)) *exporter {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &exporter{
		attr:          attr,
		fromRequestID: attr.TraceIDSource == conf.TraceIDFromRequestID,
		url:           attr.Collector.URL(),
		resource:      resourceOf(attr.Resource),
		client:        &http.Client{Timeout: attr.Collector.RequestTimeout},
		counters:      ctrs,
		logf:          logf,
		wake:          make(chan struct{}, 1),
		done:          make(chan struct{}),
		slots:         make([]spanRecord, attr.Batch.MaxQueueSize),
	}
}

// The worker's one exporter, made from the first Build's configuration: plugin_attr is
// fixed for a worker's life (a reload starts new workers).
var (
	workerOnce sync.Once
	workerExp  *exporter
)

func workerExporter(shared *plugins.Shared) *exporter {
	workerOnce.Do(func() {
		cfg, logf := conf.Default(), func(string, ...any) {}
		ctrs := localCounters()
		if shared != nil {
			if shared.Config != nil {
				cfg = shared.Config
			}
			if shared.Logf != nil {
				logf = shared.Logf
			}
			if seg := shared.Segments[Name]; seg != nil {
				ctrs = segmentCounters(seg)
			}
		}
		workerExp = newExporter(cfg.PluginAttr.OpenTelemetry, ctrs, logf)
	})
	return workerExp
}

func localCounters() *counters {
	return &counters{new(atomic.Uint64), new(atomic.Uint64), new(atomic.Uint64)}
}

// record queues the span of c, or drops and counts it when the queue is full.
func (e *exporter) record(c *plugins.Ctx, cfg *Config) {
	e.start.Do(func() { go e.loop() })
	e.mu.Lock()
	if e.count == len(e.slots) {
		e.mu.Unlock()
		e.counters.dropped.Add(1)
		if !e.attr.Batch.DropOnQueueFull {
			e.signal() // APISIX's "force process batches": empty the queue now
		}
		return
	}
	e.slots[(e.head+e.count)%len(e.slots)].fill(c, cfg)
	e.count++
	full := e.count >= e.attr.Batch.MaxExportBatchSize
	e.mu.Unlock()
	if full {
		e.signal()
	}
}

func (e *exporter) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// loop sends batches: at once when one is full, else every min(batch_timeout,
// inactive_timeout) whatever is queued.
func (e *exporter) loop() {
	tick := time.NewTicker(min(e.attr.Batch.BatchTimeout, e.attr.Batch.InactiveTimeout))
	defer tick.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-e.wake:
		case <-tick.C:
		}
		for e.exportBatch() == e.attr.Batch.MaxExportBatchSize {
		}
	}
}

// stop ends the loop (tests).
func (e *exporter) stop() { close(e.done) }

// exportBatch sends up to one batch of the queue and returns how many spans it took. The
// slots it reads stay out of the producers' reach until it has converted them, since they
// still count as queued.
func (e *exporter) exportBatch() int {
	e.mu.Lock()
	n, head := min(e.count, e.attr.Batch.MaxExportBatchSize), e.head
	e.mu.Unlock()
	if n == 0 {
		return 0
	}
	spans := make([]*tracepb.Span, n)
	for i := range n {
		spans[i] = e.slots[(head+i)%len(e.slots)].otlp()
	}
	e.mu.Lock()
	e.head = (e.head + n) % len(e.slots)
	e.count -= n
	e.mu.Unlock()

	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   e.resource,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "gw"}, Spans: spans}},
	}}})
	if err == nil {
		err = e.post(body)
	}
	if err != nil {
		e.counters.failed.Add(uint64(n))
		if sec := time.Now().Unix(); e.lastLog.Swap(sec) != sec {
			e.logf("opentelemetry: %d spans lost: %v", n, err)
		}
		return n
	}
	e.counters.exported.Add(uint64(n))
	return n
}

// post sends one ExportTraceServiceRequest, whose encoding is TracesData's.
func (e *exporter) post(body []byte) error {
	req, err := http.NewRequest(http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	for _, h := range e.attr.Collector.RequestHeaders {
		req.Header.Set(h.Key, fmt.Sprint(h.Value))
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", e.url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: collector answered %s", e.url, resp.Status)
	}
	return nil
}

// resourceOf is the resource APISIX reports: hostname, then service.name "APISIX" unless
// configured, then the configured attributes.
func resourceOf(attrs []conf.KeyValue) *resourcepb.Resource {
	host, _ := os.Hostname()
	r := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{stringAttr("hostname", host)}}
	named := false
	for _, kv := range attrs {
		named = named || kv.Key == "service.name"
	}
	if !named {
		r.Attributes = append(r.Attributes, stringAttr("service.name", "APISIX"))
	}
	for _, kv := range attrs {
		switch v := kv.Value.(type) {
		case string:
			r.Attributes = append(r.Attributes, stringAttr(kv.Key, v))
		case float64:
			r.Attributes = append(r.Attributes, &commonpb.KeyValue{Key: kv.Key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}})
		case bool:
			r.Attributes = append(r.Attributes, &commonpb.KeyValue{Key: kv.Key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}})
		}
	}
	return r
}

func stringAttr(key, value string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: value}}}
}

func intAttr(key string, value int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: value}}}
}

// otlp converts the record into a new OTLP span that shares nothing with it: APISIX's
// name and attributes, and gw's upstream ones.
func (r *spanRecord) otlp() *tracepb.Span {
	s := &tracepb.Span{
		TraceId:           append([]byte(nil), r.trace.TraceID[:]...),
		SpanId:            append([]byte(nil), r.trace.SpanID[:]...),
		TraceState:        string(r.get(r.tstate)),
		Name:              string(r.get(r.method)),
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(r.start),
		EndTimeUnixNano:   uint64(max(r.end, r.start)),
		Flags:             0x100 | 1, // the parent's remoteness is known; sampled
	}
	if r.trace.ParentSpanID != ([8]byte{}) {
		s.ParentSpanId = append([]byte(nil), r.trace.ParentSpanID[:]...)
		s.Flags |= 0x200 // the parent is remote
	}
	scheme := "http"
	if r.https {
		scheme = "https"
	}
	s.Attributes = append(s.Attributes,
		stringAttr("net.host.name", string(r.get(r.host))),
		stringAttr("http.method", string(r.get(r.method))),
		stringAttr("http.scheme", scheme),
		stringAttr("http.target", string(r.get(r.target))),
		stringAttr("http.user_agent", string(r.get(r.userAgent))),
	)
	if r.route != nil && r.route.ID != "" {
		s.Attributes = append(s.Attributes,
			stringAttr("apisix.route_id", r.route.ID),
			stringAttr("apisix.route_name", r.route.Name),
			stringAttr("http.route", r.matchedURI))
		s.Name += " " + r.matchedURI
		if r.route.ServiceID != "" {
			s.Attributes = append(s.Attributes,
				stringAttr("apisix.service_id", r.route.ServiceID),
				stringAttr("apisix.service_name", r.route.ServiceName))
		}
	}
	for _, a := range r.attrs {
		key := a.key
		if key == "" {
			key = string(r.get(a.keyRef))
		}
		s.Attributes = append(s.Attributes, stringAttr(key, string(r.get(a.value))))
	}
	s.Attributes = append(s.Attributes,
		intAttr("http.status_code", int64(r.status)),
		intAttr("http.response.status_code", int64(r.status)))
	if r.upstreamNanos >= 0 {
		s.Attributes = append(s.Attributes,
			stringAttr("gw.upstream.address", string(r.get(r.node))),
			&commonpb.KeyValue{Key: "gw.upstream.latency_ms", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: float64(r.upstreamNanos) / 1e6}}})
		if r.status >= 500 {
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream response status: " + strconv.Itoa(r.status)}
		}
	}
	return s
}
