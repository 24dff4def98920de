package router

import (
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins/vars"
)

// conditions are the checks of one entry that need the request itself, in APISIX's order
// (after method and host): the client address, then vars.
type conditions struct {
	remoteAddrs []netip.Prefix
	vars        *conf.Expr
}

func newConditions(e *Entry) *conditions {
	if len(e.RemoteAddrs) == 0 && e.Vars == nil {
		return nil
	}
	return &conditions{remoteAddrs: append([]netip.Prefix(nil), e.RemoteAddrs...), vars: e.Vars}
}

// admits reports whether req passes every condition. A nil req (Match, which has no
// request) passes none: a route limited to some clients must not open to all.
func (c *conditions) admits(req *fasthttp.RequestCtx) bool {
	if req == nil {
		return false
	}
	if len(c.remoteAddrs) > 0 && !containsAddr(c.remoteAddrs, remoteAddr(req)) {
		return false
	}
	if c.vars == nil {
		return true
	}
	r := vars.Request{HTTP: req} // no route yet, nor consumer: their variables have no value
	return evalExpr(c.vars, &r)
}

func containsAddr(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// remoteAddr is the TCP peer's address; an IPv4 peer on a dual-stack socket comes as
// ::ffff:a.b.c.d and is unmapped, so that IPv4 prefixes cover it.
func remoteAddr(req *fasthttp.RequestCtx) netip.Addr {
	return tcpAddr(req.RemoteAddr())
}

func tcpAddr(a net.Addr) netip.Addr {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	addr, _ := netip.AddrFromSlice(tcp.IP)
	return addr.Unmap()
}

// evalExpr is the vars expression's evaluation, which lives with the variables
// (vars.Eval) so that plugins (traffic-split) evaluate it the same.
func evalExpr(e *conf.Expr, req *vars.Request) bool { return vars.Eval(req, e) }
