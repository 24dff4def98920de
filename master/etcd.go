package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/internal/atomicfile"
	"gw/master/etcdstore"
	"gw/master/store"
	"gw/plugins"
)

// etcdState is what a master on config_provider etcd adds (see master/etcdstore/doc.go).
type etcdState struct {
	client    *etcdstore.Client
	nodeID    string
	cachePath string
	prefix    string
	// listed is set when the start's list succeeded: the sync then watches from there.
	listed bool
	// cached is set while the node serves the copy in cachePath because etcd has not
	// answered since the start.
	cached atomic.Bool
	dirty  atomic.Bool // the store changed since the cache was written
	stop   context.CancelFunc
	done   chan struct{}

	// served is the etcd revision every change up to which the workers serve; servedCh is
	// closed and replaced when it grows (guarded by Master.mu).
	served   uint64
	servedCh chan struct{}

	// cluster is the node's record under <prefix>/gw/nodes/ and its view of every
	// node's; an Admin API write waits up to clusterWait for the others to serve it.
	cluster     *etcdstore.Cluster
	role        string
	clusterWait time.Duration
}

// The files a node on etcd keeps in data_dir.
const (
	nodeIDFile = "node-id"
	cacheFile  = "etcd-cache.json"
)

// openEtcdStore opens the store over etcd: the node's id, the cached copy of the last
// config, then a list of etcd, which replaces that copy when etcd answers within its
// timeout. A node with a cached copy does not wait long for etcd: it serves the copy.
func (m *Master) openEtcdStore(cfg *conf.Config) error {
	dir := m.paths.DataDir(cfg.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating data_dir %s: %w", dir, err)
	}
	e := &etcdState{cachePath: filepath.Join(dir, cacheFile), prefix: cfg.Deployment.Etcd.Prefix, servedCh: make(chan struct{}),
		role: cfg.Deployment.Role, clusterWait: cfg.Deployment.Etcd.ClusterWaitTimeout}
	var err error
	if e.nodeID, err = nodeID(filepath.Join(dir, nodeIDFile)); err != nil {
		return err
	}
	objects, revision, haveCache, err := readCache(e.cachePath, e.prefix)
	if err != nil {
		m.log.Warnf("%v; starting without it", err)
	}
	if e.client, err = etcdstore.Open(cfg.Deployment.Etcd, m.paths.Prefix); err != nil {
		return err
	}
	m.store, err = store.OpenRemote(e.client, cfg.Deployment.Etcd.WriteTimeout, objects, revision)
	if err != nil {
		e.client.Close()
		return fmt.Errorf("%s: %w", e.cachePath, err)
	}
	m.etcd = e
	wait := cfg.Deployment.Etcd.Timeout
	if haveCache {
		wait = min(wait, 3*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := e.client.Load(ctx, m.store); err != nil {
		if !haveCache {
			return fmt.Errorf("deployment.etcd: %w; no cached config in %s to start from", err, e.cachePath)
		}
		e.cached.Store(true)
		m.log.Warnf("serving the cached config of etcd revision %d from %s: %v", revision, e.cachePath, err)
		return nil
	}
	e.listed = true
	e.dirty.Store(true)
	return nil
}

// startEtcdSync starts the watch that feeds the workers, once they serve the start's
// snapshot, the node's record in the cluster, and the writer of the cached copy.
func (m *Master) startEtcdSync() {
	e := m.etcd
	if e == nil {
		return
	}
	hostname, _ := os.Hostname()
	cluster := e.client.Cluster(etcdstore.NodeRecord{ID: e.nodeID, Role: e.role, Hostname: hostname, PID: m.pid, Version: m.opts.Version},
		etcdstore.NodeTTL, m.log)
	m.mu.Lock()
	e.cluster = cluster
	m.mu.Unlock()
	m.setServed(m.store.Revision())
	ctx, stop := context.WithCancel(context.Background())
	e.stop, e.done = stop, make(chan struct{})
	go func() {
		defer close(e.done)
		e.client.Sync(ctx, m.store, e.listed, m.publishRemote, m.log)
	}()
	go m.writeCacheEvery(ctx, time.Second)
}

// stopEtcdSync ends the node's record first, so that writes stop waiting for a node
// that is going, then the watch, and writes the cached copy a last time.
func (m *Master) stopEtcdSync() {
	e := m.etcd
	if e == nil || e.stop == nil {
		return
	}
	e.cluster.Close()
	e.stop()
	<-e.done
	m.writeCache()
}

// publishRemote hands the workers what a list or a watch batch changed, up to revision.
func (m *Master) publishRemote(changes []store.Change, revision uint64) {
	e := m.etcd
	if e.cached.Swap(false) {
		m.log.Infof("etcd answers: serving its config of revision %d, no longer the cached copy", revision)
	}
	if len(changes) > 0 {
		d := m.remoteDelta(changes, revision, "etcd", "fix it with a PUT, or DELETE it")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := m.Publish(ctx, d); err != nil {
			m.log.Errorf("etcd revision %d: %v", revision, err)
		}
		cancel()
		e.dirty.Store(true)
	}
	m.setServed(revision)
}

// remoteDelta is the delta that serves changes from a Remote (etcd, a standalone file),
// named source in the log: an object that does not decode or does not build is left out
// and named in the error log with advice, never refused (it is stored already), and
// whatever else the changes hold is served.
func (m *Master) remoteDelta(changes []store.Change, revision uint64, source, advice string) *conf.Delta {
	d := &conf.Delta{To: revision}
	touched := map[string]bool{}
	var failed []conf.LeftOut
	for _, c := range changes {
		touched[string(c.Kind)+"/"+c.ID] = true
		var decoded any
		if c.Value != nil {
			var err error
			if decoded, err = store.DecodeRemote(c.Kind, c.ID, c.Value); err != nil {
				failed = append(failed, conf.LeftOut{Kind: string(c.Kind), ID: conf.ID(c.ID), Reason: err.Error()})
			}
		}
		d.Changes = append(d.Changes, conf.ChangeOf(string(c.Kind), conf.ID(c.ID), decoded))
	}
	for _, l := range m.LeftOut() {
		if !touched[l.Key()] {
			d.LeftOut = append(d.LeftOut, l)
		}
	}
	d.LeftOut = append(d.LeftOut, failed...)
	// Leaving one object out can make another unservable (what referenced it): check
	// again until the build is clean, a few rounds at most.
	for range 8 {
		bad, err := m.Check(d)
		if err != nil {
			m.log.Errorf("%s revision %d: the config could not be built: %v", source, revision, err)
			break
		}
		if len(bad) == 0 {
			break
		}
		d.LeftOut = append(d.LeftOut, bad...)
		failed = append(failed, bad...)
	}
	for _, l := range failed {
		m.log.Errorf("object %s in %s is left out and not served: %s (%s)", l.Key(), source, l.Reason, advice)
	}
	return d
}

func (m *Master) setServed(revision uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if revision > m.etcd.served || m.etcd.served == 0 {
		m.etcd.served = revision
		close(m.etcd.servedCh)
		m.etcd.servedCh = make(chan struct{})
		if m.etcd.cluster != nil {
			m.etcd.cluster.Serve(revision)
		}
	}
}

// ServedRevision is the etcd revision up to which the workers serve every change (0 on
// the local store): what a cluster-wide read-your-writes compares.
func (m *Master) ServedRevision() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd == nil {
		return 0
	}
	return m.etcd.served
}

// etcdPublisher is the Admin API's Publisher on etcd: the watch publishes every change,
// the node's own writes included, so a write waits until the workers serve its revision,
// then until every other live node records that it serves it (cluster_wait_timeout).
type etcdPublisher struct{ m *Master }

func (p etcdPublisher) Publish(ctx context.Context, d *conf.Delta) error {
	m := p.m
	for {
		m.mu.Lock()
		served, ch, cluster := m.etcd.served, m.etcd.servedCh, m.etcd.cluster
		m.mu.Unlock()
		if served >= d.To {
			if cluster == nil {
				return nil
			}
			// Its own bound: the local wait may have used most of ctx's.
			wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.etcd.clusterWait)
			defer cancel()
			return cluster.Wait(wait, d.To)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("etcd revision %d: the workers serve revision %d: %w", d.To, served, ctx.Err())
		}
	}
}

// adminPublisher is what the Admin API hands its writes to.
func (m *Master) adminPublisher() Publisher {
	if m.etcd != nil {
		return etcdPublisher{m}
	}
	return m
}

// Publisher is admin.Publisher, named here so adminPublisher can return either kind.
type Publisher interface {
	Publish(ctx context.Context, d *conf.Delta) error
}

func (m *Master) writeCacheEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if m.etcd.dirty.Swap(false) {
				m.writeCache()
			}
		}
	}
}

// cache is the cached copy's format: the store at one revision, for one prefix.
type cache struct {
	Format   int           `json:"gw_etcd_cache"`
	Prefix   string        `json:"prefix"`
	Revision uint64        `json:"revision"`
	Objects  []cacheObject `json:"objects"`
}

type cacheObject struct {
	Kind          store.Kind      `json:"kind"`
	ID            string          `json:"id"`
	CreatedIndex  uint64          `json:"created_index"`
	ModifiedIndex uint64          `json:"modified_index"`
	Value         json.RawMessage `json:"value"`
}

func (m *Master) writeCache() {
	objects, revision := m.store.All()
	c := cache{Format: 1, Prefix: m.etcd.prefix, Revision: revision, Objects: make([]cacheObject, len(objects))}
	for i, o := range objects {
		c.Objects[i] = cacheObject{o.Kind, o.ID, o.CreatedIndex, o.ModifiedIndex, o.Value}
	}
	data, err := json.Marshal(c)
	if err == nil {
		err = atomicfile.Write(m.etcd.cachePath, data, 0o600, "."+cacheFile+".tmp-*")
	}
	if err != nil {
		m.log.Errorf("writing the cached config %s: %v", m.etcd.cachePath, err)
	}
}

// readCache reads the cached copy; a missing one is no error, and one for another prefix
// is not used.
func readCache(path, prefix string) ([]store.Object, uint64, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading the cached config: %w", err)
	}
	var c cache
	if err := json.Unmarshal(data, &c); err != nil || c.Format != 1 {
		return nil, 0, false, fmt.Errorf("the cached config %s is not one this binary wrote", path)
	}
	if c.Prefix != prefix {
		return nil, 0, false, fmt.Errorf("the cached config %s is of prefix %s, not deployment.etcd.prefix %s", path, c.Prefix, prefix)
	}
	objects := make([]store.Object, len(c.Objects))
	for i, o := range c.Objects {
		objects[i] = store.Object{Kind: o.Kind, ID: o.ID, Value: o.Value, CreatedIndex: o.CreatedIndex, ModifiedIndex: o.ModifiedIndex}
	}
	return objects, c.Revision, true, nil
}

// nodeID reads the node's id from path, making one the first time: the same across
// restarts, so etcd can tell the node's keys from another's.
func nodeID(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(data)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading the node id: %w", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := atomicfile.Write(path, []byte(id+"\n"), 0o600, "."+nodeIDFile+".tmp-*"); err != nil {
		return "", fmt.Errorf("writing the node id: %w", err)
	}
	return id, nil
}

// etcdMetrics writes APISIX's etcd metrics (exporter.lua) and gw's cached-config gauge.
type etcdMetrics struct{ m *Master }

// modifyIndexKinds are the kinds APISIX's apisix_etcd_modify_indexes names, in its order.
var modifyIndexKinds = []store.Kind{store.Routes, store.Services, store.SSLs, store.Consumers, store.GlobalRules, store.Upstreams}

func (e etcdMetrics) WriteMetrics(w io.Writer, _ plugins.HostFacts) {
	m := e.m
	var b strings.Builder
	reachable := 0
	if m.etcd.client.Reachable() {
		reachable = 1
	}
	b.WriteString("# HELP apisix_etcd_reachable Config server etcd reachable from APISIX, 0 is unreachable\n# TYPE apisix_etcd_reachable gauge\n")
	fmt.Fprintf(&b, "apisix_etcd_reachable %d\n", reachable)
	b.WriteString("# HELP apisix_etcd_modify_indexes Etcd modify index for APISIX keys\n# TYPE apisix_etcd_modify_indexes gauge\n")
	var maxIndex uint64
	for _, kind := range modifyIndexKinds {
		var kindMax uint64
		for _, obj := range m.store.List(kind) {
			kindMax = max(kindMax, obj.ModifiedIndex)
		}
		maxIndex = max(maxIndex, kindMax)
		fmt.Fprintf(&b, "apisix_etcd_modify_indexes{key=%q} %d\n", kind, kindMax)
	}
	fmt.Fprintf(&b, "apisix_etcd_modify_indexes{key=\"max_modify_index\"} %d\n", maxIndex)
	fmt.Fprintf(&b, "apisix_etcd_modify_indexes{key=\"x_etcd_index\"} %d\n", m.etcd.client.Revision())
	cached := 0
	if m.etcd.cached.Load() {
		cached = 1
	}
	m.mu.Lock()
	cluster, served := m.etcd.cluster, m.etcd.served
	m.mu.Unlock()
	if cluster != nil {
		writeClusterMetrics(&b, cluster, m.etcd.nodeID, served)
	}
	b.WriteString("# HELP gw_config_cached 1 while the node serves its cached copy of etcd's config because etcd has not answered since it started\n# TYPE gw_config_cached gauge\n")
	fmt.Fprintf(&b, "gw_config_cached %d\n", cached)
	io.WriteString(w, b.String())
}

// writeClusterMetrics writes gw_cluster_nodes, the live nodes that serve data by whether
// they serve what this node serves (current) or not yet (lagging), and the histogram of
// how long Admin API writes waited for them.
func writeClusterMetrics(b *strings.Builder, cluster *etcdstore.Cluster, self string, served uint64) {
	current, lagging := 0, 0
	for _, n := range cluster.Nodes() {
		switch {
		case n.Role == conf.RoleControlPlane:
		case n.ID == self || n.Revision >= served:
			current++
		default:
			lagging++
		}
	}
	b.WriteString("# HELP gw_cluster_nodes Live gw nodes serving data on this etcd, by whether they serve this node's revision\n# TYPE gw_cluster_nodes gauge\n")
	fmt.Fprintf(b, "gw_cluster_nodes{state=\"current\"} %d\ngw_cluster_nodes{state=\"lagging\"} %d\n", current, lagging)
	buckets, count, sum := cluster.WaitCounts()
	b.WriteString("# HELP gw_cluster_write_wait_seconds How long Admin API writes waited for the other nodes to serve them\n# TYPE gw_cluster_write_wait_seconds histogram\n")
	for i, bound := range etcdstore.WaitBuckets {
		fmt.Fprintf(b, "gw_cluster_write_wait_seconds_bucket{le=\"%g\"} %d\n", bound, buckets[i])
	}
	fmt.Fprintf(b, "gw_cluster_write_wait_seconds_bucket{le=\"+Inf\"} %d\ngw_cluster_write_wait_seconds_sum %g\ngw_cluster_write_wait_seconds_count %d\n", count, sum, count)
}
