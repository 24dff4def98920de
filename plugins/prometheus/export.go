package prometheus

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"gw/plugins"
)

// WorkerStates are the states gw_worker_processes reports, always all of them.
var WorkerStates = []string{"starting", "ready", "draining"}

// SegmentInfo describes one shared-memory segment for the shared_dict gauges.
type SegmentInfo struct {
	Name          string
	CapacityBytes int
	// FreeBytes, when set, reports the free space; without it only capacity is exported.
	FreeBytes func() int
	// Evictions, when set, counts the entries the segment's table evicted to make room,
	// exported as gw_<name>_evictions_total (limit-count's: gw_limit_count_evictions_total).
	Evictions func() uint64
}

// evictionsMetric is the counter a segment's evictions are exported as.
func evictionsMetric(segment string) string {
	return "gw_" + strings.ReplaceAll(segment, "-", "_") + "_evictions_total"
}

// ExporterOptions are the fixed parts of the exposition, known when the master starts.
type ExporterOptions struct {
	Hostname string
	Version  string
	Segments []SegmentInfo
	// Alive reports whether a pid is still running. A master retires its own workers'
	// areas as it reaps them; each scrape also retires those of dead processes it never
	// reaped (an old master's workers, which outlive it after an upgrade).
	Alive func(pid int) bool
}

// Exporter writes the Prometheus text exposition of a metrics table and of the
// instance's facts. The instance-wide families go through a VictoriaMetrics Set; the
// per-request families are summed from shared memory and written by writeSeries (see the
// package doc for why). WritePrometheus is safe for concurrent use; scrapes are
// serialised.
type Exporter struct {
	table *Table
	opts  ExporterOptions

	mu    sync.Mutex
	set   *metrics.Set
	facts plugins.HostFacts
	conns ConnStats

	// scratch reused by every scrape
	buf    []byte
	groups []group
	byKey  map[string]int
	key    []byte
}

// group is one (route, service, consumer, node) label set of apisix_http_latency and
// apisix_bandwidth, summed over the status codes it was seen with.
type group struct {
	labels  []byte // `route="1",service="",consumer="",node="10.0.0.1"`
	latency [latencyTypes]histogram
	ingress uint64
	egress  uint64
}

// NewExporter makes the exporter for table. It turns on VictoriaMetrics' HELP and TYPE
// lines for the whole process (only the master exports metrics).
func NewExporter(table *Table, opts ExporterOptions) *Exporter {
	metrics.ExposeMetadata(true)
	e := &Exporter{table: table, opts: opts, set: metrics.NewSet(), byKey: map[string]int{}}
	s := e.set
	s.NewGauge(`apisix_node_info{hostname=`+quote(opts.Hostname)+`,version=`+quote(opts.Version)+`}`, func() float64 { return 1 })
	for _, st := range []struct {
		name string
		get  func(c *ConnStats) uint64
	}{
		{"active", func(c *ConnStats) uint64 { return c.Active }},
		{"accepted", func(c *ConnStats) uint64 { return c.Accepted }},
		{"handled", func(c *ConnStats) uint64 { return c.Handled }},
		{"reading", func(c *ConnStats) uint64 { return c.Reading }},
		{"writing", func(c *ConnStats) uint64 { return c.Writing }},
		{"waiting", func(c *ConnStats) uint64 { return c.Waiting }},
	} {
		get := st.get
		s.NewGauge(`apisix_nginx_http_current_connections{state="`+st.name+`"}`, func() float64 { return float64(get(&e.conns)) })
	}
	s.NewGauge(`apisix_http_requests_total`, func() float64 { return float64(e.conns.Requests) })
	for _, seg := range opts.Segments {
		capacity := seg.CapacityBytes
		s.NewGauge(`apisix_shared_dict_capacity_bytes{name=`+quote(seg.Name)+`}`, func() float64 { return float64(capacity) })
		if free := seg.FreeBytes; free != nil {
			s.NewGauge(`apisix_shared_dict_free_space_bytes{name=`+quote(seg.Name)+`}`, func() float64 { return float64(free()) })
		}
	}
	for _, state := range WorkerStates {
		state := state
		s.NewGauge(`gw_worker_processes{state="`+state+`"}`, func() float64 { return float64(e.facts.Workers[state]) })
	}
	s.NewGauge(`gw_config_version`, func() float64 { return float64(e.facts.ConfigVersion) })
	s.NewGauge(`gw_config_left_out_objects`, func() float64 { return float64(e.facts.ConfigLeftOut) })
	s.NewGauge(`gw_workers_refusing_config`, func() float64 { return float64(e.facts.WorkersRefusingConfig) })
	s.NewGauge(`gw_metrics_label_sets`, func() float64 { return float64(table.Used()) })
	s.NewGauge(`gw_metrics_label_sets_max`, func() float64 { return float64(table.Capacity()) })
	// Counters whose totals live elsewhere are set just before each write (see sync).
	s.NewCounter(`gw_worker_restarts_total`)
	s.NewCounter(`gw_reloads_total`)
	s.NewCounter(`gw_reload_failures_total`)
	s.NewCounter(`gw_config_rejections_total`)
	s.NewCounter(`gw_metrics_overflow_total`)
	// nginx-lua-prometheus counts in apisix_nginx_metric_errors_total each update it could
	// not make, above all when its shared dict is full and a new series is dropped. gw's
	// one such failure is a label set that finds the table full (it counts in the overflow
	// series instead), so the two counters hold the same number; the APISIX name is what
	// APISIX's Grafana dashboard plots.
	s.NewCounter(`apisix_nginx_metric_errors_total`)
	for _, seg := range opts.Segments {
		if seg.Evictions != nil {
			s.NewCounter(evictionsMetric(seg.Name))
		}
	}
	s.RegisterMetricsWriter(e.writeSeries)
	return e
}

// sync copies the externally kept totals into the Set's counters.
func (e *Exporter) sync() {
	s := e.set
	s.GetOrCreateCounter(`gw_worker_restarts_total`).Set(e.facts.WorkerRestarts)
	s.GetOrCreateCounter(`gw_reloads_total`).Set(e.facts.Reloads)
	s.GetOrCreateCounter(`gw_reload_failures_total`).Set(e.facts.ReloadFailures)
	s.GetOrCreateCounter(`gw_config_rejections_total`).Set(e.facts.ConfigRejections)
	s.GetOrCreateCounter(`gw_metrics_overflow_total`).Set(e.table.Overflowed())
	s.GetOrCreateCounter(`apisix_nginx_metric_errors_total`).Set(e.table.Overflowed())
	// A kind's series appears with its first count; the kinds are the worker's own names.
	for kind, n := range e.facts.HTTP2Abuse {
		s.GetOrCreateCounter(`gw_http2_abuse_total{kind=` + quote(kind) + `}`).Set(n)
	}
	for _, seg := range e.opts.Segments {
		if seg.Evictions != nil {
			s.GetOrCreateCounter(evictionsMetric(seg.Name)).Set(seg.Evictions())
		}
	}
}

// WritePrometheus writes the whole exposition to w. It reads shared memory directly, so
// it reflects every request whose log phase has finished.
func (e *Exporter) WritePrometheus(w io.Writer, facts plugins.HostFacts) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.facts = facts
	if e.opts.Alive != nil {
		e.table.RetireWorkerAreas(func(pid int) bool { return !e.opts.Alive(pid) })
	}
	e.conns = e.table.ConnStats()
	e.sync()
	e.set.WritePrometheus(w)
	e.writeUpstreamStatus(w)
}

const helpUpstreamStatus = "# HELP apisix_upstream_status Upstream status from health check\n# TYPE apisix_upstream_status gauge\n"

// writeUpstreamStatus writes apisix_upstream_status, 1 healthy and 0 unhealthy, only when
// some node is health checked (as APISIX). It runs under e.mu and reuses e.buf.
func (e *Exporter) writeUpstreamStatus(w io.Writer) {
	if len(e.facts.UpstreamStatus) == 0 {
		return
	}
	b := append(e.buf[:0], helpUpstreamStatus...)
	for _, st := range e.facts.UpstreamStatus {
		b = append(b, `apisix_upstream_status{name="`...)
		b = appendEscaped(b, []byte(st.Name))
		b = append(b, `",ip="`...)
		b = appendEscaped(b, []byte(st.IP))
		b = append(b, `",port="`...)
		b = appendEscaped(b, []byte(st.Port))
		if st.Healthy {
			b = append(b, "\"} 1\n"...)
		} else {
			b = append(b, "\"} 0\n"...)
		}
	}
	_, _ = w.Write(b)
	e.buf = b
}

const (
	helpStatus    = "# HELP apisix_http_status HTTP status codes per service in APISIX\n# TYPE apisix_http_status counter\n"
	helpLatency   = "# HELP apisix_http_latency HTTP request latency in milliseconds per service in APISIX\n# TYPE apisix_http_latency histogram\n"
	helpBandwidth = "# HELP apisix_bandwidth Total bandwidth in bytes consumed per service in APISIX\n# TYPE apisix_bandwidth counter\n"
)

// writeSeries writes apisix_http_status, apisix_http_latency and apisix_bandwidth. It runs
// inside WritePrometheus, under e.mu.
func (e *Exporter) writeSeries(w io.Writer) {
	t := e.table
	// Up to 4 KB of text per label set: sizing up front spares the first scrape the
	// regrowth of a buffer of tens of megabytes.
	if want := (t.Used() + 1) << 12; cap(e.buf) < want {
		e.buf = make([]byte, 0, want)
	}
	if want := t.Used() + 1; cap(e.groups) < want {
		e.groups = make([]group, 0, want)
	}
	b := append(e.buf[:0], helpStatus...)
	e.groups = e.groups[:0]
	clear(e.byKey)
	var values [labelCount][]byte
	t.entries(func(ent int) {
		c := t.counters(ent)
		status := c.latency[latencyRequest].count()
		decodeText(t.entryText(ent), &values)
		if ent == 0 && status == 0 {
			return // the overflow series, unused
		}
		b = append(b, `apisix_http_status{code="`...)
		if code := t.entryCode(ent); code != 0 {
			b = strconv.AppendInt(b, int64(code), 10)
		}
		b = append(b, '"')
		for i, name := range statusLabelNames {
			b = append(b, ',')
			b = append(b, name...)
			b = append(b, `="`...)
			b = appendEscaped(b, values[i])
			b = append(b, '"')
		}
		b = append(b, "} "...)
		b = strconv.AppendUint(b, status, 10)
		b = append(b, '\n')

		g := e.group(&values)
		for k := range c.latency {
			src, dst := &c.latency[k], &g.latency[k]
			for i := range src.buckets {
				dst.buckets[i] += atomic.LoadUint64(&src.buckets[i])
			}
			dst.sumNano += atomic.LoadUint64(&src.sumNano)
		}
		g.ingress += atomic.LoadUint64(&c.ingress)
		g.egress += atomic.LoadUint64(&c.egress)
	})

	b = append(b, helpLatency...)
	for gi := range e.groups {
		g := &e.groups[gi]
		for k := range g.latency {
			h := &g.latency[k]
			var count uint64
			for _, n := range h.buckets {
				count += n
			}
			if count == 0 {
				continue // APISIX has no upstream series for requests that reached none
			}
			var cumulative uint64
			for i, n := range h.buckets {
				cumulative += n
				b = append(b, `apisix_http_latency_bucket{type="`...)
				b = append(b, latencyTypeNames[k]...)
				b = append(b, `",`...)
				b = append(b, g.labels...)
				b = append(b, `,le="`...)
				if i < len(BucketsMillis) {
					b = strconv.AppendUint(b, BucketsMillis[i], 10)
				} else {
					b = append(b, "+Inf"...)
				}
				b = append(b, `"} `...)
				b = strconv.AppendUint(b, cumulative, 10)
				b = append(b, '\n')
			}
			b = appendLatencyLine(b, "_sum", k, g.labels)
			b = strconv.AppendFloat(b, float64(h.sumNano)/1e6, 'g', -1, 64)
			b = append(b, '\n')
			b = appendLatencyLine(b, "_count", k, g.labels)
			b = strconv.AppendUint(b, count, 10)
			b = append(b, '\n')
		}
	}

	b = append(b, helpBandwidth...)
	for gi := range e.groups {
		g := &e.groups[gi]
		for _, dir := range [...]struct {
			name string
			n    uint64
		}{{"ingress", g.ingress}, {"egress", g.egress}} {
			b = append(b, `apisix_bandwidth{type="`...)
			b = append(b, dir.name...)
			b = append(b, `",`...)
			b = append(b, g.labels...)
			b = append(b, "} "...)
			b = strconv.AppendUint(b, dir.n, 10)
			b = append(b, '\n')
		}
	}
	e.buf = b
	_, _ = w.Write(b)
}

var statusLabelNames = [labelCount]string{"route", "matched_uri", "matched_host", "service", "consumer", "node"}

// groupLabels are the label values of latency and bandwidth, in APISIX's order.
var groupLabels = [...]int{labelRoute, labelService, labelConsumer, labelNode}

// group returns the latency and bandwidth group for one entry's values, adding it when new.
func (e *Exporter) group(values *[labelCount][]byte) *group {
	e.key = e.key[:0]
	for _, i := range groupLabels {
		e.key = append(e.key, values[i]...)
		e.key = append(e.key, 0xff)
	}
	if gi, ok := e.byKey[string(e.key)]; ok {
		return &e.groups[gi]
	}
	var labels []byte
	for j, i := range groupLabels {
		if j > 0 {
			labels = append(labels, ',')
		}
		labels = append(labels, statusLabelNames[i]...)
		labels = append(labels, `="`...)
		labels = appendEscaped(labels, values[i])
		labels = append(labels, '"')
	}
	e.byKey[string(e.key)] = len(e.groups)
	e.groups = append(e.groups, group{labels: labels})
	return &e.groups[len(e.groups)-1]
}

func appendLatencyLine(b []byte, suffix string, k int, labels []byte) []byte {
	b = append(b, "apisix_http_latency"...)
	b = append(b, suffix...)
	b = append(b, `{type="`...)
	b = append(b, latencyTypeNames[k]...)
	b = append(b, `",`...)
	b = append(b, labels...)
	return append(b, "} "...)
}

// appendEscaped appends a label value escaped as the text format requires.
func appendEscaped(b, v []byte) []byte {
	for _, c := range v {
		switch c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func quote(s string) string {
	return `"` + string(appendEscaped(nil, []byte(s))) + `"`
}
