package worker

import (
	"bytes"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
	"gw/plugins"
	"gw/worker/accesslog"
	"gw/worker/proxy"
)

var (
	adminPrefix       = []byte("/apisix/admin")
	routeNotFoundBody = []byte(`{"error_msg":"404 Route Not Found"}` + "\n")
	noUpstreamBody    = []byte(`{"error_msg":"503 Service Unavailable: no upstream configured for this route"}` + "\n")
	// APISIX answers a bare 503 when a route's plugin_config is missing.
	pluginConfigGoneBody = []byte(`{"error_msg":"503 Service Unavailable: the route's plugin_config does not exist"}` + "\n")
	adminUnreachable     = []byte(`{"error_msg":"502 Bad Gateway: the master's Admin API did not answer"}` + "\n")
	contentTypeJSON      = []byte("application/json")
)

// exchange is what the access log needs to know about one request beyond the RequestCtx.
type exchange struct {
	routeID string
	up      proxy.Info
	// plugins is the client connection's own plugin Ctx, nil when it has none (the
	// request then takes one from the pool).
	plugins *plugins.Ctx
	// startNanos is when the request started, read once for the access log and the
	// plugins' Ctx; 0 until start reads it. startStamp is the same reading (monotime).
	startNanos int64
	startStamp int64
}

// start returns the request's start time (unix nanos), reading the clock on first use:
// the monotonic clock alone (monotime.Unix), so that the latency measured from it never
// runs backwards and costs one clock read at each end.
func (x *exchange) start() int64 {
	if x.startNanos == 0 {
		x.startStamp = monotime.Now()
		x.startNanos = monotime.Unix(x.startStamp)
	}
	return x.startNanos
}

// handle is the request path: one atomic load, one router lookup, one forward.
func (w *Worker) handle(ctx *fasthttp.RequestCtx) {
	w.requests.Add(1)
	x := exchange{up: proxy.Info{UpstreamNanos: -1}}
	if w.accessLog != nil {
		x.start()
	}
	ec := edgeConnOf(ctx.Conn())
	if ec != nil {
		// The connection's requests come one at a time: its scratch serves each.
		x.up.Scratch, x.plugins = &ec.scratch, &ec.plugins
	}
	if w.edge == nil || w.edge.admit(ctx, ec) {
		w.route(ctx, &x)
		if ec != nil {
			ec.answeredAt = x.up.Ended
		}
		if w.edge != nil {
			w.edge.finish(ctx, ec)
		}
	}
	if w.draining.Load() {
		// Set last: proxying replaces the response whole.
		ctx.SetConnectionClose()
	}
	if w.accessLog != nil {
		e := accesslog.Entry{
			Ctx: ctx, StartNanos: x.startNanos, RouteID: x.routeID,
			UpstreamAddr: x.up.Node, UpstreamNanos: x.up.UpstreamNanos,
		}
		if x.up.Ended != 0 {
			e.Now = monotime.Unix(x.up.Ended) // the answer was ready then: no clock read
		}
		if ec != nil && !ec.trusted {
			e.RemoteAddr = ec.peerText() // no real_ip: the TCP peer, formatted once
		}
		w.accessLog.Log(&e)
	}
}

func (w *Worker) route(ctx *fasthttp.RequestCtx, x *exchange) {
	path := ctx.Path()
	if bytes.HasPrefix(path, adminPrefix) && isLoopback(tcpPeer(ctx)) {
		// APISIX 2.x served the Admin API on the data port; scripts written for it still
		// call :9080/apisix/admin. Only loopback peers, judged by the TCP peer alone:
		// ctx.RemoteAddr may be the client real_ip_header named.
		w.forwardAdmin(ctx)
		return
	}
	t := w.table.Load()
	if t.closed != nil {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, t.closed)
		return
	}
	value, ok := t.router.MatchCtx(ctx.Method(), ctx.Host(), path, ctx)
	if !ok {
		t.notFound(ctx, x)
		return
	}
	r := &t.routes[value]
	x.routeID = r.info.ID
	x.up.Route = &r.info // for a chash key naming $route_id and the like
	x.up.Pristine = r.pristine
	if r.chain == nil && r.global == nil {
		// Only the route lookup came since the start (when the access log read it): the
		// forward starts from that reading.
		x.up.Start = x.startStamp
		r.proxy(ctx, &x.up)
		return
	}
	c := x.pluginCtx(ctx, &r.info)
	// Global rules' access phase runs before the route's, and one that answers (key-auth
	// as a global rule, say) ends the request; their log phase runs before the route's.
	if !accessAll(r.global, c) && (r.chain == nil || !r.chain.Access(c)) {
		x.up.Consumer = c.Consumer // for a chash upstream with hash_on consumer
		x.up.Host = c.UpstreamHost
		r.proxy(ctx, &x.up)
		c.UpstreamNanos = x.up.UpstreamNanos
		c.Node = append(c.Node[:0], x.up.Node...) // a copy: the Ctx outlives nothing, but is pooled
		if x.up.Ended != 0 {
			c.AnsweredNanos = monotime.Unix(x.up.Ended) // the log phase reads no clock
		}
	}
	c.ApplyResponseHeaders()
	logAll(r.global, c)
	if r.chain != nil {
		r.chain.Log(c)
	}
	x.releasePluginCtx(c)
}

// pluginCtx begins the request's plugin Ctx: the connection's, or a pooled one.
func (x *exchange) pluginCtx(ctx *fasthttp.RequestCtx, route *plugins.RouteInfo) *plugins.Ctx {
	if x.plugins != nil {
		x.plugins.Begin(ctx, route, x.start())
		return x.plugins
	}
	return plugins.AcquireCtx(ctx, route, x.start())
}

// releasePluginCtx ends c, which pluginCtx returned.
func (x *exchange) releasePluginCtx(c *plugins.Ctx) {
	if c == x.plugins {
		c.End()
		return
	}
	plugins.ReleaseCtx(c)
}

// notFound answers a request no route matched. The global rules still run, as in APISIX:
// one may answer first (401 from key-auth), and their log phase sees the 404.
func (t *table) notFound(ctx *fasthttp.RequestCtx, x *exchange) {
	if t.global == nil {
		writeJSON(ctx, fasthttp.StatusNotFound, routeNotFoundBody)
		return
	}
	c := x.pluginCtx(ctx, &t.unmatched)
	if !accessAll(t.global, c) {
		writeJSON(ctx, fasthttp.StatusNotFound, routeNotFoundBody)
	}
	c.ApplyResponseHeaders()
	logAll(t.global, c)
	x.releasePluginCtx(c)
}

// accessAll runs the chains' access phases in order until one answers.
func accessAll(chains []*plugins.Chain, c *plugins.Ctx) (answered bool) {
	for _, ch := range chains {
		if ch.Access(c) {
			return true
		}
	}
	return false
}

func logAll(chains []*plugins.Chain, c *plugins.Ctx) {
	for _, ch := range chains {
		ch.Log(c)
	}
}

// proxy forwards the request and notes which node answered and how long the upstream
// took, for the log phase and the access log.
func (r *route) proxy(ctx *fasthttp.RequestCtx, info *proxy.Info) {
	if r.upstream == nil {
		body := noUpstreamBody
		if r.unavailable != nil {
			body = r.unavailable
		}
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, body)
		return
	}
	r.upstream.ForwardInfo(ctx, info)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(body)
}

// tcpPeer is the connection's peer, whatever real_ip_header said.
func tcpPeer(ctx *fasthttp.RequestCtx) net.Addr {
	if c := ctx.Conn(); c != nil {
		return c.RemoteAddr()
	}
	return nil
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// newAdminClient reaches the master's private Admin API socket.
func newAdminClient(socket string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr: "gw-master",
		Dial: func(string) (net.Conn, error) { return net.Dial("unix", socket) },
		// The master answers a write only once every worker, this one included, serves it.
		ReadTimeout:            30 * time.Second,
		WriteTimeout:           30 * time.Second,
		MaxConns:               16,
		DisablePathNormalizing: true,
	}
}

// forwardAdmin passes an Admin API call from the data port to the master, which owns the
// store; the worker answers nothing itself.
func (w *Worker) forwardAdmin(ctx *fasthttp.RequestCtx) {
	if err := w.admin.Do(&ctx.Request, &ctx.Response); err != nil {
		w.log.Errorf("forwarding admin call to master: %v", err)
		ctx.Response.Reset()
		writeJSON(ctx, fasthttp.StatusBadGateway, adminUnreachable)
	}
}
