package worker

import (
	"encoding/json"
	"maps"
	"slices"

	"gw/conf"
	"gw/plugins"
	"gw/worker/proxy"
	"gw/worker/router"
)

// A write that changes routes, stored upstreams, services or plugin_configs is built
// from the table before it: the changed routes, and the routes that use a changed object,
// are built; the router gets them with Router.With and Router.Without (copying only the
// tree nodes on their keys); the changed objects are compiled into copies of the
// builder's indexes; everything else is shared. A write costs what it touches, not what
// the whole config holds. A write of consumers, global rules or ssls changes what every
// chain (or the TLS table) is built from, and a route whose plugins check the whole
// snapshot (limit-count's group) needs every object at once: those compile the whole
// snapshot, as a new worker does.

// routeIndex is where each route of the latest table stands: its router value (its
// place in table.routes) and its order (its place in the snapshot's creation order,
// which breaks ties in the router as Build's index does). A replaced route keeps both.
type routeIndex struct {
	slots     map[conf.ID]*routeSlot
	free      []int // router values of removed routes, for the next new ones
	nextOrder int
	// users are the routes that name each object by id (upstream_id, service_id,
	// plugin_config_id), so that a write of one finds them without reading every route.
	users map[objectRef]map[conf.ID]struct{}
}

// objectRef names a stored object: its kind (as in a Change) and id.
type objectRef struct {
	kind string
	id   conf.ID
}

// refsOf are the objects r names by id: by its upstream_id, service_id and
// plugin_config_id, and the upstreams its own plugins name (traffic-split's upstream_id,
// plugins.UpstreamReferrer).
func refsOf(r *conf.Route) []objectRef {
	refs := []objectRef{{"upstreams", r.UpstreamID}, {"services", r.ServiceID}, {"plugin_configs", r.PluginConfigID}}
	for _, id := range plugins.UpstreamIDsOf(r.Plugins) {
		refs = append(refs, objectRef{"upstreams", id})
	}
	return refs
}

// place records that slot holds r from now on, for users.
func (idx *routeIndex) place(slot *routeSlot, r *conf.Route) {
	if slot.route != nil {
		idx.forget(slot.route)
	}
	slot.route = r
	if idx.users == nil {
		idx.users = map[objectRef]map[conf.ID]struct{}{}
	}
	for _, ref := range refsOf(r) {
		if ref.id == "" {
			continue
		}
		set := idx.users[ref]
		if set == nil {
			set = map[conf.ID]struct{}{}
			idx.users[ref] = set
		}
		set[r.ID] = struct{}{}
	}
}

// forget undoes place for r, a route leaving its slot.
func (idx *routeIndex) forget(r *conf.Route) {
	for _, ref := range refsOf(r) {
		if set := idx.users[ref]; set != nil {
			delete(set, r.ID)
			if len(set) == 0 {
				delete(idx.users, ref)
			}
		}
	}
}

// routeSlot is one route's place. placed is false for a route that is disabled or was
// left out: it has an order but no router entry. route is the route as last written.
type routeSlot struct {
	route  *conf.Route
	value  int
	order  int
	entry  router.Entry
	placed bool
}

// routeList is every route of the index, in the snapshot's order: a whole snapshot's
// Routes, made only when a write needs a whole compile.
func (idx *routeIndex) routeList() []conf.Route {
	slots := make([]*routeSlot, 0, len(idx.slots))
	for _, s := range idx.slots {
		slots = append(slots, s)
	}
	slices.SortFunc(slots, func(a, b *routeSlot) int { return a.order - b.order })
	routes := make([]conf.Route, len(slots))
	for i, s := range slots {
		routes[i] = *s.route
	}
	return routes
}

// snapshotOf is the whole snapshot t serves: base's objects but routes, which t's index
// holds (base's may be older: a write of routes alone does not copy the snapshot).
func snapshotOf(t *routeTable, base *conf.Snapshot, leftOut []conf.LeftOut) *conf.Snapshot {
	snap := *base
	if t != nil && t.index != nil {
		snap.Routes = t.index.routeList()
		snap.Version = t.version
	}
	snap.LeftOut = leftOut
	return &snap
}

// update is a delta as recompile builds it.
type update struct {
	d *conf.Delta
	// base is the snapshot the table's objects other than routes are built from once d
	// is applied (its routes may be older: the table's index holds them).
	base *conf.Snapshot
	// objects are d's changes of upstreams, services and plugin_configs.
	objects []*conf.Change
	// routes are the routes to build again, each as it is after d: d's own, then those
	// that use an object d changes.
	routes []conf.Change
}

// planUpdate returns how d is built from prev, the latest table, and base, the snapshot
// it was built with; false when d must compile the whole snapshot.
func planUpdate(prev *routeTable, d *conf.Delta, base *conf.Snapshot) (*update, bool) {
	if prev == nil || prev.index == nil || prev.built == nil || prev.closed != nil {
		return nil, false
	}
	u := &update{d: d, base: base}
	for i := range d.Changes {
		c := &d.Changes[i]
		switch c.Kind {
		case "routes":
			if c.Route != nil && checksSnapshot(c.Route.Plugins) {
				return nil, false
			}
			if slot := prev.index.slots[c.ID]; slot != nil && slot.placed && prev.routes[slot.value].checksSnapshot {
				return nil, false
			}
			u.routes = append(u.routes, *c)
		case "upstreams":
			if pluginsNameUpstreams(prev.built.snap) {
				return nil, false // a global rule's or consumer's plugins name upstreams
			}
			u.objects = append(u.objects, c)
		case "services":
			if (c.Service != nil && checksSnapshot(c.Service.Plugins)) ||
				(prev.built.services[c.ID] != nil && checksSnapshot(prev.built.services[c.ID].Plugins)) {
				return nil, false
			}
			u.objects = append(u.objects, c)
		case "plugin_configs":
			if (c.PluginConfig != nil && checksSnapshot(c.PluginConfig.Plugins)) ||
				(prev.built.pluginConfigs[c.ID] != nil && checksSnapshot(prev.built.pluginConfigs[c.ID].Plugins)) {
				return nil, false
			}
			u.objects = append(u.objects, c)
		default:
			return nil, false
		}
	}
	if len(u.objects) == 0 {
		return u, true
	}
	objects := &conf.Delta{From: d.From, To: d.To, LeftOut: d.LeftOut}
	for _, c := range u.objects {
		objects.Changes = append(objects.Changes, *c)
	}
	u.base = base.Apply(objects)
	return u, u.addUsers(prev)
}

// addUsers adds to u.routes every route of prev that uses an object u changes: through
// its upstream_id, its service_id (the service's upstream_id too, before d and after it)
// or its plugin_config_id. false when such a route checks the whole snapshot.
func (u *update) addUsers(prev *routeTable) bool {
	changed := map[string]map[conf.ID]bool{"upstreams": {}, "services": {}, "plugin_configs": {}}
	for _, c := range u.objects {
		changed[c.Kind][c.ID] = true
	}
	upstreams, services, pluginConfigs := changed["upstreams"], changed["services"], changed["plugin_configs"]
	namesChanged := func(set map[string]json.RawMessage) bool {
		return slices.ContainsFunc(plugins.UpstreamIDsOf(set), func(id conf.ID) bool { return upstreams[id] })
	}
	for _, svcs := range [][]conf.Service{prev.built.snap.Services, u.base.Services} {
		for i := range svcs {
			if upstreams[svcs[i].UpstreamID] || namesChanged(svcs[i].Plugins) {
				services[svcs[i].ID] = true
			}
		}
	}
	for _, pcs := range [][]conf.PluginConfig{prev.built.snap.PluginConfigs, u.base.PluginConfigs} {
		for i := range pcs {
			if namesChanged(pcs[i].Plugins) {
				pluginConfigs[pcs[i].ID] = true
			}
		}
	}
	own := make(map[conf.ID]bool, len(u.routes))
	for i := range u.routes {
		own[u.routes[i].ID] = true
	}
	var users []*routeSlot
	for kind, ids := range changed {
		for id := range ids {
			for rid := range prev.index.users[objectRef{kind, id}] {
				if !own[rid] {
					own[rid] = true
					users = append(users, prev.index.slots[rid])
				}
			}
		}
	}
	// In the snapshot's order, so that every build of one delta is the same.
	slices.SortFunc(users, func(a, b *routeSlot) int { return a.order - b.order })
	for _, slot := range users {
		if checksSnapshot(slot.route.Plugins) {
			return false
		}
		u.routes = append(u.routes, conf.ChangeOf("routes", slot.route.ID, slot.route))
	}
	return true
}

// pluginsNameUpstreams reports whether a global rule's or a consumer's plugins name a
// stored upstream (traffic-split's upstream_id): their chains are built into every
// route, so a write of an upstream compiles the whole snapshot.
func pluginsNameUpstreams(snap *conf.Snapshot) bool {
	for i := range snap.GlobalRules {
		if len(plugins.UpstreamIDsOf(snap.GlobalRules[i].Plugins)) > 0 {
			return true
		}
	}
	for i := range snap.Consumers {
		if len(plugins.UpstreamIDsOf(snap.Consumers[i].Plugins)) > 0 {
			return true
		}
	}
	return false
}

// incremental reports whether d can be built from prev alone (recompile).
func incremental(prev *routeTable, d *conf.Delta, base *conf.Snapshot) bool {
	_, ok := planUpdate(prev, d, base)
	return ok
}

// checksSnapshot reports whether a plugin of set checks a rule across the snapshot.
func checksSnapshot(set map[string]json.RawMessage) bool {
	return plugins.ChecksSnapshot(set)
}

// builtRoute is one changed route of a delta, built but not placed.
type builtRoute struct {
	id    conf.ID
	route *route // nil: the route is deleted, disabled or failed
	entry router.Entry
}

// buildChanged builds the objects u changes and the routes it names, against prev's
// objects, into a copy of prev's builder (prev's own is shared with the table serving
// now). It changes nothing; failures are returned as the objects left out.
func buildChanged(prev *routeTable, u *update) ([]builtRoute, *builder, []conf.LeftOut) {
	b := *prev.built
	b.snap, b.leftOut = u.base, nil
	// Plugins see the snapshot being built (Env.Snapshot: traffic-split looks up the
	// upstreams it names), with the states prev's build made.
	b.plugins = prev.built.plugins.For(u.base)
	if len(u.objects) > 0 {
		b.reindex(u.objects, u.d.LeftOut)
	}
	d, base := u.d, u.base
	opts := routerOptions(b.shared.Config)
	var out []builtRoute
	for i := range u.routes {
		c := &u.routes[i]
		br := builtRoute{id: c.ID}
		if r := c.Route; r != nil && r.Enabled() && !isLeftOut(d.LeftOut, "routes", c.ID) {
			var built route
			err := b.guard(func() (err error) {
				base.ResolveClientCert(r.Upstream)
				built, br.entry, err = b.route(r)
				if err == nil {
					err = router.CheckEntry(&br.entry, opts)
				}
				return err
			})
			if err != nil {
				b.leaveOut("routes", r.ID, err)
				continue
			}
			built.checksSnapshot = checksSnapshot(r.Plugins)
			br.route = &built
		}
		out = append(out, br)
	}
	return out, &b, b.leftOut
}

func isLeftOut(leftOut []conf.LeftOut, kind string, id conf.ID) bool {
	for i := range leftOut {
		if leftOut[i].Kind == kind && leftOut[i].ID == id {
			return true
		}
	}
	return false
}

// recompile makes the table of the snapshot after u's delta from prev, the latest table,
// when planUpdate allows it. It takes prev's index over; on failure (what it leaves out)
// it changes nothing.
func recompile(prev *routeTable, u *update) (*routeTable, []conf.LeftOut, error) {
	changed, built, leftOut := buildChanged(prev, u)
	if len(leftOut) > 0 {
		return nil, leftOut, nil
	}
	t := &routeTable{
		version: u.d.To, router: prev.router, routes: slices.Clone(prev.routes),
		index: prev.index, built: built,
		global: prev.global, unmatched: prev.unmatched,
	}
	idx := t.index
	final := lastRoutes(u.routes)
	for i, c := range changed {
		slot := idx.slots[c.id]
		if slot != nil && slot.placed {
			t.router = t.router.Without(slot.entry)
			t.routes[slot.value] = nil
			idx.free = append(idx.free, slot.value)
			slot.placed = false
		}
		route := final[c.id]
		if route == nil { // deleted
			if slot != nil {
				idx.forget(slot.route)
			}
			delete(idx.slots, c.id)
			continue
		}
		if slot == nil {
			slot = &routeSlot{order: idx.nextOrder}
			idx.nextOrder++
			idx.slots[c.id] = slot
		}
		idx.place(slot, route)
		if changed[i].route == nil {
			continue // disabled, or left out: it keeps its order for when it comes back
		}
		value := len(t.routes)
		if n := len(idx.free); n > 0 {
			value, idx.free = idx.free[n-1], idx.free[:n-1]
		} else {
			t.routes = append(t.routes, nil)
		}
		c.entry.Value = value
		r, err := t.router.With(c.entry, slot.order)
		if err != nil {
			return nil, nil, err // CheckEntry passed it: a router bug
		}
		t.router, t.routes[value] = r, c.route
		slot.value, slot.entry, slot.placed = value, c.entry, true
	}
	if len(u.objects) > 0 {
		// A replaced or deleted upstream's connections go, as after a whole compile.
		live := make([]*proxy.Upstream, 0, len(t.routes)+len(built.compiled))
		for _, r := range t.routes {
			if r != nil {
				live = r.appendLive(live)
			}
		}
		for _, c := range built.compiled {
			live = append(live, c)
		}
		built.pools.Retain(live)
	}
	return t, nil, nil
}

// reindex compiles the objects of changes into copies of b's indexes, as indexObjects
// compiles every one: what fails, or the master left out, is left out of them.
func (b *builder) reindex(changes []*conf.Change, leftOut []conf.LeftOut) {
	b.upstreams, b.compiled = maps.Clone(b.upstreams), maps.Clone(b.compiled)
	b.services, b.pluginConfigs = maps.Clone(b.services), maps.Clone(b.pluginConfigs)
	probe := b.probe()
	for _, c := range changes {
		gone := isLeftOut(leftOut, c.Kind, c.ID)
		switch c.Kind {
		case "upstreams":
			delete(b.upstreams, c.ID)
			delete(b.compiled, c.ID)
			if c.Upstream != nil && !gone {
				b.indexUpstream(c.Upstream)
			}
		case "services":
			delete(b.services, c.ID)
			if c.Service != nil && !gone {
				b.indexService(c.Service, probe)
			}
		case "plugin_configs":
			delete(b.pluginConfigs, c.ID)
			if c.PluginConfig != nil && !gone {
				b.indexPluginConfig(c.PluginConfig, probe)
			}
		}
	}
}

// lastRoutes maps each route id of changes to the route it is left as, nil when
// deleted.
func lastRoutes(changes []conf.Change) map[conf.ID]*conf.Route {
	final := make(map[conf.ID]*conf.Route, len(changes))
	for i := range changes {
		final[changes[i].ID] = changes[i].Route
	}
	return final
}
