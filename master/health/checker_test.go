package health

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gw/conf"
	"gw/shm"
)

func TestMain(m *testing.M) {
	intervalUnit = 20 * time.Millisecond
	m.Run()
}

type testLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *testLog) Infof(format string, args ...any) { l.add(format, args...) }
func (l *testLog) Warnf(format string, args ...any) { l.add(format, args...) }
func (l *testLog) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *testLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func newTable(t *testing.T) *shm.HealthTable {
	t.Helper()
	seg, err := shm.Create(shm.HealthLayout, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := shm.InitHealthTable(seg); err != nil {
		t.Fatal(err)
	}
	table, err := shm.OpenHealthTable(seg)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// snapshotWith is a snapshot with upstream 1 over addrs and the given checks JSON.
func snapshotWith(t *testing.T, checks string, addrs ...string) *conf.Snapshot {
	t.Helper()
	nodes := make([]string, len(addrs))
	for i, a := range addrs {
		nodes[i] = fmt.Sprintf("%q:1", a)
	}
	u, err := conf.DecodeUpstream([]byte(`{"id":"1","nodes":{` + strings.Join(nodes, ",") + `},"checks":` + checks + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return &conf.Snapshot{Upstreams: []conf.Upstream{*u}}
}

func healthOf(table *shm.HealthTable, name, addr string) (healthy, found bool) {
	n, ok := table.Lookup(shm.HealthKey(name, addr))
	return n.Healthy(), ok
}

// waitFor polls cond for up to 5 s: generous, since a probe round is 20-60 ms here.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// switchable answers with status, which the test changes.
type switchable struct {
	status atomic.Int32
	hits   atomic.Int64
	last   atomic.Pointer[http.Request]
	delay  atomic.Int64
}

// serveStatus starts a node answering status (until the test changes it), closed when the
// test ends, and returns it with its address.
func serveStatus(t *testing.T, status int) (*switchable, string) {
	t.Helper()
	s := new(switchable)
	s.status.Store(int32(status))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.Listener.Addr().String()
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.last.Store(r.Clone(r.Context()))
	if d := s.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	w.WriteHeader(int(s.status.Load()))
}

func TestHTTPProbesMarkDownAndUp(t *testing.T) {
	_, ga := serveStatus(t, 200)
	bad, ba := serveStatus(t, 500)

	table, log := newTable(t), &testLog{}
	c := New(table, log)
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"healthy":{"successes":2},"unhealthy":{"http_failures":2}}}`, ga, ba))
	for _, a := range []string{ga, ba} {
		if healthy, found := healthOf(table, "/apisix/upstreams/1", a); !found || !healthy {
			t.Fatalf("%s: found %v healthy %v right after Update; want a healthy entry", a, found, healthy)
		}
	}
	waitFor(t, "the 500 node is unhealthy", func() bool { h, _ := healthOf(table, "/apisix/upstreams/1", ba); return !h })
	if h, _ := healthOf(table, "/apisix/upstreams/1", ga); !h {
		t.Error("the 200 node went unhealthy")
	}
	if !log.has("upstream /apisix/upstreams/1 node " + ba + " is unhealthy (active check: HTTP failure)") {
		t.Errorf("no log line for the change: %q", log.lines)
	}
	statuses := c.Statuses()
	if len(statuses) != 2 {
		t.Fatalf("statuses %+v", statuses)
	}
	for _, s := range statuses {
		if want := s.Host+":"+s.Port == ga; s.Healthy != want || s.Name != "/apisix/upstreams/1" {
			t.Errorf("status %+v", s)
		}
	}
	bad.status.Store(200)
	waitFor(t, "the node is back", func() bool { h, _ := healthOf(table, "/apisix/upstreams/1", ba); return h })
}

func TestHTTPProbeSendsTheConfiguredRequest(t *testing.T) {
	s, addr := serveStatus(t, 200)
	table := newTable(t)
	c := New(table, &testLog{})
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"http_method":"POST","http_path":"/status?full=1","host":"health.example",`+
		`"http_req_body":"ping","req_headers":["X-Probe: yes","X-Two:  2  "]}}`, addr, "127.0.0.1:1"))
	waitFor(t, "a probe arrived", func() bool { return s.hits.Load() > 0 })
	r := s.last.Load()
	if r.Method != "POST" || r.URL.RequestURI() != "/status?full=1" || r.Host != "health.example" ||
		r.Header.Get("X-Probe") != "yes" || r.Header.Get("X-Two") != "2" || r.ContentLength != 4 {
		t.Errorf("probe: %s %s Host %q headers %v length %d", r.Method, r.URL.RequestURI(), r.Host, r.Header, r.ContentLength)
	}
}

func TestStatusInNeitherListCountsNothing(t *testing.T) {
	s, addr := serveStatus(t, 418)
	table := newTable(t)
	c := New(table, &testLog{})
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"unhealthy":{"http_failures":1}}}`, addr, "127.0.0.1:1"))
	waitFor(t, "several probes", func() bool { return s.hits.Load() >= 3 })
	n, _ := table.Lookup(shm.HealthKey("/apisix/upstreams/1", addr))
	if sc, h, tc, to := n.Counters(); !n.Healthy() || sc+h+tc+to != 0 {
		t.Errorf("418 counted: healthy %v counters %d %d %d %d", n.Healthy(), sc, h, tc, to)
	}
}

func TestTCPProbesMarkDownAndUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go acceptAll(ln)
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go acceptAll(other)

	table := newTable(t)
	c := New(table, &testLog{})
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"type":"tcp","healthy":{"successes":1},"unhealthy":{"tcp_failures":2}}}`, addr, other.Addr().String()))
	name := "/apisix/upstreams/1"
	ln.Close() // refused from now on
	waitFor(t, "the closed port is unhealthy", func() bool { h, _ := healthOf(table, name, addr); return !h })
	if h, _ := healthOf(table, name, other.Addr().String()); !h {
		t.Error("the open port went unhealthy")
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer again.Close()
	go acceptAll(again)
	waitFor(t, "the reopened port is healthy", func() bool { h, _ := healthOf(table, name, addr); return h })
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func TestSlowAnswersCountAsTimeouts(t *testing.T) {
	slow, addr := serveStatus(t, 200)
	slow.delay.Store(int64(300 * time.Millisecond))
	table, log := newTable(t), &testLog{}
	c := New(table, log)
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"timeout":0.05,"unhealthy":{"timeouts":1}}}`, addr, "127.0.0.1:1"))
	waitFor(t, "the slow node is unhealthy", func() bool { h, _ := healthOf(table, "/apisix/upstreams/1", addr); return !h })
	if !log.has(addr + " is unhealthy (active check: timeout)") {
		t.Errorf("not counted as a timeout: %q", log.lines)
	}
}

func TestUpdateFollowsTheConfig(t *testing.T) {
	s, addr := serveStatus(t, 500)
	table := newTable(t)
	c := New(table, &testLog{})
	snap := snapshotWith(t, `{"active":{"unhealthy":{"http_failures":1}}}`, addr, "127.0.0.1:1")
	c.Update(snap)
	name := "/apisix/upstreams/1"
	waitFor(t, "unhealthy", func() bool { h, _ := healthOf(table, name, addr); return !h })

	// The same snapshot again (another object changed) keeps the prober and the state.
	c.Update(snap)
	if h, found := healthOf(table, name, addr); h || !found {
		t.Errorf("an unrelated update reset the node: healthy %v found %v", h, found)
	}
	// Dropping the checks gives the entries up.
	u := snap.Upstreams[0]
	u.Checks = nil
	c.Update(&conf.Snapshot{Upstreams: []conf.Upstream{u}})
	if _, found := healthOf(table, name, addr); found {
		t.Error("the entry of an upstream without checks is still in the table")
	}
	if len(c.Statuses()) != 0 {
		t.Errorf("statuses %+v", c.Statuses())
	}
	// An inline upstream of a route is kept under the route's key.
	route := conf.Route{ID: "7", Upstream: &snap.Upstreams[0]}
	c.Update(&conf.Snapshot{Routes: []conf.Route{route}})
	if _, found := healthOf(table, "/apisix/routes/7", addr); !found {
		t.Error("no entry under /apisix/routes/7")
	}
	c.Stop()
	hits := s.hits.Load()
	time.Sleep(10 * intervalUnit)
	if s.hits.Load() != hits {
		t.Error("probes went on after Stop")
	}
	c.Update(snap) // after Stop: nothing
	time.Sleep(5 * intervalUnit)
	if s.hits.Load() != hits {
		t.Error("Update after Stop started probing")
	}
}

func TestPassiveChangesAreLogged(t *testing.T) {
	_, addr := serveStatus(t, 200)
	table, log := newTable(t), &testLog{}
	c := New(table, log)
	defer c.Stop()
	c.Update(snapshotWith(t, `{"active":{"healthy":{"successes":254}}}`, addr, "127.0.0.1:1"))
	n, _ := table.Lookup(shm.HealthKey("/apisix/upstreams/1", addr))
	n.Report(shm.HealthHTTPFailure, 1) // as a worker's passive check would
	waitFor(t, "the passive change is logged", func() bool {
		return log.has("upstream /apisix/upstreams/1 node " + addr + " is unhealthy (passive check: live traffic)")
	})
}
