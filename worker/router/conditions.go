package router

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"

	"github.com/valyala/fasthttp"

	"gw/conf"
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
	return c.vars == nil || evalExpr(c.vars, req)
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

func tcpPort(a net.Addr) (int, bool) {
	tcp, ok := a.(*net.TCPAddr)
	return tcp.Port, ok
}

// evalExpr evaluates a compiled vars expression as lua-resty-expr does: AND stops at the
// first false operand, OR at the first true one.
func evalExpr(e *conf.Expr, req *fasthttp.RequestCtx) bool {
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
func compare(c *conf.Comparison, req *fasthttp.RequestCtx) bool {
	switch c.Op {
	case conf.OpMatch, conf.OpMatchFold:
		return matchRegexp(c, req)
	case conf.OpIPMatch:
		return ipmatch(c, req)
	case conf.OpHas:
		return has(c, req)
	}
	var scratch [scratchSize]byte
	value, present := lookup(req, c.Var, scratch[:0])
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
// regexp keeps its input, so a value formatted here (an address, a port, a host with
// upper-case letters) is allocated.
func matchRegexp(c *conf.Comparison, req *fasthttp.RequestCtx) bool {
	var buf []byte
	switch c.Var.Kind {
	case conf.VarHost, conf.VarRemoteAddr, conf.VarRemotePort, conf.VarServerAddr, conf.VarServerPort:
		buf = make([]byte, 0, scratchSize)
	}
	value, present := lookup(req, c.Var, buf)
	return present && c.Regexp.Match(value)
}

// ipmatch reads remote_addr without formatting it; another variable holding an address
// (an X-Real-IP header) is parsed, which allocates its string.
func ipmatch(c *conf.Comparison, req *fasthttp.RequestCtx) bool {
	var addr netip.Addr
	if c.Var.Kind == conf.VarRemoteAddr {
		addr = remoteAddr(req)
	} else {
		value, present := lookup(req, c.Var, nil)
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

// has holds when any value of a repeated header, argument or cookie is the operand; a
// single-valued variable has one value. (lua-resty-expr's has reads a Lua table, which
// only some of APISIX's variables are.)
func has(c *conf.Comparison, req *fasthttp.RequestCtx) bool {
	switch c.Var.Kind {
	case conf.VarHeader:
		for _, v := range req.Request.Header.PeekAll(c.Var.Name) {
			if string(v) == c.Text {
				return true
			}
		}
		return false
	case conf.VarArg:
		for k, v := range req.QueryArgs().All() {
			if string(k) == c.Var.Name && string(v) == c.Text {
				return true
			}
		}
		return false
	case conf.VarCookie:
		for _, header := range req.Request.Header.PeekAll(fasthttp.HeaderCookie) {
			for rest := header; len(rest) > 0; {
				var name, value []byte
				name, value, rest = nextCookie(rest)
				if string(name) == c.Var.Name && string(value) == c.Text {
					return true
				}
			}
		}
		return false
	}
	var scratch [scratchSize]byte
	value, present := lookup(req, c.Var, scratch[:0])
	return present && string(value) == c.Text
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// lookup returns the value of v for req and whether req has it. Values the request holds
// as bytes are returned without copying; formatted ones (addresses, ports, a host with
// upper-case letters) are appended to buf, so a caller passing a stack buffer allocates
// nothing.
func lookup(req *fasthttp.RequestCtx, v conf.Var, buf []byte) ([]byte, bool) {
	switch v.Kind {
	case conf.VarURI:
		return req.Path(), true
	case conf.VarRequestURI:
		return req.RequestURI(), true
	case conf.VarArgs:
		q := req.URI().QueryString()
		return q, len(q) > 0
	case conf.VarHost:
		return lowerHost(hostName(req.Host()), buf), true
	case conf.VarRemoteAddr:
		addr := remoteAddr(req)
		return addr.AppendTo(buf), addr.IsValid()
	case conf.VarRemotePort:
		port, ok := tcpPort(req.RemoteAddr())
		return strconv.AppendInt(buf, int64(port), 10), ok
	case conf.VarServerAddr:
		addr := tcpAddr(req.LocalAddr())
		return addr.AppendTo(buf), addr.IsValid()
	case conf.VarServerPort:
		port, ok := tcpPort(req.LocalAddr())
		return strconv.AppendInt(buf, int64(port), 10), ok
	case conf.VarRequestMethod:
		return req.Method(), true
	case conf.VarScheme:
		if req.IsTLS() {
			return schemeHTTPS, true
		}
		return schemeHTTP, true
	case conf.VarHeader:
		// PeekAll, not Peek, tells a header sent empty from one not sent.
		values := req.Request.Header.PeekAll(v.Name)
		if len(values) == 0 {
			return nil, false
		}
		return values[0], true
	case conf.VarArg:
		args := req.QueryArgs()
		if !args.Has(v.Name) {
			return nil, false
		}
		return args.Peek(v.Name), true
	case conf.VarCookie:
		return cookie(req, v.Name)
	}
	panic("BUG: router: variable kind " + strconv.Itoa(int(v.Kind)) + " not looked up")
}

// lowerHost returns host, or a lower-cased copy in buf when it has upper-case letters
// ($host is lower case).
func lowerHost(host, buf []byte) []byte {
	upper := false
	for _, c := range host {
		if 'A' <= c && c <= 'Z' {
			upper = true
			break
		}
	}
	if !upper {
		return host
	}
	for _, c := range host {
		buf = append(buf, lowerASCII(c))
	}
	return buf
}

// cookie finds a cookie in the Cookie headers without fasthttp's cookie parsing, which
// would rewrite the request's headers on their way to the upstream.
func cookie(req *fasthttp.RequestCtx, name string) ([]byte, bool) {
	for _, header := range req.Request.Header.PeekAll(fasthttp.HeaderCookie) {
		for rest := header; len(rest) > 0; {
			var k, v []byte
			k, v, rest = nextCookie(rest)
			if string(k) == name {
				return v, true
			}
		}
	}
	return nil, false
}

// nextCookie splits the first "name=value" pair off a Cookie header, trimming the spaces
// around the ';' separators.
func nextCookie(header []byte) (name, value, rest []byte) {
	pair := header
	if i := bytes.IndexByte(header, ';'); i >= 0 {
		pair, rest = header[:i], header[i+1:]
	}
	pair = bytes.TrimSpace(pair)
	if i := bytes.IndexByte(pair, '='); i >= 0 {
		return bytes.TrimSpace(pair[:i]), bytes.TrimSpace(pair[i+1:]), rest
	}
	return nil, pair, rest
}
