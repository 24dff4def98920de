package router

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"

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

// evalExpr evaluates a compiled vars expression as lua-resty-expr does: AND stops at the
// first false operand, OR at the first true one.
func evalExpr(e *conf.Expr, req *vars.Request) bool {
	var holds bool
	switch e.Logic {
	case conf.LogicAnd:
		holds = true
		for i := range e.Operands {
			if !evalExpr(&e.Operands[i], req) {
				holds = false
				break
			}
		}
	case conf.LogicOr:
		for i := range e.Operands {
			if evalExpr(&e.Operands[i], req) {
				holds = true
				break
			}
		}
	default:
		holds = compare(&e.Cmp, req)
	}
	return holds != e.Negate
}

// scratchSize holds any formatted address or port, and most host names, on the stack.
const scratchSize = 64

// compare evaluates one comparison. A missing variable fails every operator but ~=, as
// Lua's nil does. Only the regular-expression operators and ipmatch on a variable other
// than remote_addr may allocate (see matchRegexp and ipmatch).
func compare(c *conf.Comparison, req *vars.Request) bool {
	switch c.Op {
	case conf.OpMatch, conf.OpMatchFold:
		return matchRegexp(c, req)
	case conf.OpIPMatch:
		return ipmatch(c, req)
	case conf.OpHas:
		return vars.Contains(req, &c.Var, c.Text)
	}
	var scratch [scratchSize]byte
	value, present := vars.Value(req, &c.Var, scratch[:0])
	switch c.Op {
	case conf.OpEqual, conf.OpNotEqual:
		var equal bool
		switch {
		case c.Absent:
			equal = !present
		case !present:
			equal = false
		case c.Numeric:
			n, ok := conf.ParseVarNumber(value)
			equal = ok && n == c.Number
		default:
			equal = string(value) == c.Text
		}
		return equal == (c.Op == conf.OpEqual)
	case conf.OpGreater, conf.OpGreaterEqual, conf.OpLess, conf.OpLessEqual:
		if !present {
			return false
		}
		n, ok := conf.ParseVarNumber(value)
		if !ok {
			return false
		}
		switch c.Op {
		case conf.OpGreater:
			return n > c.Number
		case conf.OpGreaterEqual:
			return n >= c.Number
		case conf.OpLess:
			return n < c.Number
		}
		return n <= c.Number
	case conf.OpIn:
		if !present {
			return false
		}
		for _, t := range c.Texts {
			if string(value) == t {
				return true
			}
		}
		if len(c.Numbers) > 0 {
			if n, ok := conf.ParseVarNumber(value); ok {
				for _, m := range c.Numbers {
					if n == m {
						return true
					}
				}
			}
		}
		return false
	}
	panic("BUG: router: comparison operator " + strconv.Itoa(int(c.Op)) + " not evaluated")
}

// matchRegexp is apart from compare so that compare's scratch buffer stays on the stack:
// regexp keeps its input, so a value that has to be made (an address, a port, a host
// with upper-case letters, a decoded argument) is allocated.
func matchRegexp(c *conf.Comparison, req *vars.Request) bool {
	value, present := vars.Value(req, &c.Var, nil)
	return present && c.Regexp.Match(value)
}

// ipmatch reads remote_addr without formatting it; another variable holding an address
// (an X-Real-IP header) is parsed, which allocates its string.
func ipmatch(c *conf.Comparison, req *vars.Request) bool {
	var addr netip.Addr
	if c.Var.Kind == conf.VarRemoteAddr {
		addr = remoteAddr(req.HTTP)
	} else {
		value, present := vars.Value(req, &c.Var, nil)
		if !present {
			return false
		}
		parsed, err := netip.ParseAddr(string(bytes.TrimSpace(value)))
		if err != nil {
			return false
		}
		addr = parsed.Unmap()
	}
	return addr.IsValid() && containsAddr(c.Prefixes, addr)
}
