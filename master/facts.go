package master

import (
	"fmt"
	"time"

	"gw/conf"
	"gw/master/etcdstore"
)

// Facts is the master's own state, for `gwctl status` and the metrics endpoint.
type Facts struct {
	PID           int
	Version       string
	Started       time.Time
	Generation    uint64
	ConfigVersion uint64
	ConfigSource  string
	Workers       []WorkerFacts
	// WorkerRestarts counts unexpected worker exits that were respawned.
	WorkerRestarts uint64
	// Reloads and ReloadFailures count `gwctl reload` (SIGHUP) outcomes.
	Reloads        uint64
	ReloadFailures uint64
	// LeftOut are the stored objects the served snapshot leaves out, each with why.
	LeftOut []conf.LeftOut `json:",omitempty"`
	// ConfigRejections counts the snapshots workers refused (see WorkerFacts.Rejected).
	ConfigRejections uint64
	// Etcd is the node's view of etcd; nil on config_provider local.
	Etcd *EtcdFacts `json:",omitempty"`
	// Standalone is the node's standalone file; nil unless config_provider is yaml or json.
	Standalone *StandaloneFacts `json:",omitempty"`
	// HTTP2Abuse counts HTTP/2 connections cut off, by kind (worker/http2.go).
	HTTP2Abuse map[string]uint64 `json:",omitempty"`
}

// EtcdFacts is a node on etcd: its id, whether etcd answers, the revision its workers
// serve, and whether that is the cached copy of a node started while etcd was down.
type EtcdFacts struct {
	NodeID         string
	Endpoints      []string
	Prefix         string
	Reachable      bool
	ServedRevision uint64
	Cached         bool
	CachePath      string
	// Nodes is every live node's record under <prefix>/gw/nodes/, this one's included:
	// what an Admin API write waits for.
	Nodes []NodeFacts `json:",omitempty"`
	// NodeLease is the records' lease: a node that stops renewing it is gone this long
	// after.
	NodeLease time.Duration
}

// NodeFacts is one node's record: the etcd revision its workers serve.
type NodeFacts struct {
	ID       string
	Role     string
	Hostname string
	PID      int
	Version  string
	Revision uint64
	Updated  time.Time
	Self     bool `json:",omitempty"`
}

// WorkerFacts describes one live worker process.
type WorkerFacts struct {
	Slot       int
	PID        int
	Generation uint64
	State      string // "starting", "ready" or "draining"
	Started    time.Time
	// Requests and Connections are from the worker's last report (at most a second old).
	Requests    uint64
	Connections int64
	// Rejected, when set, says which snapshot the worker refuses and why: it serves an
	// older one.
	Rejected string `json:",omitempty"`
}

// Facts returns a consistent copy of the master's state. Safe for concurrent use.
func (m *Master) Facts() Facts {
	m.mu.Lock()
	defer m.mu.Unlock()
	sup := m.sup.view()
	f := Facts{
		PID: m.pid, Version: m.opts.Version, Started: m.started, Generation: sup.gen.id,
		ConfigVersion: m.version, ConfigSource: m.paths.Config,
		WorkerRestarts: sup.restarts, Reloads: m.reloads, ReloadFailures: m.reloadFailures,
		LeftOut: m.leftOut, ConfigRejections: m.configRejections, HTTP2Abuse: sup.http2Abuse,
	}
	if e := m.etcd; e != nil {
		f.Etcd = &EtcdFacts{NodeID: e.nodeID, Endpoints: m.currentConfig().Deployment.Etcd.Host, Prefix: e.prefix,
			Reachable: e.client.Reachable(), ServedRevision: e.served, Cached: e.cached.Load(), CachePath: e.cachePath}
		f.Etcd.NodeLease = etcdstore.NodeTTL
		if e.cluster != nil {
			for _, n := range e.cluster.Nodes() {
				f.Etcd.Nodes = append(f.Etcd.Nodes, NodeFacts{ID: n.ID, Role: n.Role, Hostname: n.Hostname, PID: n.PID,
					Version: n.Version, Revision: n.Revision, Updated: n.Updated, Self: n.ID == e.nodeID})
			}
		}
	}
	if fs := m.file; fs != nil {
		f.Standalone = &StandaloneFacts{Path: fs.path, Loaded: fs.loaded, Problem: fs.problem}
	}
	for _, w := range sup.workers {
		wf := WorkerFacts{Slot: w.slot, PID: w.pid, Generation: w.generation, State: w.state(), Started: w.started}
		if st := w.stats.Load(); st != nil {
			wf.Requests, wf.Connections = st.Requests, st.Connections
		}
		if rejected := w.refuses(); rejected != nil {
			wf.Rejected = fmt.Sprintf("refuses config version %d: %s", rejected.Version, rejected.Reason)
		}
		f.Workers = append(f.Workers, wf)
	}
	return f
}

func (w *workerProc) state() string {
	switch {
	case w.draining.Load():
		return "draining"
	case w.isReady():
		return "ready"
	default:
		return "starting"
	}
}

func (w *workerProc) isReady() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}
