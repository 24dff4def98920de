package master

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
)

// serveMetrics starts the Prometheus export server on prometheus.export_addr: GET on
// prometheus.export_uri returns the exposition, anything else 404, as APISIX's export
// server. The page is the plugins' (plugins.MetricsWriter, the prometheus plugin's part
// in the master), which read it straight from shared memory on each scrape, so it is
// never stale and no worker does any work for a scrape. The prometheus settings are fixed
// for the master's life (a reload that changes them fails), so this runs once.
func (m *Master) serveMetrics() error {
	cfg := m.currentConfig().Prometheus
	if !cfg.Enabled {
		return nil
	}
	writers := m.pluginParts.metricsWriters()
	if len(writers) == 0 {
		return errors.New("prometheus.enabled: no plugin in this binary writes metrics")
	}
	if m.etcd != nil {
		writers = append(writers, etcdMetrics{m})
	}
	ln, err := m.listenTCP(handOverMetrics, cfg.ExportAddr)
	if err != nil {
		return fmt.Errorf("prometheus.export_addr %s: %w", cfg.ExportAddr, err)
	}
	srv := &http.Server{Handler: &metricsHandler{m: m, uri: cfg.ExportURI, writers: writers},
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
	m       *Master
	uri     string
	writers []plugins.MetricsWriter
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != h.uri || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	facts := h.m.metricsFacts()
	for _, mw := range h.writers {
		// Each renders into its own reused buffer and writes it in one call.
		mw.WriteMetrics(w, facts)
	}
	h.m.certs.writeMetrics(w) // the master's own, which no plugin knows of
}

// metricsFacts is the master's part of a scrape.
func (m *Master) metricsFacts() plugins.HostFacts {
	f := m.Facts()
	out := plugins.HostFacts{
		Workers:          map[string]int{},
		WorkerRestarts:   f.WorkerRestarts,
		Reloads:          f.Reloads,
		ReloadFailures:   f.ReloadFailures,
		ConfigVersion:    f.ConfigVersion,
		ConfigLeftOut:    len(f.LeftOut),
		ConfigRejections: f.ConfigRejections,
		HTTP2Abuse:       f.HTTP2Abuse,
	}
	for _, w := range f.Workers {
		out.Workers[w.State]++
		if w.Rejected != "" {
			out.WorkersRefusingConfig++
		}
	}
	if m.health != nil {
		for _, st := range m.health.Statuses() {
			out.UpstreamStatus = append(out.UpstreamStatus, plugins.UpstreamStatus{Name: st.Name, IP: st.Host, Port: st.Port, Healthy: st.Healthy})
		}
	}
	return out
}

// pluginParts are the plugins' parts in the master (plugins.MasterPart): told of each
// worker's exit between the exit and the reap, and closed before the segments are
// unmapped. Its methods are safe for concurrent use, and on a nil pluginParts (a master
// that failed before starting them) do nothing.
type pluginParts struct {
	parts []plugins.MasterInstance
	// closeOnce makes close idempotent; each part guards its own state.
	closeOnce sync.Once
}

func startPluginParts(segments map[string]*shm.Segment, cfg *conf.Config, version string, logf func(string, ...any)) (*pluginParts, error) {
	parts, err := plugins.StartMaster(&plugins.MasterEnv{Segments: segments, Config: cfg, Version: version, Logf: logf})
	if err != nil {
		return nil, err
	}
	return &pluginParts{parts: parts}, nil
}

// workerExited tells every part that pid, a child that has exited and is not yet reaped,
// is gone: while its zombie holds the pid no other process can have it, so whatever a
// part keeps in its name (prometheus's connection area) is its own.
func (p *pluginParts) workerExited(pid int) {
	if p == nil {
		return
	}
	for _, part := range p.parts {
		part.WorkerExited(pid)
	}
}

// metricsWriters are the parts that render the metrics page.
func (p *pluginParts) metricsWriters() []plugins.MetricsWriter {
	if p == nil {
		return nil
	}
	var writers []plugins.MetricsWriter
	for _, part := range p.parts {
		if mw, ok := part.(plugins.MetricsWriter); ok {
			writers = append(writers, mw)
		}
	}
	return writers
}

// close ends the parts' use of the segments, which may be unmapped once it returns.
func (p *pluginParts) close() {
	if p == nil {
		return
	}
	p.closeOnce.Do(func() {
		for _, part := range p.parts {
			part.Close()
		}
	})
}
