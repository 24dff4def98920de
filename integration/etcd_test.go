package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/internal/testetcd"
)

// The etcd provider on the real binary against a real etcd (Debian's etcd-server; the
// tests skip without it). Each case starts its own etcd on free ports.

func startEtcd(t *testing.T) (*testetcd.Server, *clientv3.Client) {
	t.Helper()
	srv := testetcd.StartOn(t, freePort(t), freePort(t))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}

// etcdNode is a gw instance on etcd with the given role.
func etcdNode(t *testing.T, srv *testetcd.Server, role string) *instance {
	return newInstance(t, fmt.Sprintf("worker_processes: 1\ndeployment:\n  role: %s\n  config_provider: etcd\n  etcd:\n    host: [%q]\n    write_timeout: 1s\n    timeout: 5s\n",
		role, srv.ClientURL))
}

func etcdPut(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, key, value)
	if err != nil {
		t.Fatalf("etcd put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// servedWithin polls path on in's data plane until it answers body, or fails.
func servedWithin(t *testing.T, in *instance, path, body string) {
	t.Helper()
	var last string
	ok := waitFor(10*time.Second, func() bool {
		resp, got := in.get(path)
		last = fmt.Sprintf("%d %s", resp.StatusCode, got)
		return resp.StatusCode == 200 && got == body
	})
	if !ok {
		t.Fatalf("GET %s on %s: %s, want 200 %q within 10s\nerror.log:\n%s", path, in.data, last, body, lastLines(in.errorLog(), 20))
	}
}

func routeJSON(uri, node string) string {
	return fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, node)
}

// A node on etcd serves what its Admin API writes (at once: the write returns once the
// workers serve it), what etcdctl writes (shortly after), and leaves out a bad object
// written into etcd while the rest serves. Indexes are etcd's revisions, as APISIX's.
func TestEtcdNodeServesAdminAndDirectWrites(t *testing.T) {
	srv, cli := startEtcd(t)
	up := startUpstream(t, "up")
	in := etcdNode(t, srv, "traditional")
	in.start()

	in.putRoute("1", "/admin", up.addr)
	if resp, body := in.get("/admin"); resp.StatusCode != 200 || body != "up" {
		t.Fatalf("GET /admin right after the PUT: %d %s", resp.StatusCode, body)
	}
	kv, err := cli.Get(context.Background(), "/apisix/routes/1")
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("route 1 is not in etcd under /apisix/routes/1: %v", err)
	}
	_, got := in.adminCall("GET", "/apisix/admin/routes/1", "")
	item := decodeJSON(t, got)
	if item["modifiedIndex"] != float64(kv.Kvs[0].ModRevision) || item["createdIndex"] != float64(kv.Kvs[0].CreateRevision) {
		t.Fatalf("GET route 1: %s; etcd's revisions are %d/%d", got, kv.Kvs[0].CreateRevision, kv.Kvs[0].ModRevision)
	}
	// POST ids are etcd revisions, 20 digits (apisix/core/etcd.lua push).
	status, got := in.adminCall("POST", "/apisix/admin/routes", routeJSON("/posted", up.addr))
	if status != 201 || !strings.Contains(got, `"key":"/apisix/routes/000000000000000000`) {
		t.Fatalf("POST: %d %s", status, got)
	}
	// PATCH: a compare-and-swap that succeeds when nothing changed in between.
	if status, got := in.adminCall("PATCH", "/apisix/admin/routes/1", `{"uri":"/patched"}`); status != 200 {
		t.Fatalf("PATCH: %d %s", status, got)
	}
	servedWithin(t, in, "/patched", "up")

	etcdPut(t, cli, "/apisix/routes/direct", routeJSON("/direct", up.addr))
	servedWithin(t, in, "/direct", "up")

	etcdPut(t, cli, "/apisix/routes/bad", `{"uri":"/bad","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":"heavy"}}}`)
	etcdPut(t, cli, "/apisix/routes/after", routeJSON("/after", up.addr))
	servedWithin(t, in, "/after", "up")
	if resp, _ := in.get("/bad"); resp.StatusCode != 404 {
		t.Fatalf("GET /bad: %d, want 404: the bad object is left out", resp.StatusCode)
	}
	out, _ := in.gwctl("status")
	if !strings.Contains(out, "routes/bad") || !strings.Contains(out, "etcd "+srv.ClientURL) {
		t.Fatalf("gwctl status does not name the left-out route and etcd:\n%s", out)
	}
	if !strings.Contains(in.errorLog(), "object routes/bad in etcd is left out") {
		t.Fatalf("error.log does not name routes/bad:\n%s", lastLines(in.errorLog(), 20))
	}
	_, metrics := getOn(t, in.metrics, "/apisix/prometheus/metrics")
	for _, want := range []string{"apisix_etcd_reachable 1", `apisix_etcd_modify_indexes{key="routes"}`, "gw_config_left_out_objects 1", "gw_config_cached 0"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// etcd down: the node serves on, a write answers 503 within write_timeout, reachability
// drops; etcd back: the node catches up. Restarted while etcd is down, the node serves its
// cached copy and says so.
func TestEtcdDownServesAndCatchesUp(t *testing.T) {
	srv, cli := startEtcd(t)
	up := startUpstream(t, "up")
	in := etcdNode(t, srv, "traditional")
	in.start()
	in.putRoute("1", "/one", up.addr)

	srv.Stop()
	start := time.Now()
	status, body := in.adminCall("PUT", "/apisix/admin/routes/2", routeJSON("/two", up.addr))
	if took := time.Since(start); status != http.StatusServiceUnavailable || took > 4*time.Second || !strings.Contains(body, "etcd") {
		t.Fatalf("PUT with etcd down: %d %s after %v; want 503 naming etcd within write_timeout (1s) and a margin", status, body, took)
	}
	if resp, got := in.get("/one"); resp.StatusCode != 200 || got != "up" {
		t.Fatalf("GET /one with etcd down: %d %s", resp.StatusCode, got)
	}
	if !waitFor(5*time.Second, func() bool {
		_, m := getOn(t, in.metrics, "/apisix/prometheus/metrics")
		return strings.Contains(m, "apisix_etcd_reachable 0")
	}) {
		t.Fatal("apisix_etcd_reachable is not 0 within 5s of etcd stopping")
	}

	srv.Start()
	etcdPut(t, cli, "/apisix/routes/3", routeJSON("/three", up.addr))
	servedWithin(t, in, "/three", "up")

	// The cache is written within a second of a change; give it two.
	time.Sleep(2 * time.Second)
	in.stop()
	srv.Stop()
	in.start()
	servedWithin(t, in, "/three", "up")
	servedWithin(t, in, "/one", "up")
	out, _ := in.gwctl("status")
	if !strings.Contains(out, "CACHED") {
		t.Fatalf("gwctl status does not say the config is cached:\n%s", out)
	}
	if !strings.Contains(in.errorLog(), "serving the cached config") {
		t.Fatalf("error.log does not say the config is cached:\n%s", lastLines(in.errorLog(), 20))
	}
	_, m := getOn(t, in.metrics, "/apisix/prometheus/metrics")
	if !strings.Contains(m, "gw_config_cached 1") {
		t.Fatal("gw_config_cached is not 1 on a node serving its cache")
	}
	srv.Start()
	etcdPut(t, cli, "/apisix/routes/4", routeJSON("/four", up.addr))
	servedWithin(t, in, "/four", "up")
	if out, _ := in.gwctl("status"); strings.Contains(out, "CACHED") {
		t.Fatalf("gwctl status still says cached after etcd answered:\n%s", out)
	}
}

// Two nodes on one etcd, a traditional one and a data_plane one: a write through the
// first is served by both, and the data plane has no Admin API.
func TestEtcdTwoNodes(t *testing.T) {
	srv, _ := startEtcd(t)
	up := startUpstream(t, "up")
	cp := etcdNode(t, srv, "traditional")
	cp.start()
	dp := etcdNode(t, srv, "data_plane")
	dp.start()

	cp.putRoute("1", "/both", up.addr)
	servedWithin(t, cp, "/both", "up")
	servedWithin(t, dp, "/both", "up")
	if _, err := http.Get("http://" + dp.admin + "/apisix/admin/routes"); err == nil {
		t.Fatal("the data_plane node listens on admin.listen")
	}
}

// A control_plane node serves the Admin API alone: no data listener, and what it writes
// a data_plane node serves.
func TestEtcdControlPlane(t *testing.T) {
	srv, _ := startEtcd(t)
	up := startUpstream(t, "up")
	cp := etcdNode(t, srv, "control_plane")
	cp.start()
	dp := etcdNode(t, srv, "data_plane")
	dp.start()
	cp.putRoute("1", "/cp", up.addr)
	servedWithin(t, dp, "/cp", "up")
	if _, err := http.Get("http://" + cp.data + "/cp"); err == nil {
		t.Fatal("the control_plane node listens on node_listen")
	}
}
