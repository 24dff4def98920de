package forwardauth

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/internal/monotime"
	"gw/plugins"
)

// Build decodes a route's configuration and opens its client to the service.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	h := &handler{cfg: c, client: newClient(c)}
	if env != nil && env.Shared != nil {
		h.logf = env.Shared.Logf
	}
	return h, nil
}

// handler is one route's forward-auth: its configuration and its client.
type handler struct {
	cfg    *Config
	client *client
	logf   func(format string, args ...any)
	// logged rate-limits the warning about a service that cannot be reached.
	logged errorLog
}

var _ plugins.AccessPhase = (*handler)(nil)

// The headers gw sets on every call, from the request (APISIX's auth_headers).
var (
	headerProto           = []byte("X-Forwarded-Proto")
	headerMethod          = []byte("X-Forwarded-Method")
	headerHost            = []byte("X-Forwarded-Host")
	headerURI             = []byte("X-Forwarded-Uri")
	headerFor             = []byte("X-Forwarded-For")
	headerContentEncoding = []byte("Content-Encoding")
	headerContentType     = []byte("Content-Type")
)

// scratch is one request's buffers, pooled so that a call allocates nothing of its own.
type scratch struct{ value []byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Access asks the service and acts on its answer: a 2xx lets the request through, with
// upstream_headers set from the answer (removed where the answer has none, so a client
// cannot forge them); any other status is the client's answer; no answer is
// status_on_error, or nothing with allow_degradation.
func (h *handler) Access(c *plugins.Ctx) error {
	cfg := h.cfg
	var body []byte
	if cfg.Method == "POST" {
		b, ok := c.RequestBody()
		if !ok || int64(len(b)) > cfg.MaxReqBodySize {
			h.warn("forward-auth: failed to read request body: larger than max_req_body_size (%d bytes)", cfg.MaxReqBodySize)
			c.Respond(413, nil, nil)
			return nil
		}
		body = b
	}
	x := h.client.begin(cfg.Method, cfg.Target.host, cfg.Target.requestURI)
	defer x.end()
	st := scratchPool.Get().(*scratch)
	defer scratchPool.Put(st)
	if !h.writeHeaders(c, x, st) {
		h.warn("forward-auth: failed to process forward auth, err: invalid characters found in header value")
		return h.unreachable(c)
	}
	if body != nil {
		x.setBody(body)
	}
	if err := h.client.do(x); err != nil {
		h.warn("forward-auth: failed to process forward auth, err: %v", err)
		return h.unreachable(c)
	}
	if status := x.status(); status >= 300 {
		for _, name := range cfg.ClientHeaders {
			if v := x.header(name); v != nil {
				c.AddResponseHeader(name, v)
			}
		}
		c.RespondCopy(status, x.header(headerContentType), x.body())
		return nil
	}
	for _, name := range cfg.UpstreamHeaders {
		if v := x.header(name); v != nil {
			c.SetRequestHeader(name, v)
		} else {
			c.DelRequestHeader(name)
		}
	}
	return nil
}

// writeHeaders sets the call's headers in APISIX's order: gw's X-Forwarded-*, extra_headers,
// then request_headers the others did not set. false when a value would break the
// header block (a CR or LF a variable brought in): the call is not made.
func (h *handler) writeHeaders(c *plugins.Ctx, x *call, st *scratch) bool {
	cfg := h.cfg
	st.value = c.ExpandTemplate(st.value[:0], &varScheme)
	x.setHeader(headerProto, st.value)
	x.setHeader(headerMethod, c.Method())
	st.value = c.ExpandTemplate(st.value[:0], &varHost)
	x.setHeader(headerHost, st.value)
	x.setHeader(headerURI, c.RequestURI())
	st.value = c.ExpandTemplate(st.value[:0], &varRemoteAddr)
	x.setHeader(headerFor, st.value)
	if cfg.Method == "POST" {
		if v := c.RequestHeader(headerContentEncoding); v != nil {
			x.setHeader(headerContentEncoding, v)
		}
	}
	for i := range cfg.ExtraHeaders {
		e := &cfg.ExtraHeaders[i]
		st.value = c.ExpandTemplate(st.value[:0], &e.value)
		if bytes.ContainsAny(st.value, "\r\n\x00") {
			return false
		}
		x.setHeader(e.name, st.value)
	}
	for _, name := range cfg.RequestHeaders {
		if x.has(name) {
			continue // gw's own, or an extra header: they win, as in APISIX
		}
		if v := c.RequestHeader(name); v != nil {
			x.setHeader(name, v)
		}
	}
	return true
}

// unreachable answers a request whose call failed: status_on_error, or nothing with
// allow_degradation.
func (h *handler) unreachable(c *plugins.Ctx) error {
	if !h.cfg.AllowDegradation {
		c.Respond(h.cfg.StatusOnError, nil, nil)
	}
	return nil
}

// The variables of gw's X-Forwarded-* values: $scheme, $host (lower-cased, without the
// port, as APISIX's core.request.get_host) and $remote_addr.
var varScheme, varHost, varRemoteAddr = mustTemplate("$scheme"), mustTemplate("$host"), mustTemplate("$remote_addr")

func mustTemplate(s string) conf.Template {
	t, err := conf.ParseTemplate(s, conf.TemplateSyntax{})
	if err != nil {
		panic("BUG: forward-auth: " + err.Error())
	}
	return t
}

// warn writes a line to the error log, at most one a second per route: a service that is
// down fails every request, and says so once a second, not per request.
func (h *handler) warn(format string, args ...any) {
	if h.logf != nil && h.logged.due(monotime.Now()) {
		h.logf(format, args...)
	}
}

// errorLog lets one line a second through. Safe for concurrent use.
type errorLog struct{ next atomic.Int64 }

func (l *errorLog) due(now int64) bool {
	next := l.next.Load()
	return now >= next && l.next.CompareAndSwap(next, now+int64(time.Second))
}
