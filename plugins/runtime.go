package plugins

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
	"gw/shm"
)

// SegmentSpec describes a plugin's shared-memory segment.
type SegmentSpec struct {
	Layout shm.Layout
	// Size returns the data size in bytes (a positive multiple of 8) for a configuration.
	// Sizes are fixed for the master's life: a reload that changes one fails.
	Size func(cfg *conf.Config) int
	// Init prepares a freshly created segment, in the master, before any worker maps it.
	Init func(seg *shm.Segment) error
}

// Shared holds what every route's plugins in one worker share, for the worker's life.
type Shared struct {
	// Segments are the plugins' shared-memory segments, by plugin name.
	Segments map[string]*shm.Segment
	// Config is the static configuration the worker runs with.
	Config *conf.Config
	// Logf writes a line to the error log (rate-limit it yourself on hot paths).
	Logf func(format string, args ...any)
}

// RouteInfo is what plugins may know about the route a request matched. It is built with
// the snapshot and never changes; plugins may keep a pointer to it.
type RouteInfo struct {
	ID          string
	Name        string
	ServiceID   string
	ServiceName string
	// URI and Host are the route's first path and host pattern (APISIX's matched_uri and
	// matched_host), "" when the route has none.
	URI  string
	Host string
}

// Env is what Build gets: the route the instance is for and the worker's shared state.
type Env struct {
	Route  *RouteInfo
	Shared *Shared
	// Snapshot is the whole config being built, for plugins whose instances must agree
	// across routes (limit-count's group).
	Snapshot *conf.Snapshot
	// GlobalRuleID is set when the instance comes from a global rule: its state (limit-count's
	// counters) then belongs to the rule and is shared by every route, as APISIX keys it by
	// the configuration's owner (conf_type and conf_id), not by the matched route.
	GlobalRuleID string
}

// AccessPhase runs before the request is proxied, highest priority first. Returning true
// means the plugin answered the request itself (a rejection, say): no later Access runs and
// nothing is proxied. Rejecting is not an error, so there is no error to return.
type AccessPhase interface {
	Access(c *Ctx) (answered bool)
}

// LogPhase runs once the response is final, proxied or not, in chain order.
type LogPhase interface {
	Log(c *Ctx)
}

// Ctx is one request as plugins see it. The worker pools them: a plugin must not keep a
// Ctx, or anything in it, past the call it was given it in.
type Ctx struct {
	Request *fasthttp.RequestCtx
	Route   *RouteInfo
	// StartNanos is when the worker began handling the request, in Unix nanoseconds
	// (fasthttp's coarse clock is not fine enough for latency): monotime.Unix, the
	// monotonic clock since the process started, so latencies never run backwards.
	StartNanos int64
	// UpstreamNanos is how long the upstream took, from connect to response header; -1
	// when no upstream was contacted.
	UpstreamNanos int64
	// AnsweredNanos is when the response was whole, in StartNanos's clock: the proxy's
	// last clock reading, which the log phase takes for now as nginx takes its cached
	// time. 0 when the worker has none (a plugin answered, a streamed body): AnsweredAt
	// then reads the clock.
	AnsweredNanos int64
	// BodySent is how many bytes of a streamed response body went to the client: the
	// worker runs the log phase of such a request once the server has sent the body. -1
	// when the response holds its body whole.
	BodySent int64
	// Node is the upstream node that answered, "host:port", empty when none did.
	Node []byte
	// Consumer is the authenticated consumer's name, empty without one.
	Consumer string
	// UpstreamHost, when set, is the Host header sent upstream in place of the one
	// pass_host would choose (proxy-rewrite's host, APISIX's upstream_host variable). The
	// request's own Host, $host to later plugins and X-Forwarded-Host, stays the client's.
	// It must stay valid until the request ends (plugins point it at their configuration).
	UpstreamHost []byte

	// headers queued by AddResponseHeader: name and value pairs, flattened.
	headers [][]byte
	// merged is the consumer's merged chain that took over from mergedBase once an auth
	// plugin named the consumer; both nil until then.
	merged, mergedBase *Chain
}

var ctxPool = sync.Pool{New: func() any { return &Ctx{} }}

// AcquireCtx returns a Ctx for one request; give it back with ReleaseCtx.
func AcquireCtx(req *fasthttp.RequestCtx, route *RouteInfo, startNanos int64) *Ctx {
	c := ctxPool.Get().(*Ctx)
	c.Begin(req, route, startNanos)
	return c
}

// ReleaseCtx returns c to the pool.
func ReleaseCtx(c *Ctx) {
	c.End()
	ctxPool.Put(c)
}

// Begin readies c for one request, as AcquireCtx does a pooled Ctx: for a caller that
// keeps its own (one per client connection, whose requests come one at a time). End it
// after the log phase.
func (c *Ctx) Begin(req *fasthttp.RequestCtx, route *RouteInfo, startNanos int64) {
	c.Request, c.Route, c.StartNanos, c.UpstreamNanos, c.AnsweredNanos = req, route, startNanos, -1, 0
	c.BodySent = -1
}

// AnsweredAt returns when the response was whole (AnsweredNanos), reading the clock when
// the worker did not say.
func (c *Ctx) AnsweredAt() int64 {
	if c.AnsweredNanos != 0 {
		return c.AnsweredNanos
	}
	return monotime.Unix(monotime.Now())
}

// End clears c after its request, keeping its buffers for the next.
func (c *Ctx) End() {
	c.Request, c.Route, c.Consumer, c.UpstreamHost = nil, nil, "", nil
	c.AnsweredNanos = 0
	c.merged, c.mergedBase = nil, nil
	c.Node = c.Node[:0]
	for i := range c.headers {
		c.headers[i] = c.headers[i][:0]
	}
	c.headers = c.headers[:0]
}

// AddResponseHeader queues a header for the final response. Plugins that decide before
// the request is proxied use it, because proxying replaces the response whole; the worker
// applies the queue once the response is final. Name and value are copied.
func (c *Ctx) AddResponseHeader(name, value []byte) {
	c.headers = appendCopy(c.headers, name)
	c.headers = appendCopy(c.headers, value)
}

func appendCopy(list [][]byte, b []byte) [][]byte {
	if len(list) < cap(list) {
		list = list[:len(list)+1]
		list[len(list)-1] = append(list[len(list)-1][:0], b...)
		return list
	}
	return append(list, append([]byte(nil), b...))
}

// ApplyResponseHeaders sets the queued headers on the response. The worker calls it once
// the response is final, before the log phase.
func (c *Ctx) ApplyResponseHeaders() {
	for i := 0; i+1 < len(c.headers); i += 2 {
		c.Request.Response.Header.SetBytesKV(c.headers[i], c.headers[i+1])
	}
}

// Chain is one route's plugins, built once per snapshot. The zero Chain runs nothing.
type Chain struct {
	access []AccessPhase
	// accessOrder is each access plugin's place in the order, for resuming a merged chain.
	accessOrder []order
	log         []LogPhase
	// byConsumer holds, for each consumer with plugins of its own, this chain's plugin set
	// merged with them (APISIX's merge_consumer_route). Once an auth plugin has named the
	// consumer, the rest of the access phase and the whole log phase run from the merged
	// chain.
	byConsumer map[string]*Chain
	// keepsRequest is set when every plugin of the chain is KeepsRequest.
	keepsRequest bool
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
		p, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("unknown plugin [%s]", name)
		}
		if p.Build == nil {
			continue
		}
		instance, err := p.Build(raw, env)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		if instance != nil {
			list = append(list, built{p, instance})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].plugin.Priority != list[j].plugin.Priority {
			return list[i].plugin.Priority > list[j].plugin.Priority
		}
		return list[i].plugin.Name < list[j].plugin.Name
	})
	ch := &Chain{keepsRequest: true}
	for _, b := range list {
		ch.keepsRequest = ch.keepsRequest && b.plugin.KeepsRequest
		if a, ok := b.instance.(AccessPhase); ok {
			ch.access = append(ch.access, a)
			ch.accessOrder = append(ch.accessOrder, order{b.plugin.Priority, b.plugin.Name})
		}
		if l, ok := b.instance.(LogPhase); ok {
			ch.log = append(ch.log, l)
		}
	}
	return ch, nil
}

// Empty reports whether the chain runs nothing, so the worker can skip the Ctx entirely.
func (ch *Chain) Empty() bool {
	return ch == nil || len(ch.access)+len(ch.log)+len(ch.byConsumer) == 0
}

// KeepsRequest reports whether running the chain leaves the request as the client sent
// it: every plugin promises so (Plugin.KeepsRequest), and no consumer's plugins can join.
// A nil chain keeps it.
func (ch *Chain) KeepsRequest() bool {
	return ch == nil || (ch.keepsRequest && len(ch.byConsumer) == 0)
}

// SetConsumerChains gives the chain its merged chains, by consumer name (see byConsumer).
// Call it while building, before the chain serves.
func (ch *Chain) SetConsumerChains(byConsumer map[string]*Chain) { ch.byConsumer = byConsumer }

// Access runs the access phase; true means a plugin answered the request. When the
// consumer is known, from an earlier chain (a global rule's key-auth) or from one of this
// chain's plugins, and has plugins of its own, the merged chain takes over after the
// plugins already run.
func (ch *Chain) Access(c *Ctx) bool {
	for i, a := range ch.access {
		if m := ch.mergedFor(c); m != nil {
			return m.resumeAccess(c, ch, i)
		}
		if a.Access(c) {
			return true
		}
	}
	if m := ch.mergedFor(c); m != nil {
		return m.resumeAccess(c, ch, len(ch.access))
	}
	return false
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
func (m *Chain) resumeAccess(c *Ctx, base *Chain, done int) bool {
	c.merged, c.mergedBase = m, base
	start := 0
	if done > 0 {
		last := base.accessOrder[done-1]
		for start < len(m.access) && !last.before(m.accessOrder[start]) {
			start++
		}
	}
	for _, a := range m.access[start:] {
		if a.Access(c) {
			return true
		}
	}
	return false
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

// Segments lists the registered plugins that want a shared-memory segment, by name.
func Segments() map[string]*SegmentSpec {
	registryMu.RLock()
	defer registryMu.RUnlock()
	specs := map[string]*SegmentSpec{}
	for name, p := range registry {
		if p.Segment != nil {
			specs[name] = p.Segment
		}
	}
	return specs
}
