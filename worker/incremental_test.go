package worker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"gw/conf"
	"gw/worker/proxy"
)

// matchedRoute is the id of the route t routes a request to, "" for none.
func matchedRoute(t *routeTable, method, host, path string) string {
	v, ok := t.router.Match([]byte(method), []byte(host), []byte(path))
	if !ok {
		return ""
	}
	return t.routes[v].info.ID
}

func randomRoute(rng *rand.Rand, id conf.ID) *conf.Route {
	paths := []string{"/a", "/a/*", "/a/b", "/b*", "/api/v1/*", "/api/v1/x", "/*"}
	r := &conf.Route{ID: id, URI: paths[rng.IntN(len(paths))], Priority: rng.IntN(3),
		Upstream: &conf.Upstream{Type: "roundrobin", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: 1, Weight: 1}}}}
	if rng.IntN(4) == 0 {
		r.Hosts = []string{"example.com"}
	}
	if rng.IntN(5) == 0 {
		disabled := 0
		r.Status = &disabled
	}
	if rng.IntN(5) == 0 {
		r.Plugins = map[string]json.RawMessage{"prometheus": json.RawMessage(`{}`)}
	}
	return r
}

// TestRecompileRoutesAsACompileWould applies random route writes to a table with
// recompile and checks, after each, that every request is routed as a whole compile of
// the same snapshot routes it.
func TestRecompileRoutesAsACompileWould(t *testing.T) {
	shared := testShared(t)
	pools := proxy.NewPoolsWith(proxy.Options{BuildOnly: true})
	t.Cleanup(pools.Close)
	snap := &conf.Snapshot{Version: 1, Upstreams: []conf.Upstream{}, Services: []conf.Service{}, Consumers: []conf.Consumer{},
		PluginConfigs: []conf.PluginConfig{}, GlobalRules: []conf.GlobalRule{}, SSLs: []conf.SSL{}}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 20 {
		snap.Routes = append(snap.Routes, *randomRoute(rng, conf.ID(fmt.Sprint("r", i))))
	}
	cur, _, err := compile(snap, pools, shared)
	if err != nil {
		t.Fatal(err)
	}
	requests := [][3]string{}
	for _, host := range []string{"", "example.com"} {
		for _, path := range []string{"/a", "/a/b", "/a/c", "/b", "/bc", "/api/v1/x", "/api/v1/y", "/z"} {
			requests = append(requests, [3]string{"GET", host, path})
		}
	}
	incrementals := 0
	for step := range 300 {
		d := &conf.Delta{From: snap.Version, To: snap.Version + 1}
		for range 1 + rng.IntN(3) {
			id := conf.ID(fmt.Sprint("r", rng.IntN(30)))
			if rng.IntN(4) == 0 {
				d.Changes = append(d.Changes, conf.Change{Kind: "routes", ID: id})
				continue
			}
			d.Changes = append(d.Changes, conf.ChangeOf("routes", id, randomRoute(rng, id)))
		}
		next := snap.Apply(d)
		u, ok := planUpdate(cur, d, snap)
		if !ok {
			t.Fatalf("step %d: a delta of routes alone is not built incrementally", step)
		}
		got, leftOut, err := recompile(cur, u)
		if err != nil || len(leftOut) > 0 {
			t.Fatalf("step %d: recompile: %v %v", step, err, leftOut)
		}
		incrementals++
		fresh := *next
		want, _, err := compile(&fresh, pools, shared)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range requests {
			if g, w := matchedRoute(got, q[0], q[1], q[2]), matchedRoute(want, q[0], q[1], q[2]); g != w {
				t.Fatalf("step %d: %v is routed to %q after recompile, %q by a whole compile\nroutes: %+v", step, q, g, w, next.Routes)
			}
		}
		cur, snap = got, next
	}
	if incrementals == 0 {
		t.Fatal("no delta was built incrementally")
	}
}

func TestAWriteToAGroupedLimitCountRouteCompilesEverything(t *testing.T) {
	shared := testShared(t)
	pools := proxy.NewPoolsWith(proxy.Options{BuildOnly: true})
	t.Cleanup(pools.Close)
	cur, _, err := compile(&conf.Snapshot{Version: 1}, pools, shared)
	if err != nil {
		t.Fatal(err)
	}
	grouped := &conf.Route{ID: "g", URI: "/g", Plugins: map[string]json.RawMessage{
		"limit-count": json.RawMessage(`{"count":1,"time_window":60,"group":"shared"}`)}}
	d := &conf.Delta{From: 1, To: 2, Changes: []conf.Change{conf.ChangeOf("routes", "g", grouped)}}
	if incremental(cur, d, &conf.Snapshot{Version: 1}) {
		t.Error("a route with a limit-count group checks the whole snapshot; its write must compile everything")
	}
	d = &conf.Delta{From: 1, To: 2, Changes: []conf.Change{conf.ChangeOf("services", "s", &conf.Service{ID: "s", Plugins: grouped.Plugins})}}
	if incremental(cur, d, &conf.Snapshot{Version: 1}) {
		t.Error("a service with a limit-count group checks the whole snapshot; its write must compile everything")
	}
	for _, kind := range []string{"consumers", "global_rules", "ssls"} {
		d = &conf.Delta{From: 1, To: 2, Changes: []conf.Change{{Kind: kind, ID: "x"}}}
		if incremental(cur, d, &conf.Snapshot{Version: 1}) {
			t.Errorf("a write of %s changes what every chain is built from; it must compile everything", kind)
		}
	}
}

// servedAs describes what t serves for each route: its router place aside, everything a
// request on it meets (its facts, upstream, 503 body and whether plugins run).
func servedAs(t *routeTable) map[string]string {
	out := map[string]string{}
	for _, r := range t.routes {
		if r != nil {
			out[r.info.ID] = fmt.Sprintf("%+v upstream[%s] unavailable %q chain %t global %d", r.info, r.upstream, r.unavailable, r.chain != nil, len(r.global))
			for _, set := range r.chosen {
				out[r.info.ID] += fmt.Sprintf(" chosen %v %q", set.upstreams, set.gone)
			}
		}
	}
	return out
}

// TestRecompileObjectsAsACompileWould applies random writes of routes, upstreams,
// services and plugin_configs that reference each other, and checks after each that
// what recompile serves for every route is what a whole compile of the same snapshot
// serves: a changed object reaches every route that uses it, directly or through its
// service, and no other route is rebuilt wrongly.
func TestRecompileObjectsAsACompileWould(t *testing.T) {
	shared := testShared(t)
	pools := proxy.NewPoolsWith(proxy.Options{BuildOnly: true})
	t.Cleanup(pools.Close)
	rng := rand.New(rand.NewPCG(11, 3))
	ref := func(prefix string, n int) conf.ID {
		if rng.IntN(3) == 0 {
			return ""
		}
		return conf.ID(fmt.Sprint(prefix, rng.IntN(n)))
	}
	upstream := func() *conf.Upstream {
		u := &conf.Upstream{Type: "roundrobin"}
		for range 1 + rng.IntN(2) {
			u.Nodes = append(u.Nodes, conf.Node{Host: "127.0.0.1", Port: 1 + rng.IntN(5), Weight: 1 + rng.IntN(3)})
		}
		u.ApplyDefaults()
		return u
	}
	plugins := func() map[string]json.RawMessage {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			// traffic-split names an upstream by id: a write of it reaches the route, as
			// one its upstream_id names does.
			return map[string]json.RawMessage{"traffic-split": json.RawMessage(fmt.Sprintf(
				`{"rules":[{"weighted_upstreams":[{"upstream_id":"u%d","weight":2},{"weight":1}]}]}`, rng.IntN(5)))}
		}
		return map[string]json.RawMessage{"prometheus": json.RawMessage(`{}`)}
	}
	object := func(kind string, id conf.ID) conf.Change {
		switch kind {
		case "upstreams":
			u := upstream()
			u.ID = id
			return conf.ChangeOf(kind, id, u)
		case "services":
			svc := &conf.Service{ID: id, UpstreamID: ref("u", 4), Plugins: plugins()}
			if svc.UpstreamID == "" && rng.IntN(2) == 0 {
				svc.Upstream = upstream()
			}
			if rng.IntN(3) == 0 {
				svc.Hosts = []string{"svc.example"}
			}
			return conf.ChangeOf(kind, id, svc)
		case "plugin_configs":
			return conf.ChangeOf(kind, id, &conf.PluginConfig{ID: id, Plugins: plugins()})
		}
		r := &conf.Route{ID: id, URI: fmt.Sprint("/", id), UpstreamID: ref("u", 4), ServiceID: ref("s", 3), PluginConfigID: ref("p", 2)}
		if r.UpstreamID == "" && r.ServiceID == "" {
			r.Upstream = upstream()
		}
		return conf.ChangeOf(kind, id, r)
	}
	prefixes := map[string]string{"routes": "r", "upstreams": "u", "services": "s", "plugin_configs": "p"}
	counts := map[string]int{"routes": 12, "upstreams": 4, "services": 3, "plugin_configs": 2}
	snap := &conf.Snapshot{Version: 1}
	first := &conf.Delta{From: 0, To: 1}
	for _, kind := range []string{"upstreams", "services", "plugin_configs", "routes"} {
		for i := range counts[kind] {
			first.Changes = append(first.Changes, object(kind, conf.ID(fmt.Sprint(prefixes[kind], i))))
		}
	}
	snap = snap.Apply(first)
	cur, _, err := compile(snap, pools, shared)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"routes", "upstreams", "upstreams", "services", "services", "plugin_configs"}
	for step := range 300 {
		d := &conf.Delta{From: snap.Version, To: snap.Version + 1}
		for range 1 + rng.IntN(2) {
			kind := kinds[rng.IntN(len(kinds))]
			id := conf.ID(fmt.Sprint(prefixes[kind], rng.IntN(counts[kind]+1)))
			if rng.IntN(5) == 0 {
				d.Changes = append(d.Changes, conf.Change{Kind: kind, ID: id}) // a delete (?force=true)
				continue
			}
			d.Changes = append(d.Changes, object(kind, id))
		}
		next := snap.Apply(d)
		u, ok := planUpdate(cur, d, snap)
		if !ok {
			t.Fatalf("step %d: %+v is not built incrementally", step, d.Changes)
		}
		got, leftOut, err := recompile(cur, u)
		if err != nil || len(leftOut) > 0 {
			t.Fatalf("step %d: recompile: %v %v", step, err, leftOut)
		}
		fresh := *next
		want, _, err := compile(&fresh, pools, shared)
		if err != nil {
			t.Fatal(err)
		}
		g, w := servedAs(got), servedAs(want)
		for id := range w {
			if g[id] != w[id] {
				t.Fatalf("step %d, after %+v: route %s\nrecompiled: %s\nwhole:      %s", step, d.Changes, id, g[id], w[id])
			}
		}
		if len(g) != len(w) {
			t.Fatalf("step %d: recompile serves %d routes, a whole compile %d", step, len(g), len(w))
		}
		for id := range w {
			if m := matchedRoute(got, "GET", "", "/"+id); m != matchedRoute(want, "GET", "", "/"+id) {
				t.Fatalf("step %d: /%s routed to %q after recompile", step, id, m)
			}
		}
		cur, snap = got, next
	}
}
