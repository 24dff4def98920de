package worker

import (
	"encoding/json"

	"errors"
	"fmt"
	"github.com/valyala/fasthttp"
	"maps"
	"runtime/debug"

	"gw/conf"
	"gw/plugins"
	"gw/shm"
	"gw/worker/proxy"
	"gw/worker/router"
)

// routeTable is one config snapshot compiled for serving: the router, each route's upstream
// and plugin chains, and the global rules. It is immutable once built: a request loads the
// current one once and uses it to the end, so a swap never disturbs requests in flight.
type routeTable struct {
	version uint64
	router  *router.Router
	routes  []*route // by router value; nil where a route was removed
	// index and built let the next write's table be made from this one (recompile): the
	// routes' places, and the objects they were built with. Only the latest table's
	// index is current; recompile takes it over.
	index *routeIndex
	built *builder
	// global runs the global rules for a request no route matched, with unmatched as
	// its route; nil without global rules.
	global    []*plugins.Chain
	unmatched plugins.RouteInfo
	// closed, when set, is the 503 body every request gets: a global rule cannot be
	// served, and serving without it could let in what it refuses.
	closed []byte
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
	// checksSnapshot is set when a plugin of the route checks the whole snapshot
	// (limit-count's group): a write to the route compiles everything (incremental.go).
	checksSnapshot bool // chosen are the upstreams the route's plugins may choose instead of its own
	// (plugins.UpstreamChooser: traffic-split), compiled with the route; nil without any.
	chosen []chosenSet
}

// chosenSet is one UpstreamChooser's upstreams, compiled: upstreams[i] is its
// Upstreams()[i]; nil where the upstream is missing (the route's own when it has none, a
// stored one deleted with ?force=true), which answers 503 with gone[i].
type chosenSet struct {
	chooser   plugins.UpstreamChooser
	upstreams []*proxy.Upstream
	gone      [][]byte
}

// compile builds a route table from a snapshot. No object stops it: an object that fails to
// build (an error, or a panic in the code that builds it) is left out of the table and
// named in leftOut, and whatever references it sees it as missing. The master runs the
// same code (Check) before it acknowledges a write, and sends workers the snapshot with
// such objects already removed, so a worker's compile leaves nothing out unless the two
// disagree. The error is for what no object explains (the shared health table).
//
// Upstreams referenced by id are compiled once and shared by every route that uses them,
// so they share one balancer rotation.
func compile(snap *conf.Snapshot, pools *proxy.Pools, shared *plugins.Shared) (t *routeTable, leftOut []conf.LeftOut, err error) {
	health, err := healthTable(shared)
	if err != nil {
		return nil, nil, err
	}
	b := &builder{snap: snap, pools: pools, shared: shared, health: health}
	b.t = &routeTable{version: snap.Version}
	snap.ResolveClientCerts() // upstream tls.client_cert_id: the ssl's pair, copied in
	b.indexObjects()
	b.buildGlobalRules()
	var entries []router.Entry
	var live []*proxy.Upstream
	opts := routerOptions(shared.Config)
	b.t.index = &routeIndex{slots: make(map[conf.ID]*routeSlot, len(snap.Routes)), nextOrder: len(snap.Routes)}
	for i := range snap.Routes {
		if b.t.closed != nil {
			break // every request is answered 503 before routing
		}
		r := &snap.Routes[i]
		slot := &routeSlot{order: i}
		b.t.index.place(slot, r)
		b.t.index.slots[r.ID] = slot
		if !r.Enabled() {
			continue
		}
		var built route
		var entry router.Entry
		err := b.guard(func() (err error) {
			built, entry, err = b.route(r)
			if err == nil {
				err = router.CheckEntry(&entry, opts)
			}
			return err
		})
		if err != nil {
			b.leaveOut("routes", r.ID, err)
			continue
		}
		entry.Value = len(b.t.routes)
		built.checksSnapshot = checksSnapshot(r.Plugins)
		slot.value, slot.entry, slot.placed = entry.Value, entry, true
		entries = append(entries, entry)
		b.t.routes = append(b.t.routes, &built)
		live = built.appendLive(live)
	}
	rtr, err := router.BuildWith(entries, opts)
	if err != nil {
		return nil, nil, err // CheckEntry passed every entry: a router bug
	}
	b.t.router = rtr
	b.t.built = b
	// Every stored upstream stays live, used or not: a later write of routes alone
	// (recompile) takes them as compiled here, pools included.
	for _, u := range b.compiled {
		live = append(live, u)
	}
	pools.Retain(live)
	return b.t, b.leftOut, nil
}

// appendLive appends the upstreams r proxies to, its own and those its plugins may
// choose, for Pools.Retain.
func (r *route) appendLive(live []*proxy.Upstream) []*proxy.Upstream {
	if r.upstream != nil {
		live = append(live, r.upstream)
	}
	for _, set := range r.chosen {
		for _, up := range set.upstreams {
			if up != nil {
				live = append(live, up)
			}
		}
	}
	return live
}

// builder is one compile's state: the snapshot's objects by id, those compiled so far and
// those left out.
type builder struct {
	snap   *conf.Snapshot
	pools  *proxy.Pools
	shared *plugins.Shared
	health *shm.HealthTable
	t      *routeTable
	// plugins builds the snapshot's chains, which share each plugin's snapshot state
	// (plugins.SnapshotBuilder); indexObjects starts it once the consumers are known.
	plugins *plugins.SnapshotBuild

	upstreams     map[conf.ID]*conf.Upstream
	services      map[conf.ID]*conf.Service
	pluginConfigs map[conf.ID]*conf.PluginConfig
	// compiled are the stored upstreams, compiled without a route's timeout.
	compiled map[conf.ID]*proxy.Upstream
	leftOut  []conf.LeftOut
}

// guard runs build, turning a panic into an error: building one object's configuration
// must never take the worker down, whatever the configuration holds. The stack goes to
// logf, which may be nil; the error, which an Admin API client may read, holds only the
// panic's value.
func guard(logf func(format string, args ...any), build func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("BUG: building it panicked: %v", p)
			if logf != nil {
				logf("%v\n%s", err, debug.Stack())
			}
		}
	}()
	return build()
}

// guard is guard with the compile's logger.
func (b *builder) guard(build func() error) error {
	var logf func(string, ...any)
	if b.shared != nil {
		logf = b.shared.Logf
	}
	return guard(logf, build)
}

func (b *builder) leaveOut(kind string, id conf.ID, err error) {
	b.leftOut = append(b.leftOut, conf.LeftOut{Kind: kind, ID: id, Reason: err.Error()})
}

// checkMetadata leaves out the stored plugin_metadata whose plugin refuses it (written
// to etcd by hand, or by a binary whose plugin read it otherwise), first, so that no
// chain is built with it: its plugin then builds as without metadata.
func (b *builder) checkMetadata() {
	snap := b.snap
	kept := snap.PluginMetadata[:0:0]
	for i := range snap.PluginMetadata {
		m := &snap.PluginMetadata[i]
		if err := b.guard(func() error { return plugins.ValidateMetadata(m.Name, m.Value) }); err != nil {
			b.leaveOut("plugin_metadata", conf.ID(m.Name), err)
			continue
		}
		kept = append(kept, *m)
	}
	if len(kept) != len(snap.PluginMetadata) {
		snap.PluginMetadata = kept
	}
}

// indexObjects builds every object that routes reference on its own, so that a failure
// is blamed on that object rather than on each route using it: a stored upstream is
// compiled, a service's inline upstream too, and the plugins of services, plugin_configs
// and consumers are built as a chain. What fails is left out of the indexes.
func (b *builder) indexObjects() {
	snap := b.snap
	b.checkMetadata()
	b.upstreams = make(map[conf.ID]*conf.Upstream, len(snap.Upstreams))
	b.compiled = make(map[conf.ID]*proxy.Upstream, len(snap.Upstreams))
	for i := range snap.Upstreams {
		b.indexUpstream(&snap.Upstreams[i])
	}
	probe := b.probe()
	b.services = make(map[conf.ID]*conf.Service, len(snap.Services))
	for i := range snap.Services {
		b.indexService(&snap.Services[i], probe)
	}
	b.pluginConfigs = make(map[conf.ID]*conf.PluginConfig, len(snap.PluginConfigs))
	for i := range snap.PluginConfigs {
		b.indexPluginConfig(&snap.PluginConfigs[i], probe)
	}
	// A consumer left out names no request: its credentials are gone from the snapshot
	// the auth plugins read, so its key is refused (401), never let in without its own
	// plugins.
	kept := snap.Consumers[:0:0]
	for i := range snap.Consumers {
		c := &snap.Consumers[i]
		if err := b.builds(consumerPlugins(c), probe); err != nil {
			b.leaveOut("consumers", conf.ID(c.Username), err)
			continue
		}
		kept = append(kept, *c)
	}
	if len(kept) != len(snap.Consumers) {
		snap.Consumers = kept
	}
	b.plugins = plugins.NewSnapshotBuild(snap, b.shared)
}

// buildGlobalRules builds the global rules for requests no route matched. A global rule
// that cannot be built, or that the master left out, closes the gateway instead: every
// request gets a 503 naming it, since serving without it could let in what it refuses
// (a key-auth or ip-restriction global rule).
func (b *builder) buildGlobalRules() {
	if err := b.guard(func() (err error) {
		b.t.global, err = buildGlobalRules(b.snap, &b.t.unmatched, b.plugins)
		return err
	}); err != nil {
		b.t.global = nil
		b.t.closed = closedBody(err.Error())
		var failed *globalRuleError
		id := conf.ID("")
		if errors.As(err, &failed) {
			id = failed.id
		}
		b.leaveOut("global_rules", id, err)
		return
	}
	for _, l := range b.snap.LeftOut {
		if l.Kind == "global_rules" {
			b.t.closed = closedBody("global rule " + string(l.ID) + " is left out: " + l.Reason)
			return
		}
	}
}

// probe is the Env the objects' own builds share. It has a SnapshotBuild of its own: the
// consumers are not all known to be served yet, and what a plugin makes of the snapshot
// (key-auth's index of keys) must not count one that is left out.
func (b *builder) probe() *plugins.Env {
	return plugins.NewSnapshotBuild(b.snap, b.shared).Env(&plugins.RouteInfo{}, "")
}

// builds reports whether set builds as a chain.
func (b *builder) builds(set map[string]json.RawMessage, probe *plugins.Env) error {
	return b.guard(func() error {
		_, err := plugins.BuildChain(set, probe)
		return err
	})
}

// indexUpstream compiles a stored upstream into the indexes, or leaves it out.
func (b *builder) indexUpstream(u *conf.Upstream) {
	var c *proxy.Upstream
	err := b.guard(func() (err error) {
		c, err = b.pools.CheckedUpstream(u, nil, b.health, conf.HealthUpstreamPrefix+string(u.ID))
		return err
	})
	if err != nil {
		b.leaveOut("upstreams", u.ID, err)
		return
	}
	b.upstreams[u.ID], b.compiled[u.ID] = u, c
}

// indexService checks that a service's plugins and its inline upstream build, and indexes
// it, or leaves it out.
func (b *builder) indexService(svc *conf.Service, probe *plugins.Env) {
	err := b.builds(svc.Plugins, probe)
	if err == nil && svc.Upstream != nil {
		err = b.guard(func() error {
			_, err := b.pools.CheckedUpstream(svc.Upstream, nil, b.health, conf.HealthServicePrefix+string(svc.ID))
			return err
		})
	}
	if err != nil {
		b.leaveOut("services", svc.ID, err)
		return
	}
	b.services[svc.ID] = svc
}

// indexPluginConfig checks that a plugin_config's plugins build, and indexes it, or
// leaves it out.
func (b *builder) indexPluginConfig(pc *conf.PluginConfig, probe *plugins.Env) {
	if err := b.builds(pc.Plugins, probe); err != nil {
		b.leaveOut("plugin_configs", pc.ID, err)
		return
	}
	b.pluginConfigs[pc.ID] = pc
}

// route builds one route's table entry and router entry. A reference to an object the
// snapshot lacks (deleted with ?force=true, or left out) is not an error: the route
// answers 503 naming it, and everything else keeps serving.
func (b *builder) route(r *conf.Route) (route, router.Entry, error) {
	var svc *conf.Service
	var missing []byte
	if r.ServiceID != "" {
		if svc = b.services[r.ServiceID]; svc == nil {
			// The service's plugins (its auth) cannot run: nothing of the route runs.
			missing = unavailableBody("service " + string(r.ServiceID) + " not found")
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
		return route{}, router.Entry{}, err
	}
	vars, err := conf.ParseVars(r.Vars)
	if err != nil {
		return route{}, router.Entry{}, err
	}
	entry := router.Entry{
		Paths: r.Paths(), Methods: r.Methods, Hosts: hosts, Priority: r.Priority,
		RemoteAddrs: remoteAddrs, Vars: vars,
	}
	rt := route{info: routeInfo(r, svc)}
	if missing != nil {
		rt.unavailable = missing
		return rt, entry, nil
	}
	var pc *conf.PluginConfig
	if r.PluginConfigID != "" {
		if pc = b.pluginConfigs[r.PluginConfigID]; pc == nil {
			rt.unavailable = pluginConfigGoneBody
			return rt, entry, nil
		}
	}
	up, gone, err := b.upstreamOf(r, svc)
	if err != nil {
		return route{}, router.Entry{}, err
	}
	if up != nil && (r.EnableWebsocket || (svc != nil && svc.EnableWebsocket)) {
		up = up.WithWebsocket() // shares the balancer with the route's other users
	}
	rt.upstream = up
	if gone != "" {
		// The route's own plugins still run (an auth plugin answers first), then 503.
		rt.unavailable = unavailableBody("upstream " + gone + " not found")
	}
	if err := rt.buildChains(r, svc, pc, b.plugins, b.snap); err != nil {
		return route{}, router.Entry{}, err
	}
	if err := b.buildChosen(&rt, r, svc); err != nil {
		return route{}, router.Entry{}, err
	}
	return rt, entry, nil
}

// buildChosen compiles the upstreams the route's plugins may choose (chosenSet), as the
// route's own is compiled: a stored one is the snapshot's (with the route's timeout, a
// distinct one), an inline one the route's, and an empty reference is the route's own.
func (b *builder) buildChosen(rt *route, r *conf.Route, svc *conf.Service) error {
	choosers := rt.chain.Choosers()
	for _, g := range rt.global {
		choosers = append(choosers, g.Choosers()...)
	}
	websocket := r.EnableWebsocket || (svc != nil && svc.EnableWebsocket)
	for _, chooser := range choosers {
		refs := chooser.Upstreams()
		set := chosenSet{chooser: chooser, upstreams: make([]*proxy.Upstream, len(refs)), gone: make([][]byte, len(refs))}
		for i, ref := range refs {
			var up *proxy.Upstream
			var gone string
			var err error
			switch {
			case ref.Upstream != nil:
				up, err = b.pools.Upstream(ref.Upstream, r.Timeout)
			case ref.ID != "":
				up, gone, err = b.namedUpstream(ref.ID, r.Timeout)
			default:
				up = rt.upstream
				if up == nil {
					set.gone[i] = rt.unavailable
					if set.gone[i] == nil {
						set.gone[i] = noUpstreamBody
					}
				}
			}
			if err != nil {
				return err
			}
			if up != nil && websocket && (ref.ID != "" || ref.Upstream != nil) {
				up = up.WithWebsocket() // the route's own has it already
			}
			if gone != "" {
				set.gone[i] = unavailableBody("upstream " + gone + " not found")
			}
			set.upstreams[i] = up
		}
		rt.chosen = append(rt.chosen, set)
	}
	return nil
}

// proxyChosen proxies the request to the upstream a plugin chose (c.ChosenUpstream), or
// to the route's own when none did.
func (r *route) proxyChosen(ctx *fasthttp.RequestCtx, info *proxy.Info, c *plugins.Ctx) {
	chooser, i := c.ChosenUpstream()
	if chooser == nil {
		r.proxy(ctx, info)
		return
	}
	for k := range r.chosen {
		set := &r.chosen[k]
		if set.chooser != chooser || i < 0 || i >= len(set.upstreams) {
			continue
		}
		if up := set.upstreams[i]; up != nil {
			forwardTo(ctx, up, info)
			return
		}
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, set.gone[i])
		return
	}
	r.proxy(ctx, info) // BUG: a choice the route never compiled; the route's own serves
}

// upstreamOf compiles the upstream r uses: its own, the one it names, its service's own
// or the one its service names. gone is the id of a named upstream the snapshot lacks.
func (b *builder) upstreamOf(r *conf.Route, svc *conf.Service) (up *proxy.Upstream, gone string, err error) {
	named := func(id conf.ID) (*proxy.Upstream, string, error) { return b.namedUpstream(id, r.Timeout) }
	switch {
	case r.Upstream != nil:
		up, err = b.pools.CheckedUpstream(r.Upstream, r.Timeout, b.health, conf.HealthRoutePrefix+string(r.ID))
	case r.UpstreamID != "":
		return named(r.UpstreamID)
	case svc != nil && svc.Upstream != nil:
		up, err = b.pools.CheckedUpstream(svc.Upstream, r.Timeout, b.health, conf.HealthServicePrefix+string(svc.ID))
	case svc != nil && svc.UpstreamID != "":
		return named(svc.UpstreamID)
	}
	return up, "", err
}

// namedUpstream is the stored upstream id compiled, with a route's timeout when it has
// one; gone is id when the snapshot lacks it.
func (b *builder) namedUpstream(id conf.ID, routeTimeout *conf.Timeout) (up *proxy.Upstream, gone string, err error) {
	u, ok := b.upstreams[id]
	if !ok {
		return nil, string(id), nil
	}
	if routeTimeout != nil { // a route's own timeout makes its upstream distinct
		up, err = b.pools.CheckedUpstream(u, routeTimeout, b.health, conf.HealthUpstreamPrefix+string(id))
		return up, "", err
	}
	return b.compiled[id], "", nil
}

// unavailableBody is the 503 body of a route that references what the snapshot lacks.
func unavailableBody(why string) []byte {
	body, _ := json.Marshal(struct {
		ErrorMsg string `json:"error_msg"`
	}{"503 Service Unavailable: " + why})
	return append(body, '\n')
}

// closedBody is the 503 body every request gets while a global rule cannot be served.
func closedBody(why string) []byte {
	return unavailableBody(why)
}

// consumerPlugins is what a consumer merges into a route's chain: its plugins other than
// its credentials (the auth plugins' configurations).
func consumerPlugins(c *conf.Consumer) map[string]json.RawMessage {
	var set map[string]json.RawMessage
	for name, raw := range c.Plugins {
		if _, ok := plugins.Lookup(name); !ok || plugins.IsAuth(name) {
			continue
		}
		if set == nil {
			set = map[string]json.RawMessage{}
		}
		set[name] = raw
	}
	return set
}

// buildChains builds the route's own chain and its copy of the global rules. The route's
// plugins are its service's, then its plugin_config's, then its own, a later
// configuration of a plugin replacing an earlier one (APISIX: route > plugin_config >
// service).
func (rt *route) buildChains(r *conf.Route, svc *conf.Service, pc *conf.PluginConfig, build *plugins.SnapshotBuild, snap *conf.Snapshot) error {
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
	env := build.Env(&rt.info, "")
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
	global, err := buildGlobalRules(snap, &rt.info, build)
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
			if _, ok := plugins.Lookup(name); !ok || plugins.IsAuth(name) {
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
	for name := range routeSet {
		if plugins.IsAuth(name) {
			return true
		}
	}
	for i := range snap.GlobalRules {
		for name := range snap.GlobalRules[i].Plugins {
			if plugins.IsAuth(name) {
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
func buildGlobalRules(snap *conf.Snapshot, info *plugins.RouteInfo, build *plugins.SnapshotBuild) ([]*plugins.Chain, error) {
	var chains []*plugins.Chain
	for i := range snap.GlobalRules {
		g := &snap.GlobalRules[i]
		chain, err := plugins.BuildChain(g.Plugins, build.Env(info, string(g.ID)))
		if err != nil {
			return nil, &globalRuleError{id: g.ID, err: err}
		}
		if !chain.Empty() {
			chains = append(chains, chain)
		}
	}
	return chains, nil
}

// globalRuleError is a global rule that failed to build.
type globalRuleError struct {
	id  conf.ID
	err error
}

func (e *globalRuleError) Error() string { return fmt.Sprintf("global rule %s: %v", e.id, e.err) }
func (e *globalRuleError) Unwrap() error { return e.err }

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

func routeInfo(r *conf.Route, svc *conf.Service) plugins.RouteInfo {
	info := plugins.RouteInfo{ID: string(r.ID), Name: r.Name}
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
