package conf

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Edge holds the limits a worker puts on its clients and says whom it trusts to name the
// real client. The keys are nginx's directives of the same names (APISIX sets them in
// nginx_config.http); each is a top-level key of config.yaml.
type Edge struct {
	// ClientHeaderBufferSize bounds the request line and the headers together, in bytes;
	// a request past it gets 431, or 414 when the request line alone does not fit. nginx splits this into client_header_buffer_size and
	// large_client_header_buffers; gw has one buffer per connection.
	ClientHeaderBufferSize int `json:"client_header_buffer_size"`
	// ClientMaxBodySize bounds a request body, in bytes; 0 means no limit (APISIX's
	// default). A larger body gets 413.
	ClientMaxBodySize int64 `json:"client_max_body_size"`
	// ClientHeaderTimeout bounds reading a request's line and headers, from their first byte
	// (on a new connection, from the accept).
	ClientHeaderTimeout time.Duration `json:"client_header_timeout"`
	// ClientBodyTimeout bounds the wait between two reads of a request body.
	ClientBodyTimeout time.Duration `json:"client_body_timeout"`
	// KeepaliveTimeout bounds how long an idle keep-alive connection waits for its next
	// request.
	KeepaliveTimeout time.Duration `json:"keepalive_timeout"`
	// SendTimeout bounds the wait between two writes of a response to the client.
	SendTimeout time.Duration `json:"send_timeout"`
	// WorkerConnections is how many client connections one worker holds at once; more wait
	// in the listening socket's accept queue.
	WorkerConnections int `json:"worker_connections"`
	// RealIPFrom lists the CIDRs (canonical) whose TCP peers may name the client in
	// RealIPHeader; RealIPNets parses them.
	RealIPFrom []string `json:"real_ip_from"`
	// RealIPHeader is the request header that names the client, e.g. X-Real-IP or
	// X-Forwarded-For.
	RealIPHeader string `json:"real_ip_header"`
	// RealIPRecursive, when set, takes the last address in RealIPHeader that is not itself
	// trusted, instead of the last address.
	RealIPRecursive bool `json:"real_ip_recursive"`
}

// RealIPNets returns real_ip_from parsed. An entry that does not parse (possible only in a
// Config built by hand) is left out, which can only narrow whom gw trusts.
func (e *Edge) RealIPNets() []netip.Prefix {
	nets := make([]netip.Prefix, 0, len(e.RealIPFrom))
	for _, s := range e.RealIPFrom {
		if p, err := netip.ParsePrefix(s); err == nil {
			nets = append(nets, p)
		}
	}
	return nets
}

// Bounds of the edge keys. The header buffer is held by every connection with a request in
// progress, so its ceiling keeps worker_connections of them affordable.
const (
	minHeaderBuffer   = 1 << 10
	maxHeaderBuffer   = 1 << 20
	maxBodySize       = 1 << 50
	minConnections    = 16
	maxConnections    = 1 << 20
	realIPHeaderUsage = "a header name such as X-Real-IP or X-Forwarded-For"
)

// edgeFields decodes the edge keys of the top-level mapping into e.
func (l *loader) edgeFields(e *Edge) []yamlField {
	return []yamlField{
		{"client_header_buffer_size", yamlIntInto(&e.ClientHeaderBufferSize, l.sizeIn(minHeaderBuffer, maxHeaderBuffer))},
		{"client_max_body_size", yamlInto(&e.ClientMaxBodySize, l.sizeIn(0, maxBodySize))},
		{"client_header_timeout", yamlInto(&e.ClientHeaderTimeout, l.positiveDuration)},
		{"client_body_timeout", yamlInto(&e.ClientBodyTimeout, l.positiveDuration)},
		{"keepalive_timeout", yamlInto(&e.KeepaliveTimeout, l.positiveDuration)},
		{"send_timeout", yamlInto(&e.SendTimeout, l.positiveDuration)},
		{"worker_connections", yamlIntInto(&e.WorkerConnections, l.intIn(minConnections, maxConnections))},
		{"real_ip_from", yamlInto(&e.RealIPFrom, l.realIPFrom)},
		{"real_ip_header", yamlInto(&e.RealIPHeader, l.realIPHeader)},
		{"real_ip_recursive", yamlInto(&e.RealIPRecursive, l.boolean)},
	}
}

// realIPFrom decodes real_ip_from into canonical CIDRs; an empty list trusts nobody.
// nginx's "unix:" is refused: gw's data plane listens on TCP only.
func (l *loader) realIPFrom(path string, v *yaml.Node) ([]string, bool) {
	items, ok := l.list(path, v)
	if !ok {
		return nil, false
	}
	cidrs := make([]string, 0, len(items))
	valid := true
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		s, ok := l.scalarString(p, item)
		if !ok {
			valid = false
			continue
		}
		if s == "unix:" {
			l.errorf(item.Line, p, `"unix:" does not apply: gw's data plane listens on TCP only; list CIDRs or IP addresses`)
			valid = false
			continue
		}
		prefix, ok := parseCIDROrIP(s)
		if !ok {
			l.errorf(item.Line, p, "must be a CIDR like 10.0.0.0/8 or an IP address, got %q", s)
			valid = false
			continue
		}
		cidrs = append(cidrs, prefix.String())
	}
	return cidrs, valid
}

// parseCIDROrIP reads a CIDR (host bits masked) or a bare IP (that address alone), both
// without a zone and with v4-mapped addresses unmapped.
func parseCIDROrIP(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, false
		}
		addr := prefix.Addr()
		if addr.Is4In6() && prefix.Bits() >= 96 {
			return netip.PrefixFrom(addr.Unmap(), prefix.Bits()-96).Masked(), true
		}
		return prefix.Masked(), true
	}
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, addr.BitLen()), true
}

// realIPHeader accepts an HTTP header name (RFC 9110 token characters). nginx's special
// value proxy_protocol is refused: gw does not speak the PROXY protocol.
func (l *loader) realIPHeader(path string, v *yaml.Node) (string, bool) {
	s, ok := l.nonEmptyString(path, v)
	if !ok {
		return "", false
	}
	if s == "proxy_protocol" {
		l.errorf(v.Line, path, "proxy_protocol is not supported (gw does not read the PROXY protocol); use %s", realIPHeaderUsage)
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if !IsTokenByte(s[i]) {
			l.errorf(v.Line, path, "must be %s (letters, digits and !#$%%&'*+-.^_`|~), got %q", realIPHeaderUsage, s)
			return "", false
		}
	}
	return s, true
}

// crossCheckEdge applies the rules that tie the edge keys to others.
func (l *loader) crossCheckEdge(c *Config) {
	// Each client connection may hold an upstream connection too, and the worker needs
	// files of its own; nginx warns in the same case, gw refuses.
	if c.WorkerConnections > c.WorkerRlimitNofile {
		p := l.pick("worker_connections", "worker_rlimit_nofile")
		l.errorf(l.lines[p], p, "worker_connections %d is more than worker_rlimit_nofile %d, so a busy worker would run out of files; lower worker_connections or raise worker_rlimit_nofile",
			c.WorkerConnections, c.WorkerRlimitNofile)
	}
}

// IsTokenByte reports whether c may appear in an HTTP token such as a header name
// (RFC 9110 section 5.6.2).
func IsTokenByte(c byte) bool {
	return tokenBytes[c]
}

var tokenBytes = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
