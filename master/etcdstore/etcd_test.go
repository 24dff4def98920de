package etcdstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/conf"
	"gw/internal/testetcd"
	"gw/master/store"
)

func open(t *testing.T, srv *testetcd.Server) (*Client, *store.Store, *clientv3.Client) {
	t.Helper()
	cfg := conf.Default().Deployment.Etcd
	cfg.Host, cfg.Timeout, cfg.WriteTimeout = []string{srv.ClientURL}, 5*time.Second, 2*time.Second
	c, err := Open(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenRemote(c, cfg.WriteTimeout, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return c, st, raw
}

const route = `{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`

// A Store over etcd: writes wait for their echo, indexes are etcd's revisions, PATCH's
// compare-and-swap refuses a stale revision, ids come from <prefix>/gen_id, and keys
// that are not objects are ignored.
func TestStoreOverEtcd(t *testing.T) {
	srv := testetcd.Start(t)
	c, st, raw := open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	var published sync.Map
	go c.Sync(ctx, st, true, func(changes []store.Change, rev uint64) {
		for _, ch := range changes {
			published.Store(string(ch.Kind)+"/"+ch.ID, rev)
		}
	}, nopLog{})

	obj, created, err := st.Put(store.Routes, "1", []byte(`{"id":"1","uri":"/a","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`))
	if err != nil || !created {
		t.Fatalf("Put: %v, created %v", err, created)
	}
	kv, err := raw.Get(ctx, "/apisix/routes/1")
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("the route is not in etcd: %v", err)
	}
	if obj.ModifiedIndex != uint64(kv.Kvs[0].ModRevision) || obj.CreatedIndex != uint64(kv.Kvs[0].CreateRevision) {
		t.Fatalf("indexes %d/%d, etcd's %d/%d", obj.CreatedIndex, obj.ModifiedIndex, kv.Kvs[0].CreateRevision, kv.Kvs[0].ModRevision)
	}
	if got, ok := st.Get(store.Routes, "1"); !ok || got.ModifiedIndex != obj.ModifiedIndex {
		t.Fatal("a write is not in the store when Put returns")
	}
	if _, err := st.PutIf(store.Routes, "1", []byte(route), obj.ModifiedIndex-1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutIf with a stale revision: %v, want ErrConflict", err)
	}
	if _, err := st.PutIf(store.Routes, "1", []byte(`{"id":"1","uri":"/b","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`), obj.ModifiedIndex); err != nil {
		t.Fatalf("PutIf with the current revision: %v", err)
	}
	id, err := st.NewID()
	if err != nil || len(id) != 20 {
		t.Fatalf("NewID: %q %v", id, err)
	}
	// Written straight into etcd, without an id: served under the key's id.
	if _, err := raw.Put(ctx, "/apisix/routes/direct", route); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "/apisix/stream_routes/x", "{}"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := st.Get(store.Routes, "direct"); return ok })
	got, _ := st.Get(store.Routes, "direct")
	if !strings.HasPrefix(string(got.Value), `{"id":"direct",`) {
		t.Fatalf("value %s, want the key's id added", got.Value)
	}
	if snap := st.Snapshot(); len(snap.Routes) != 2 || len(snap.LeftOut) != 0 {
		t.Fatalf("snapshot %d routes, left out %v", len(snap.Routes), snap.LeftOut)
	}
	if _, ok := published.Load("routes/direct"); !ok {
		t.Fatal("the direct write was not published")
	}
	if ok, err := st.Delete(store.Routes, "1"); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	if _, ok := st.Get(store.Routes, "1"); ok {
		t.Fatal("a delete is not in the store when Delete returns")
	}
}

// A value in etcd that is not JSON, or whose id is not its key's, is held and left out;
// the rest serves.
func TestBadObjectsAreLeftOut(t *testing.T) {
	srv := testetcd.Start(t)
	c, st, raw := open(t, srv)
	ctx := context.Background()
	raw.Put(ctx, "/apisix/routes/good", route)
	raw.Put(ctx, "/apisix/routes/notjson", "{uri: /x")
	raw.Put(ctx, "/apisix/routes/other", `{"id":"else","uri":"/x","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
	if _, err := c.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if len(snap.Routes) != 1 || snap.Routes[0].ID != "good" {
		t.Fatalf("routes %+v, want only good", snap.Routes)
	}
	reasons := map[string]string{}
	for _, l := range snap.LeftOut {
		reasons[l.Key()] = l.Reason
	}
	if !strings.Contains(reasons["routes/notjson"], "not JSON") || !strings.Contains(reasons["routes/other"], `the value's id "else" is not the key's "other"`) {
		t.Fatalf("left out %v", reasons)
	}
}

// A watch that etcd has compacted past ends, and Sync lists again: the store holds every
// change made meanwhile, deletes included. The gap is made by a store that stopped at an
// old revision, as a node that was cut off.
func TestSyncRelistsAfterCompaction(t *testing.T) {
	srv := testetcd.Start(t)
	c, st, raw := open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	raw.Put(ctx, "/apisix/routes/old", route)
	if _, err := c.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	raw.Delete(ctx, "/apisix/routes/old")
	for _, id := range []string{"a", "b", "c"} {
		raw.Put(ctx, "/apisix/routes/"+id, route)
	}
	resp, _ := raw.Put(ctx, "/apisix/gen_id", "1")
	if _, err := raw.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := c.watch(ctx, st.Revision()+1, func([]store.Applied, uint64) {}); !errors.Is(err, errCompacted) {
		t.Fatalf("watch from a compacted revision: %v, want errCompacted", err)
	}
	go c.Sync(ctx, st, true, func([]store.Change, uint64) {}, nopLog{})
	waitFor(t, func() bool { return len(st.List(store.Routes)) == 3 })
	if _, ok := st.Get(store.Routes, "old"); ok {
		t.Fatal("a delete made during the gap was missed")
	}
	raw.Put(ctx, "/apisix/routes/d", route)
	waitFor(t, func() bool { _, ok := st.Get(store.Routes, "d"); return ok })
}

// With etcd down a write fails within the write timeout, and reachability drops.
func TestEtcdDown(t *testing.T) {
	srv := testetcd.Start(t)
	c, st, _ := open(t, srv)
	if _, err := c.Load(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.Reachable)
	srv.Stop()
	start := time.Now()
	_, _, err := st.Put(store.Routes, "1", []byte(route))
	if err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("Put with etcd down: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Put with etcd down took %v; the write timeout is 2s", took)
	}
	waitFor(t, func() bool { return !c.Reachable() })
}

type nopLog struct{}

func (nopLog) Infof(string, ...any) {}
func (nopLog) Warnf(string, ...any) {}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWithID(t *testing.T) {
	tests := []struct {
		kind       store.Kind
		value, out string
	}{
		{store.Routes, `{"uri":"/a"}`, `{"id":"7","uri":"/a"}`},
		{store.Routes, ` {} `, `{"id":"7"}`},
		{store.Routes, `{"id":"x","uri":"/a"}`, `{"id":"x","uri":"/a"}`},
		{store.Routes, `[1]`, `[1]`},
		{store.Routes, `not json`, `not json`},
		{store.Consumers, `{"username":"jack"}`, `{"username":"jack"}`},
	}
	for _, tt := range tests {
		if got := string(withID(tt.kind, "7", []byte(tt.value))); got != tt.out {
			t.Errorf("withID(%s, %s) = %s, want %s", tt.kind, tt.value, got, tt.out)
		}
	}
}
