package worker

import (
	"bytes"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"gw/plugins"
)

var (
	adminPrefix       = []byte("/apisix/admin")
	routeNotFoundBody = []byte(`{"error_msg":"404 Route Not Found"}` + "\n")
	noUpstreamBody    = []byte(`{"error_msg":"503 Service Unavailable: no upstream configured for this route"}` + "\n")
	adminUnreachable  = []byte(`{"error_msg":"502 Bad Gateway: the master's Admin API did not answer"}` + "\n")
	contentTypeJSON   = []byte("application/json")
)

// handle is the request path: one atomic load, one router lookup, one forward.
func (w *Worker) handle(ctx *fasthttp.RequestCtx) {
	w.requests.Add(1)
	w.route(ctx)
	if w.draining.Load() {
		// Set last: proxying replaces the response whole.
		ctx.SetConnectionClose()
	}
}

func (w *Worker) route(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if bytes.HasPrefix(path, adminPrefix) && isLoopback(ctx.RemoteAddr()) {
		// APISIX 2.x served the Admin API on the data port; scripts written for it still
		// call :9080/apisix/admin. Only loopback peers, judged by the TCP peer alone.
		w.forwardAdmin(ctx)
		return
	}
	t := w.table.Load()
	value, ok := t.router.Match(ctx.Method(), ctx.Host(), path)
	if !ok {
		writeJSON(ctx, fasthttp.StatusNotFound, routeNotFoundBody)
		return
	}
	r := &t.routes[value]
	if r.chain == nil {
		r.proxy(ctx)
		return
	}
	c := plugins.AcquireCtx(ctx, &r.info, time.Now().UnixNano())
	if !r.chain.Access(c) {
		r.proxy(ctx)
	}
	c.ApplyResponseHeaders()
	r.chain.Log(c)
	plugins.ReleaseCtx(c)
}

func (r *route) proxy(ctx *fasthttp.RequestCtx) {
	if r.upstream == nil {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, noUpstreamBody)
		return
	}
	r.upstream.Forward(ctx)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(body)
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
