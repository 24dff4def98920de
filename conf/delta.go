package conf

import "slices"

// Delta is one accepted write as the workers apply it: the objects it stores, whole, and
// the ones it deletes, taking a snapshot from version From to version To. The master
// sends a worker that serves From this instead of the whole snapshot, so that a write
// costs the same whatever the config holds; a worker at any other version gets the whole
// snapshot. Applying a delta to a snapshot that already holds it changes nothing: every
// change is a whole object or a delete.
type Delta struct {
	From    uint64   `json:"from"`
	To      uint64   `json:"to"`
	Changes []Change `json:"changes"`
	// LeftOut is the whole list of objects version To leaves out (see Snapshot.LeftOut).
	LeftOut []LeftOut `json:"left_out,omitempty"`
}

// Change is one object of a Delta. Kind and ID name it; for a put exactly one of the
// object fields is set, of Kind's type; a delete sets none.
type Change struct {
	Kind string `json:"kind"`
	ID   ID     `json:"id"`

	Route        *Route        `json:"route,omitempty"`
	Upstream     *Upstream     `json:"upstream,omitempty"`
	Service      *Service      `json:"service,omitempty"`
	Consumer     *Consumer     `json:"consumer,omitempty"`
	PluginConfig *PluginConfig `json:"plugin_config,omitempty"`
	GlobalRule   *GlobalRule   `json:"global_rule,omitempty"`
	SSL          *SSL          `json:"ssl,omitempty"`
}

// Deleted reports whether the change deletes its object.
func (c *Change) Deleted() bool {
	return c.Route == nil && c.Upstream == nil && c.Service == nil && c.Consumer == nil &&
		c.PluginConfig == nil && c.GlobalRule == nil && c.SSL == nil
}

// Key is "kind/id", as LeftOut.Key.
func (c *Change) Key() string { return c.Kind + "/" + string(c.ID) }

// ChangeOf is the change that stores v (a *Route, *Upstream, ... as the store decodes
// them) as kind/id; a nil v deletes it.
func ChangeOf(kind string, id ID, v any) Change {
	c := Change{Kind: kind, ID: id}
	switch o := v.(type) {
	case *Route:
		c.Route = o
	case *Upstream:
		c.Upstream = o
	case *Service:
		c.Service = o
	case *Consumer:
		c.Consumer = o
	case *PluginConfig:
		c.PluginConfig = o
	case *GlobalRule:
		c.GlobalRule = o
	case *SSL:
		c.SSL = o
	}
	return c
}

// Apply returns s with d's changes made and d's LeftOut: a changed object keeps its place
// in its kind's list, a new one goes last, as the store orders them (creation order). The
// lists of kinds d does not change are shared with s; s is not changed.
func (s *Snapshot) Apply(d *Delta) *Snapshot {
	next := *s
	next.Version = d.To
	next.LeftOut = d.LeftOut
	for i := range d.Changes {
		c := &d.Changes[i]
		switch c.Kind {
		case "routes":
			next.Routes = applyChange(next.Routes, s.Routes, c.ID, c.Route, func(r *Route) ID { return r.ID })
		case "upstreams":
			next.Upstreams = applyChange(next.Upstreams, s.Upstreams, c.ID, c.Upstream, func(u *Upstream) ID { return u.ID })
		case "services":
			next.Services = applyChange(next.Services, s.Services, c.ID, c.Service, func(v *Service) ID { return v.ID })
		case "consumers":
			next.Consumers = applyChange(next.Consumers, s.Consumers, c.ID, c.Consumer, func(v *Consumer) ID { return ID(v.Username) })
		case "plugin_configs":
			next.PluginConfigs = applyChange(next.PluginConfigs, s.PluginConfigs, c.ID, c.PluginConfig, func(v *PluginConfig) ID { return v.ID })
		case "global_rules":
			next.GlobalRules = applyChange(next.GlobalRules, s.GlobalRules, c.ID, c.GlobalRule, func(v *GlobalRule) ID { return v.ID })
		case "ssls":
			next.SSLs = applyChange(next.SSLs, s.SSLs, c.ID, c.SSL, func(v *SSL) ID { return v.ID })
		}
	}
	// An object left out is not served: it leaves its list, whatever the changes said.
	kept := next.LeftOut
	next.LeftOut = nil
	next.LeaveOut(kept)
	return &next
}

// applyChange puts v (nil: removes the object id) into list, which is copied first when it
// is still the original's, shared with the snapshot being changed.
func applyChange[T any](list, original []T, id ID, v *T, idOf func(*T) ID) []T {
	if len(list) > 0 && len(original) > 0 && &list[0] == &original[0] {
		list = slices.Clone(list)
	}
	i := -1
	for j := range list {
		if idOf(&list[j]) == id {
			i = j
			break
		}
	}
	switch {
	case v == nil && i >= 0:
		return slices.Delete(list, i, i+1)
	case v == nil:
		return list
	case i >= 0:
		list[i] = *v
		return list
	}
	return append(list, *v)
}
