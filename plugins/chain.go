package plugins

import (
	"encoding/json"
	"fmt"
	"sort"
)

// BuildInstance builds the instance of the plugin named name for one route: its snapshot
// state first (SnapshotBuilder; once per SnapshotBuild), then Build. An instance that
// runs in no phase is an error, not dropped: it is a plugin's bug, and a route that
// silently ran less than its configuration says could let in what it should refuse. A nil
// instance (the plugin is off on this route) is not an error.
func BuildInstance(name string, raw json.RawMessage, env *Env) (any, error) {
	p, ok := Lookup(name)
	if !ok {
		return nil, UnknownPlugin(name)
	}
	if env == nil {
		env = &Env{}
	}
	if sb, ok := p.(SnapshotBuilder); ok {
		state, err := env.stateOf(name, sb)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		withState := *env
		withState.SnapshotState = state
		env = &withState
	}
	if _, ok := p.(MetadataOwner); ok {
		withMetadata := *env
		withMetadata.Metadata = env.Snapshot.MetadataOf(name)
		env = &withMetadata
	}
	instance, err := p.Build(raw, env)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	if instance == nil {
		return nil, nil
	}
	_, access := instance.(AccessPhase)
	_, log := instance.(LogPhase)
	_, response := instance.(ResponsePhase)
	if !access && !log && !response {
		return nil, fmt.Errorf("BUG: plugin %s: its instance (%T) runs in no phase: it implements none of AccessPhase, ResponsePhase and LogPhase", name, instance)
	}
	return instance, nil
}

// PluginError is an internal fault a plugin's access phase returned, with the plugin's
// name. The worker answers the request 500 with Err's text as error_msg, and logs the
// whole.
type PluginError struct {
	Plugin string
	Err    error
}

func (e *PluginError) Error() string { return "plugin " + e.Plugin + ": " + e.Err.Error() }
func (e *PluginError) Unwrap() error { return e.Err }

// Chain is one route's plugins, built once per snapshot. The zero Chain runs nothing.
type Chain struct {
	access []AccessPhase
	// accessOrder is each access plugin's place in the order, for resuming a merged chain
	// and for naming the plugin of a fault.
	accessOrder []order
	log         []LogPhase
	// byConsumer holds, for each consumer with plugins of its own, this chain's plugin set
	// merged with them (APISIX's merge_consumer_route). Once an auth plugin has named the
	// consumer, the rest of the access phase and the whole log phase run from the merged
	// chain.
	byConsumer map[string]*Chain
	// keepsRequest is set when every plugin of the chain is a RequestKeeper that keeps it.
	keepsRequest bool
	// choosers are the instances that choose the upstream (UpstreamChooser).
	choosers []UpstreamChooser
	// response are the ResponsePhase instances, in chain order (plugins-c).
	response []ResponsePhase
}

// order is a plugin's place in a chain: priority descending, then name.
type order struct {
	priority int
	name     string
}

func (o order) before(p order) bool {
	if o.priority != p.priority {
		return o.priority > p.priority
	}
	return o.name < p.name
}

// BuildChain builds every configured plugin for one route, ordered by priority (highest
// first, then by name so the order never depends on map iteration).
func BuildChain(set map[string]json.RawMessage, env *Env) (*Chain, error) {
	type built struct {
		plugin   Plugin
		instance any
	}
	var list []built
	for name, raw := range set {
		instance, err := BuildInstance(name, raw, env)
		if err != nil {
			return nil, err
		}
		if instance != nil {
			p, _ := Lookup(name)
			list = append(list, built{p, instance})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		return order{list[i].plugin.Priority(), list[i].plugin.Name()}.before(order{list[j].plugin.Priority(), list[j].plugin.Name()})
	})
	ch := &Chain{keepsRequest: true}
	for _, b := range list {
		ch.keepsRequest = ch.keepsRequest && keepsRequest(b.instance, b.plugin)
		if a, ok := b.instance.(AccessPhase); ok {
			ch.access = append(ch.access, a)
			ch.accessOrder = append(ch.accessOrder, order{b.plugin.Priority(), b.plugin.Name()})
		}
		if l, ok := b.instance.(LogPhase); ok {
			ch.log = append(ch.log, l)
		}
		if r, ok := b.instance.(ResponsePhase); ok {
			ch.response = append(ch.response, r)
		}
		if c, ok := b.instance.(UpstreamChooser); ok {
			ch.choosers = append(ch.choosers, c)
		}
	}
	return ch, nil
}

// Choosers are the chain's instances that choose the upstream (UpstreamChooser), its
// consumers' merged chains' included, for the host to compile their upstreams. A nil
// chain has none.
func (ch *Chain) Choosers() []UpstreamChooser {
	if ch == nil {
		return nil
	}
	list := ch.choosers
	for _, m := range ch.byConsumer {
		list = append(list[:len(list):len(list)], m.choosers...)
	}
	return list
}

// Empty reports whether the chain runs nothing, so the worker can skip the Ctx entirely.
func (ch *Chain) Empty() bool {
	return ch == nil || len(ch.access)+len(ch.log)+len(ch.response)+len(ch.byConsumer) == 0
}

// keepsRequest reports whether a plugin leaves the request as the client sent it, or
// changes only header fields, which the Ctx records (HeaderEditor). The built instance's
// word comes first, deciding for its configuration (key-auth's hide_credentials), then
// the plugin's.
func keepsRequest(instance any, p Plugin) bool {
	if keeper, ok := instance.(RequestKeeper); ok {
		return keeper.KeepsRequest()
	}
	if keeper, ok := p.(RequestKeeper); ok && keeper.KeepsRequest() {
		return true
	}
	editor, ok := p.(HeaderEditor)
	return ok && editor.EditsOnlyHeaders()
}

// KeepsRequest reports whether running the chain leaves the request as the client sent
// it but for the header edits its Ctx records: every plugin promises so (RequestKeeper,
// HeaderEditor), and no consumer's plugins can join. A nil chain keeps it.
func (ch *Chain) KeepsRequest() bool {
	return ch == nil || (ch.keepsRequest && len(ch.byConsumer) == 0)
}

// SetConsumerChains gives the chain its merged chains, by consumer name (see byConsumer).
// Call it while building, before the chain serves.
func (ch *Chain) SetConsumerChains(byConsumer map[string]*Chain) { ch.byConsumer = byConsumer }

// Access runs the access phase until a plugin answers (c.Answered) or fails (a
// *PluginError). When the consumer is known, from an earlier chain (a global rule's
// key-auth) or from one of this chain's plugins, and has plugins of its own, the merged
// chain takes over after the plugins already run.
func (ch *Chain) Access(c *Ctx) error {
	for i, a := range ch.access {
		if m := ch.mergedFor(c); m != nil {
			return m.resumeAccess(c, ch, i)
		}
		if err := a.Access(c); err != nil {
			return &PluginError{Plugin: ch.accessOrder[i].name, Err: err}
		}
		if c.answered {
			return nil
		}
	}
	if m := ch.mergedFor(c); m != nil {
		return m.resumeAccess(c, ch, len(ch.access))
	}
	return nil
}

func (ch *Chain) mergedFor(c *Ctx) *Chain {
	if ch.byConsumer == nil || c.Consumer == "" {
		return nil
	}
	return ch.byConsumer[c.Consumer]
}

// resumeAccess runs the merged chain m's access plugins that come after the first done
// plugins of base, which have run. A consumer plugin that sorts before the plugin that
// named the consumer does not run: in gw every plugin works in the access phase, and the
// auth plugins come first (APISIX runs them in rewrite, before any access phase).
func (m *Chain) resumeAccess(c *Ctx, base *Chain, done int) error {
	c.merged, c.mergedBase = m, base
	start := 0
	if done > 0 {
		last := base.accessOrder[done-1]
		for start < len(m.access) && !last.before(m.accessOrder[start]) {
			start++
		}
	}
	for i := start; i < len(m.access); i++ {
		if err := m.access[i].Access(c); err != nil {
			return &PluginError{Plugin: m.accessOrder[i].name, Err: err}
		}
		if c.answered {
			return nil
		}
	}
	return nil
}

// Log runs the log phase, the merged chain's when the consumer's plugins took over.
func (ch *Chain) Log(c *Ctx) {
	list := ch.log
	if c.mergedBase == ch {
		list = c.merged.log
	}
	for _, l := range list {
		l.Log(c)
	}
}

// The response phase (plugins-c: response-rewrite, gzip).

// Response runs the response phase, the merged chain's when the consumer's plugins took
// over.
func (ch *Chain) Response(c *Ctx) {
	list := ch.response
	if c.mergedBase == ch {
		list = c.merged.response
	}
	for _, r := range list {
		r.Response(c)
	}
}

// RunResponsePhase runs the response phase of the global rules' chains, then the route's
// (nil for none), once the response is final and its queued headers are set
// (ApplyResponseHeaders), before the log phase. The worker calls it whoever answered.
func RunResponsePhase(global []*Chain, route *Chain, c *Ctx) {
	for _, ch := range global {
		ch.Response(c)
	}
	if route != nil {
		route.Response(c)
	}
}
