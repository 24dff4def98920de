package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gw/internal/testetcd"
)

// Faults of a fleet on one etcd, on the real binary and a real etcd (Debian's
// etcd-server 3.4): etcd killed and restarted, a data_plane node restarted while etcd is
// down, a compaction while a node is behind, a node cut off by a network namespace. In
// each, nothing acknowledged is lost and every node ends at the same revision, serving
// the same routes. Convergence times are in the test log (go test -v).

// etcdView is a node's view of etcd, from `gwctl status --json`.
type etcdView struct {
	Reachable      bool
	Cached         bool
	ServedRevision int64
}

func (in *instance) etcdView() etcdView {
	in.t.Helper()
	out, err := in.gwctl("status", "--json")
	if err != nil {
		in.t.Fatalf("gwctl status: %v\n%s", err, out)
	}
	var s struct{ Etcd *etcdView }
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Etcd == nil {
		in.t.Fatalf("gwctl status --json has no Etcd: %v\n%s", err, out)
	}
	return *s.Etcd
}

// etcdNodeOn is etcdNode with its etcd at url (a proxy, an address seen from a netns).
func etcdNodeOn(t *testing.T, url, role string) *instance {
	return newInstance(t, etcdConfig(url, role))
}

func etcdConfig(url, role string) string {
	return fmt.Sprintf("worker_processes: 1\ndeployment:\n  role: %s\n  config_provider: etcd\n  etcd:\n    host: [%q]\n    write_timeout: 1s\n    timeout: 5s\n", role, url)
}

// etcdRevision is the revision of the newest config object in etcd: what every node must
// serve at least. etcd's own revision is no measure, as the nodes' records under
// /apisix/gw/ raise it too and are not config (a delete leaves no key behind: the paths
// converge checks cover those).
func etcdRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var newest int64
	for _, kind := range []string{"routes", "upstreams", "services", "consumers", "plugin_configs", "global_rules", "ssls"} {
		resp, err := cli.Get(ctx, "/apisix/"+kind+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatalf("etcd get: %v", err)
		}
		for _, kv := range resp.Kvs {
			newest = max(newest, kv.ModRevision)
		}
	}
	return newest
}

// lagsBehind sends an Admin API write while a node cannot serve it: it must be kept and
// answered 503 naming the node that lags.
func lagsBehind(t *testing.T, in *instance, method, path, body string) {
	t.Helper()
	if status, resp := in.adminCall(method, path, body); status != 503 || !strings.Contains(resp, "not yet served by nodes") {
		t.Fatalf("%s %s with a node cut off: %d %s, want 503 naming the node that lags", method, path, status, resp)
	}
}

// putDirect writes value at /apisix/key straight into etcd.
func putDirect(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/apisix/"+key, value); err != nil {
		t.Fatalf("etcd put %s: %v", key, err)
	}
}

// reachableAgain waits until in's etcd client answers again after an outage, and says how
// long that took from since.
func reachableAgain(t *testing.T, in *instance, since time.Time) time.Duration {
	t.Helper()
	if !waitFor(30*time.Second, func() bool { return in.etcdView().Reachable }) {
		t.Fatalf("%s does not reach etcd within 30s of it coming back\nerror.log:\n%s", in.prefix, lastLines(in.errorLog(), 20))
	}
	return time.Since(since)
}

// converge polls until every node serves at least revision atLeast and answers each path
// in want as want says: 200 with that body, or 404 for "". The revisions may differ: a
// node that lists again serves the list's revision, which counts the nodes' records under
// /apisix/gw/ too. It returns how long that took; a generous deadline, since it bounds
// behaviour, not speed.
func converge(t *testing.T, nodes []*instance, atLeast int64, want map[string]string) time.Duration {
	t.Helper()
	begin := time.Now()
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var state string
	ok := waitFor(30*time.Second, func() bool {
		var revisions []int64
		var wrong []string
		for i, in := range nodes {
			revisions = append(revisions, in.etcdView().ServedRevision)
			for _, p := range paths {
				resp, body := in.get(p)
				if wantBody := want[p]; (wantBody == "" && resp.StatusCode != 404) || (wantBody != "" && (resp.StatusCode != 200 || body != wantBody)) {
					wrong = append(wrong, fmt.Sprintf("node %d GET %s: %d %q", i, p, resp.StatusCode, body))
				}
			}
		}
		state = fmt.Sprintf("served revisions %v, want all >= %d; %s", revisions, atLeast, strings.Join(wrong, "; "))
		for _, r := range revisions {
			if r < atLeast {
				return false
			}
		}
		return len(wrong) == 0
	})
	if !ok {
		for i, in := range nodes {
			t.Logf("node %d error.log:\n%s", i, lastLines(in.errorLog(), 15))
		}
		t.Fatalf("the nodes did not converge within 30s: %s", state)
	}
	return time.Since(begin)
}

func (in *instance) deleteRoute(id string) {
	in.t.Helper()
	if status, body := in.adminCall("DELETE", "/apisix/admin/routes/"+id, ""); status != 200 {
		in.t.Fatalf("DELETE route %s: %d %s", id, status, body)
	}
}

// etcd SIGKILLed right after an acknowledged write, written to while down, restarted on
// the same data dir: the acknowledged writes are there, the refused one is not, and the
// writes made after the restart reach both nodes.
func TestEtcdKilledAndRestarted(t *testing.T) {
	srv, cli := startEtcd(t)
	up := startUpstream(t, "up")
	cp := etcdNode(t, srv, "traditional")
	cp.start()
	dp := etcdNode(t, srv, "data_plane")
	dp.start()
	nodes := []*instance{cp, dp}

	cp.putRoute("1", "/one", up.addr)
	cp.putRoute("2", "/two", up.addr)
	etcdPut(t, cli, "/apisix/routes/direct", routeJSON("/direct", up.addr))
	converge(t, nodes, etcdRevision(t, cli), map[string]string{"/one": "up", "/two": "up", "/direct": "up"})
	// The data plane may not have this one yet when etcd dies: it must get it afterwards.
	cp.putRoute("3", "/three", up.addr)
	srv.Kill()

	status, body := cp.adminCall("PUT", "/apisix/admin/routes/refused", routeJSON("/refused", up.addr))
	if status != 503 || !strings.Contains(body, "etcd") {
		t.Fatalf("PUT with etcd killed: %d %s, want 503 naming etcd", status, body)
	}
	for i, in := range nodes {
		if resp, got := in.get("/one"); resp.StatusCode != 200 || got != "up" {
			t.Fatalf("node %d GET /one with etcd killed: %d %q", i, resp.StatusCode, got)
		}
	}

	// The client retries inside its watch without a word; the error log must still say.
	for i, in := range nodes {
		if !waitFor(10*time.Second, func() bool { return strings.Contains(in.errorLog(), "etcd does not answer") }) {
			t.Fatalf("node %d's error log does not say etcd is down within 10s:\n%s", i, lastLines(in.errorLog(), 10))
		}
	}

	restarted := time.Now()
	srv.Start()
	t.Logf("etcd restarted; the traditional node reached it again after %v", reachableAgain(t, cp, restarted))
	cp.putRoute("4", "/four", up.addr)
	cp.deleteRoute("2")
	etcdPut(t, cli, "/apisix/routes/5", routeJSON("/five", up.addr))
	took := converge(t, nodes, etcdRevision(t, cli), map[string]string{
		"/one": "up", "/two": "", "/three": "up", "/direct": "up", "/four": "up", "/five": "up", "/refused": "",
	})
	t.Logf("both nodes converged %v after the last write, %v after etcd's restart", took, time.Since(restarted))
	for i, in := range nodes {
		if !waitFor(10*time.Second, func() bool { return strings.Contains(in.errorLog(), "etcd answers again") }) {
			t.Fatalf("node %d's error log does not say etcd answers again:\n%s", i, lastLines(in.errorLog(), 10))
		}
	}
	resp, err := cli.Get(context.Background(), "/apisix/routes/refused")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the write refused with 503 while etcd was down is in etcd: %v %v", resp.Kvs, err)
	}
}

// waitCached waits until in's data_dir/etcd-cache.json holds revision at least rev.
func waitCached(t *testing.T, in *instance, rev int64) {
	t.Helper()
	path := filepath.Join(in.prefix, "data", "etcd-cache.json")
	var got int64
	if !waitFor(10*time.Second, func() bool {
		var c struct{ Revision int64 }
		data, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(data, &c) == nil {
			got = c.Revision
		}
		return got >= rev
	}) {
		t.Fatalf("%s holds revision %d after 10s, want %d", path, got, rev)
	}
}

// A data_plane node restarted while etcd is down serves its cached copy and says so, then
// catches up with what was written while it was cut off from the truth.
func TestEtcdDataPlaneRestartedWhileEtcdDown(t *testing.T) {
	srv, cli := startEtcd(t)
	up := startUpstream(t, "up")
	cp := etcdNode(t, srv, "traditional")
	cp.start()
	dp := etcdNode(t, srv, "data_plane")
	dp.start()
	nodes := []*instance{cp, dp}

	cp.putRoute("1", "/one", up.addr)
	cp.putRoute("2", "/two", up.addr)
	rev := etcdRevision(t, cli)
	converge(t, nodes, rev, map[string]string{"/one": "up", "/two": "up"})
	waitCached(t, dp, rev)

	srv.Kill()
	dp.stop()
	begin := time.Now()
	dp.start()
	t.Logf("the data_plane node started in %v with etcd down", time.Since(begin))
	for _, p := range []string{"/one", "/two"} {
		if resp, got := dp.get(p); resp.StatusCode != 200 || got != "up" {
			t.Fatalf("GET %s on the node started from its cache: %d %q", p, resp.StatusCode, got)
		}
	}
	if v := dp.etcdView(); !v.Cached || v.Reachable || v.ServedRevision != rev {
		t.Fatalf("status of the node started from its cache: %+v, want cached, unreachable, revision %d", v, rev)
	}
	if out, _ := dp.gwctl("status"); !strings.Contains(out, "CACHED") {
		t.Fatalf("gwctl status does not say CACHED:\n%s", out)
	}
	if _, m := getOn(t, dp.metrics, "/apisix/prometheus/metrics"); !strings.Contains(m, "gw_config_cached 1") || !strings.Contains(m, "apisix_etcd_reachable 0") {
		t.Fatalf("metrics of the node started from its cache lack gw_config_cached 1 and apisix_etcd_reachable 0:\n%s", m)
	}

	restarted := time.Now()
	srv.Start()
	reachableAgain(t, cp, restarted)
	cp.putRoute("3", "/three", up.addr)
	cp.deleteRoute("1")
	took := converge(t, nodes, etcdRevision(t, cli), map[string]string{"/one": "", "/two": "up", "/three": "up"})
	t.Logf("the node started from its cache caught up %v after etcd's restart (%v after the last write)", time.Since(restarted), took)
	if v := dp.etcdView(); v.Cached {
		t.Fatalf("the node still says it serves its cache after catching up: %+v", v)
	}
}

// A node whose connection to etcd is cut (a proxy closes it) misses writes and a
// compaction past them; healed, its watch finds its revision compacted, it lists again and
// ends where the others are: deleted routes gone, moved ones moved, nothing lost.
func TestEtcdCompactionWhileNodeBehind(t *testing.T) {
	srv, cli := startEtcd(t)
	proxy := srv.NewProxy()
	up := startUpstream(t, "up")
	cp := etcdNode(t, srv, "traditional")
	cp.start()
	dp := etcdNodeOn(t, proxy.URL, "data_plane")
	dp.start()
	nodes := []*instance{cp, dp}

	cp.putRoute("1", "/one", up.addr)
	cp.putRoute("2", "/two", up.addr)
	converge(t, nodes, etcdRevision(t, cli), map[string]string{"/one": "up", "/two": "up"})
	behind := dp.etcdView().ServedRevision

	proxy.Cut()
	if !waitFor(10*time.Second, func() bool { return !dp.etcdView().Reachable }) {
		t.Fatal("the cut-off node still says etcd is reachable after 10s")
	}
	lagsBehind(t, cp, "DELETE", "/apisix/admin/routes/1", "")
	putDirect(t, cli, "routes/2", fmt.Sprintf(`{"id":"2","uri":"/two-moved","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr))
	putDirect(t, cli, "routes/3", fmt.Sprintf(`{"id":"3","uri":"/three","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr))
	compactAt := etcdRevision(t, cli)
	srv.Etcdctl("compact", fmt.Sprint(compactAt))
	putDirect(t, cli, "routes/4", fmt.Sprintf(`{"id":"4","uri":"/four","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr))
	if v := dp.etcdView(); v.ServedRevision != behind {
		t.Fatalf("the cut-off node serves revision %d, want %d: the cut did not hold", v.ServedRevision, behind)
	}

	healed := time.Now()
	proxy.Heal()
	converge(t, nodes, etcdRevision(t, cli), map[string]string{
		"/one": "", "/two": "", "/two-moved": "up", "/three": "up", "/four": "up",
	})
	t.Logf("the node behind a compaction (at %d, it had %d) converged %v after the heal", compactAt, behind, time.Since(healed))
	if log := dp.errorLog(); !strings.Contains(log, "compacted") || !strings.Contains(log, "listing everything again") {
		t.Fatalf("the node's error log does not say it listed again after the compaction:\n%s", lastLines(log, 20))
	}
}

// netnsLink is a network namespace joined to this one by a veth pair on a private /30:
// hostIP on this side, nsIP inside.
type netnsLink struct {
	t            *testing.T
	ns           string
	hostIf, nsIf string
	hostIP, nsIP string
}

// newNetnsLink makes the namespace and the pair, removed when the test ends, failed or
// not; it skips t where namespaces are not permitted.
func newNetnsLink(t *testing.T) *netnsLink {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) is not installed: skipping the network-namespace test")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	l := &netnsLink{t: t, ns: "gwt-" + tag, hostIf: "gwt" + tag + "h", nsIf: "gwt" + tag + "n"}
	if out, err := exec.Command("ip", "netns", "add", l.ns).CombinedOutput(); err != nil {
		t.Skipf("network namespaces are not permitted here (needs root or CAP_NET_ADMIN): ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		// Deleting one end of a veth pair deletes both.
		_ = exec.Command("ip", "link", "del", l.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", l.ns).Run()
	})
	l.hostIP, l.nsIP = freeSubnet(t)
	if out, err := exec.Command("ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", l.nsIf).CombinedOutput(); err != nil {
		t.Skipf("veth pairs are not permitted here: ip link add: %v: %s", err, bytes.TrimSpace(out))
	}
	l.ip("link", "set", l.nsIf, "netns", l.ns)
	l.ip("addr", "add", l.hostIP+"/30", "dev", l.hostIf)
	l.ip("link", "set", l.hostIf, "up")
	l.ip("-n", l.ns, "addr", "add", l.nsIP+"/30", "dev", l.nsIf)
	l.ip("-n", l.ns, "link", "set", l.nsIf, "up")
	l.ip("-n", l.ns, "link", "set", "lo", "up")
	return l
}

// freeSubnet picks a /30 in 10.200.0.0/13 that no interface here has an address in.
func freeSubnet(t *testing.T) (hostIP, nsIP string) {
	t.Helper()
	out, err := exec.Command("ip", "-o", "-4", "addr").Output()
	if err != nil {
		t.Fatalf("ip addr: %v", err)
	}
	for range 100 {
		n, _ := rand.Int(rand.Reader, big.NewInt(8<<16))
		v := n.Int64()
		a, b, c := 200+v>>16, (v>>8)&0xff, v&0xfc
		if !strings.Contains(string(out), fmt.Sprintf(" 10.%d.%d.", a, b)) {
			return fmt.Sprintf("10.%d.%d.%d", a, b, c+1), fmt.Sprintf("10.%d.%d.%d", a, b, c+2)
		}
	}
	t.Fatal("no free /30 in 10.200.0.0/13")
	return "", ""
}

func (l *netnsLink) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cut takes this side of the pair down: the node inside keeps running and serving, and
// every packet to or from etcd is lost, as in a partition (no reset, no refusal).
func (l *netnsLink) cut()  { l.ip("link", "set", l.hostIf, "down") }
func (l *netnsLink) heal() { l.ip("link", "set", l.hostIf, "up") }

// getInside sends GET path to address from inside the namespace (bash's /dev/tcp), for
// when this side cannot reach it; it returns the status line and the body.
func (l *netnsLink) getInside(address, path string) (string, string) {
	l.t.Helper()
	host, port, _ := net.SplitHostPort(address)
	script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%s && printf 'GET %s HTTP/1.0\r\nHost: gw\r\n\r\n' >&3 && timeout 10 cat <&3`, host, port, path)
	out, err := exec.Command("ip", "netns", "exec", l.ns, "bash", "-c", script).CombinedOutput()
	if err != nil {
		l.t.Fatalf("GET %s inside %s: %v: %s", path, l.ns, err, out)
	}
	head, body, _ := strings.Cut(string(out), "\r\n\r\n")
	status, _, _ := strings.Cut(head, "\r\n")
	return status, body
}

// A data_plane node in its own network namespace, cut off from etcd by taking its link
// down while writes go through another node, keeps serving; healed, it converges.
func TestEtcdNodeCutOffByNetns(t *testing.T) {
	link := newNetnsLink(t)
	srv := testetcd.StartOn(t, freePort(t), freePort(t), link.hostIP)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	// The upstream listens where both nodes reach it: the host side of the pair.
	up := startUpstreamAt(t, net.JoinHostPort(link.hostIP, "0"), "up")
	cp := etcdNode(t, srv, "traditional")
	cp.start()

	// The node inside listens on its side of the pair and reaches etcd at the host's.
	dp := &instance{t: t, prefix: t.TempDir(),
		data:    net.JoinHostPort(link.nsIP, fmt.Sprint(freePort(t))),
		metrics: net.JoinHostPort(link.nsIP, fmt.Sprint(freePort(t)))}
	dp.writeConfig(fmt.Sprintf("node_listen:\n  - %q\n%s", dp.data, etcdConfig(srv.URLOn(link.hostIP), "data_plane")))
	if out, err := exec.Command("ip", "netns", "exec", link.ns, gwctl, "start", "--prefix", dp.prefix).CombinedOutput(); err != nil {
		t.Fatalf("gwctl start inside %s: %v\n%s\nerror.log:\n%s", link.ns, err, out, dp.errorLog())
	}
	t.Cleanup(func() { _, _ = dp.gwctl("stop") }) // runs before the namespace goes
	nodes := []*instance{cp, dp}

	cp.putRoute("1", "/one", up)
	cp.putRoute("2", "/two", up)
	// Cut off, the node reaches no upstream either; a route that answers by itself (key-auth,
	// no key: 401) shows it still serves its config.
	cp.mustPut("/apisix/admin/routes/guarded", fmt.Sprintf(`{"uri":"/guarded","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up))
	converge(t, nodes, etcdRevision(t, cli), map[string]string{"/one": "up", "/two": "up"})
	behind := dp.etcdView().ServedRevision

	cutAt := time.Now()
	link.cut()
	if !waitFor(15*time.Second, func() bool { return !dp.etcdView().Reachable }) {
		t.Fatal("the node cut off still says etcd is reachable after 15s")
	}
	t.Logf("the cut-off node reported etcd unreachable after %v", time.Since(cutAt))
	// A write through the Admin API is kept and answered 503 naming the node cut off,
	// which cannot serve it (cluster-wide read-your-writes); the rest go straight into
	// etcd, as etcdctl or a dashboard writes, without waiting for the node each time.
	lagsBehind(t, cp, "DELETE", "/apisix/admin/routes/1", "")
	putDirect(t, cli, "routes/2", fmt.Sprintf(`{"id":"2","uri":"/two-moved","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up))
	putDirect(t, cli, "routes/3", fmt.Sprintf(`{"id":"3","uri":"/three","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up))
	if status, body := link.getInside(dp.data, "/guarded"); !strings.Contains(status, " 401 ") {
		t.Fatalf("GET /guarded on the cut-off node: %q %q, want key-auth's 401: its last config served", status, body)
	}
	if status, _ := link.getInside(dp.data, "/nowhere"); !strings.Contains(status, " 404 ") {
		t.Fatalf("GET /nowhere on the cut-off node: %q, want 404", status)
	}
	if v := dp.etcdView(); v.ServedRevision != behind {
		t.Fatalf("the cut-off node serves revision %d, want %d: the cut did not hold", v.ServedRevision, behind)
	}

	// Hold the cut past the client's keepalive (2 s, then 2 s for the answer), so the node
	// tears its connection down and must dial again through the healed link.
	time.Sleep(time.Until(cutAt.Add(6 * time.Second)))
	healed := time.Now()
	link.heal()
	converge(t, nodes, etcdRevision(t, cli), map[string]string{"/one": "", "/two": "", "/two-moved": "up", "/three": "up"})
	t.Logf("the cut-off node converged %v after the heal", time.Since(healed))
}
