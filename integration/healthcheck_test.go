package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// switchableBackend is a real HTTP backend at a fixed address that can be stopped and
// started again on it, and told to answer 500.
type switchableBackend struct {
	t       *testing.T
	addr    string
	body    string
	failing atomic.Bool
	srv     *http.Server
}

func startSwitchable(t *testing.T, body string) *switchableBackend {
	t.Helper()
	b := &switchableBackend{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), body: body}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *switchableBackend) start() {
	b.t.Helper()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		b.t.Fatalf("listening on %s again: %v", b.addr, err)
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
		io.WriteString(w, b.body)
	})}
	go b.srv.Serve(ln)
}

func (b *switchableBackend) stop() {
	if b.srv != nil {
		b.srv.Close()
	}
}

// upstreamStatus reads apisix_upstream_status for node addr of upstream 1: 1, 0, or -1
// when the series is missing.
func (in *metricsInstance) upstreamStatus(addr string) float64 {
	in.t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	f := in.scrape()["apisix_upstream_status"]
	if f == nil {
		return -1
	}
	for _, s := range f.Samples {
		if s.Labels["name"] == "/apisix/upstreams/1" && s.Labels["ip"] == host && s.Labels["port"] == port {
			return s.Value
		}
	}
	return -1
}

// putCheckedUpstream stores upstream 1 over a and b with checks, and route 1 to it. No
// retries: a request sent to a dead node fails, so only health checks keep traffic off it.
func (in *metricsInstance) putCheckedUpstream(checks string, a, b string) {
	in.t.Helper()
	body := fmt.Sprintf(`{"type":"roundrobin","retries":0,"nodes":{%q:1,%q:1},"checks":%s}`, a, b, checks)
	if status, resp := in.adminCall("PUT", "/apisix/admin/upstreams/1", body); status != 200 && status != 201 {
		in.t.Fatalf("PUT upstream: %d %s", status, resp)
	}
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", `{"uri":"/hc","upstream_id":"1"}`); status != 200 && status != 201 {
		in.t.Fatalf("PUT route: %d %s", status, resp)
	}
}

// bodies sends n requests on fresh connections (so both workers serve some) and counts
// the answers by "status body".
func (in *metricsInstance) bodies(n int) map[string]int {
	in.t.Helper()
	seen := map[string]int{}
	for range n {
		resp, body := in.get("/hc")
		seen[fmt.Sprintf("%d %s", resp.StatusCode, body)]++
	}
	return seen
}

func TestHealthCheckActiveMarksDeadNodeDownAndBack(t *testing.T) {
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	a, b := startSwitchable(t, "A"), startSwitchable(t, "B")
	in.putCheckedUpstream(`{"active":{"type":"http","http_path":"/health","timeout":1,`+
		`"healthy":{"interval":1,"successes":1},"unhealthy":{"interval":1,"tcp_failures":1}}}`, a.addr, b.addr)

	if got := in.bodies(10); got["200 A"] == 0 || got["200 B"] == 0 {
		t.Fatalf("both nodes healthy: answers %v, want both", got)
	}
	if got := in.upstreamStatus(b.addr); got != 1 {
		t.Fatalf("apisix_upstream_status for B = %g, want 1", got)
	}

	b.stop()
	if !waitFor(10*time.Second, func() bool { return in.upstreamStatus(b.addr) == 0 }) {
		t.Fatalf("B stopped: apisix_upstream_status never went to 0\n%s", lastLines(in.errorLog(), 20))
	}
	if got := in.bodies(20); got["200 A"] != 20 {
		t.Errorf("B marked down: answers %v, want all 20 from A", got)
	}
	if got := in.upstreamStatus(a.addr); got != 1 {
		t.Errorf("apisix_upstream_status for A = %g, want 1", got)
	}
	if log := in.errorLog(); !strings.Contains(log, "node "+b.addr+" is unhealthy (active check: TCP failure)") {
		t.Errorf("no log line for B going down:\n%s", lastLines(log, 20))
	}

	b.start()
	if !waitFor(10*time.Second, func() bool { return in.upstreamStatus(b.addr) == 1 }) {
		t.Fatalf("B restarted: apisix_upstream_status never went back to 1")
	}
	if got := in.bodies(10); got["200 B"] == 0 || got["200 A"]+got["200 B"] != 10 {
		t.Errorf("B back: answers %v, want traffic to B again", got)
	}
}

func TestHealthCheckPassiveMarksFailingNodeDownAndBack(t *testing.T) {
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	a, b := startSwitchable(t, "A"), startSwitchable(t, "B")
	// Healthy nodes are probed only every 5 minutes, so detection is the passive check's
	// alone; unhealthy ones every second, so a node that recovers comes back.
	in.putCheckedUpstream(`{"active":{"timeout":1,"healthy":{"interval":300,"successes":1},"unhealthy":{"interval":1}},`+
		`"passive":{"unhealthy":{"http_statuses":[500],"http_failures":2}}}`, a.addr, b.addr)
	if got := in.bodies(10); got["200 A"] == 0 || got["200 B"] == 0 {
		t.Fatalf("both nodes healthy: answers %v, want both", got)
	}

	b.failing.Store(true)
	// Each worker counts into the same entry: two 500s from B in all take it out.
	failures := 0
	if !waitFor(10*time.Second, func() bool {
		resp, _ := in.get("/hc")
		if resp.StatusCode == 500 {
			failures++
		}
		return failures >= 2 && in.upstreamStatus(b.addr) == 0
	}) {
		t.Fatalf("B answering 500: still healthy after %d failures\n%s", failures, lastLines(in.errorLog(), 20))
	}
	if failures > 3 {
		t.Errorf("%d requests failed before B was taken out, want 2 (3 if a request was in flight)", failures)
	}
	if got := in.bodies(20); got["200 A"] != 20 {
		t.Errorf("B marked down: answers %v, want all 20 from A", got)
	}

	b.failing.Store(false)
	if !waitFor(10*time.Second, func() bool { return in.upstreamStatus(b.addr) == 1 }) {
		t.Fatalf("B healthy again: apisix_upstream_status never went back to 1")
	}
	if got := in.bodies(10); got["200 B"] == 0 || got["200 A"]+got["200 B"] != 10 {
		t.Errorf("B back: answers %v, want traffic to B again", got)
	}
}

func TestHealthCheckPassiveRefusedConnections(t *testing.T) {
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	a, b := startSwitchable(t, "A"), startSwitchable(t, "B")
	in.putCheckedUpstream(`{"active":{"healthy":{"interval":300},"unhealthy":{"interval":300}},`+
		`"passive":{"unhealthy":{"tcp_failures":1}}}`, a.addr, b.addr)
	b.stop()
	if !waitFor(10*time.Second, func() bool {
		in.get("/hc")
		return in.upstreamStatus(b.addr) == 0
	}) {
		t.Fatal("B refusing connections: never marked down")
	}
	if got := in.bodies(20); got["200 A"] != 20 {
		t.Errorf("B marked down: answers %v, want all 20 from A", got)
	}
}
