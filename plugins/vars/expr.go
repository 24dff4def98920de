package vars

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"

	"gw/conf"
)

// Eval reports whether the compiled vars expression e (conf.ParseVars) holds for req, as
// lua-resty-expr evaluates it: AND stops at the first false operand, OR at the first true
// one. The router's route vars and traffic-split's matches evaluate it. It allocates
// nothing but for the regular-expression operators and ipmatch on a variable other than
// remote_addr (see matchRegexp and ipmatch).
func Eval(req *Request, e *conf.Expr) bool {
	var holds bool
	switch e.Logic {
	case conf.LogicAnd:
		holds = true
		for i := range e.Operands {
			if !Eval(req, &e.Operands[i]) {
				holds = false
				break
			}
		}
	case conf.LogicOr:
		for i := range e.Operands {
			if Eval(req, &e.Operands[i]) {
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
func compare(c *conf.Comparison, req *Request) bool {
	switch c.Op {
	case conf.OpMatch, conf.OpMatchFold:
		return matchRegexp(c, req)
	case conf.OpIPMatch:
		return ipmatch(c, req)
	case conf.OpHas:
		return Contains(req, &c.Var, c.Text)
	}
	var scratch [scratchSize]byte
	value, present := Value(req, &c.Var, scratch[:0])
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
	panic("BUG: vars: comparison operator " + strconv.Itoa(int(c.Op)) + " not evaluated")
}

// matchRegexp is apart from compare so that compare's scratch buffer stays on the stack:
// regexp keeps its input, so a value that has to be made (an address, a port, a host
// with upper-case letters, a decoded argument) is allocated.
func matchRegexp(c *conf.Comparison, req *Request) bool {
	value, present := Value(req, &c.Var, nil)
	return present && c.Regexp.Match(value)
}

// ipmatch reads remote_addr without formatting it; another variable holding an address
// (an X-Real-IP header) is parsed, which allocates its string.
func ipmatch(c *conf.Comparison, req *Request) bool {
	var addr netip.Addr
	if c.Var.Kind == conf.VarRemoteAddr {
		addr = peerAddr(req.HTTP.RemoteAddr())
	} else {
		value, present := Value(req, &c.Var, nil)
		if !present {
			return false
		}
		parsed, err := netip.ParseAddr(string(bytes.TrimSpace(value)))
		if err != nil {
			return false
		}
		addr = parsed.Unmap()
	}
	return addr.IsValid() && inPrefixes(c.Prefixes, addr)
}

// peerAddr is a TCP address as a netip.Addr, an IPv4 one on a dual-stack socket
// (::ffff:a.b.c.d) unmapped so that IPv4 prefixes cover it; the zero Addr for any other.
func peerAddr(a net.Addr) netip.Addr {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	addr, _ := netip.AddrFromSlice(tcp.IP)
	return addr.Unmap()
}

func inPrefixes(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
