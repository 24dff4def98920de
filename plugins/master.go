package plugins

import (
	"fmt"
	"io"

	"gw/conf"
	"gw/shm"
)

// MasterPart is implemented by a plugin with work of its own in the master process, on
// its shared memory: prometheus retires the connection gauges of workers that are gone,
// and renders the metrics exposition. The master calls StartMaster once, after creating
// the segments and before starting any worker.
type MasterPart interface {
	StartMaster(env *MasterEnv) (MasterInstance, error)
}

// MasterEnv is what a plugin's part in the master gets.
type MasterEnv struct {
	// Segments are the master's shared-memory segments, by plugin name (and the host's
	// by theirs), mapped for the master's life.
	Segments map[string]*shm.Segment
	// Config is the static configuration the master started with.
	Config *conf.Config
	// Version is the binary's version.
	Version string
	Logf    func(format string, args ...any)
}

// MasterInstance is one plugin's part in the running master. Its methods are safe for
// concurrent use.
type MasterInstance interface {
	// WorkerExited is called with the pid of a worker that has exited and is not yet
	// reaped: while its zombie holds the pid no other process can have it, so whatever
	// the plugin keeps in that pid's name is the dead worker's.
	WorkerExited(pid int)
	// Close is called before the master unmaps the segments; once it returns, the
	// instance touches them no more, and nothing else is called.
	Close()
}

// MetricsWriter is a MasterInstance that renders the master's metrics endpoint (the
// prometheus plugin's part). The master serves the endpoint, on prometheus.export_addr
// and export_uri, and calls WriteMetrics on each scrape; scrapes may overlap.
type MetricsWriter interface {
	WriteMetrics(w io.Writer, facts HostFacts)
}

// HostFacts are what only the master knows, for the metrics: read once per scrape.
type HostFacts struct {
	// Workers counts live worker processes by state ("starting", "ready", "draining").
	Workers        map[string]int
	WorkerRestarts uint64
	Reloads        uint64
	ReloadFailures uint64
	ConfigVersion  uint64
	// ConfigLeftOut counts the stored objects the served snapshot leaves out (they failed
	// to decode or build at start); WorkersRefusingConfig the workers that refused the
	// latest snapshot and serve an older one; ConfigRejections every snapshot refused.
	ConfigLeftOut         int
	WorkersRefusingConfig int
	ConfigRejections      uint64
	// UpstreamStatus is the health of every health-checked node, for
	// apisix_upstream_status; empty when no upstream has checks.
	UpstreamStatus []UpstreamStatus
	// HTTP2Abuse counts HTTP/2 connections cut off, by kind, for gw_http2_abuse_total.
	HTTP2Abuse map[string]uint64
}

// UpstreamStatus is one health-checked node: Name is the upstream's key
// (/apisix/upstreams/1, or the route's or service's key for an inline upstream).
type UpstreamStatus struct {
	Name, IP, Port string
	Healthy        bool
}

// StartMaster starts every MasterPart's instance, in name order. Should one fail, those
// already started are closed and the error names the plugin.
func StartMaster(env *MasterEnv) ([]MasterInstance, error) {
	var started []MasterInstance
	for _, p := range registered() {
		mp, ok := p.(MasterPart)
		if !ok {
			continue
		}
		inst, err := mp.StartMaster(env)
		if err != nil {
			for _, s := range started {
				s.Close()
			}
			return nil, fmt.Errorf("%s: %w", p.Name(), err)
		}
		if inst != nil {
			started = append(started, inst)
		}
	}
	return started, nil
}
