package opentelemetry

import (
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

// exporter is a worker's span queue and the goroutine that empties it: spans are
// recorded into a ring of max_queue_size slots under a mutex held for the copy only, and
// sent as OTLP/HTTP protobuf in batches of max_export_batch_size, never on a request's
// time. One per worker process, shared by every route's instance.
type exporter struct {
	attr          conf.OpenTelemetryAttr
	fromRequestID bool
	url           string
	resource      []byte // the Resource message's body, encoded once
	client        *fasthttp.HostClient
	req           fasthttp.Request // method, URL and headers set once; the body per POST
	resp          fasthttp.Response
	counters      *counters
	logf          func(format string, args ...any)

	start sync.Once
	wake  chan struct{}
	done  chan struct{}

	mu          sync.Mutex
	slots       []spanRecord
	head, count int

	// The exporter goroutine's buffers, kept from batch to batch.
	spans, span, scratch, body []byte

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
	e := &exporter{
		attr:          attr,
		fromRequestID: attr.TraceIDSource == conf.TraceIDFromRequestID,
		url:           attr.Collector.URL(),
		resource:      appendResource(nil, hostname(), attr.Resource),
		client:        newCollectorClient(attr.Collector.URL()),
		counters:      ctrs,
		logf:          logf,
		wake:          make(chan struct{}, 1),
		done:          make(chan struct{}),
		slots:         make([]spanRecord, attr.Batch.MaxQueueSize),
	}
	e.req.Header.SetMethod(fasthttp.MethodPost)
	e.req.SetRequestURI(e.url)
	e.req.Header.SetContentType("application/x-protobuf")
	for _, h := range attr.Collector.RequestHeaders {
		e.req.Header.Set(h.Key, fmt.Sprint(h.Value))
	}
	return e
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

// exportBatch sends up to one batch of the queue and returns how many spans it took.
func (e *exporter) exportBatch() int {
	body, n := e.encodeBatch()
	if n == 0 {
		return 0
	}
	if err := e.post(body); err != nil {
		e.counters.failed.Add(uint64(n))
		if sec := time.Now().Unix(); e.lastLog.Swap(sec) != sec {
			e.logf("opentelemetry: %d spans lost: %v", n, err)
		}
		return n
	}
	e.counters.exported.Add(uint64(n))
	return n
}

// encodeBatch takes up to one batch from the queue and encodes it as an OTLP
// TracesData (encode.go). The slots it reads stay out of the producers' reach until it
// has encoded them, since they still count as queued. The body is the exporter's buffer,
// valid until the next call.
func (e *exporter) encodeBatch() ([]byte, int) {
	e.mu.Lock()
	n, head := min(e.count, e.attr.Batch.MaxExportBatchSize), e.head
	e.mu.Unlock()
	if n == 0 {
		return nil, 0
	}
	e.spans = e.spans[:0]
	for i := range n {
		e.span, e.scratch = e.slots[(head+i)%len(e.slots)].appendSpan(e.span[:0], e.scratch)
		e.spans = appendMessage(e.spans, fieldSpans, e.span)
	}
	e.mu.Lock()
	e.head = (e.head + n) % len(e.slots)
	e.count -= n
	e.mu.Unlock()

	scope := protowire.SizeTag(fieldScopeName) + protowire.SizeBytes(len(scopeName))
	scopeSpans := protowire.SizeTag(fieldScope) + protowire.SizeBytes(scope) + len(e.spans)
	resourceSpans := protowire.SizeTag(fieldResource) + protowire.SizeBytes(len(e.resource)) +
		protowire.SizeTag(fieldScopeSpans) + protowire.SizeBytes(scopeSpans)
	b := e.body[:0]
	b = protowire.AppendTag(b, fieldResourceSpans, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(resourceSpans))
	b = appendMessage(b, fieldResource, e.resource)
	b = protowire.AppendTag(b, fieldScopeSpans, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(scopeSpans))
	b = protowire.AppendTag(b, fieldScope, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(scope))
	b = appendString(b, fieldScopeName, scopeName)
	b = append(b, e.spans...)
	e.body = b
	return b, n
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
