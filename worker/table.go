package worker

import (
	"encoding/json"
	"fmt"

	"gw/conf"
	"gw/plugins"
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
	info     plugins.RouteInfo
	upstream *proxy.Upstream // nil: no upstream in the route or its service (503)
	chain    *plugins.Chain  // nil when the route runs no plugin
}

// compile builds a table from a snapshot. Upstreams referenced by id are compiled once and
// shared by every route that uses them, so they share one balancer rotation.
func compile(snap *conf.Snapshot, pools *proxy.Pools, shared *plugins.Shared) (*table, error) {
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
			if r.EnableWebsocket || (svc != nil && svc.EnableWebsocket) {
				up = up.WithWebsocket() // shares the balancer with the route's other users
			}
		}
		hosts := r.Hosts
		if r.Host != "" {
			hosts = []string{r.Host}
		}
		if len(hosts) == 0 && svc != nil {
			hosts = svc.Hosts
		}
		remoteAddrs, err := r.RemoteAddrPrefixes()
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.ID, err)
		}
		vars, err := conf.ParseVars(r.Vars)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.ID, err)
		}
		entries = append(entries, router.Entry{
			Paths: r.Paths(), Methods: r.Methods, Hosts: hosts, Priority: r.Priority,
			RemoteAddrs: remoteAddrs, Vars: vars, Value: len(t.routes),
		})
		t.routes = append(t.routes, route{info: routeInfo(r, svc, hosts), upstream: up})
		pluginSet := r.Plugins
		if svc != nil && len(svc.Plugins) > 0 {
			// A service supplies plugins; the route's own configuration of one wins.
			pluginSet = make(map[string]json.RawMessage, len(svc.Plugins)+len(r.Plugins))
			for name, raw := range svc.Plugins {
				pluginSet[name] = raw
			}
			for name, raw := range r.Plugins {
				pluginSet[name] = raw
			}
		}
		if len(pluginSet) > 0 {
			rt := &t.routes[len(t.routes)-1]
			chain, err := plugins.BuildChain(pluginSet, &plugins.Env{Route: &rt.info, Shared: shared, Snapshot: snap})
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", r.ID, err)
			}
			if !chain.Empty() {
				rt.chain = chain
			}
		}
	}
	rt, err := router.Build(entries)
	if err != nil {
		return nil, err
	}
	t.router = rt
	pools.Retain(live)
	return t, nil
}

func routeInfo(r *conf.Route, svc *conf.Service, hosts []string) plugins.RouteInfo {
	info := plugins.RouteInfo{ID: string(r.ID), Name: r.Name}
	if paths := r.Paths(); len(paths) > 0 {
		info.URI = paths[0]
	}
	if len(hosts) > 0 {
		info.Host = hosts[0]
	}
	if svc != nil {
		info.ServiceID, info.ServiceName = string(svc.ID), svc.Name
	}
	return info
}
