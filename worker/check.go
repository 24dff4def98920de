package worker

import (
	"fmt"
	"sync"

	"gw/conf"
	"gw/internal/errlog"
	"gw/plugins"
	"gw/shm"
	"gw/worker/proxy"
)

// Checker builds snapshots exactly as a worker does, without serving them. The master
// runs it on the snapshot a write would produce before it acknowledges the write, and on
// the stored objects at start, so that what it sends workers is what they can build: a
// write is refused with the object and the reason, a stored object that fails is left
// out. It keeps what a worker keeps between snapshots (parsed certificates), so a check
// costs what a worker's compile costs. Safe for concurrent use; checks run one at a time.
type Checker struct {
	mu       sync.Mutex
	pools    *proxy.Pools
	certs    *certStore
	segments map[string]*shm.Segment
	log      *errlog.Logger
	// current is what the workers serve, and table what they made of it (nil until a
	// whole compile), for CheckDelta; pending is CheckDelta's last work, for Commit.
	current *conf.Snapshot
	table   *routeTable
	leftOut []conf.LeftOut
	pending pending
}

// NewChecker makes a Checker whose plugins see segments, the master's shared memory
// (plugin builds only read it). log receives the stack of a panic in a build; the
// plugins' own remarks are left to the workers.
func NewChecker(segments map[string]*shm.Segment, log *errlog.Logger) *Checker {
	return &Checker{
		pools:    proxy.NewPoolsWith(proxy.Options{BuildOnly: true}),
		segments: segments,
		log:      log,
	}
}

// Check builds snap under cfg, the config.yaml workers run with, and returns the objects
// that fail to build, each with why (a panic in the code that builds one included). It
// changes snap as a worker's compile does: client certificates copied into upstreams,
// consumers that fail dropped. The error is for a failure no object explains.
func (c *Checker) Check(snap *conf.Snapshot, cfg *conf.Config) ([]conf.LeftOut, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, leftOut, err := c.compileLocked(snap, cfg)
	return leftOut, err
}

func (c *Checker) compileLocked(snap *conf.Snapshot, cfg *conf.Config) (*routeTable, []conf.LeftOut, error) {
	fallbackSNI := ""
	if cfg != nil {
		fallbackSNI = cfg.SSL.FallbackSNI
	}
	if c.certs == nil || c.certs.fallbackSNI != fallbackSNI {
		c.certs = newCertStore(fallbackSNI, c.log)
	}
	certs, pairs, leftOut := c.certs.compile(snap.SSLs)
	shared := &plugins.Shared{Segments: c.segments, Config: cfg, Logf: c.log.Errorf}
	t, more, err := compile(snap, c.pools, shared)
	if err != nil {
		return nil, nil, fmt.Errorf("building config version %d: %w", snap.Version, err)
	}
	c.certs.commit(certs, pairs)
	return t, append(leftOut, more...), nil
}

// Reset makes snap, as the workers serve it, the snapshot CheckDelta builds deltas on.
func (c *Checker) Reset(snap *conf.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current, c.table, c.leftOut, c.pending = snap, nil, snap.LeftOut, pending{}
}

// pending is what CheckDelta built for a delta, for Commit to keep.
type pending struct {
	delta *conf.Delta
	next  *conf.Snapshot // nil: a delta of routes alone, for recompile
	table *routeTable
}

// CheckDelta builds what the workers serve with d applied, as they will, and changes
// nothing a later CheckDelta sees. A delta that recompile can build builds only what it
// touches; another, the whole snapshot.
func (c *Checker) CheckDelta(d *conf.Delta, cfg *conf.Config) ([]conf.LeftOut, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return nil, fmt.Errorf("BUG: worker: CheckDelta before Reset")
	}
	if c.table != nil && c.table.built.shared.Config == cfg {
		if u, ok := planUpdate(c.table, d, c.current); ok {
			_, _, leftOut := buildChanged(c.table, u)
			c.pending = pending{delta: d}
			return leftOut, nil
		}
	}
	next := snapshotOf(c.table, c.current, c.leftOut).Apply(d)
	// A copy: compile changes the lists it is given (consumers left out).
	snap := *next
	t, leftOut, err := c.compileLocked(&snap, cfg)
	if err != nil {
		return nil, err
	}
	c.pending = pending{delta: d, next: next, table: t}
	return leftOut, nil
}

// Commit applies d, accepted and stored, to what CheckDelta builds on, and keeps the
// table a worker makes of it for the next CheckDelta to build on.
func (c *Checker) Commit(d *conf.Delta, cfg *conf.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return
	}
	p := c.pending
	c.pending = pending{}
	c.leftOut = d.LeftOut
	if p.delta == d && p.table != nil {
		c.current, c.table = p.next, p.table
		return
	}
	if c.table != nil && c.table.built.shared.Config == cfg {
		if u, ok := planUpdate(c.table, d, c.current); ok {
			t, leftOut, err := recompile(c.table, u)
			if err != nil || len(leftOut) > 0 {
				c.current, c.table = snapshotOf(c.table, c.current, d.LeftOut).Apply(d), nil
				return
			}
			c.current, c.table = u.base, t
			return
		}
	}
	// The next CheckDelta compiles the whole snapshot.
	c.current, c.table = snapshotOf(c.table, c.current, d.LeftOut).Apply(d), nil
}
