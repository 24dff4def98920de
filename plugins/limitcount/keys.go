package limitcount

import (
	"encoding/binary"
	"net"
	"strings"

	"gw/internal/bytesconv"
	"gw/plugins"
	"gw/shm"
)

// varKind is a variable a key may name, as in APISIX (nginx variables plus APISIX's own).
type varKind uint8

const (
	varUnknown varKind = iota // always missing, as an unknown variable is nil in APISIX
	varRemoteAddr
	varRemotePort
	varServerAddr
	varServerPort
	varHeader // http_<name>
	varArg    // arg_<name>
	varCookie // cookie_<name>
	varURI
	varRequestURI
	varHost
	varMethod
	varScheme
	varRouteID
	varRouteName
	varServiceID
	varServiceName
	varConsumerName
)

// variable is one resolved-at-build variable reference.
type variable struct {
	kind varKind
	name []byte // header name (X-User), argument or cookie name
}

var simpleVars = map[string]varKind{
	"remote_addr":    varRemoteAddr,
	"remote_port":    varRemotePort,
	"server_addr":    varServerAddr,
	"server_port":    varServerPort,
	"uri":            varURI,
	"request_uri":    varRequestURI,
	"host":           varHost,
	"request_method": varMethod,
	"scheme":         varScheme,
	"route_id":       varRouteID,
	"route_name":     varRouteName,
	"service_id":     varServiceID,
	"service_name":   varServiceName,
	"consumer_name":  varConsumerName,
}

// parseVariable resolves a variable name once, at build time.
func parseVariable(name string) variable {
	if kind, ok := simpleVars[name]; ok {
		return variable{kind: kind}
	}
	switch {
	case strings.HasPrefix(name, "http_") && len(name) > len("http_"):
		// nginx's $http_x_user is the header X-User: lower case, '_' for '-'.
		header := strings.ReplaceAll(name[len("http_"):], "_", "-")
		return variable{kind: varHeader, name: []byte(fasthttpCanonical(header))}
	case strings.HasPrefix(name, "arg_") && len(name) > len("arg_"):
		return variable{kind: varArg, name: []byte(name[len("arg_"):])}
	case strings.HasPrefix(name, "cookie_") && len(name) > len("cookie_"):
		return variable{kind: varCookie, name: []byte(name[len("cookie_"):])}
	}
	return variable{kind: varUnknown}
}

// fasthttpCanonical writes a header name the way fasthttp stores it (X-User), so that a
// lookup needs no normalising copy.
func fasthttpCanonical(name string) string {
	b := []byte(strings.ToLower(name))
	upper := true
	for i, c := range b {
		if upper && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		upper = c == '-'
	}
	return string(b)
}

// value returns the variable's value for a request and whether it has one. The result may
// point into scratch, into the request, or into the route's strings: read it, never keep
// or change it.
func (v *variable) value(c *plugins.Ctx, scratch *[16]byte) ([]byte, bool) {
	req := c.Request
	var b []byte
	switch v.kind {
	case varRemoteAddr:
		return ipBytes(req.RemoteIP()), true
	case varRemotePort:
		return portBytes(req.RemoteAddr(), scratch)
	case varServerAddr:
		return ipBytes(req.LocalIP()), true
	case varServerPort:
		return portBytes(req.LocalAddr(), scratch)
	case varHeader:
		b = req.Request.Header.PeekBytes(v.name)
	case varArg:
		b = req.QueryArgs().PeekBytes(v.name)
	case varCookie:
		b = req.Request.Header.CookieBytes(v.name)
	case varURI:
		b = req.Path()
	case varRequestURI:
		b = req.RequestURI()
	case varHost:
		b = req.Host()
	case varMethod:
		b = req.Method()
	case varScheme:
		if req.IsTLS() {
			return schemeHTTPS, true
		}
		return schemeHTTP, true
	case varRouteID:
		b = stringBytes(c.Route.ID)
	case varRouteName:
		b = stringBytes(c.Route.Name)
	case varServiceID:
		b = stringBytes(c.Route.ServiceID)
	case varServiceName:
		b = stringBytes(c.Route.ServiceName)
	case varConsumerName:
		b = stringBytes(c.Consumer)
	}
	// fasthttp cannot tell an empty header or argument from a missing one; both count as
	// missing, so the key falls back to the client address rather than one shared counter.
	return b, len(b) > 0
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// ipBytes is the address in its 4-byte form when it is IPv4, so that one client counts as
// one key whether it arrived on an IPv4 or a dual-stack socket.
func ipBytes(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

func portBytes(addr net.Addr, scratch *[16]byte) ([]byte, bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil, false
	}
	binary.BigEndian.PutUint16(scratch[:2], uint16(tcp.Port))
	return scratch[:2], true
}

func stringBytes(s string) []byte { return bytesconv.Bytes(s) }

// keyPart is a piece of a var_combination key: literal text or a variable.
type keyPart struct {
	literal string
	isVar   bool
	v       variable
}

// parseCombination splits APISIX's "$remote_addr $http_x" (also "${name}") into parts,
// as core.utils.resolve_var reads it: a variable name is letters, digits and '_'.
func parseCombination(key string) []keyPart {
	var parts []keyPart
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, keyPart{literal: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(key); {
		if key[i] != '$' {
			text.WriteByte(key[i])
			i++
			continue
		}
		if i+1 < len(key) && key[i+1] == '{' {
			if end := strings.IndexByte(key[i+2:], '}'); end > 0 {
				flush()
				parts = append(parts, keyPart{isVar: true, v: parseVariable(key[i+2 : i+2+end])})
				i += end + 3
				continue
			}
		}
		j := i + 1
		for j < len(key) && isNameByte(key[j]) {
			j++
		}
		if j == i+1 { // a lone '$' is text
			text.WriteByte('$')
			i++
			continue
		}
		flush()
		parts = append(parts, keyPart{isVar: true, v: parseVariable(key[i+1 : j])})
		i = j
	}
	flush()
	return parts
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// keySource computes a request's counter fingerprint: the route's prefix (or the group's)
// followed by the key's value.
type keySource struct {
	base     shm.KeyHash // seeded and fed the prefix at build time
	constant bool
	fp       uint64 // the whole fingerprint when constant
	parts    []keyPart
	fallback variable // remote_addr, used when no variable of the key has a value
}

func newKeySource(base shm.KeyHash, cfg *Config) *keySource {
	ks := &keySource{base: base, fallback: variable{kind: varRemoteAddr}}
	switch cfg.KeyType {
	case "constant":
		ks.constant = true
		h := base
		h.WriteString(cfg.Key)
		ks.fp = h.Sum()
	case "var_combination":
		ks.parts = parseCombination(cfg.Key)
	default:
		ks.parts = []keyPart{{isVar: true, v: parseVariable(cfg.Key)}}
	}
	return ks
}

// fingerprint hashes the request's key without allocating.
func (ks *keySource) fingerprint(c *plugins.Ctx) uint64 {
	if ks.constant {
		return ks.fp
	}
	var scratch [16]byte
	h := ks.base
	resolved := false
	for i := range ks.parts {
		p := &ks.parts[i]
		if !p.isVar {
			h.WriteString(p.literal)
			continue
		}
		if v, ok := p.v.value(c, &scratch); ok {
			h.Write(v)
			resolved = true
		}
	}
	if !resolved { // APISIX: "The value of the configured key is empty, use client IP instead"
		h = ks.base
		v, _ := ks.fallback.value(c, &scratch)
		h.Write(v)
	}
	return h.Sum()
}
