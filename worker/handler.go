package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"sync/atomic"
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

// requestState is one request's state beyond the RequestCtx, from the handler's start to
// the access log line: the route, the forward's Info, the plugins' Ctx and the start time.
type requestState struct {
	routeID string
	up      proxy.Info
	// plugins is the client connection's own plugin Ctx, nil when it has none (the
	// request then takes one from the pool).
	plugins *plugins.Ctx
	// startNanos is when the request started, read once for the access log and the
	// plugins' Ctx; 0 until start reads it. startStamp is the same reading (monotime).
	startNanos int64
	startStamp int64
	// logPhase is the plugin Ctx of a request whose log phase is still to run, with the
	// chains that run it (the global rules', then the route's): route leaves it for a
	// body streamed from a node, which is sent only after the handler returns. nil when
	// the log phase ran, or there is none.
	logPhase *plugins.Ctx
	global   []*plugins.Chain
	chain    *plugins.Chain
	// pooled is a pooled plugin Ctx whose log phase ran, given back once the access log
	// line is written (finish): a client address the real-ip plugin set points into it.
	pooled *plugins.Ctx
}

// start returns the request's start time (unix nanos), reading the clock on first use:
// the monotonic clock alone (monotime.Unix), so that the latency measured from it never
// runs backwards and costs one clock read at each end.
func (x *requestState) start() int64 {
	if x.startNanos == 0 {
		x.startStamp = monotime.Now()
		x.startNanos = monotime.Unix(x.startStamp)
	}
	return x.startNanos
}

// handle is the request path: one atomic load, one router lookup, one forward.
func (w *Worker) handle(ctx *fasthttp.RequestCtx) {
	w.requests.Add(1)
	x := requestState{up: proxy.Info{UpstreamNanos: -1}}
	if w.accessLog != nil {
		x.start()
	}
	ec := edgeConnOf(ctx.Conn())
	if ec != nil {
		// The connection's requests come one at a time: from its second on, its own
		// scratch and plugin Ctx serve each, growing their buffers once. Its first takes
		// pooled ones, grown already: a connection that serves one request (seed 001's ab)
		// then grows no buffer of its own, each an allocation per connection for the
		// collector to find.
		if ec.servedOne {
			k := ec.keptState()
			x.up.Scratch, x.plugins = &k.scratch, &k.plugins
		}
		ec.servedOne = true
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
	if ctx.Response.IsBodyStream() && (x.logPhase != nil || w.accessLog != nil) {
		// The server sends the body after this returns, and only then is it known how
		// much of it went out (a node may break it off): the log phase and the access log
		// line wait for that, as nginx logs a request once its response is over.
		end := w.streamEndFor(ec)
		end.ctx, end.ec, end.x = ctx, ec, x
		if proxy.OnStreamEnd(&ctx.Response, end) {
			return
		}
		*end = streamEnd{} // not the proxy's stream: nothing will say what it sent
	}
	w.finish(ctx, &x, ec, -1)
}

// finish ends a request whose response is out, or will be once the server writes it
// whole: it runs the log phase that route left for it (requestState.logPhase), then
// writes the access log line. sent is what went out of a streamed body, -1 for a body
// the response holds.
func (w *Worker) finish(ctx *fasthttp.RequestCtx, x *requestState, ec *edgeConn, sent int64) {
	if x.logPhase != nil {
		x.logPhase.BodySent = sent
		x.runLogPhase()
	}
	if w.accessLog != nil {
		e := accesslog.Entry{
			Ctx: ctx, StartNanos: x.startNanos, RouteID: x.routeID,
			UpstreamAddr: x.up.Node, UpstreamNanos: x.up.UpstreamNanos,
			StreamedBody: sent >= 0, BodyBytesSent: sent,
		}
		if x.up.Ended != 0 {
			e.Now = monotime.Unix(x.up.Ended) // the answer was ready then: no clock read
		}
		// No real_ip: the TCP peer, formatted once; unless the real-ip plugin named the
		// client (plugins.Ctx.SetRemoteIP), whose address the log formats.
		if ec != nil && !ec.trusted && ctx.RemoteAddr() == net.Addr(ec.socket.RemoteAddr()) {
			e.RemoteAddr = ec.peerText()
		}
		if ec != nil && ec.h2Stream {
			e.Protocol = h2Protocol
		}
		w.accessLog.Log(&e)
	}
	if x.pooled != nil {
		plugins.ReleaseCtx(x.pooled)
		x.pooled = nil
	}
}

// streamEnd is a request whose body streams from a node, waiting for the proxy to say how
// much of it went out (proxy.StreamEnd) to finish. The proxy says so from the server's
// goroutine as it closes the stream, once it has written the body or given up, while the
// request and the response (status, header) are still the ones sent.
type streamEnd struct {
	w   *Worker
	ctx *fasthttp.RequestCtx
	ec  *edgeConn
	x   requestState
}

// streamEndFor is the streamEnd for a request on ec: the connection's own, free again by
// the time it reads the next request; a new one for a connection that is not an edgeConn.
func (w *Worker) streamEndFor(ec *edgeConn) *streamEnd {
	if ec != nil {
		k := ec.keptState()
		k.streamEnd.w = w
		return &k.streamEnd
	}
	return &streamEnd{w: w}
}

func (s *streamEnd) StreamEnded(sent int64) {
	s.w.finish(s.ctx, &s.x, s.ec, sent)
	*s = streamEnd{}
}

func (w *Worker) route(ctx *fasthttp.RequestCtx, x *requestState) {
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
	matched, ok := t.router.MatchCtx(ctx.Method(), ctx.Host(), path, ctx)
	if !ok {
		w.notFound(t, ctx, x)
		return
	}
	r := t.routes[matched.Value]
	x.routeID = r.info.ID
	x.up.Route = &r.info // for a chash key naming $route_id and the like
	x.up.Pristine, x.up.Edits = r.pristine, nil
	if r.chain == nil && r.global == nil {
		// Only the route lookup came since the start (when the access log read it): the
		// forward starts from that reading.
		x.up.Start = x.startStamp
		r.proxy(ctx, &x.up)
		return
	}
	c := x.pluginCtx(ctx, &r.info)
	c.MatchedURI, c.MatchedHost = matched.Path, matched.Host
	// Global rules' access phase runs before the route's, and one that answers (key-auth
	// as a global rule, say) ends the request; their log phase runs before the route's.
	err := accessAll(r.global, c)
	if err == nil && !c.Answered() && r.chain != nil {
		err = r.chain.Access(c)
	}
	switch {
	case err != nil:
		w.answerFault(ctx, r.info.ID, err)
	case !c.Answered():
		x.up.Consumer = c.Consumer // for a chash upstream with hash_on consumer
		x.up.Host = c.UpstreamHost
		x.up.Edits = c.HeaderEdits()        // a HeaderEditor's fields, for a pristine forward
		x.up.Forwarded = c.TakenForwarded() // proxy-rewrite's X-Forwarded-* win over the proxy's
		r.proxyChosen(ctx, &x.up, c)        // the upstream a plugin chose (traffic-split), or the route's
		c.UpstreamNanos = x.up.UpstreamNanos
		c.Node = append(c.Node[:0], x.up.Node...) // a copy: the Ctx outlives nothing, but is pooled
		if x.up.Ended != 0 {
			c.AnsweredNanos = monotime.Unix(x.up.Ended) // the log phase reads no clock
		}
	}
	c.ApplyResponseHeaders()
	plugins.RunResponsePhase(r.global, r.chain, c) // plugins-c: response-rewrite, gzip
	x.logPhase, x.global, x.chain = c, r.global, r.chain
	if !ctx.Response.IsBodyStream() {
		x.runLogPhase()
	}
}

// runLogPhase runs the log phase route left (logPhase), now, and ends its Ctx.
func (x *requestState) runLogPhase() {
	c := x.logPhase
	logAll(x.global, c)
	if x.chain != nil {
		x.chain.Log(c)
	}
	x.releasePluginCtx(c)
	x.logPhase = nil
}

// pluginCtx begins the request's plugin Ctx: the connection's, or a pooled one.
func (x *requestState) pluginCtx(ctx *fasthttp.RequestCtx, route *plugins.RouteInfo) *plugins.Ctx {
	if x.plugins != nil {
		x.plugins.Begin(ctx, route, x.start())
		return x.plugins
	}
	return plugins.AcquireCtx(ctx, route, x.start())
}

// releasePluginCtx ends c, which pluginCtx returned; a pooled one goes back to its pool in
// finish, after the access log line.
func (x *requestState) releasePluginCtx(c *plugins.Ctx) {
	if c == x.plugins {
		c.End()
		return
	}
	x.pooled = c
}

// notFound answers a request no route of t matched. The global rules still run, as in
// APISIX: one may answer first (401 from key-auth), and their log phase sees the 404.
func (w *Worker) notFound(t *routeTable, ctx *fasthttp.RequestCtx, x *requestState) {
	if t.global == nil {
		writeJSON(ctx, fasthttp.StatusNotFound, routeNotFoundBody)
		return
	}
	c := x.pluginCtx(ctx, &t.unmatched)
	switch err := accessAll(t.global, c); {
	case err != nil:
		w.answerFault(ctx, "", err)
	case !c.Answered():
		writeJSON(ctx, fasthttp.StatusNotFound, routeNotFoundBody)
	}
	c.ApplyResponseHeaders()
	plugins.RunResponsePhase(t.global, nil, c) // plugins-c: response-rewrite, gzip
	logAll(t.global, c)
	x.releasePluginCtx(c)
}

// accessAll runs the chains' access phases in order until one answers (c.Answered) or
// fails.
func accessAll(chains []*plugins.Chain, c *plugins.Ctx) error {
	for _, ch := range chains {
		if err := ch.Access(c); err != nil || c.Answered() {
			return err
		}
	}
	return nil
}

// answerFault is the one place a plugin's fault (an error from its access phase) becomes
// a response: 500 with the fault's own words as error_msg, as APISIX's plugins answer
// theirs, whatever the plugin had written. The error log gets the plugin and the route,
// at most once a second (faultLog): a route whose plugin fails every request fails
// loudly to its clients, not to the log's disk.
func (w *Worker) answerFault(ctx *fasthttp.RequestCtx, routeID string, err error) {
	msg := err.Error()
	var fault *plugins.PluginError
	if errors.As(err, &fault) {
		msg = fault.Err.Error()
	}
	body, _ := json.Marshal(struct {
		ErrorMsg string `json:"error_msg"`
	}{msg})
	ctx.Response.Reset()
	writeJSON(ctx, fasthttp.StatusInternalServerError, append(body, '\n'))
	if suppressed, ok := w.faults.due(monotime.Now()); ok {
		w.log.Errorf("route %q: %v (500; %d more plugin faults in the last second)", routeID, err, suppressed)
	}
}

// faultLog lets one line about plugin faults into the error log per second and counts
// the others, for the next line. Safe for concurrent use.
type faultLog struct {
	next       atomic.Int64 // monotime before which no line is written
	suppressed atomic.Uint64
}

// due reports whether a line may be written now and how many faults went unlogged since
// the last one.
func (f *faultLog) due(now int64) (suppressed uint64, ok bool) {
	next := f.next.Load()
	if now < next || !f.next.CompareAndSwap(next, now+int64(time.Second)) {
		f.suppressed.Add(1)
		return 0, false
	}
	return f.suppressed.Swap(0), true
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
	forwardTo(ctx, r.upstream, info)
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
