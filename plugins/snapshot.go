package plugins

import (
	"gw/conf"
	"gw/shm"
)

// Shared holds what every route's plugins in one worker share, for the worker's life.
type Shared struct {
	// Segments are the shared-memory segments, by plugin name (and the host's by theirs).
	Segments map[string]*shm.Segment
	// Config is the static configuration the worker runs with.
	Config *conf.Config
	// Logf writes a line to the error log (rate-limit it yourself on hot paths).
	Logf func(format string, args ...any)
	// Version is the gateway's version (the loggers' server.version); Prefix its prefix
	// directory, which relative paths in configurations are under. Empty outside a
	// worker.
	Version, Prefix string
}

// SnapshotBuild is the building of one config snapshot's chains. It keeps what each
// SnapshotBuilder plugin made of the snapshot, made on the first Build of the plugin and
// reached by every later one through Env.SnapshotState, so that per-snapshot state lives
// as long as the snapshot's chains do and never in a plugin's package. A worker makes one
// per snapshot it compiles and drops it once the table is built. It is not safe for
// concurrent use: one goroutine builds a snapshot.
type SnapshotBuild struct {
	snap   *conf.Snapshot
	shared *Shared
	states map[string]snapshotState
}

type snapshotState struct {
	value any
	err   error
}

// NewSnapshotBuild starts the building of snap's chains in a worker that shares shared.
func NewSnapshotBuild(snap *conf.Snapshot, shared *Shared) *SnapshotBuild {
	return &SnapshotBuild{snap: snap, shared: shared, states: map[string]snapshotState{}}
}

// Env returns the Env to build one chain with: a route's (route), or a global rule's
// copy for a route (globalRuleID set too).
func (b *SnapshotBuild) Env(route *RouteInfo, globalRuleID string) *Env {
	return &Env{Route: route, Shared: b.shared, Snapshot: b.snap, GlobalRuleID: globalRuleID, build: b}
}

// stateOf returns what sb made of env's snapshot, building it on first use.
func (env *Env) stateOf(name string, sb SnapshotBuilder) (any, error) {
	b := env.build
	if b == nil {
		return sb.BuildSnapshot(env.Snapshot, env.Shared)
	}
	if st, ok := b.states[name]; ok {
		return st.value, st.err
	}
	value, err := sb.BuildSnapshot(b.snap, b.shared)
	b.states[name] = snapshotState{value, err}
	return value, err
}

// For returns a SnapshotBuild of snap that shares b's states: for a worker that builds
// part of a newer snapshot from b's table (a write of routes, upstreams, services or
// plugin configs, which change nothing a SnapshotBuilder reads), so that Env.Snapshot is
// the snapshot being built while the states are not made again.
func (b *SnapshotBuild) For(snap *conf.Snapshot) *SnapshotBuild {
	return &SnapshotBuild{snap: snap, shared: b.shared, states: b.states}
}
