package proxy

import (
	"bufio"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
	"gw/plugins/vars"
)

func stringHash(s string) uint64 { return newKeyHash().addString(s).sum() }

// shares counts picks per node over keys key-0 … key-(n-1).
func chashShares(up *Upstream, n int) []int {
	counts := make([]int, len(up.nodes))
	tried := make([]uint64, 1)
	for k := range n {
		counts[up.pickChash(stringHash("key-"+strconv.Itoa(k)), tried)]++
	}
	return counts
}

func TestChashDistributionFollowsWeights(t *testing.T) {
	for _, weights := range [][]int{{1, 2, 5}, {1, 1, 1}, {10, 20, 50}, {3, 3}} {
		up := build(t, &conf.Upstream{Type: "chash", Key: "remote_addr", Nodes: nodes(weights...)}, nil)
		const n = 40000
		counts := chashShares(up, n)
		total := 0
		for _, w := range weights {
			total += w
		}
		for i, w := range weights {
			want := float64(n) * float64(w) / float64(total)
			// 160 points per unit of weight leave ketama's usual spread of some percent.
			if got := float64(counts[i]); math.Abs(got-want) > 0.15*want {
				t.Errorf("weights %v: node %d got %d of %d keys, want %.0f ± 15%%", weights, i, counts[i], n, want)
			}
		}
	}
}

func TestChashSameKeySameNodeInEveryBuild(t *testing.T) {
	// Two builds stand for two worker processes: nothing but the nodes decides the ring.
	u := &conf.Upstream{Type: "chash", HashOn: "header", Key: "x-user", Nodes: nodes(1, 2, 5, 1)}
	a, b := build(t, u, nil), build(t, u, nil)
	tried := make([]uint64, 1)
	for k := range 2000 {
		h := stringHash("user-" + strconv.Itoa(k))
		if x, y := a.pickChash(h, tried), b.pickChash(h, tried); x != y {
			t.Fatalf("key %d: node %d in one build, %d in the other", k, x, y)
		}
	}
}

func TestChashRemovingANodeMovesOnlyItsKeys(t *testing.T) {
	all := nodes(1, 1, 2, 1, 3)
	without := append(append(conf.Nodes{}, all[:2]...), all[3:]...) // node 2 removed
	before := build(t, &conf.Upstream{Type: "chash", Key: "uri", Nodes: all}, nil)
	after := build(t, &conf.Upstream{Type: "chash", Key: "uri", Nodes: without}, nil)
	tried := make([]uint64, 1)
	moved, onRemoved := 0, 0
	for k := range 10000 {
		h := stringHash("/item/" + strconv.Itoa(k))
		was := string(before.nodes[before.pickChash(h, tried)].addr)
		is := string(after.nodes[after.pickChash(h, tried)].addr)
		if was == string(before.nodes[2].addr) {
			onRemoved++
			continue
		}
		if was != is {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d keys not on the removed node changed node", moved)
	}
	if onRemoved == 0 {
		t.Errorf("no key was on the removed node; the test proves nothing")
	}
}

func TestChashRetryWalksTheRing(t *testing.T) {
	up := build(t, &conf.Upstream{Type: "chash", Key: "uri", Nodes: nodes(1, 1, 1, 1)}, nil)
	for k := range 50 {
		h := stringHash(strconv.Itoa(k))
		tried := make([]uint64, 1)
		var order []int
		for i := up.pickChash(h, tried); i >= 0; i = up.pickChash(h, tried) {
			set(tried, i)
			order = append(order, i)
		}
		if len(order) != 4 {
			t.Fatalf("key %d: tries %v, want each of 4 nodes once", k, order)
		}
		// The second try is the first other node clockwise from the key.
		g := &up.ring.groups[0]
		start := 0
		for start < len(g.hashes) && g.hashes[start] < h {
			start++
		}
		want := -1
		for j := range len(g.hashes) {
			if o := int(g.owners[(start+j)%len(g.hashes)]); o != order[0] {
				want = o
				break
			}
		}
		if order[1] != want {
			t.Errorf("key %d: retry went to %d, next node on the ring is %d", k, order[1], want)
		}
	}
}

func TestChashPriorityAndWeightZero(t *testing.T) {
	up := build(t, &conf.Upstream{Type: "chash", Key: "uri", Nodes: conf.Nodes{
		{Host: "127.0.0.1", Port: 1, Weight: 1, Priority: 0},
		{Host: "127.0.0.1", Port: 2, Weight: 1, Priority: 5},
		{Host: "127.0.0.1", Port: 3, Weight: 0, Priority: 5},
		{Host: "127.0.0.1", Port: 4, Weight: 1, Priority: 5},
	}}, nil)
	for k := range 100 {
		h := stringHash(strconv.Itoa(k))
		tried := make([]uint64, 1)
		var order []int
		for i := up.pickChash(h, tried); i >= 0; i = up.pickChash(h, tried) {
			set(tried, i)
			order = append(order, i)
		}
		if len(order) != 3 || order[2] != 0 || order[0] == 2 || order[1] == 2 {
			t.Fatalf("key %d: order %v, want nodes 1 and 3 (priority 5) then 0, never 2 (weight 0)", k, order)
		}
	}
}

// A ring built from any weights, even ones conf and Pools.Upstream refuse, has a bounded
// size and a point for every node of weight above 0: weights once overflowed the ring's
// size (makeslice: cap out of range in every worker).
func TestChashRingAnyWeights(t *testing.T) {
	for _, weights := range [][]int{
		{1e17, 1},
		{math.MaxInt, 1},
		{math.MaxInt, math.MaxInt, math.MaxInt},
		{math.MaxInt, math.MaxInt - 1, 3},
		{conf.MaxNodeWeight, 1},
		{conf.MaxNodeWeight, conf.MaxNodeWeight - 1, 7, 0},
	} {
		ns := make([]node, len(weights))
		for i, w := range weights {
			ns[i] = node{weight: w, addr: []byte("127.0.0.1:" + strconv.Itoa(10001+i))}
		}
		var ring *chashRing
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("weights %v: buildRing panicked: %v", weights, r)
				}
			}()
			ring = buildRing(ns)
		}()
		if len(ring.groups) != 1 {
			t.Fatalf("weights %v: %d groups, want 1", weights, len(ring.groups))
		}
		g := ring.groups[0]
		if len(g.hashes) > maxRingPoints+len(g.members) {
			t.Errorf("weights %v: %d ring points, want at most %d", weights, len(g.hashes), maxRingPoints+len(g.members))
		}
		owned := make([]int, len(weights))
		for _, o := range g.owners {
			owned[o]++
		}
		for i, w := range weights {
			if (w > 0) != (owned[i] > 0) {
				t.Errorf("weights %v: node %d (weight %d) owns %d points", weights, i, w, owned[i])
			}
		}
		// The heaviest node owns the most points, as its weight says.
		if owned[0] < owned[len(owned)-1] {
			t.Errorf("weights %v: points %v do not follow the weights", weights, owned)
		}
		up := &Upstream{nodes: ns, ring: ring}
		tried := make([]uint64, 1)
		if i := up.pickChash(stringHash("key"), tried); i < 0 || weights[i] == 0 {
			t.Errorf("weights %v: picked node %d", weights, i)
		}
	}
}

// request builds a RequestCtx from a raw request, with the given peer.
func request(t testing.TB, raw string, peer string) *fasthttp.RequestCtx {
	t.Helper()
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("parsing %q: %v", raw, err)
	}
	addr, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		t.Fatal(err)
	}
	ctx.Init(&req, addr, nil)
	return &ctx
}

func TestChashKeys(t *testing.T) {
	const peer = "192.0.2.7:5555"
	const get = "GET /p/a?x=1&name=bob&empty= HTTP/1.1\r\nHost: Api.Example.COM:8080\r\nX-User: alice\r\nX-Empty:\r\nCookie: sid=s1; other=o\r\n\r\n"
	tests := []struct {
		hashOn, key string
		consumer    string
		raw         string
		want        string // the key text the request should hash as
	}{
		{"", "remote_addr", "", get, "192.0.2.7"},
		{"vars", "remote_port", "", get, "5555"},
		{"vars", "uri", "", get, "/p/a"},
		{"vars", "request_uri", "", get, "/p/a?x=1&name=bob&empty="},
		{"vars", "query_string", "", get, "x=1&name=bob&empty="},
		{"vars", "query_string", "", "GET /p HTTP/1.1\r\nHost: a\r\n\r\n", "192.0.2.7"},
		{"vars", "host", "", get, "api.example.com"},
		{"vars", "host", "", "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", "[::1]"},
		{"vars", "server_name", "", get, "_"},
		{"vars", "hostname", "", get, hostname(t)},
		{"vars", "arg_name", "", get, "bob"},
		{"vars", "arg_empty", "", get, ""},
		{"vars", "arg_missing", "", get, "192.0.2.7"},
		{"vars", "mqtt_client_id", "", get, "192.0.2.7"},
		{"header", "X-User", "", get, "alice"},
		{"header", "x_user", "", get, "alice"},
		{"header", "X-Missing", "", get, "192.0.2.7"},
		{"header", "X-Empty", "", get, ""}, // sent empty: APISIX hashes "", not the client
		{"vars_combinations", "$route_id/$route_name/$service_id/$service_name", "", get, "r1/orders/s1/shop"},
		{"cookie", "sid", "", get, "s1"},
		{"cookie", "nope", "", get, "192.0.2.7"},
		{"consumer", "", "jack", get, "jack"},
		{"consumer", "", "", get, "192.0.2.7"},
		{"vars_combinations", "$remote_addr-$http_x_user", "", get, "192.0.2.7-alice"},
		{"vars_combinations", "${arg_name}:${ cookie_sid }/$request_method", "", get, "bob:s1/GET"},
		{"vars_combinations", "$http_missing|${http_none ?? dflt}", "", get, "|dflt"},
		{"vars_combinations", "$http_missing $cookie_none", "", get, "192.0.2.7"},
		{"vars_combinations", "constant", "", get, "192.0.2.7"},
		{"vars_combinations", `\$uri $uri $ {`, "", get, `\$uri /p/a $ {`},
		{"vars_combinations", "$consumer_name@$host", "ann", get, "ann@api.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.hashOn+" "+tt.key, func(t *testing.T) {
			n, err := (&conf.Upstream{Type: "chash", HashOn: tt.hashOn, Key: tt.key, Nodes: nodes(1)}).Normalize(nil)
			if err != nil {
				t.Fatal(err)
			}
			k, err := compileHashKey(n.HashOn, n.Key)
			if err != nil {
				t.Fatal(err)
			}
			ctx := request(t, tt.raw, peer)
			x := new(exchange)
			r := vars.Request{HTTP: ctx, Consumer: tt.consumer, RouteID: "r1", RouteName: "orders", ServiceID: "s1", ServiceName: "shop"}
			if got, want := k.hash(&r, x), stringHash(tt.want); got != want {
				t.Errorf("hash does not match the key %q", tt.want)
			}
		})
	}
}

func hostname(t *testing.T) string {
	name, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	return name
}

func TestLeastConnPicksFewestInFlightPerWeight(t *testing.T) {
	up := build(t, &conf.Upstream{Type: "least_conn", Nodes: nodes(1, 2, 5)}, nil)
	tried := make([]uint64, 1)
	// Nothing finishes: in-flight requests pile up in proportion to the weights.
	for range 80 {
		if up.pickLeastConn(tried) < 0 {
			t.Fatal("no node")
		}
	}
	want := []int64{10, 20, 50}
	for i, w := range want {
		if got := up.state.inflight[i].Load(); got < w-1 || got > w+1 {
			t.Errorf("node %d has %d in flight, want %d ± 1", i, got, w)
		}
	}
	// Requests that finish at once: ties on equal nodes take turns.
	eq := build(t, &conf.Upstream{Type: "least_conn", Nodes: nodes(1, 1, 1)}, nil)
	var order []byte
	for range 6 {
		i := eq.pickLeastConn(tried)
		order = append(order, byte('A'+i))
		eq.state.inflight[i].Add(-1)
	}
	seen := map[byte]int{}
	for _, c := range order {
		seen[c]++
	}
	if len(seen) != 3 || seen['A'] != 2 || seen['B'] != 2 || seen['C'] != 2 {
		t.Errorf("sequential picks on equal nodes = %s, want each node twice", order)
	}
	// A busy node is avoided.
	eq.state.inflight[0].Add(5)
	for range 4 {
		i := eq.pickLeastConn(tried)
		if i == 0 {
			t.Fatalf("picked the node with 5 requests in flight")
		}
		eq.state.inflight[i].Add(-1)
	}
}

func TestLeastConnSkipsTriedAndPriority(t *testing.T) {
	up := build(t, &conf.Upstream{Type: "least_conn", Nodes: conf.Nodes{
		{Host: "127.0.0.1", Port: 1, Weight: 9, Priority: 0},
		{Host: "127.0.0.1", Port: 2, Weight: 1, Priority: 1},
		{Host: "127.0.0.1", Port: 3, Weight: 1, Priority: 1},
		{Host: "127.0.0.1", Port: 4, Weight: 0, Priority: 1},
	}}, nil)
	tried := make([]uint64, 1)
	var order []int
	for i := up.pickLeastConn(tried); i >= 0; i = up.pickLeastConn(tried) {
		set(tried, i)
		order = append(order, i)
	}
	if len(order) != 3 || order[2] != 0 || order[0] == order[1] {
		t.Errorf("order %v, want nodes 1 and 2 (priority 1), then 0, never 3 (weight 0)", order)
	}
}

func TestEWMAAverage(t *testing.T) {
	tau := int64(ewmaDecay)
	tests := []struct {
		name      string
		samples   []float64 // one every step
		step      int64
		readAfter int64
		want      float64
	}{
		{"first sample is the average", []float64{100}, 0, 0, 100},
		{"peak replaces", []float64{100, 500}, 1, 0, 500},
		{"lower sample after τ blends 1/e", []float64{100, 0}, tau, 0, 100 / math.E},
		{"lower sample right away barely moves", []float64{100, 0}, 1, 0, 100},
		{"decays towards 0 when idle", []float64{100}, 0, tau, 100 / math.E},
		{"two τ idle", []float64{100}, 0, 2 * tau, 100 / (math.E * math.E)},
	}
	for _, tt := range tests {
		var s ewmaStat
		now := int64(1)
		for i, v := range tt.samples {
			if i > 0 {
				now += tt.step
			}
			s.observe(v, now)
		}
		if got := s.score(now + tt.readAfter); math.Abs(got-tt.want) > 1e-6*max(1, tt.want) {
			t.Errorf("%s: score %g, want %g", tt.name, got, tt.want)
		}
	}
	var fresh ewmaStat
	if fresh.score(monotime.Now()) != 0 {
		t.Errorf("a node with no sample scores %g, want 0", fresh.score(monotime.Now()))
	}
}

func TestEWMAPicksTheBetterOfTwo(t *testing.T) {
	up := build(t, &conf.Upstream{Type: "ewma", Nodes: nodes(1, 1, 1)}, nil)
	up.observeEWMA(0, 50*time.Millisecond)
	up.observeEWMA(1, 5*time.Millisecond)
	up.observeEWMA(2, time.Millisecond)
	tried := make([]uint64, 1)
	counts := make([]int, 3)
	for range 3000 {
		counts[up.pickEWMA(tried)]++
	}
	// Node 0 loses every draw; node 2 wins every draw it is in (2 in 3).
	if counts[0] != 0 {
		t.Errorf("the slowest node was picked %d times", counts[0])
	}
	if counts[2] < 1800 || counts[2] > 2200 || counts[1] < 800 {
		t.Errorf("picks %v, want about 0/1000/2000", counts)
	}
	// With the fastest tried, the choice is between the other two.
	set(tried, 2)
	for range 100 {
		if i := up.pickEWMA(tried); i != 1 {
			t.Fatalf("with node 2 tried, picked %d, want 1 (faster than 0)", i)
		}
	}
	set(tried, 1)
	if i := up.pickEWMA(tried); i != 0 {
		t.Errorf("with one node left, picked %d", i)
	}
	set(tried, 0)
	if i := up.pickEWMA(tried); i != -1 {
		t.Errorf("with every node tried, picked %d", i)
	}
}

func TestEWMALearnsFromForward(t *testing.T) {
	slow := startStub(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(30 * time.Millisecond)
		ctx.WriteString("slow") //nolint:errcheck
	})
	fast := startStub(t, reply("fast"))
	dead := deadPort(t)
	up, _ := newUpstream(t, &conf.Upstream{Type: "ewma", Nodes: conf.Nodes{slow.node(1), fast.node(1),
		{Host: "127.0.0.1", Port: dead, Weight: 1}}})
	proxy := startProxy(t, up)
	for range 10 {
		if status, _ := get(t, proxy, "/"); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	now := monotime.Now()
	s := up.state.ewma
	if !(s[1].score(now) < s[0].score(now)) {
		t.Errorf("fast node scores %v, slow node %v", time.Duration(s[1].score(now)), time.Duration(s[0].score(now)))
	}
	if s[2].touched != 0 && s[2].score(now) < float64(30*time.Millisecond) {
		t.Errorf("the dead node scores %v, want the connect timeout's penalty", time.Duration(s[2].score(now)))
	}
}

func TestLeastConnCountsUntilTheBodyIsSent(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	big := make([]byte, 256<<10)
	held := startStub(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/hold" {
			<-release
		}
		ctx.Write(big) //nolint:errcheck
	})
	up, _ := newUpstream(t, &conf.Upstream{Type: "least_conn", Nodes: conf.Nodes{held.node(1)}})
	proxy := startProxy(t, up)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := client.Get("http://" + proxy + "/hold"); err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
		}
	}()
	if !waitUntil(func() bool { return up.state.inflight[0].Load() == 1 }) {
		t.Fatalf("a request held by the node is not counted: %d", up.state.inflight[0].Load())
	}
	once.Do(func() { close(release) })
	<-done
	// A large body is streamed; the count drops when the server has sent it.
	if status, body := get(t, proxy, "/big"); status != 200 || len(body) != len(big) {
		t.Fatalf("status %d, %d bytes", status, len(body))
	}
	if !waitUntil(func() bool { return up.state.inflight[0].Load() == 0 }) {
		t.Errorf("after the requests, %d still counted in flight", up.state.inflight[0].Load())
	}
}

func waitUntil(cond func() bool) bool {
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func TestPicksDoNotAllocate(t *testing.T) {
	ctx := request(t, "GET /a HTTP/1.1\r\nHost: h\r\nX-User: u1\r\n\r\n", "192.0.2.1:1000")
	for _, u := range []*conf.Upstream{
		{Nodes: nodes(1, 2, 5)},
		{Type: "chash", HashOn: "header", Key: "x-user", Nodes: nodes(1, 2, 5)},
		{Type: "chash", HashOn: "vars_combinations", Key: "$remote_addr $http_x_user", Nodes: nodes(1, 2, 5)},
		{Type: "least_conn", Nodes: nodes(1, 2, 5)},
		{Type: "ewma", Nodes: nodes(1, 2, 5)},
	} {
		up := build(t, u, nil)
		run := pickRunner(up, ctx)
		if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
			t.Errorf("%s %s: %.1f allocations per pick", u.Type, u.HashOn, allocs)
		}
	}
}

// pickRunner returns one request's first pick, as forward makes it, with its release.
func pickRunner(up *Upstream, ctx *fasthttp.RequestCtx) func() {
	x := &exchange{tried: make([]uint64, 1)}
	return func() {
		clear(x.tried)
		if up.balancer == conf.BalanceChash {
			x.hash = up.hashKey.hash(x.varsFor(ctx, nil, up.hashKey.names), x)
		}
		i := up.choose(x)
		if i < 0 {
			panic("no node")
		}
		up.tryEnded(i, done, x, monotime.Now())
	}
}

func BenchmarkPick(b *testing.B) {
	ctx := request(b, "GET /a HTTP/1.1\r\nHost: h\r\nX-User: u1\r\n\r\n", "192.0.2.1:1000")
	for _, bc := range []struct {
		name string
		u    *conf.Upstream
	}{
		{"roundrobin", &conf.Upstream{Nodes: nodes(1, 2, 5)}},
		{"chash-header", &conf.Upstream{Type: "chash", HashOn: "header", Key: "x-user", Nodes: nodes(1, 2, 5)}},
		{"chash-remote_addr", &conf.Upstream{Type: "chash", Key: "remote_addr", Nodes: nodes(1, 2, 5)}},
		{"chash-combination", &conf.Upstream{Type: "chash", HashOn: "vars_combinations", Key: "$remote_addr $http_x_user", Nodes: nodes(1, 2, 5)}},
		{"least_conn", &conf.Upstream{Type: "least_conn", Nodes: nodes(1, 2, 5)}},
		{"ewma", &conf.Upstream{Type: "ewma", Nodes: nodes(1, 2, 5)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := NewPools()
			defer p.Close()
			up, err := p.Upstream(bc.u, nil)
			if err != nil {
				b.Fatal(err)
			}
			run := pickRunner(up, ctx)
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
		})
	}
}
