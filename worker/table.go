package worker

import (
	"encoding/json"
	"fmt"
	"maps"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
	"gw/worker/proxy"
	"gw/worker/router"
)

// table is one compiled config snapshot. It is immutable once built: a request loads the
// current table once and uses it to the end, so a swap never disturbs requests in flight.
type table struct {
	version uint64
	router  *router.Router
	routes  []route
	// global runs the global rules for a request no route matched, with unmatched as
	// its route; nil without global rules.
	global    []*plugins.Chain
	unmatched plugins.RouteInfo
}

// route is what a matched request needs, resolved at build time so the request path does
// no lookups by id.
type route struct {
	info     plugins.RouteInfo
	upstream *proxy.Upstream // nil: no upstream in the route or its service (503)
	chain    *plugins.Chain  // nil when the route runs no plugin
	// global holds the global rules' chains, one per rule in creation order, built for
	// this route so that per-route plugins (prometheus' labels) see it; nil without any.
	global []*plugins.Chain
	// unavailable, when set, is the 503 body of a route whose plugin_config is gone
	// (deleted with ?force=true); such a route runs nothing, as in APISIX.
	unavailable []byte
	// pristine is set when no plugin of the route or the global rules can change the
	// request (proxy.Info.Pristine).
	pristine bool
}

// compile builds a table from a snapshot. Upstreams referenced by id are compiled once and
// shared by every route that uses them, so they share one balancer rotation.
func compile(snap *conf.Snapshot, pools *proxy.Pools, shared *plugins.Shared) (*table, error) {
	snap.ResolveClientCerts() // upstream tls.client_cert_id: the ssl's pair, copied in
	upstreams := make(map[conf.ID]*conf.Upstream, len(snap.Upstreams))
	for i := range snap.Upstreams {
		upstreams[snap.Upstreams[i].ID] = &snap.Upstreams[i]
	}
	services := make(map[conf.ID]*conf.Service, len(snap.Services))
	for i := range snap.Services {
		services[snap.Services[i].ID] = &snap.Services[i]
	}
	pluginConfigs := make(map[conf.ID]*conf.PluginConfig, len(snap.PluginConfigs))
	for i := range snap.PluginConfigs {
		pluginConfigs[snap.PluginConfigs[i].ID] = &snap.PluginConfigs[i]
	}
	health, err := healthTable(shared)
	if err != nil {
		return nil, err
	}
	compiledByID := map[conf.ID]*proxy.Upstream{}
	upstreamByID := func(id conf.ID, timeout *conf.Timeout) (*proxy.Upstream, error) {
		u, ok := upstreams[id]
		if !ok {
			return nil, fmt.Errorf("upstream %s not found", id)
		}
		if timeout != nil { // a route's own timeout makes its upstream distinct
			return pools.CheckedUpstream(u, timeout, health, conf.HealthUpstreamPrefix+string(id))
		}
		if c, ok := compiledByID[id]; ok {
			return c, nil
		}
		c, err := pools.CheckedUpstream(u, nil, health, conf.HealthUpstreamPrefix+string(id))
		if err != nil {
			return nil, err
		}
		compiledByID[id] = c
		return c, nil
	}

	t := &table{version: snap.Version}
	// APISIX runs global rules on a request no route matched too, with no route in its
	// context: their plugins see an empty RouteInfo.
	global, err := buildGlobalRules(snap, &t.unmatched, shared)
	if err != nil {
		return nil, err
	}
	t.global = global
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
			up, err = pools.CheckedUpstream(r.Upstream, r.Timeout, health, conf.HealthRoutePrefix+string(r.ID))
		case r.UpstreamID != "":
			up, err = upstreamByID(r.UpstreamID, r.Timeout)
		case svc != nil && svc.Upstream != nil:
			up, err = pools.CheckedUpstream(svc.Upstream, r.Timeout, health, conf.HealthServicePrefix+string(svc.ID))
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
		rt := &t.routes[len(t.routes)-1]
		var pc *conf.PluginConfig
		if r.PluginConfigID != "" {
			if pc = pluginConfigs[r.PluginConfigID]; pc == nil {
				rt.upstream = nil
				rt.unavailable = pluginConfigGoneBody
				continue
			}
		}
		if err := rt.buildChains(r, svc, pc, shared, snap); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.ID, err)
		}
	}
	rtr, err := router.BuildWith(entries, routerOptions(shared.Config))
	if err != nil {
		return nil, err
	}
	t.router = rtr
	pools.Retain(live)
	return t, nil
}

// buildChains builds the route's own chain and its copy of the global rules. The route's
// plugins are its service's, then its plugin_config's, then its own, a later
// configuration of a plugin replacing an earlier one (APISIX: route > plugin_config >
// service).
func (rt *route) buildChains(r *conf.Route, svc *conf.Service, pc *conf.PluginConfig, shared *plugins.Shared, snap *conf.Snapshot) error {
	pluginSet := r.Plugins
	if (svc != nil && len(svc.Plugins) > 0) || (pc != nil && len(pc.Plugins) > 0) {
		pluginSet = map[string]json.RawMessage{}
		if svc != nil {
			maps.Copy(pluginSet, svc.Plugins)
		}
		if pc != nil {
			maps.Copy(pluginSet, pc.Plugins)
		}
		maps.Copy(pluginSet, r.Plugins)
	}
	env := &plugins.Env{Route: &rt.info, Shared: shared, Snapshot: snap}
	chain, err := plugins.BuildChain(pluginSet, env)
	if err != nil {
		return err
	}
	byConsumer, err := consumerChains(pluginSet, snap, env)
	if err != nil {
		return err
	}
	chain.SetConsumerChains(byConsumer)
	if !chain.Empty() {
		rt.chain = chain
	}
	global, err := buildGlobalRules(snap, &rt.info, shared)
	rt.global = global
	rt.pristine = rt.chain.KeepsRequest()
	for _, g := range global {
		rt.pristine = rt.pristine && g.KeepsRequest()
	}
	return err
}

// consumerChains merges each consumer's own plugins (not its credentials, the auth
// plugins' configurations) into the route's plugin set, the consumer's configuration of a
// plugin replacing the route's, as APISIX's merge_consumer_route does, and builds one chain
// per consumer with such plugins. Only a route where a consumer can be named gets them:
// one with an auth plugin in its own set or in a global rule. The merged instances are
// the route's (limit-count counts per route, as APISIX's conf_type_without_consumer).
func consumerChains(routeSet map[string]json.RawMessage, snap *conf.Snapshot, env *plugins.Env) (map[string]*plugins.Chain, error) {
	if len(snap.Consumers) == 0 || !namesConsumer(routeSet, snap) {
		return nil, nil
	}
	var byConsumer map[string]*plugins.Chain
	for i := range snap.Consumers {
		c := &snap.Consumers[i]
		var merged map[string]json.RawMessage
		for name, raw := range c.Plugins {
			if p, ok := plugins.Lookup(name); !ok || p.Auth {
				continue
			}
			if merged == nil {
				merged = make(map[string]json.RawMessage, len(routeSet)+len(c.Plugins))
				maps.Copy(merged, routeSet)
			}
			merged[name] = raw
		}
		if merged == nil {
			continue
		}
		chain, err := plugins.BuildChain(merged, env)
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", c.Username, err)
		}
		if byConsumer == nil {
			byConsumer = map[string]*plugins.Chain{}
		}
		byConsumer[c.Username] = chain
	}
	return byConsumer, nil
}

// namesConsumer reports whether a request on a route with this plugin set can have a
// consumer: an auth plugin in the set or in a global rule.
func namesConsumer(routeSet map[string]json.RawMessage, snap *conf.Snapshot) bool {
	isAuth := func(name string) bool {
		p, ok := plugins.Lookup(name)
		return ok && p.Auth
	}
	for name := range routeSet {
		if isAuth(name) {
			return true
		}
	}
	for i := range snap.GlobalRules {
		for name := range snap.GlobalRules[i].Plugins {
			if isAuth(name) {
				return true
			}
		}
	}
	return false
}

// buildGlobalRules builds one chain per global rule, in the snapshot's (creation) order,
// for requests that see info as their route. Each rule runs on its own, as APISIX's
// run_global_rules does: a plugin configured in two rules runs twice, and a rule whose
// access phase answers ends the request before the next rule. Rules that run nothing are
// dropped, and nil means there is nothing to run.
func buildGlobalRules(snap *conf.Snapshot, info *plugins.RouteInfo, shared *plugins.Shared) ([]*plugins.Chain, error) {
	var chains []*plugins.Chain
	for i := range snap.GlobalRules {
		g := &snap.GlobalRules[i]
		chain, err := plugins.BuildChain(g.Plugins, &plugins.Env{Route: info, Shared: shared, Snapshot: snap, GlobalRuleID: string(g.ID)})
		if err != nil {
			return nil, fmt.Errorf("global rule %s: %w", g.ID, err)
		}
		if !chain.Empty() {
			chains = append(chains, chain)
		}
	}
	return chains, nil
}

// healthTable is the upstream health table the master shares, nil when there is none
// (unit tests build tables without segments).
func healthTable(shared *plugins.Shared) (*shm.HealthTable, error) {
	if shared == nil || shared.Segments[plugins.HealthSegment] == nil {
		return nil, nil
	}
	table, err := shm.OpenHealthTable(shared.Segments[plugins.HealthSegment])
	if err != nil {
		return nil, fmt.Errorf("health checks: %w", err)
	}
	return table, nil
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

// routerOptions maps config.yaml's router.http, APISIX's router names, onto the router's
// options.
func routerOptions(cfg *conf.Config) router.Options {
	if cfg == nil {
		return router.Options{}
	}
	switch cfg.Router.HTTP {
	case conf.RouterURI:
		return router.Options{HostsAsCondition: true}
	case conf.RouterURIWithParameter:
		return router.Options{HostsAsCondition: true, Parameters: true}
	}
	return router.Options{}
}
