package proxy

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
	"gw/shm"
)

const testUpstreamName = "/apisix/upstreams/1"

func newHealthTable(tb testing.TB) *shm.HealthTable {
	tb.Helper()
	seg, err := shm.Create(shm.HealthLayout, 64<<10)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { seg.Close() })
	if err := shm.InitHealthTable(seg); err != nil {
		tb.Fatal(err)
	}
	table, err := shm.OpenHealthTable(seg)
	if err != nil {
		tb.Fatal(err)
	}
	return table
}

// checked decodes checks and gives them to u, and installs u's nodes in table as the
// master's checker would.
func checked(tb testing.TB, table *shm.HealthTable, u *conf.Upstream, checks string) *conf.Upstream {
	tb.Helper()
	d, err := conf.DecodeUpstream([]byte(`{"nodes":{},"checks":` + checks + `}`))
	if err != nil {
		tb.Fatal(err)
	}
	u.Checks = d.Checks
	keys := map[uint64]bool{}
	for i := range u.Nodes {
		keys[shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[i]))] = true
	}
	table.Sync(keys)
	return u
}

func buildChecked(tb testing.TB, table *shm.HealthTable, u *conf.Upstream) *Upstream {
	tb.Helper()
	p := NewPools()
	tb.Cleanup(p.Close)
	up, err := p.CheckedUpstream(u, nil, table, testUpstreamName)
	if err != nil {
		tb.Fatal(err)
	}
	return up
}

// markDown makes node i of u unhealthy in table.
func markDown(tb testing.TB, table *shm.HealthTable, u *conf.Upstream, i int) {
	tb.Helper()
	n, ok := table.Lookup(shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[i])))
	if !ok {
		tb.Fatalf("node %d not in the table", i)
	}
	n.Report(shm.HealthTCPFailure, 1)
}

func markUp(tb testing.TB, table *shm.HealthTable, u *conf.Upstream, i int) {
	tb.Helper()
	n, _ := table.Lookup(shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[i])))
	n.Report(shm.HealthSuccess, 1)
}

// pickCounts makes n first picks, as forward does, and counts them per node.
func pickCounts(up *Upstream, n int) []int {
	counts := make([]int, len(up.nodes))
	x := &exchange{tried: make([]uint64, 1)}
	for k := range n {
		clear(x.tried)
		x.hash = uint64(k) * 0x9e3779b97f4a7c15
		i := up.choose(x)
		if i < 0 {
			panic("no node")
		}
		counts[i]++
		up.tryEnded(i, done, x, monotime.Now())
	}
	return counts
}

func TestEveryBalancerSkipsUnhealthyNodes(t *testing.T) {
	for _, typ := range []string{"roundrobin", "chash", "least_conn", "ewma"} {
		t.Run(typ, func(t *testing.T) {
			table := newHealthTable(t)
			u := checked(t, table, &conf.Upstream{Type: typ, Key: "remote_addr", Nodes: nodes(1, 2, 5)}, `{"active":{}}`)
			up := buildChecked(t, table, u)
			// least_conn and ewma may favour one node when requests do not overlap;
			// round robin and chash spread sequential picks over every node.
			spreads := typ == "roundrobin" || typ == "chash"
			if c := pickCounts(up, 300); spreads && (c[0] == 0 || c[1] == 0 || c[2] == 0) {
				t.Fatalf("all healthy: picks %v, want every node", c)
			}
			markDown(t, table, u, 2)
			if c := pickCounts(up, 300); c[2] != 0 || c[0]+c[1] != 300 {
				t.Errorf("node 2 down: picks %v", c)
			}
			markDown(t, table, u, 0)
			if c := pickCounts(up, 100); c[1] != 100 {
				t.Errorf("nodes 0 and 2 down: picks %v", c)
			}
			// All down: every node is used rather than none (pickCounts panics on none).
			markDown(t, table, u, 1)
			if c := pickCounts(up, 300); spreads && (c[0] == 0 || c[1] == 0 || c[2] == 0) {
				t.Errorf("all down: picks %v, want every node", c)
			}
			markUp(t, table, u, 2)
			if c := pickCounts(up, 100); c[2] != 100 {
				t.Errorf("node 2 back: picks %v", c)
			}
		})
	}
}

func TestUnhealthyTopPriorityGroupFallsToTheNext(t *testing.T) {
	table := newHealthTable(t)
	ns := nodes(1, 1, 1)
	ns[0].Priority, ns[1].Priority, ns[2].Priority = 10, 10, 0
	u := checked(t, table, &conf.Upstream{Nodes: ns}, `{"active":{}}`)
	up := buildChecked(t, table, u)
	if c := pickCounts(up, 100); c[2] != 0 {
		t.Fatalf("healthy: the low-priority node got %v", c)
	}
	markDown(t, table, u, 0)
	if c := pickCounts(up, 100); c[1] != 100 {
		t.Errorf("one of the top group down: picks %v", c)
	}
	markDown(t, table, u, 1)
	if c := pickCounts(up, 100); c[2] != 100 {
		t.Errorf("top group down: picks %v, want the lower group", c)
	}
}

func TestRetriesSkipUnhealthyNodes(t *testing.T) {
	table := newHealthTable(t)
	u := checked(t, table, &conf.Upstream{Nodes: nodes(1, 1, 1)}, `{"active":{}}`)
	up := buildChecked(t, table, u)
	markDown(t, table, u, 1)
	x := &exchange{tried: make([]uint64, 1)}
	var seen []int
	for {
		i := up.choose(x)
		if i < 0 {
			break
		}
		set(x.tried, i)
		seen = append(seen, i)
	}
	if len(seen) != 2 || seen[0] == 1 || seen[1] == 1 {
		t.Errorf("tries %v: want the two healthy nodes, then none", seen)
	}
}

func TestUpstreamWithoutChecksIgnoresTheTable(t *testing.T) {
	table := newHealthTable(t)
	u := &conf.Upstream{Nodes: nodes(1, 1)}
	up := buildChecked(t, table, u)
	if up.health != nil {
		t.Error("an upstream without checks reads the table")
	}
	// One node: never checked, as in APISIX.
	one := checked(t, table, &conf.Upstream{Nodes: nodes(1)}, `{"active":{}}`)
	if buildChecked(t, table, one).health != nil {
		t.Error("a one-node upstream reads the table")
	}
}

func TestPassiveCountsLiveTraffic(t *testing.T) {
	var status atomic32
	status.set(200)
	s := startStub(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(status.get()) })
	dead := deadPort(t)
	table := newHealthTable(t)
	u := checked(t, table, &conf.Upstream{Nodes: conf.Nodes{s.node(1), {Host: "127.0.0.1", Port: dead, Weight: 1}}},
		`{"active":{},"passive":{"healthy":{"successes":2},"unhealthy":{"http_failures":2,"tcp_failures":1}}}`)
	up := buildChecked(t, table, u)
	proxy := startProxy(t, up)
	entry := func(i int) shm.HealthNode {
		n, _ := table.Lookup(shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[i])))
		return n
	}
	// The refused node is taken out by its first refusal, and the request retried.
	for range 4 {
		if code, _ := get(t, proxy, "/"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if entry(1).Healthy() {
		t.Fatal("the refusing node is still healthy")
	}
	// 500s are failures: two in a row take the live node out too.
	status.set(500)
	get(t, proxy, "/")
	get(t, proxy, "/")
	if entry(0).Healthy() {
		t.Fatal("two 500s left the node healthy")
	}
	// An unhealthy node is brought back by successes when every node is down and used.
	status.set(200)
	for range 4 {
		get(t, proxy, "/")
	}
	if !entry(0).Healthy() {
		_, h, _, _ := entry(0).Counters()
		t.Errorf("successes did not bring the node back (http failures %d)", h)
	}
}

func TestPassiveStatusesOutsideTheListsCountNothing(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(http.StatusTeapot) })
	other := startStub(t, reply("x"))
	table := newHealthTable(t)
	u := checked(t, table, &conf.Upstream{Nodes: conf.Nodes{s.node(1), other.node(0)}},
		`{"active":{},"passive":{"unhealthy":{"http_failures":1}}}`)
	up := buildChecked(t, table, u)
	proxy := startProxy(t, up)
	for range 3 {
		get(t, proxy, "/")
	}
	n, _ := table.Lookup(shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[0])))
	if sc, h, tc, to := n.Counters(); !n.Healthy() || sc+h+tc+to != 0 {
		t.Errorf("418 counted: healthy %v, counters %d %d %d %d", n.Healthy(), sc, h, tc, to)
	}
}

func TestPassiveReadTimeoutCounts(t *testing.T) {
	slow := startStub(t, func(ctx *fasthttp.RequestCtx) { time.Sleep(300 * time.Millisecond) })
	fast := startStub(t, reply("ok"))
	table := newHealthTable(t)
	u := checked(t, table, &conf.Upstream{Nodes: conf.Nodes{slow.node(1), fast.node(0)}, Retries: intPtr(0),
		Timeout: &conf.Timeout{Connect: 1, Send: 1, Read: 0.05}},
		`{"active":{},"passive":{"unhealthy":{"timeouts":1}}}`)
	up := buildChecked(t, table, u)
	proxy := startProxy(t, up)
	if code, _ := get(t, proxy, "/"); code != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504", code)
	}
	n, _ := table.Lookup(shm.HealthKey(testUpstreamName, u.NodeAddress(&u.Nodes[0])))
	if n.Healthy() {
		t.Error("a read timeout did not count")
	}
}

func TestStatusSet(t *testing.T) {
	var s statusSet
	for _, c := range []int{200, 226, 599, 639} {
		s.add(c)
	}
	s.add(-1)
	s.add(640)
	for c := -1; c <= 700; c++ {
		want := c == 200 || c == 226 || c == 599 || c == 639
		if s.has(c) != want {
			t.Errorf("has(%d) = %v", c, !want)
		}
	}
}

func TestHealthPicksDoNotAllocate(t *testing.T) {
	ctx := request(t, "GET /a HTTP/1.1\r\nHost: h\r\nX-User: u1\r\n\r\n", "192.0.2.1:1000")
	for _, typ := range []string{"roundrobin", "chash", "least_conn", "ewma"} {
		table := newHealthTable(t)
		u := checked(t, table, &conf.Upstream{Type: typ, Key: "remote_addr", Nodes: nodes(1, 2, 5)}, `{"active":{},"passive":{}}`)
		up := buildChecked(t, table, u)
		markDown(t, table, u, 1)
		run := pickRunner(up, ctx)
		if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
			t.Errorf("%s: %.1f allocations per pick with health checks", typ, allocs)
		}
		if allocs := testing.AllocsPerRun(200, func() { up.reportPassive(0, done, tryAnswered, 200) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per passive report", typ, allocs)
		}
	}
}

func BenchmarkPickWithHealth(b *testing.B) {
	ctx := request(b, "GET /a HTTP/1.1\r\nHost: h\r\nX-User: u1\r\n\r\n", "192.0.2.1:1000")
	for _, typ := range []string{"roundrobin", "chash", "least_conn", "ewma"} {
		for _, down := range []int{0, 1} {
			b.Run(typ+"/down="+strconv.Itoa(down), func(b *testing.B) {
				table := newHealthTable(b)
				u := checked(b, table, &conf.Upstream{Type: typ, Key: "remote_addr", Nodes: nodes(1, 2, 5)}, `{"active":{},"passive":{}}`)
				up := buildChecked(b, table, u)
				for i := range down {
					markDown(b, table, u, i)
				}
				run := pickRunner(up, ctx)
				b.ReportAllocs()
				for b.Loop() {
					run()
					up.reportPassive(2, done, tryAnswered, 200)
				}
			})
		}
	}
}

// atomic32 is a status a stub answers with, changed by the test.
type atomic32 struct{ v atomic.Int32 }

func (a *atomic32) set(v int) { a.v.Store(int32(v)) }
func (a *atomic32) get() int  { return int(a.v.Load()) }
