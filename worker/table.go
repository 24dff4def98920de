package worker

import (
	"fmt"

	"gw/conf"
	"gw/worker/proxy"
	"gw/worker/router"
)

// table is one compiled config snapshot. It is immutable once built: a request loads the
// current table once and uses it to the end, so a swap never disturbs requests in flight.
type table struct {
	version uint64
	router  *router.Router
	routes  []route
}

// route is what a matched request needs, resolved at build time so the request path does
// no lookups by id.
type route struct {
	id       string
	upstream *proxy.Upstream // nil: no upstream in the route or its service (503)
}

// compile builds a table from a snapshot. Upstreams referenced by id are compiled once and
// shared by every route that uses them, so they share one balancer rotation.
func compile(snap *conf.Snapshot, pools *proxy.Pools) (*table, error) {
	upstreams := make(map[conf.ID]*conf.Upstream, len(snap.Upstreams))
	for i := range snap.Upstreams {
		upstreams[snap.Upstreams[i].ID] = &snap.Upstreams[i]
	}
	services := make(map[conf.ID]*conf.Service, len(snap.Services))
	for i := range snap.Services {
		services[snap.Services[i].ID] = &snap.Services[i]
	}
	compiledByID := map[conf.ID]*proxy.Upstream{}
	upstreamByID := func(id conf.ID, timeout *conf.Timeout) (*proxy.Upstream, error) {
		u, ok := upstreams[id]
		if !ok {
			return nil, fmt.Errorf("upstream %s not found", id)
		}
		if timeout != nil { // a route's own timeout makes its upstream distinct
			return pools.Upstream(u, timeout)
		}
		if c, ok := compiledByID[id]; ok {
			return c, nil
		}
		c, err := pools.Upstream(u, nil)
		if err != nil {
			return nil, err
		}
		compiledByID[id] = c
		return c, nil
	}

	t := &table{version: snap.Version}
	var entries []router.Entry
	var live []*proxy.Upstream
	for i := range snap.Routes {
		r := &snap.Routes[i]
		if !r.Enabled() {
			continue
		}
		var svc *conf.Service
		if r.ServiceID != "" {
			svc = services[r.ServiceID]
			if svc == nil {
				return nil, fmt.Errorf("route %s: service %s not found", r.ID, r.ServiceID)
			}
		}
		var up *proxy.Upstream
		var err error
		switch {
		case r.Upstream != nil:
			up, err = pools.Upstream(r.Upstream, r.Timeout)
		case r.UpstreamID != "":
			up, err = upstreamByID(r.UpstreamID, r.Timeout)
		case svc != nil && svc.Upstream != nil:
			up, err = pools.Upstream(svc.Upstream, r.Timeout)
		case svc != nil && svc.UpstreamID != "":
			up, err = upstreamByID(svc.UpstreamID, r.Timeout)
		}
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.ID, err)
		}
		if up != nil {
			live = append(live, up)
		}
		hosts := r.Hosts
		if r.Host != "" {
			hosts = []string{r.Host}
		}
		if len(hosts) == 0 && svc != nil {
			hosts = svc.Hosts
		}
		entries = append(entries, router.Entry{
			Paths: r.Paths(), Methods: r.Methods, Hosts: hosts, Priority: r.Priority, Value: len(t.routes),
		})
		t.routes = append(t.routes, route{id: string(r.ID), upstream: up})
	}
	rt, err := router.Build(entries)
	if err != nil {
		return nil, err
	}
	t.router = rt
	pools.Retain(live)
	return t, nil
}
