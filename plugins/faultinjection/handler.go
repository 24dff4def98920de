package faultinjection

import (
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	"gw/plugins"
	"gw/plugins/vars"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var (
	_ plugins.AccessPhase   = (*Config)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: fault-injection delays or answers a request, never changes it.
func (plugin) KeepsRequest() bool { return true }

var contentTypeText = []byte("text/plain")

// buffers hold an expanded body or header value while it is copied into the response.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// Access runs the delay, then the abort, each when its condition holds, as APISIX's
// rewrite does (both conditions are read first, so a delay does not change what abort
// sees). The delay sleeps in the request's goroutine: the worker serves each connection
// on a goroutine of its own, so a sleeping request parks that one and the worker's one
// processor goes on serving every other.
func (c *Config) Access(pc *plugins.Ctx) error {
	r := pc.VarsRequest()
	abort := c.Abort != nil && c.Abort.When.varsHold(&r)
	delay := c.Delay != nil && c.Delay.When.varsHold(&r)
	if delay && c.Delay.When.sampled() && c.Delay.Duration > 0 {
		time.Sleep(c.Delay.Duration)
	}
	if abort && c.Abort.When.sampled() {
		c.Abort.respond(pc, &r)
	}
	return nil
}

func (a *Abort) respond(pc *plugins.Ctx, r *vars.Request) {
	buf := buffers.Get().(*[]byte)
	for i := range a.Headers {
		h := &a.Headers[i]
		*buf, _ = vars.Expand((*buf)[:0], r, &h.value)
		pc.AddResponseHeader(h.name, *buf)
	}
	switch {
	case a.Body == nil:
		pc.Respond(a.Status, nil, nil)
	case a.HasBodyVars:
		*buf, _ = vars.Expand((*buf)[:0], r, a.Body)
		pc.RespondCopy(a.Status, contentTypeText, *buf)
	default:
		pc.Respond(a.Status, contentTypeText, a.bodyText)
	}
	buffers.Put(buf)
}

// varsHold reports whether w's expressions let the request in: no vars at all, or one
// that holds. An empty list holds for none, as APISIX's vars_match finds no match in it.
func (w *When) varsHold(r *vars.Request) bool {
	if !w.HasVars {
		return true
	}
	for _, e := range w.Vars {
		if vars.Eval(e, r) {
			return true
		}
	}
	return false
}

// sampled is APISIX's sample_hit: random(1, 100) <= percentage. math/rand/v2's functions
// draw from the runtime's per-thread generator: no lock, no allocation.
func (w *When) sampled() bool {
	return w.Percentage < 0 || rand.IntN(100) < w.Percentage
}
