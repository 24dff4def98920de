package worker

import (
	"encoding/json"
	"slices"

	"gw/conf"
	"gw/plugins"
	"gw/worker/router"
)

// A write that changes only routes is built from the table before it: the changed
// routes are built, the router gets them with Router.With and Router.Without (copying
// only the tree nodes on their keys), and everything else is shared. A write costs what
// its own routes cost, not what the whole config holds. Any other write, or a route
// whose plugins check the whole snapshot (limit-count's group), compiles the whole
// snapshot, as a new worker does.

// routeIndex is where each route of the latest table stands: its router value (its
// place in table.routes) and its order (its place in the snapshot's creation order,
// which breaks ties in the router as Build's index does). A replaced route keeps both.
type routeIndex struct {
	slots     map[conf.ID]*routeSlot
	free      []int // router values of removed routes, for the next new ones
	nextOrder int
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

// incremental reports whether d can be built from prev alone (recompile).
func incremental(prev *routeTable, d *conf.Delta) bool {
	if prev == nil || prev.index == nil || prev.built == nil || prev.closed != nil {
		return false
	}
	for i := range d.Changes {
		c := &d.Changes[i]
		if c.Kind != "routes" || (c.Route != nil && checksSnapshot(c.Route.Plugins)) {
			return false
		}
		if slot := prev.index.slots[c.ID]; slot != nil && slot.placed && prev.routes[slot.value].checksSnapshot {
			return false
		}
	}
	return true
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

// buildChanged builds the routes d puts, against prev's objects; base is the snapshot
// prev was built with, whose objects other than routes d leaves as they are. It changes
// nothing; failures are returned as the objects left out.
func buildChanged(prev *routeTable, d *conf.Delta, base *conf.Snapshot) ([]builtRoute, []conf.LeftOut) {
	b := *prev.built
	b.snap, b.leftOut = base, nil
	opts := routerOptions(b.shared.Config)
	var out []builtRoute
	for i := range d.Changes {
		c := &d.Changes[i]
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
	return out, b.leftOut
}

func isLeftOut(leftOut []conf.LeftOut, kind string, id conf.ID) bool {
	for i := range leftOut {
		if leftOut[i].Kind == kind && leftOut[i].ID == id {
			return true
		}
	}
	return false
}

// recompile makes the table of the snapshot after d from prev, the latest table, when
// incremental(prev, d); base is the snapshot prev was built with. It takes prev's index
// over; on failure (what it leaves out) it changes nothing.
func recompile(prev *routeTable, d *conf.Delta, base *conf.Snapshot) (*routeTable, []conf.LeftOut, error) {
	changed, leftOut := buildChanged(prev, d, base)
	if len(leftOut) > 0 {
		return nil, leftOut, nil
	}
	t := &routeTable{
		version: d.To, router: prev.router, routes: slices.Clone(prev.routes),
		index: prev.index, built: prev.built,
		global: prev.global, unmatched: prev.unmatched,
	}
	idx := t.index
	final := lastRoutes(d)
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
			delete(idx.slots, c.id)
			continue
		}
		if slot == nil {
			slot = &routeSlot{order: idx.nextOrder}
			idx.nextOrder++
			idx.slots[c.id] = slot
		}
		slot.route = route
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
	return t, nil, nil
}

// lastRoutes maps each route id d changes to the route d leaves it as, nil when d
// deletes it.
func lastRoutes(d *conf.Delta) map[conf.ID]*conf.Route {
	final := make(map[conf.ID]*conf.Route, len(d.Changes))
	for i := range d.Changes {
		if c := &d.Changes[i]; c.Kind == "routes" {
			final[c.ID] = c.Route
		}
	}
	return final
}
