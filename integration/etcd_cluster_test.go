package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/internal/testetcd"
)

// Three gw nodes on one etcd (issue 20): a traditional node that takes the Admin API's
// writes and two data_plane nodes. A write's 2xx means every live node serves it.

type cluster struct {
	srv   *testetcd.Server
	cli   *clientv3.Client
	up    *upstream
	admin *instance   // traditional
	nodes []*instance // admin first, then the data planes
}

// startCluster starts etcd and the three nodes, whose writes wait up to clusterWait for
// the others.
func startCluster(t *testing.T, clusterWait string) *cluster {
	t.Helper()
	srv, cli := startEtcd(t)
	c := &cluster{srv: srv, cli: cli, up: startUpstream(t, "up")}
	for _, role := range []string{"traditional", "data_plane", "data_plane"} {
		in := newInstance(t, fmt.Sprintf("worker_processes: 1\ndeployment:\n  role: %s\n  config_provider: etcd\n  etcd:\n    host: [%q]\n"+
			"    write_timeout: 2s\n    timeout: 5s\n    cluster_wait_timeout: %s\n", role, srv.ClientURL, clusterWait))
		in.start()
		c.nodes = append(c.nodes, in)
	}
	c.admin = c.nodes[0]
	// Every node is live once its record is in etcd; until then a write does not wait
	// for it (a node that starts lists etcd anyway).
	ids := make([]string, len(c.nodes))
	for i, in := range c.nodes {
		ids[i] = nodeIDOf(t, in)
	}
	if !waitFor(10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), "/apisix/gw/nodes/", clientv3.WithPrefix())
		if err != nil {
			return false
		}
		have := map[string]bool{}
		for _, kv := range resp.Kvs {
			have[strings.TrimPrefix(string(kv.Key), "/apisix/gw/nodes/")] = true
		}
		for _, id := range ids {
			if !have[id] {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the three nodes %v did not all register under /apisix/gw/nodes/ within 10s", ids)
	}
	return c
}

func nodeIDOf(t *testing.T, in *instance) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.prefix, "data", "node-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// seqRoute is route id at /seq, whose upstream sees the path /v/<n>: which write a node
// serves shows in the upstream's X-Seen-Path.
func seqRoute(addr string, n int) string {
	return fmt.Sprintf(`{"uri":"/seq","plugins":{"proxy-rewrite":{"uri":"/v/%d"}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, n, addr)
}

// keptConnections reuses connections: a thousand writes checked on three nodes would
// otherwise spend most of their time connecting.
var keptConnections = &http.Client{Timeout: 10 * time.Second}

// seenPath is the path the upstream saw for GET path on in, or the status when none.
func seenPath(t *testing.T, in *instance, path string) string {
	t.Helper()
	resp, err := keptConnections.Get("http://" + in.data + path)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, in.data, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Seen-Path")
}

// (1) When a route PUT on the traditional node returns, each node serves it: an
// immediate GET, no polling. Repeated, so that a missing wait shows.
// (2) A value put with etcdctl is served by every node shortly after (the goal is
// 100 ms; the figure is logged, 2 s is the failure bound).
// gwctl status lists the three nodes, and the metrics count them.
func TestEtcdClusterReadYourWrites(t *testing.T) {
	c := startCluster(t, "5s")
	for i := range 20 {
		uri := fmt.Sprintf("/ryw/%d", i)
		status, body := c.admin.adminCall("PUT", "/apisix/admin/routes/ryw", routeJSON(uri, c.up.addr))
		if status != 200 && status != 201 {
			t.Fatalf("PUT %s: %d %s", uri, status, body)
		}
		for n, in := range c.nodes {
			if resp, got := in.get(uri); resp.StatusCode != 200 || got != "up" {
				t.Fatalf("write %d: node %d answers GET %s right after the 2xx with %d %q: the write was not yet served there",
					i, n, uri, resp.StatusCode, got)
			}
		}
	}

	t.Run("etcdctl", func(t *testing.T) { etcdctlServedEverywhere(t, c) })

	out, _ := c.admin.gwctl("status")
	for _, in := range c.nodes {
		if !strings.Contains(out, nodeIDOf(t, in)) {
			t.Fatalf("gwctl status does not list node %s:\n%s", nodeIDOf(t, in), out)
		}
	}
	if !strings.Contains(out, "cluster: 3 live nodes") || !strings.Contains(out, "data_plane") {
		t.Fatalf("gwctl status does not show the cluster:\n%s", out)
	}
	_, metrics := getOn(t, c.admin.metrics, "/apisix/prometheus/metrics")
	for _, want := range []string{`gw_cluster_nodes{state="current"} 3`, `gw_cluster_nodes{state="lagging"} 0`, "gw_cluster_write_wait_seconds_count 20"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// etcdctlServedEverywhere puts routes with Debian's etcdctl and polls every node every
// 2 ms until each serves them: behaviour fails at 2 s, the figure is logged.
func etcdctlServedEverywhere(t *testing.T, c *cluster) {
	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl is not installed (apt-get install etcd-client): skipping the etcdctl case")
	}
	var slowest, slowestSinceStart time.Duration
	for i := range 5 {
		uri := fmt.Sprintf("/etcdctl/%d", i)
		cmd := exec.Command(etcdctl, "--endpoints", c.srv.ClientURL, "put", "/apisix/routes/ctl", routeJSON(uri, c.up.addr))
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		started := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcdctl put: %v\n%s", err, out)
		}
		put := time.Now() // etcdctl has returned: etcd holds the value
		for n, in := range c.nodes {
			for {
				if resp, _ := in.get(uri); resp.StatusCode == 200 {
					break
				}
				if time.Since(put) > 2*time.Second {
					t.Fatalf("node %d does not serve %s 2s after etcdctl put it", n, uri)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		slowest, slowestSinceStart = max(slowest, time.Since(put)), max(slowestSinceStart, time.Since(started))
	}
	// The first figure leaves out the put's own round trip, the second adds etcdctl's
	// start and exit: the true figure lies between.
	t.Logf("an etcdctl put was served by all three nodes %s after etcdctl returned, %s after it started (the slowest of 5)",
		slowest.Round(time.Millisecond), slowestSinceStart.Round(time.Millisecond))

}

// (3) 1,000 writes in a row through the Admin API reach every node in order: after each
// 2xx every node serves exactly that write, each node's recorded revision never goes
// back, and all end on the last write.
func TestEtcdClusterThousandWritesInOrder(t *testing.T) {
	c := startCluster(t, "5s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	records := c.cli.Watch(ctx, "/apisix/gw/nodes/", clientv3.WithPrefix())
	recorded := map[string]uint64{}
	var backwards []string
	drain := func() {
		for {
			select {
			case wr := <-records:
				for _, ev := range wr.Events {
					var rec struct{ Revision uint64 }
					if ev.Type != clientv3.EventTypePut || json.Unmarshal(ev.Kv.Value, &rec) != nil {
						continue
					}
					id := string(ev.Kv.Key)
					if rec.Revision < recorded[id] {
						backwards = append(backwards, fmt.Sprintf("%s: %d after %d", id, rec.Revision, recorded[id]))
					}
					recorded[id] = rec.Revision
				}
			default:
				return
			}
		}
	}

	const writes = 1000
	start := time.Now()
	for i := 1; i <= writes; i++ {
		status, body := c.admin.adminCall("PUT", "/apisix/admin/routes/seq", seqRoute(c.up.addr, i))
		if status != 200 && status != 201 {
			t.Fatalf("write %d: %d %s", i, status, body)
		}
		want := fmt.Sprintf("/v/%d", i)
		for n, in := range c.nodes {
			if got := seenPath(t, in, "/seq"); got != want {
				t.Fatalf("write %d: node %d serves %s right after the 2xx, want %s", i, n, got, want)
			}
		}
		drain()
	}
	took := time.Since(start)
	t.Logf("%d writes, each served by three nodes before its 2xx, then checked on each: %s (%s a write)",
		writes, took.Round(time.Millisecond), (took / writes).Round(time.Microsecond))
	time.Sleep(100 * time.Millisecond)
	drain()
	if len(backwards) > 0 {
		t.Fatalf("a node's recorded revision went back: %v", backwards)
	}
	if len(recorded) != 3 {
		t.Fatalf("records of %d nodes seen during the writes, want 3: %v", len(recorded), recorded)
	}
}

// (4) A data_plane node stopped (SIGSTOP): a write answers 503 after cluster_wait_timeout
// naming it, is kept, and the other nodes serve it; once the node runs again (SIGCONT) it
// catches up and writes return 2xx. A node stopped gracefully revokes its lease: writes
// stop waiting for it at once.
func TestEtcdClusterLaggingNode(t *testing.T) {
	c := startCluster(t, "1s")
	stopped := c.nodes[1]
	stoppedID := nodeIDOf(t, stopped)
	pids := append([]int{stopped.masterPID()}, children(stopped.masterPID())...)
	signal := func(sig syscall.Signal) {
		for _, pid := range pids {
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatalf("kill -%d %d: %v", sig, pid, err)
			}
		}
	}
	signal(syscall.SIGSTOP)
	continued := false
	defer func() {
		if !continued {
			signal(syscall.SIGCONT)
		}
	}()

	start := time.Now()
	status, body := c.admin.adminCall("PUT", "/apisix/admin/routes/lag", routeJSON("/lag", c.up.addr))
	took := time.Since(start)
	if status != 503 || !strings.Contains(body, stoppedID) || strings.Contains(body, nodeIDOf(t, c.admin)) ||
		!strings.Contains(body, "cluster_wait_timeout") {
		t.Fatalf("PUT with node %s stopped: %d %s; want 503 naming it (and never the writer)", stoppedID, status, body)
	}
	if took < time.Second || took > 5*time.Second {
		t.Fatalf("the 503 came after %s, want cluster_wait_timeout (1s) and a margin", took)
	}
	t.Logf("503 after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(body))
	for _, in := range []*instance{c.admin, c.nodes[2]} {
		if resp, got := in.get("/lag"); resp.StatusCode != 200 || got != "up" {
			t.Fatalf("the write that got 503 is not served on a running node: %d %q", resp.StatusCode, got)
		}
	}

	signal(syscall.SIGCONT)
	continued = true
	servedWithin(t, stopped, "/lag", "up")
	// The node's record catches up too; then a write waits for it and succeeds.
	if !waitFor(10*time.Second, func() bool {
		status, _ := c.admin.adminCall("PUT", "/apisix/admin/routes/after", routeJSON("/after", c.up.addr))
		return status == 200 || status == 201
	}) {
		t.Fatal("writes do not return 2xx again within 10s of SIGCONT")
	}
	if resp, got := stopped.get("/after"); resp.StatusCode != 200 || got != "up" {
		t.Fatalf("the continued node answers GET /after right after its 2xx with %d %q", resp.StatusCode, got)
	}

	// Stopped for good: its lease is revoked, so the next write does not wait.
	c.nodes[2].stop()
	start = time.Now()
	status, body = c.admin.adminCall("PUT", "/apisix/admin/routes/gone", routeJSON("/gone", c.up.addr))
	if status != 200 && status != 201 {
		t.Fatalf("PUT after a node stopped gracefully: %d %s after %s", status, body, time.Since(start))
	}
}

// A data_plane node killed with SIGKILL (master and workers: nothing revokes its lease)
// keeps counting until its lease expires: a write answers 503 naming it, and once the
// lease's 10 s have passed since its last renewal, writes return 2xx again without it.
// Renewals come about every 3 s, so the lease ends 6 to 10 s after the kill; the bounds
// below leave room for a busy machine.
func TestEtcdClusterKilledNodeLeaseExpires(t *testing.T) {
	c := startCluster(t, "1s")
	killed := c.nodes[1]
	killedID := nodeIDOf(t, killed)
	master := killed.masterPID()
	for _, pid := range append([]int{master}, children(master)...) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
	}
	killedAt := time.Now()
	// The pid file stays behind; the cleanup's gwctl stop finds no process to stop.
	if !waitFor(5*time.Second, func() bool { return !alive(master) }) {
		t.Fatalf("master %d still alive 5s after SIGKILL", master)
	}

	status, body := c.admin.adminCall("PUT", "/apisix/admin/routes/dead", routeJSON("/dead", c.up.addr))
	if sinceKill := time.Since(killedAt); status != 503 || !strings.Contains(body, killedID) {
		t.Fatalf("PUT %s after killing node %s: %d %s; want 503 naming it while its lease lives", sinceKill, killedID, status, body)
	}
	t.Logf("%s after the kill: 503 %s", time.Since(killedAt).Round(time.Millisecond), strings.TrimSpace(body))

	var expiredAfter time.Duration
	for i := 0; ; i++ {
		status, body = c.admin.adminCall("PUT", "/apisix/admin/routes/dead", routeJSON("/dead", c.up.addr))
		if status == 200 || status == 201 {
			expiredAfter = time.Since(killedAt)
			break
		}
		if status != 503 || !strings.Contains(body, killedID) {
			t.Fatalf("PUT %d while node %s's lease lives: %d %s; want 503 naming it", i, killedID, status, body)
		}
		if time.Since(killedAt) > 40*time.Second {
			t.Fatalf("writes still answer 503 %s after the kill, well past the 10s lease: %s", time.Since(killedAt), body)
		}
	}
	t.Logf("writes return 2xx again %s after the kill (lease 10s, renewed every ~3s)", expiredAfter.Round(time.Millisecond))
	if expiredAfter < 3*time.Second {
		t.Fatalf("writes stopped waiting for the killed node %s after the kill, before any 10s lease renewed ~3s earlier could expire", expiredAfter)
	}
	for _, in := range []*instance{c.admin, c.nodes[2]} {
		if resp, got := in.get("/dead"); resp.StatusCode != 200 || got != "up" {
			t.Fatalf("a live node answers GET /dead right after its 2xx with %d %q", resp.StatusCode, got)
		}
	}
	resp, err := c.cli.Get(context.Background(), "/apisix/gw/nodes/"+killedID)
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the killed node's record is still in etcd after its lease expired: %v %v", resp, err)
	}
}
