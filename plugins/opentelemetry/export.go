package opentelemetry

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protowire"

	"gw/conf"
	"gw/plugins"
)

// exporter is a worker's span queue and the goroutine that empties it. The log phase
// encodes each span straight into the batch being filled, under a mutex held for that
// only; a full batch waits in a list for the goroutine, which adds the batch's resource
// and scope in front and POSTs it as OTLP/HTTP protobuf, never on a request's time. The
// queue holds at most max_queue_size spans (the batch being filled and the full ones not
// yet taken); the batches' buffers go back to a free list once sent, so that in the
// steady state nothing is allocated. One per worker process, shared by every route's
// instance.
type exporter struct {
	attr          conf.OpenTelemetryAttr
	fromRequestID bool
	url           string
	// resource and scope are the constant parts of a batch's front, encoded once as
	// fields, and room the bytes each batch keeps ahead of its spans for the front (body).
	resource, scope []byte
	room            int
	client          *fasthttp.HostClient
	req             fasthttp.Request // method, URL and headers set once; the body per POST
	resp            fasthttp.Response
	counters        *counters
	logf            func(format string, args ...any)

	start sync.Once
	wake  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	filling *batch
	full    []*batch // oldest first
	free    []*batch
	queued  int    // spans in filling and full
	scratch []byte // appendSpan's, under mu

	lastLog atomic.Int64 // Unix seconds of the last export error logged
}

// batch is up to max_export_batch_size encoded spans: buf is the exporter's room, then
// the spans' fields of ScopeSpans, back to back.
type batch struct {
	buf []byte
	n   int
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
	e := &exporter{
		attr:          attr,
		fromRequestID: attr.TraceIDSource == conf.TraceIDFromRequestID,
		url:           attr.Collector.URL(),
		client:        newCollectorClient(attr.Collector.URL()),
		counters:      ctrs,
		logf:          logf,
		wake:          make(chan struct{}, 1),
		done:          make(chan struct{}),
	}
	e.resource = appendMessage(nil, fieldResource, appendResource(nil, hostname(), attr.Resource))
	scope := protowire.AppendTag(nil, fieldScopeName, protowire.BytesType)
	e.scope = appendMessage(nil, fieldScope, protowire.AppendString(scope, scopeName))
	// Two tags and two lengths, besides the resource and the scope.
	e.room = len(e.resource) + len(e.scope) + 2*(1+binary.MaxVarintLen64)
	// The batches the queue can need at once: the full ones it holds, the one being
	// filled, and the one being sent.
	size := max(attr.Batch.MaxExportBatchSize, 1)
	n := attr.Batch.MaxQueueSize/size + 2
	e.full, e.free = make([]*batch, 0, n), make([]*batch, 0, n)
	for range n - 1 {
		e.free = append(e.free, e.newBatch())
	}
	e.filling = e.newBatch()

	e.req.Header.SetMethod(fasthttp.MethodPost)
	e.req.SetRequestURI(e.url)
	e.req.Header.SetContentType("application/x-protobuf")
	for _, h := range attr.Collector.RequestHeaders {
		e.req.Header.Set(h.Key, fmt.Sprint(h.Value))
	}
	return e
}

func (e *exporter) newBatch() *batch { return &batch{buf: make([]byte, e.room, e.room+4096)} }

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

// record encodes the span of c into the queue, or drops and counts it when the queue is
// full.
func (e *exporter) record(c *plugins.Ctx, cfg *Config) {
	e.start.Do(func() { go e.loop() })
	e.mu.Lock()
	if e.queued >= e.attr.Batch.MaxQueueSize {
		e.mu.Unlock()
		e.counters.dropped.Add(1)
		if !e.attr.Batch.DropOnQueueFull {
			e.signal() // APISIX's "force process batches": empty the queue now
		}
		return
	}
	b := e.filling
	b.buf = appendSpan(b.buf, c, cfg, &e.scratch)
	b.n++
	e.queued++
	full := b.n >= e.attr.Batch.MaxExportBatchSize
	if full {
		e.full = append(e.full, b)
		e.filling = e.takeFree()
	}
	e.mu.Unlock()
	if full {
		e.signal()
	}
}

// takeFree returns a free batch; e.mu is held. There is always one (newExporter counts
// them), but should that be wrong a new batch is better than a lost worker.
func (e *exporter) takeFree() *batch {
	if len(e.free) == 0 {
		return e.newBatch()
	}
	b := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	return b
}

// take removes the oldest full batch from the queue, or with partial and none full the
// batch being filled if it holds any span; nil when there is nothing to take. The caller
// gives it back (giveBack) once sent.
func (e *exporter) take(partial bool) *batch {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b *batch
	switch {
	case len(e.full) > 0:
		b = e.full[0]
		n := copy(e.full, e.full[1:])
		e.full[n] = nil
		e.full = e.full[:n]
	case partial && e.filling.n > 0:
		b = e.filling
		e.filling = e.takeFree()
	default:
		return nil
	}
	e.queued -= b.n
	return b
}

func (e *exporter) giveBack(b *batch) {
	b.buf, b.n = b.buf[:e.room], 0
	e.mu.Lock()
	e.free = append(e.free, b)
	e.mu.Unlock()
}

func (e *exporter) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// loop sends batches: the full ones at once, and every min(batch_timeout,
// inactive_timeout) whatever is queued.
func (e *exporter) loop() {
	tick := time.NewTicker(min(e.attr.Batch.BatchTimeout, e.attr.Batch.InactiveTimeout))
	defer tick.Stop()
	for {
		partial := false
		select {
		case <-e.done:
			return
		case <-e.wake:
		case <-tick.C:
			partial = true
		}
		for b := e.take(partial); b != nil; b = e.take(false) {
			e.export(b)
		}
	}
}

// stop ends the loop (tests).
func (e *exporter) stop() { close(e.done) }

// export sends the batch b and gives it back.
func (e *exporter) export(b *batch) {
	n := b.n
	err := e.post(e.body(b))
	e.giveBack(b)
	if err != nil {
		e.counters.failed.Add(uint64(n))
		if sec := time.Now().Unix(); e.lastLog.Swap(sec) != sec {
			e.logf("opentelemetry: %d spans lost: %v", n, err)
		}
		return
	}
	e.counters.exported.Add(uint64(n))
}

// body writes the front of b, taken from the queue, into its room, and returns the
// whole as one TracesData: a ResourceSpans holding the resource and a ScopeSpans, which
// holds the scope and b's spans. It is b's buffer, valid until b is given back.
func (e *exporter) body(b *batch) []byte {
	spans := len(b.buf) - e.room
	scopeSpans := len(e.scope) + spans
	resourceSpans := len(e.resource) + 1 + protowire.SizeVarint(uint64(scopeSpans)) + scopeSpans
	front := 1 + protowire.SizeVarint(uint64(resourceSpans)) + resourceSpans - spans
	start := e.room - front
	h := b.buf[start:start]
	h = protowire.AppendTag(h, fieldResourceSpans, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(resourceSpans))
	h = append(h, e.resource...)
	h = protowire.AppendTag(h, fieldScopeSpans, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(scopeSpans))
	_ = append(h, e.scope...) // in place: h ends where the spans begin
	return b.buf[start:]
}

// scopeName is the instrumentation scope's name.
const scopeName = "gw"

// post sends one ExportTraceServiceRequest, whose encoding is TracesData's, on the
// exporter's kept-alive connection. The request's header is built once (newExporter);
// the body is the caller's buffer, which fasthttp has finished with when Do returns (it
// writes and reads on this goroutine, the timeout a deadline on the connection).
// net/http cost a Request, a Header map, a Response, a 32 KiB copy buffer and a second
// goroutine's hand-offs per POST, and a copy of the body to lend its transport.
func (e *exporter) post(body []byte) error {
	e.req.SetBodyRaw(body)
	var err error
	if timeout := e.attr.Collector.RequestTimeout; timeout > 0 {
		err = e.client.DoTimeout(&e.req, &e.resp, timeout)
	} else { // none set (conf refuses 0): fasthttp's DoTimeout would fail at once
		err = e.client.Do(&e.req, &e.resp)
	}
	e.req.SetBodyRaw(nil)
	if err != nil {
		return fmt.Errorf("POST %s: %w", e.url, err)
	}
	if code := e.resp.StatusCode(); code/100 != 2 {
		return fmt.Errorf("POST %s: collector answered %d", e.url, code)
	}
	return nil
}

// newCollectorClient is the exporter's client of the collector at url (http:// or
// https://host:port/v1/traces): one connection, kept alive, and a POST that finds its
// kept-alive connection closed by the collector tried once more on a new one, as
// net/http does with a request it could not start.
func newCollectorClient(url string) *fasthttp.HostClient {
	hostPort, tls := strings.CutPrefix(url, "https://")
	if !tls {
		hostPort = strings.TrimPrefix(url, "http://")
	}
	hostPort, _, _ = strings.Cut(hostPort, "/")
	return &fasthttp.HostClient{
		Addr:                hostPort,
		IsTLS:               tls,
		Name:                "gw",
		MaxConns:            1,
		MaxResponseBodySize: 1 << 20,
		RetryIfErr: func(_ *fasthttp.Request, attempts int, _ error) (resetTimeout, retry bool) {
			return false, attempts < 2
		},
	}
}

func hostname() string {
	host, _ := os.Hostname()
	return host
}
