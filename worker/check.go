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
	// current is what the workers serve, for CheckDelta.
	current *conf.Snapshot
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
	fallbackSNI := ""
	if cfg != nil {
		fallbackSNI = cfg.SSL.FallbackSNI
	}
	if c.certs == nil || c.certs.fallbackSNI != fallbackSNI {
		c.certs = newCertStore(fallbackSNI, c.log)
	}
	certs, pairs, leftOut := c.certs.compile(snap.SSLs)
	shared := &plugins.Shared{Segments: c.segments, Config: cfg, Logf: c.log.Errorf}
	_, more, err := compile(snap, c.pools, shared)
	if err != nil {
		return nil, fmt.Errorf("building config version %d: %w", snap.Version, err)
	}
	c.certs.commit(certs, pairs)
	return append(leftOut, more...), nil
}

// Reset makes snap, as the workers serve it, the snapshot CheckDelta builds deltas on.
func (c *Checker) Reset(snap *conf.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current = snap
}

// CheckDelta builds the snapshot Reset or Commit left with d applied, as Check does, and
// changes nothing.
func (c *Checker) CheckDelta(d *conf.Delta, cfg *conf.Config) ([]conf.LeftOut, error) {
	c.mu.Lock()
	current := c.current
	c.mu.Unlock()
	if current == nil {
		return nil, fmt.Errorf("BUG: worker: CheckDelta before Reset")
	}
	return c.Check(current.Apply(d), cfg)
}

// Commit applies d, accepted and stored, to the snapshot CheckDelta builds on.
func (c *Checker) Commit(d *conf.Delta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != nil {
		c.current = c.current.Apply(d)
	}
}
