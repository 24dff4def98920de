package master

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"gw/plugins/limitcount"
	"gw/plugins/prometheus"
	"gw/shm"
)

// serveMetrics starts the Prometheus export server on prometheus.export_addr: GET on
// prometheus.export_uri returns the exposition, anything else 404, as APISIX's export
// server. Values are read straight from the metrics segment on each scrape, so they are
// never stale and no worker does any work for a scrape. The prometheus settings are fixed
// for the master's life (a reload that changes them fails), so this runs once.
func (m *Master) serveMetrics() error {
	cfg := m.currentConfig().Prometheus
	if !cfg.Enabled {
		return nil
	}
	seg := m.segments[prometheus.Name]
	if seg == nil {
		return fmt.Errorf("prometheus: no metrics segment was created")
	}
	table, err := prometheus.OpenTable(seg)
	if err != nil {
		return err
	}
	hostname, _ := os.Hostname()
	opts := prometheus.ExporterOptions{
		Hostname: hostname,
		Version:  m.opts.Version,
		Alive:    processAlive,
	}
	for _, name := range m.segmentNames() {
		info := prometheus.SegmentInfo{Name: name, CapacityBytes: m.segments[name].Size()}
		switch name {
		case prometheus.Name:
			info.FreeBytes = table.FreeBytes
		case limitcount.Name:
			seg := m.segments[name]
			info.FreeBytes = func() int {
				capacity, used, _ := limitcount.Stats(seg)
				if capacity == 0 {
					return 0
				}
				return int(uint64(seg.Size()) * (capacity - used) / capacity)
			}
			opts.Evictions = func() (uint64, bool) { return limitcount.Evictions(seg), true }
		}
		opts.Segments = append(opts.Segments, info)
	}
	exporter := prometheus.NewExporter(table, opts)

	ln, err := m.listenTCP(handOverMetrics, cfg.ExportAddr)
	if err != nil {
		return fmt.Errorf("prometheus.export_addr %s: %w", cfg.ExportAddr, err)
	}
	srv := &http.Server{Handler: &metricsHandler{m: m, uri: cfg.ExportURI, exporter: exporter},
		ReadHeaderTimeout: 10 * time.Second}
	m.metrics = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Errorf("metrics server on %s: %v", ln.Addr(), err)
		}
	}()
	return nil
}

type metricsHandler struct {
	m        *Master
	uri      string
	exporter *prometheus.Exporter
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != h.uri || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	// The exporter renders into its own reused buffer and writes it in one call.
	h.exporter.WritePrometheus(w, h.m.metricsFacts())
}

// metricsFacts is the master's part of a scrape.
func (m *Master) metricsFacts() prometheus.Facts {
	f := m.Facts()
	out := prometheus.Facts{
		Workers:          map[string]int{},
		WorkerRestarts:   f.WorkerRestarts,
		Reloads:          f.Reloads,
		ReloadFailures:   f.ReloadFailures,
		ConfigVersion:    f.ConfigVersion,
		ConfigLeftOut:    len(f.LeftOut),
		ConfigRejections: f.ConfigRejections,
	}
	for _, w := range f.Workers {
		out.Workers[w.State]++
		if w.Rejected != "" {
			out.WorkersRefusingConfig++
		}
	}
	if m.health != nil {
		for _, st := range m.health.Statuses() {
			out.UpstreamStatus = append(out.UpstreamStatus, prometheus.UpstreamStatus{Name: st.Name, IP: st.Host, Port: st.Port, Healthy: st.Healthy})
		}
	}
	return out
}

// processAlive reports whether pid exists (a zombie not yet reaped still does).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// workerAreas retires the metrics areas of the master's workers as it reaps them. Each
// worker claims one of the segment's prometheus.WorkerAreas; retiring it when the worker
// is reaped, rather than at the next scrape, keeps areas for the workers to come however
// rarely anything scrapes (issue 17: 256 areas went in 128 reloads of two workers).
type workerAreas struct {
	mu    sync.Mutex        // held while table is used, so teardown never unmaps it under a retirement
	table *prometheus.Table // nil without a metrics segment, and once it is unmapped
}

func openWorkerAreas(seg *shm.Segment) (*workerAreas, error) {
	if seg == nil {
		return &workerAreas{}, nil
	}
	table, err := prometheus.OpenTable(seg)
	if err != nil {
		return nil, fmt.Errorf("shared memory for %s: %w", prometheus.Name, err)
	}
	return &workerAreas{table: table}, nil
}

// retireExited retires the area of pid, a child that has exited and is not yet reaped:
// while its zombie holds the pid no other process can have it, so every area in its
// name is its own, and no new owner can be mistaken for it. Areas of other processes that
// are gone are retired too, such as an old master's workers, which outlive it after an
// upgrade and which this master never reaps. Safe for concurrent use.
func (a *workerAreas) retireExited(pid int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.table != nil {
		a.table.RetireWorkerAreas(func(p int) bool { return p == pid || !processAlive(p) })
	}
}

// close stops all retirement; the segment may be unmapped once it returns.
func (a *workerAreas) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.table = nil
}
