package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/conf"
)

// NodeTTL is the lease of a node's record: a node that stops renewing it (killed, stopped,
// cut off from etcd) stops counting for the cluster-wide wait this long after its last
// renewal. The etcd client renews it every third of it.
const NodeTTL = 10 * time.Second

// nodesDir is where the records live, under the prefix. APISIX reads only the
// directories it knows (apisix/core/config_etcd.lua filters its watch by each one's key),
// so it passes over this one.
const nodesDir = "/gw/nodes/"

// NodeRecord is one node's record under <prefix>/gw/nodes/<id>: the etcd revision every
// worker of the node serves, and who the node is.
type NodeRecord struct {
	ID       string    `json:"-"` // the key's last part
	Revision uint64    `json:"revision"`
	Role     string    `json:"role"`
	Hostname string    `json:"hostname"`
	PID      int       `json:"pid"`
	Version  string    `json:"version"`
	Updated  time.Time `json:"updated"`
}

// servesData reports whether a write waits for the node: a control_plane node has no
// workers, so it serves nothing.
func (r NodeRecord) servesData() bool { return r.Role != conf.RoleControlPlane }

// String names the node as a 503 and gwctl status name it.
func (r NodeRecord) String() string {
	return fmt.Sprintf("%s (%s, %s pid %d, serving revision %d)", r.ID, r.Role, r.Hostname, r.PID, r.Revision)
}

// LagError is a wait that ended with live nodes not yet serving Revision.
type LagError struct {
	Revision uint64
	Lagging  []NodeRecord
	Waited   time.Duration
}

func (e *LagError) Error() string {
	names := make([]string, len(e.Lagging))
	for i, r := range e.Lagging {
		names[i] = r.String()
	}
	return fmt.Sprintf("revision %d is not yet served by nodes %s after %s (deployment.etcd.cluster_wait_timeout); "+
		"the write is kept, and they serve it once they catch up", e.Revision, strings.Join(names, ", "), e.Waited.Round(time.Millisecond))
}

// Cluster is a node's place in the cluster: it keeps the node's record under its lease,
// with the newest revision Serve was given, and watches every node's record, so that a
// write can wait until each live node serves it. Safe for concurrent use.
type Cluster struct {
	c    *Client
	self NodeRecord
	ttl  time.Duration
	log  Logger

	served atomic.Uint64
	kick   chan struct{} // capacity 1: the record is to be written again
	// lost is set when the view sees this node's own record deleted while the node runs
	// (an old master's lease revoked after a binary upgrade took the key over).
	lost  atomic.Bool
	lease atomic.Int64

	mu      sync.Mutex
	nodes   map[string]NodeRecord // by id, as the watch last saw them
	changed chan struct{}         // closed and replaced when nodes changes
	waits   waitHistogram

	stop context.CancelFunc
	done sync.WaitGroup
}

// Cluster starts the node's registration as self (its ID, Role, Hostname, PID and
// Version; Revision and Updated are filled in) and the watch of every node's record.
// ttl is the lease's, NodeTTL but in tests. Close ends both.
func (c *Client) Cluster(self NodeRecord, ttl time.Duration, log Logger) *Cluster {
	ctx, stop := context.WithCancel(context.Background())
	cl := &Cluster{c: c, self: self, ttl: ttl, log: log, kick: make(chan struct{}, 1),
		nodes: map[string]NodeRecord{}, changed: make(chan struct{}), stop: stop}
	cl.done.Add(2)
	go func() { defer cl.done.Done(); cl.register(ctx) }()
	go func() { defer cl.done.Done(); cl.watchNodes(ctx) }()
	return cl
}

// Serve records that every worker of the node serves revision. Writes to etcd are
// coalesced: at most one is in flight, and the next carries the newest revision.
func (cl *Cluster) Serve(revision uint64) {
	cl.served.Store(revision)
	cl.wake()
}

func (cl *Cluster) wake() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// Close stops the registration and revokes the lease, so the node stops counting at
// once rather than when the lease would expire.
func (cl *Cluster) Close() {
	cl.stop()
	cl.done.Wait()
	if lease := cl.lease.Load(); lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = cl.c.cli.Revoke(ctx, clientv3.LeaseID(lease)) // unreachable: it expires instead
		cancel()
	}
}

func (cl *Cluster) key(id string) string { return cl.c.prefix + nodesDir + id }

// register keeps the node's lease alive and its record current: a new lease when the
// old one is lost (etcd unreachable for longer than the TTL, the node stopped), and a
// put whenever the served revision changes or the lease is new.
func (cl *Cluster) register(ctx context.Context) {
	var alive <-chan *clientv3.LeaseKeepAliveResponse
	var recorded uint64
	current := false // the record in etcd is under this lease and says recorded
	for ctx.Err() == nil {
		if cl.lease.Load() == 0 {
			lease, err := cl.grant(ctx)
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			cl.lease.Store(int64(lease))
			if alive, err = cl.c.cli.KeepAlive(ctx, lease); err != nil {
				cl.lease.Store(0)
				sleep(ctx, time.Second)
				continue
			}
			current = false
		}
		if cl.lost.Swap(false) {
			current = false
		}
		if want := cl.served.Load(); want != 0 && (!current || want != recorded) {
			err := cl.put(ctx, want)
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				cl.lease.Store(0)
				continue
			case err != nil:
				sleep(ctx, time.Second)
				continue
			}
			recorded, current = want, true
		}
		select {
		case <-ctx.Done():
		case <-cl.kick:
		case _, ok := <-alive:
			if !ok && ctx.Err() == nil {
				cl.log.Warnf("etcd: the lease of this node's record %s expired: registering again", cl.key(cl.self.ID))
				cl.lease.Store(0)
			}
		}
	}
}

func (cl *Cluster) grant(ctx context.Context) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, cl.c.timeout)
	defer cancel()
	resp, err := cl.c.cli.Grant(ctx, int64(cl.ttl/time.Second))
	if err != nil {
		return 0, err
	}
	return resp.ID, nil
}

func (cl *Cluster) put(ctx context.Context, revision uint64) error {
	rec := cl.self
	rec.Revision, rec.Updated = revision, time.Now().UTC().Truncate(time.Millisecond)
	value, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("BUG: etcdstore: encoding a node record: %v", err))
	}
	ctx, cancel := context.WithTimeout(ctx, cl.c.timeout)
	defer cancel()
	_, err = cl.c.cli.Put(ctx, cl.key(cl.self.ID), string(value), clientv3.WithLease(clientv3.LeaseID(cl.lease.Load())))
	return err
}

// watchNodes keeps the view of every node's record: a list, then a watch from it, and a
// new list when the watch breaks. A record deleted is a node gone (its lease expired or
// was revoked).
func (cl *Cluster) watchNodes(ctx context.Context) {
	dir := cl.c.prefix + nodesDir
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, cl.c.timeout)
		resp, err := cl.c.cli.Get(lctx, dir, clientv3.WithPrefix())
		cancel()
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		nodes := map[string]NodeRecord{}
		for _, kv := range resp.Kvs {
			if rec, ok := cl.decode(kv.Key, kv.Value); ok {
				nodes[rec.ID] = rec
			}
		}
		cl.update(func(m map[string]NodeRecord) {
			clear(m)
			for id, rec := range nodes {
				m[id] = rec
			}
		})
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cl.c.cli.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.CompactRevision != 0 || wr.Err() != nil {
				break
			}
			cl.update(func(m map[string]NodeRecord) {
				for _, ev := range wr.Events {
					id := strings.TrimPrefix(string(ev.Kv.Key), dir)
					if ev.Type == clientv3.EventTypeDelete {
						delete(m, id)
						if id == cl.self.ID {
							cl.lost.Store(true)
							cl.wake()
						}
						continue
					}
					if rec, ok := cl.decode(ev.Kv.Key, ev.Kv.Value); ok {
						m[rec.ID] = rec
					}
				}
			})
		}
		cancel()
		sleep(ctx, 100*time.Millisecond)
	}
}

// decode reads a record; one that is not a record (written by hand) is not a node.
func (cl *Cluster) decode(key, value []byte) (NodeRecord, bool) {
	id := strings.TrimPrefix(string(key), cl.c.prefix+nodesDir)
	var rec NodeRecord
	if id == "" || strings.Contains(id, "/") || json.Unmarshal(value, &rec) != nil {
		return NodeRecord{}, false
	}
	rec.ID = id
	return rec, true
}

func (cl *Cluster) update(change func(map[string]NodeRecord)) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	change(cl.nodes)
	close(cl.changed)
	cl.changed = make(chan struct{})
}

// Nodes is every live node's record, this node's included, sorted by id.
func (cl *Cluster) Nodes() []NodeRecord {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := make([]NodeRecord, 0, len(cl.nodes))
	for _, rec := range cl.nodes {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b NodeRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Wait blocks until every other live node that serves data serves revision (this node's
// own workers are the caller's to wait for), or ctx ends: then a *LagError names the
// nodes that lag.
func (cl *Cluster) Wait(ctx context.Context, revision uint64) error {
	start := time.Now()
	for {
		cl.mu.Lock()
		lagging := cl.lagging(revision)
		changed := cl.changed
		cl.mu.Unlock()
		if len(lagging) == 0 {
			cl.observe(time.Since(start))
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			waited := time.Since(start)
			cl.observe(waited)
			return &LagError{Revision: revision, Lagging: lagging, Waited: waited}
		}
	}
}

// lagging is the nodes Wait waits for; cl.mu held.
func (cl *Cluster) lagging(revision uint64) []NodeRecord {
	var out []NodeRecord
	for _, rec := range cl.nodes {
		if rec.ID != cl.self.ID && rec.servesData() && rec.Revision < revision {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b NodeRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// WaitBuckets are the upper bounds, in seconds, of WaitCounts' buckets.
var WaitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// WaitCounts is the histogram of how long Wait took: a cumulative count per bucket of
// WaitBuckets, then the count of all waits and their sum in seconds.
func (cl *Cluster) WaitCounts() (buckets []uint64, count uint64, sum float64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	buckets = make([]uint64, len(WaitBuckets))
	var running uint64
	for i := range WaitBuckets {
		running += cl.waits.counts[i]
		buckets[i] = running
	}
	return buckets, cl.waits.count, cl.waits.sum
}

func (cl *Cluster) observe(d time.Duration) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.waits.observe(d)
}

type waitHistogram struct {
	counts [12]uint64 // per bucket of WaitBuckets, not cumulative
	count  uint64
	sum    float64
}

func (h *waitHistogram) observe(d time.Duration) {
	s := d.Seconds()
	h.count++
	h.sum += s
	for i, bound := range WaitBuckets {
		if s <= bound {
			h.counts[i]++
			return
		}
	}
}
