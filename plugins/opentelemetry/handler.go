package opentelemetry

import (
	"bytes"
	"encoding/json"

	"gw/plugins"
)

// handler is one route's opentelemetry instance: its Config, and the worker's exporter.
type handler struct {
	cfg *Config
	exp *exporter
	// fromRequestID is plugin_attr's trace_id_source: x-request-id.
	fromRequestID bool
}

var (
	_ plugins.AccessPhase = (*handler)(nil)
	_ plugins.LogPhase    = (*handler)(nil)
)

// Build compiles a route's configuration against the worker's exporter, made from
// plugin_attr.opentelemetry with the worker's first Build (it starts sending at the first
// span, so a master's Build, which only checks, starts nothing).
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	exp := workerExporter(env.Shared)
	return &handler{cfg: cfg, exp: exp, fromRequestID: exp.fromRequestID}, nil
}

// Access places the request in its trace, as APISIX's rewrite phase does: the client's
// trace when its traceparent is valid (the client's span becomes the parent), else a new
// one (from X-Request-Id with trace_id_source x-request-id); a new span id; the sampler's
// decision; and a traceparent naming the new span sent upstream in place of the client's.
// The client's tracestate goes upstream unchanged with a valid traceparent and is removed
// without one, as the specification requires. A request a global rule's instance already
// placed is left as it is: one span per request.
func (h *handler) Access(c *plugins.Ctx) error {
	tc := &c.Trace
	if tc.SpanID != ([8]byte{}) {
		return nil
	}
	// One pass over the client's fields finds both trace headers: the common request has
	// neither, and then needs no search to remove them (SetRequestHeader's and
	// DelRequestHeader's, two each).
	var sent []byte
	sentAny, stateAny := false, false
	for name, value := range c.RequestHeaders() {
		switch {
		case len(name) == len(traceparentHeader) && bytes.EqualFold(name, traceparentHeader):
			if !sentAny {
				sent, sentAny = value, true
			}
		case len(name) == len(tracestateHeader) && bytes.EqualFold(name, tracestateHeader):
			stateAny = true
		}
	}
	parent, hasParent := ParseTraceparent(sent)
	switch {
	case hasParent:
		tc.TraceID, tc.ParentSpanID = parent.TraceID, parent.SpanID
	case h.fromRequestID:
		var ok bool
		if tc.TraceID, ok = traceIDFromRequestID(c.RequestHeader(requestIDHeader)); !ok {
			tc.TraceID = newTraceID()
		}
	default:
		tc.TraceID = newTraceID()
	}
	if !hasParent && stateAny {
		c.DelRequestHeader(tracestateHeader)
	}
	tc.SpanID = newSpanID()
	tc.Sampled = h.cfg.Sampler.sample(tc.TraceID, parent, hasParent)
	tc.Recording = tc.Sampled
	var buf [traceparentLen]byte
	if sentAny {
		c.SetRequestHeader(traceparentHeader, appendTraceparent(buf[:0], tc))
	} else {
		c.AddRequestHeader(traceparentHeader, appendTraceparent(buf[:0], tc))
	}
	return nil
}

// Log records the request's span once the response is final, if it is sampled: the span,
// encoded, goes into the worker's queue, or is dropped and counted when the queue is
// full. It never waits on the collector.
func (h *handler) Log(c *plugins.Ctx) {
	if !c.Trace.Recording {
		return
	}
	c.Trace.Recording = false
	h.exp.record(c, h.cfg)
}
