package conf

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// HTTP2 is the http2 section: HTTP/2 to clients, over TLS (h2 by ALPN on ssl.listen) and
// in the clear (prior-knowledge h2c on node_listen). The keys are nginx's http2_*
// directives without the prefix, with nginx's defaults.
type HTTP2 struct {
	// MaxConcurrentStreams is how many streams one connection may have open at once
	// (SETTINGS_MAX_CONCURRENT_STREAMS); a stream past it is refused (REFUSED_STREAM).
	MaxConcurrentStreams int `json:"max_concurrent_streams"`
	// MaxFieldSize bounds one header field, name and value as HPACK decodes them.
	MaxFieldSize int `json:"max_field_size"`
	// MaxHeaderSize bounds a request's header list as RFC 9113 counts it (each field's
	// name and value plus 32), advertised as SETTINGS_MAX_HEADER_LIST_SIZE.
	MaxHeaderSize int `json:"max_header_size"`
	// RecvTimeout bounds the wait for the rest of a frame, or for more of a request, while
	// the connection has a stream open.
	RecvTimeout time.Duration `json:"recv_timeout"`
	// IdleTimeout closes a connection that has had no stream open this long.
	IdleTimeout time.Duration `json:"idle_timeout"`
	// H2CDisable lists node_listen addresses that answer only HTTP/1.1: there, a
	// connection starting with HTTP/2's preface is refused as a bad HTTP/1.1 request.
	H2CDisable []string `json:"h2c_disable"`
}

// ServesH2C reports whether the node_listen address accepts prior-knowledge h2c.
func (c *Config) ServesH2C(address string) bool {
	for _, a := range c.HTTP2.H2CDisable {
		if a == address {
			return false
		}
	}
	return true
}

// Bounds of the http2 keys. A stream costs a pooled request context and up to one
// receive window (64 KiB) of buffered body, so the ceiling keeps a connection's share of a
// worker's memory in the tens of megabytes.
const (
	maxHTTP2Streams    = 1024
	minHTTP2FieldSize  = 1 << 10
	maxHTTP2HeaderSize = 1 << 20
)

func (l *loader) http2(path string, n *yaml.Node, h *HTTP2) {
	l.mapping(n, path, []yamlField{
		{"max_concurrent_streams", yamlIntInto(&h.MaxConcurrentStreams, l.intIn(1, maxHTTP2Streams))},
		{"max_field_size", yamlIntInto(&h.MaxFieldSize, l.sizeIn(minHTTP2FieldSize, maxHTTP2HeaderSize))},
		{"max_header_size", yamlIntInto(&h.MaxHeaderSize, l.sizeIn(minHTTP2FieldSize, maxHTTP2HeaderSize))},
		{"recv_timeout", yamlInto(&h.RecvTimeout, l.positiveDuration)},
		{"idle_timeout", yamlInto(&h.IdleTimeout, l.positiveDuration)},
		{"h2c_disable", yamlInto(&h.H2CDisable, l.h2cDisable)},
	})
}

// h2cDisable decodes http2.h2c_disable: addresses in node_listen's forms, each checked
// against node_listen by crossCheckHTTP2.
func (l *loader) h2cDisable(path string, v *yaml.Node) ([]string, bool) {
	items, ok := l.list(path, v)
	if !ok {
		return nil, false
	}
	addrs := make([]string, 0, len(items))
	valid := true
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		l.lines[p] = item.Line // for crossCheckHTTP2's message
		addr, ok := l.listenAddr(p, item)
		valid = valid && ok
		addrs = append(addrs, addr)
	}
	return addrs, valid
}

// crossCheckHTTP2 refuses an h2c_disable entry that is no node_listen address: it would
// turn nothing off, which is not what its writer meant.
func (l *loader) crossCheckHTTP2(c *Config) {
	if c.HTTP2.MaxFieldSize > c.HTTP2.MaxHeaderSize {
		p := l.pick("http2.max_field_size", "http2.max_header_size")
		l.errorf(l.lines[p], p, "max_field_size %d is larger than max_header_size %d, which bounds every field too; lower max_field_size or raise max_header_size", c.HTTP2.MaxFieldSize, c.HTTP2.MaxHeaderSize)
	}
	for i, addr := range c.HTTP2.H2CDisable {
		found := false
		for _, node := range c.NodeListen {
			found = found || node == addr
		}
		if !found {
			p := fmt.Sprintf("http2.h2c_disable[%d]", i)
			l.errorf(l.lines[p], p, "%q is not a node_listen address (node_listen: %v); list the node_listen entry to serve HTTP/1.1 alone there", addr, c.NodeListen)
		}
	}
}
