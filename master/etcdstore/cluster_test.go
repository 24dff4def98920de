package etcdstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/conf"
	"gw/internal/testetcd"
	"gw/master/store"
)

// node is one Cluster on its own connection, as each gw node has.
func node(t *testing.T, srv *testetcd.Server, id, role string, ttl time.Duration) *Cluster {
	t.Helper()
	c, _, _ := open(t, srv)
	t.Cleanup(func() { c.Close() })
	cl := c.Cluster(NodeRecord{ID: id, Role: role, Hostname: "host-" + id, PID: 1, Version: "test"}, ttl, nopLog{})
	t.Cleanup(cl.Close)
	return cl
}

// sees waits until cl's view holds node id at revision at least rev (or, with rev 0,
// holds no node id).
func sees(t *testing.T, cl *Cluster, id string, rev uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		found := false
		for _, n := range cl.Nodes() {
			if n.ID == id {
				found = rev != 0 && n.Revision >= rev
			}
		}
		if found || (rev == 0 && !hasNode(cl, id)) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("node %s: want revision >= %d (0: gone) within %s; the view holds %v", id, rev, within, cl.Nodes())
}

func hasNode(cl *Cluster, id string) bool {
	for _, n := range cl.Nodes() {
		if n.ID == id {
			return true
		}
	}
	return false
}

// A write waits for every other live node that serves data, and names those that lag:
// never the writer itself (its workers are waited for apart), never a control plane.
func TestClusterWaitNamesTheNodesThatLag(t *testing.T) {
	srv := testetcd.Start(t)
	writer := node(t, srv, "a-writer", conf.RoleTraditional, NodeTTL)
	dp := node(t, srv, "b-data", conf.RoleDataPlane, NodeTTL)
	cp := node(t, srv, "c-control", conf.RoleControlPlane, NodeTTL)
	writer.Serve(3)
	dp.Serve(5)
	cp.Serve(1)
	sees(t, writer, "b-data", 5, 10*time.Second)
	sees(t, writer, "c-control", 1, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := writer.Wait(ctx, 10)
	var lag *LagError
	if !errors.As(err, &lag) || len(lag.Lagging) != 1 || lag.Lagging[0].ID != "b-data" || lag.Lagging[0].Revision != 5 {
		t.Fatalf("Wait(10) with b-data at 5: %v; want a LagError naming b-data alone", err)
	}
	for _, want := range []string{"revision 10 is not yet served by nodes b-data (data_plane, host-b-data pid 1, serving revision 5)", "cluster_wait_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- writer.Wait(ctx, 10)
	}()
	dp.Serve(10)
	if err := <-done; err != nil {
		t.Fatalf("Wait(10) once b-data serves 10: %v", err)
	}
	if _, count, _ := writer.WaitCounts(); count != 2 {
		t.Fatalf("the wait histogram counts %d waits, want 2", count)
	}
}

// A node that stops renewing its lease stops counting once the lease expires; one that
// closes revokes it and stops counting at once.
func TestClusterNodeGoneWithItsLease(t *testing.T) {
	srv := testetcd.Start(t)
	writer := node(t, srv, "writer", conf.RoleTraditional, NodeTTL)
	dying := node(t, srv, "dying", conf.RoleDataPlane, 2*time.Second)
	leaving := node(t, srv, "leaving", conf.RoleDataPlane, NodeTTL)
	dying.Serve(1)
	leaving.Serve(1)
	sees(t, writer, "dying", 1, 10*time.Second)
	sees(t, writer, "leaving", 1, 10*time.Second)

	// As a killed node: the renewals stop, the lease is not revoked.
	dying.stop()
	dying.done.Wait()
	start := time.Now()
	sees(t, writer, "dying", 0, 15*time.Second)
	t.Logf("a node that stopped renewing a 2s lease was gone after %s", time.Since(start).Round(time.Millisecond))

	leaving.Close()
	sees(t, writer, "leaving", 0, 5*time.Second) // well inside its 10s lease: revoked
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := writer.Wait(ctx, 100); err != nil {
		t.Fatalf("Wait with every other node gone: %v", err)
	}
}

// A node whose record vanishes while it runs (an old master's lease revoked after a
// binary upgrade took the key over) writes it again.
func TestClusterRecordWrittenAgainWhenDeleted(t *testing.T) {
	srv := testetcd.Start(t)
	n := node(t, srv, "n", conf.RoleDataPlane, NodeTTL)
	n.Serve(7)
	sees(t, n, "n", 7, 10*time.Second)
	_, _, raw := open(t, srv)
	deleted, err := raw.Delete(context.Background(), "/apisix/gw/nodes/n")
	if err != nil {
		t.Fatal(err)
	}
	// The node may write it again before any view sees it gone: what must hold is that a
	// record newer than the delete comes back, without the node serving anything new.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := raw.Get(context.Background(), "/apisix/gw/nodes/n")
		if err == nil && len(got.Kvs) == 1 && got.Kvs[0].ModRevision > deleted.Header.Revision {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of node n written after its delete at revision %d within 10s: %v %v", deleted.Header.Revision, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sees(t, n, "n", 7, 10*time.Second)
}

// Node records are not config: the sync neither applies them nor counts their revision.
// Were it to count them, a node's record put would raise the revision it serves, which it
// would record again, without end.
func TestSyncIgnoresNodeRecords(t *testing.T) {
	srv := testetcd.Start(t)
	c, st, raw := open(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster(NodeRecord{ID: "self", Role: conf.RoleTraditional}, NodeTTL, nopLog{})
	defer cl.Close()
	other := node(t, srv, "other", conf.RoleDataPlane, NodeTTL)
	go c.Sync(ctx, st, true, func(_ []store.Change, rev uint64) {
		cl.Serve(rev)
		other.Serve(rev) // a second node serving in step
	}, nopLog{})

	rev, _, err := c.Put(ctx, store.Routes, "1", []byte(route), 0)
	if err != nil {
		t.Fatal(err)
	}
	sees(t, cl, "self", rev, 10*time.Second)
	sees(t, cl, "other", rev, 10*time.Second)
	settled := etcdRevision(t, raw)
	time.Sleep(500 * time.Millisecond)
	if now := etcdRevision(t, raw); now != settled {
		t.Fatalf("etcd's revision went from %d to %d with no config written: node records feed back into the served revision", settled, now)
	}
	if st.Revision() != rev {
		t.Fatalf("the store is at revision %d, want the route's %d: a record's revision was applied", st.Revision(), rev)
	}
	if _, ok := st.Get("gw", "nodes/self"); ok {
		t.Fatal("a node record is in the store")
	}
}

func etcdRevision(t *testing.T, raw *clientv3.Client) int64 {
	t.Helper()
	resp, err := raw.Get(context.Background(), "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
