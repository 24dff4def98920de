package trafficsplit

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string, snap *conf.Snapshot) *splitter {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	return built.(*splitter)
}

func request(uri string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("gw.test")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

// pick runs the access phase for uri and returns the name of the upstream chosen: the
// inline upstream's name, the stored one's id, or "route" for the route's own.
func pick(t testing.TB, s *splitter, uri string) string {
	t.Helper()
	c := plugins.AcquireCtx(request(uri), &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := s.Access(c); err != nil {
		t.Fatal(err)
	}
	chooser, i := c.ChosenUpstream()
	if chooser == nil {
		return "route"
	}
	if chooser != plugins.UpstreamChooser(s) {
		t.Fatalf("chosen by %v", chooser)
	}
	ref := s.Upstreams()[i]
	switch {
	case ref.Upstream != nil:
		return ref.Upstream.Name
	case ref.ID != "":
		return string(ref.ID)
	}
	return "route"
}

func picks(t testing.TB, s *splitter, uri string, n int) string {
	var got []string
	for range n {
		got = append(got, pick(t, s, uri))
	}
	return strings.Join(got, " ")
}

func sorted(s string) string {
	list := strings.Fields(s)
	slices.Sort(list)
	return strings.Join(list, " ")
}

// t/plugin/traffic-split.t TEST 8 to 13: vars choose the rule, weights split it.
func TestAccess(t *testing.T) {
	// TEST 8: one match, upstream_A weight 2, the route's own weight 1.
	test8 := instance(t, `{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["arg_age","!","<","16"]]}],
		"weighted_upstreams":[{"upstream":{"name":"upstream_A","type":"roundrobin","nodes":{"127.0.0.1:1981":2}},"weight":2},{"weight":1}]}]}`, nil)
	// TEST 9: the expression fails: the route's own.
	if got := pick(t, test8, "/server_port?name=jack&age=14"); got != "route" {
		t.Errorf("TEST 9: %s", got)
	}
	// TEST 10: it holds: 2/3 to upstream_A, 1/3 to the route's.
	if got := sorted(picks(t, test8, "/server_port?name=jack&age=16", 6)); got != "route route upstream_A upstream_A upstream_A upstream_A" {
		t.Errorf("TEST 10: %s", got)
	}
	// TEST 11: two match items, either may hold; A 2, B 2, the route's 1.
	test11 := instance(t, `{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["arg_age","~~","^[1-9]{1,2}"]]},
		{"vars":[["arg_name2","in",["jack","rose"]],["arg_age","!","<",18]]}],
		"weighted_upstreams":[{"upstream":{"name":"upstream_A","nodes":{"127.0.0.1:1981":20}},"weight":2},
		{"upstream":{"name":"upstream_B","nodes":{"127.0.0.1:1982":10}},"weight":2},{"weight":1}]}]}`, nil)
	// TEST 12: neither holds.
	if got := pick(t, test11, "/server_port?name=jack&age=0"); got != "route" {
		t.Errorf("TEST 12: %s", got)
	}
	// TEST 13: the first holds: 1/5 the route's, 2/5 each.
	if got := sorted(picks(t, test11, "/server_port?name=jack&age=22", 5)); got != "route upstream_A upstream_A upstream_B upstream_B" {
		t.Errorf("TEST 13: %s", got)
	}
	// The second item holds alone.
	if got := sorted(picks(t, test11, "/server_port?name2=rose&age=18", 5)); got != "route upstream_A upstream_A upstream_B upstream_B" {
		t.Errorf("the second match item alone: %s", got)
	}
	// TEST 4, 6: no rules, or a rule without weighted_upstreams: the route's own.
	if got := pick(t, instance(t, `{}`, nil), "/"); got != "route" {
		t.Errorf("TEST 4: %s", got)
	}
	if got := pick(t, instance(t, `{"rules":[{"match":[{"vars":[["arg_name","==","jack"]]}]}]}`, nil), "/?name=jack"); got != "route" {
		t.Errorf("TEST 6: %s", got)
	}
	// The first matching rule wins.
	rules := instance(t, `{"rules":[{"match":[{"vars":[["http_x_canary","==","1"]]}],"weighted_upstreams":[{"upstream_id":"canary"}]},
		{"weighted_upstreams":[{"upstream_id":"stable"}]}]}`, nil)
	if got := pick(t, rules, "/"); got != "stable" {
		t.Errorf("no header: %s", got)
	}
	c := plugins.AcquireCtx(request("/"), &plugins.RouteInfo{ID: "1"}, 0)
	c.Request.Request.Header.Set("X-Canary", "1")
	_ = rules.Access(c)
	if chooser, i := c.ChosenUpstream(); chooser == nil || rules.Upstreams()[i].ID != "canary" {
		t.Errorf("X-Canary: %v %d", chooser, i)
	}
	plugins.ReleaseCtx(c)
	// Weights of 0 are never chosen; all 0 is the route's own.
	if got := picks(t, instance(t, `{"rules":[{"weighted_upstreams":[{"upstream_id":"a","weight":0},{"upstream_id":"b"}]}]}`, nil), "/", 3); got != "b b b" {
		t.Errorf("weight 0: %s", got)
	}
	if got := pick(t, instance(t, `{"rules":[{"weighted_upstreams":[{"upstream_id":"a","weight":0}]}]}`, nil), "/"); got != "route" {
		t.Errorf("all weights 0: %s", got)
	}
}

// The rotation is smooth: weights 5, 1, 1 interleave as nginx's, never five of one in a
// row.
func TestRotationIsSmooth(t *testing.T) {
	s := instance(t, `{"rules":[{"weighted_upstreams":[{"upstream_id":"a","weight":5},{"upstream_id":"b"},{"upstream_id":"c"}]}]}`, nil)
	if got := picks(t, s, "/", 14); got != "a a b a c a a a a b a c a a" {
		t.Fatalf("%s", got)
	}
}

// A rule naming a stored upstream the snapshot lacks fails the request it would serve
// with APISIX's words (a 500 from the worker); another rule before it still serves.
func TestMissingUpstream(t *testing.T) {
	snap := &conf.Snapshot{Upstreams: []conf.Upstream{{ID: "here"}}}
	s := instance(t, `{"rules":[{"match":[{"vars":[["arg_a","==","1"]]}],"weighted_upstreams":[{"upstream_id":"here"}]},
		{"weighted_upstreams":[{"upstream_id":"gone"}]}]}`, snap)
	if got := pick(t, s, "/?a=1"); got != "here" {
		t.Fatalf("first rule: %s", got)
	}
	c := plugins.AcquireCtx(request("/"), &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := s.Access(c); err == nil || err.Error() != "failed to fetch upstream info by upstream id: gone" {
		t.Fatalf("error %v", err)
	}
}

// Matching and choosing allocate nothing.
func TestAccessAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	s := instance(t, `{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["http_x_a","!","==","b"]]}],
		"weighted_upstreams":[{"upstream_id":"a","weight":3},{"upstream_id":"b","weight":2},{"weight":1}]}]}`, nil)
	c := plugins.AcquireCtx(request("/?name=jack"), &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := s.Access(c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per request", allocs)
	}
}

func BenchmarkAccess(b *testing.B) {
	s := instance(b, `{"rules":[{"match":[{"vars":[["arg_name","==","jack"]]}],
		"weighted_upstreams":[{"upstream_id":"a","weight":3},{"upstream_id":"b","weight":2},{"weight":1}]}]}`, nil)
	c := plugins.AcquireCtx(request("/?name=jack"), &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Access(c)
	}
}
