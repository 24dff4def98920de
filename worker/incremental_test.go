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
		if !incremental(cur, d) {
			t.Fatalf("step %d: a delta of routes alone is not built incrementally", step)
		}
		got, leftOut, err := recompile(cur, d, next)
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
	if incremental(cur, d) {
		t.Error("a route with a limit-count group checks the whole snapshot; its write must compile everything")
	}
	d = &conf.Delta{From: 1, To: 2, Changes: []conf.Change{conf.ChangeOf("upstreams", "u", &conf.Upstream{ID: "u"})}}
	if incremental(cur, d) {
		t.Error("an upstream write must compile everything")
	}
}
