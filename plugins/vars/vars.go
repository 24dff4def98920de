package vars

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/bytesconv"
)

// Request is what variables are read from: one HTTP request and what gw has learnt about
// it so far. A field not known yet is empty, and the variables it answers have no value:
// route_id while routing, consumer_name before authentication, as in APISIX. A Request
// is a value for one goroutine: build it on the stack for each request, or keep one per
// connection and set its fields.
type Request struct {
	// HTTP is the request; it must be set.
	HTTP *fasthttp.RequestCtx
	// RouteID, RouteName, ServiceID and ServiceName are the matched route's and its
	// service's ($route_id, $route_name, $service_id, $service_name).
	RouteID, RouteName, ServiceID, ServiceName string
	// Consumer is the authenticated consumer's name ($consumer_name).
	Consumer string
	// Match is the regular expression match a template's $1 reads (proxy-rewrite's
	// regex_uri); nil when nothing matched, and every capture is then empty. A pointer
	// keeps Request small: every reader builds one per request.
	Match *Match
}

// Match is one regular expression match: Captures holds the submatch indexes into
// Subject, as regexp's FindSubmatchIndex returns them.
type Match struct {
	Subject  []byte
	Captures []int
}

// capture returns capture n of r's match and whether it matched.
func (r *Request) capture(n int) ([]byte, bool) {
	m := r.Match
	if m == nil {
		return nil, false
	}
	if i := 2 * n; i+1 < len(m.Captures) && m.Captures[i] >= 0 {
		return m.Subject[m.Captures[i]:m.Captures[i+1]], true
	}
	return nil, false
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
	// serverName is APISIX's $server_name: its nginx.conf serves HTTP in `server_name _;`.
	serverName = []byte("_")
	hostname   = func() []byte {
		name, _ := os.Hostname()
		return []byte(name)
	}()
)

// Value returns v's value for r and whether r has it. A value r holds is returned as it
// is and points into the request (or into r's strings); a made one (an address, a port, a
// lower-cased host, a decoded argument) is appended to buf[:0]. Either way the caller
// reads it and never writes to it, and it is valid until the request changes; a caller
// that passes a buffer on its stack allocates nothing.
//
// A header, argument or cookie sent empty has a value, the empty one; so has $host.
// $args has none without a query string, and the route, service and consumer variables
// none while r's fields are empty.
func Value(r *Request, v *conf.Var, buf []byte) ([]byte, bool) {
	value, _, ok := read(r, v, buf[:0])
	return value, ok
}

// Append appends v's value for r to dst and reports whether r has one; dst is returned
// unchanged when it has none.
func Append(dst []byte, r *Request, v *conf.Var) ([]byte, bool) {
	value, appended, ok := read(r, v, dst)
	if appended {
		return value, ok
	}
	return append(dst, value...), ok
}

// ReadsNames reports whether v reads Request's route, service or consumer names. A caller
// on a hot path may leave those fields empty when none of its variables does: copying
// them costs more than reading an address.
func ReadsNames(v *conf.Var) bool {
	switch v.Kind {
	case conf.VarRouteID, conf.VarRouteName, conf.VarServiceID, conf.VarServiceName, conf.VarConsumerName:
		return true
	}
	return false
}

// HashValue is Value for a caller that hashes the value rather than reads it (limit-count's
// counter keys): the connection's addresses and ports come in their binary form, an IPv4
// address as 4 bytes, an IPv6 one as 16, a port as 2 bytes big-endian. That identifies
// them as well as their text, costs no formatting, and is the form limit-count has always
// hashed, so counters keyed on them survive an upgrade. Every other variable is as Value
// gives it.
func HashValue(r *Request, v *conf.Var, buf []byte) ([]byte, bool) {
	switch v.Kind {
	case conf.VarRemoteAddr:
		return binaryAddr(r.HTTP.RemoteAddr())
	case conf.VarServerAddr:
		return binaryAddr(r.HTTP.LocalAddr())
	case conf.VarRemotePort:
		return binaryPort(buf[:0], r.HTTP.RemoteAddr())
	case conf.VarServerPort:
		return binaryPort(buf[:0], r.HTTP.LocalAddr())
	}
	return Value(r, v, buf)
}

func binaryAddr(a net.Addr) ([]byte, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || len(tcp.IP) == 0 {
		return nil, false
	}
	if v4 := tcp.IP.To4(); v4 != nil {
		return v4, true
	}
	return tcp.IP, true
}

func binaryPort(buf []byte, a net.Addr) ([]byte, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return nil, false
	}
	return append(buf, byte(tcp.Port>>8), byte(tcp.Port)), true
}

// Contains reports whether any of v's values is want: for a header, argument, cookie or
// form field sent several times, any of them; for a post_arg path that reaches several
// values ([*]), any of them, and for a JSON array, any of its items; for the other
// variables, their one value. It is lua-resty-expr's "has", which APISIX evaluates on a
// variable read as a list.
func Contains(r *Request, v *conf.Var, want string) bool {
	req := r.HTTP
	switch v.Kind {
	case conf.VarHeader:
		for _, value := range req.Request.Header.PeekAll(v.Name) {
			if string(value) == want {
				return true
			}
		}
		return false
	case conf.VarArg:
		for query := req.URI().QueryString(); len(query) > 0; {
			key, value, rest, keyEscaped, valueEscaped := nextArg(query)
			query = rest
			if argNameIs(key, keyEscaped, v.Name) && argNameIs(value, valueEscaped, want) {
				return true
			}
		}
		return false
	case conf.VarCookie:
		for _, header := range req.Request.Header.PeekAll(fasthttp.HeaderCookie) {
			for rest := header; len(rest) > 0; {
				var name, value []byte
				name, value, rest = nextCookie(rest)
				if string(name) == v.Name && string(value) == want {
					return true
				}
			}
		}
		return false
	case conf.VarPostArg, conf.VarPostArgForm:
		return containsPostArg(r, v, want)
	}
	var scratch [64]byte
	value, ok := Value(r, v, scratch[:0])
	return ok && string(value) == want
}

// read is Value and Append: a made value is appended to buf and returned whole with
// appended set; a value r holds is returned with appended clear.
func read(r *Request, v *conf.Var, buf []byte) (value []byte, appended, ok bool) {
	req := r.HTTP
	switch v.Kind {
	case conf.VarURI:
		return req.Path(), false, true
	case conf.VarRequestURI:
		return req.RequestURI(), false, true
	case conf.VarArgs:
		q := req.URI().QueryString()
		return q, false, len(q) > 0
	case conf.VarHost:
		host := HostName(req.Host())
		if !hasUpper(host) {
			return host, false, true
		}
		start := len(buf)
		buf = append(buf, host...)
		for i := start; i < len(buf); i++ {
			buf[i] = lower(buf[i])
		}
		return buf, true, true
	case conf.VarHostname:
		return hostname, false, true
	case conf.VarServerName:
		return serverName, false, true
	case conf.VarRemoteAddr:
		return appendAddr(buf, req.RemoteAddr())
	case conf.VarRemotePort:
		return appendPort(buf, req.RemoteAddr())
	case conf.VarServerAddr:
		return appendAddr(buf, req.LocalAddr())
	case conf.VarServerPort:
		return appendPort(buf, req.LocalAddr())
	case conf.VarRequestMethod:
		return req.Method(), false, true
	case conf.VarScheme:
		if req.IsTLS() {
			return schemeHTTPS, false, true
		}
		return schemeHTTP, false, true
	case conf.VarHeader:
		// The name is canonical already: no normalising copy. An empty answer is either a
		// header sent empty or none; PeekAll tells them apart.
		if value := req.Request.Header.PeekCanonical(stringBytes(v.Name)); len(value) > 0 {
			return value, false, true
		}
		values := req.Request.Header.PeekAll(v.Name)
		if len(values) == 0 {
			return nil, false, false
		}
		return values[0], false, true
	case conf.VarArg:
		return queryArg(req.URI().QueryString(), v.Name, buf)
	case conf.VarCookie:
		value, ok := cookie(req, v.Name)
		return value, false, ok
	case conf.VarRouteID:
		return text(r.RouteID)
	case conf.VarRouteName:
		return text(r.RouteName)
	case conf.VarServiceID:
		return text(r.ServiceID)
	case conf.VarServiceName:
		return text(r.ServiceName)
	case conf.VarConsumerName:
		return text(r.Consumer)
	case conf.VarPostArg, conf.VarPostArgForm:
		return readPostArg(r, v, buf)
	case conf.VarStatus:
		// The response's status as it stands; nginx's $status is 000 before there is one,
		// and only response-rewrite, once there is, reads it.
		return strconv.AppendInt(buf, int64(req.Response.StatusCode()), 10), true, true
	case conf.VarSentHeader:
		h := &req.Response.Header
		if value := h.PeekBytes(stringBytes(v.Name)); len(value) > 0 {
			return value, false, true
		}
		values := h.PeekAll(v.Name)
		if len(values) == 0 {
			return nil, false, false
		}
		return values[0], false, true
	case conf.VarTimeISO8601:
		// nginx's $time_iso8601: the local time to the second, with the zone's offset.
		return time.Now().AppendFormat(buf, "2006-01-02T15:04:05-07:00"), true, true
	case 0, conf.VarMQTTClientID:
		return nil, false, false
	}
	panic("BUG: vars: variable kind " + strconv.Itoa(int(v.Kind)) + " is not read")
}

// text is a string field as a value: no copy (the caller never writes to a value), and
// none when empty.
func text(s string) ([]byte, bool, bool) {
	return stringBytes(s), false, s != ""
}

// stringBytes is s's bytes, for reading only.
func stringBytes(s string) []byte { return bytesconv.Bytes(s) }

// maxAddrText is the longest address appendAddr writes, an IPv6 one.
const maxAddrText = len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")

// appendAddr appends a TCP address's IP; an IPv4 client on a dual-stack socket comes as
// ::ffff:a.b.c.d and is unmapped, as nginx shows it.
func appendAddr(buf []byte, a net.Addr) ([]byte, bool, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return nil, false, false
	}
	addr, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return nil, false, false
	}
	if cap(buf) == 0 {
		// One allocation, not AppendTo's few as it appends byte by byte, for a caller
		// that has no buffer (the router's regular expressions, which keep their input).
		buf = make([]byte, 0, maxAddrText)
	}
	return addr.Unmap().AppendTo(buf), true, true
}

func appendPort(buf []byte, a net.Addr) ([]byte, bool, bool) {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return nil, false, false
	}
	return strconv.AppendInt(buf, int64(tcp.Port), 10), true, true
}

// HostName is nginx's $host of a Host value but for case, which the caller folds as it
// needs: without a ":port" suffix (an IPv6 literal keeps its brackets) and without one
// trailing dot. The router matches hosts on it.
func HostName(host []byte) []byte {
	if len(host) > 0 && host[0] == '[' {
		if end := bytes.IndexByte(host, ']'); end >= 0 {
			host = host[:end+1]
		}
	} else if colon := bytes.IndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	if n := len(host); n > 0 && host[n-1] == '.' {
		host = host[:n-1]
	}
	return host
}

func hasUpper(b []byte) bool {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
