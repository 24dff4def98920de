package realip

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"sync"

	"gw/internal/bytesconv"
	"gw/plugins"
	"gw/plugins/vars"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var (
	_ plugins.AccessPhase   = (*Config)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: real-ip changes who the client is, not what is sent; the X-Real-IP and
// X-Forwarded-For the proxy derives from it are set on every request alike.
func (plugin) KeepsRequest() bool { return true }

var forwardedForHeader = []byte("X-Forwarded-For")

// Access names the client from the source, as APISIX's real-ip does: only for a TCP peer
// in trusted_addresses when they are set, and only when the source holds an IPv4 or
// IPv6 address (with a port from 1 to 65535, or none). Anything else leaves the client
// as it was, without answering.
func (c *Config) Access(pc *plugins.Ctx) error {
	if c.Trusted != nil && !c.trusts(pc.RemoteIP()) {
		return nil
	}
	if c.ForwardedFor {
		if addr, ok := c.forwardedFor(pc); ok {
			c.use(pc, addr)
		}
		return nil
	}
	// A value that has to be made (a decoded argument) goes in a pooled buffer: one on
	// the stack would escape through netip's error, which keeps its input.
	buf := scratch.Get().(*[]byte)
	r := pc.VarsRequest()
	if addr, ok := vars.Value(&r, &c.Source, *buf); ok {
		c.use(pc, addr)
	}
	scratch.Put(buf)
	return nil
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// use makes addr the client when it is one.
func (c *Config) use(pc *plugins.Ctx, addr []byte) {
	if ip, port, ok := parseAddr(addr); ok {
		pc.SetRemoteIP(ip, port)
	}
}

// forwardedFor is APISIX's reading of X-Forwarded-For: the last header's last address,
// or with recursive (and trusted_addresses) the rightmost address not trusted, the
// leftmost when all are.
func (c *Config) forwardedFor(pc *plugins.Ctx) ([]byte, bool) {
	list := pc.LastRequestHeader(forwardedForHeader)
	if list == nil {
		return nil, false
	}
	comma := bytes.LastIndexByte(list, ',')
	if comma < 0 {
		return list, true
	}
	if !c.Recursive || c.Trusted == nil {
		return bytes.TrimLeft(list[comma+1:], " "), true
	}
	for comma >= 0 {
		item := bytes.Trim(list[comma+1:], " \t")
		if ip, err := netip.ParseAddr(bytesconv.String(item)); err != nil || !c.trusts(ip.Unmap()) {
			return item, true // neither ip nor err is kept
		}
		list = list[:comma]
		comma = bytes.LastIndexByte(list, ',')
	}
	return bytes.Trim(list, " \t"), true
}

func (c *Config) trusts(ip netip.Addr) bool {
	for _, p := range c.Trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// parseAddr reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port", as APISIX's parse_addr and
// its checks do; port is 0 when none is given.
func parseAddr(addr []byte) (ip netip.Addr, port int, ok bool) {
	host, portText := addr, []byte(nil)
	switch {
	case len(addr) > 0 && addr[0] == '[':
		end := bytes.IndexByte(addr, ']')
		if end < 0 {
			return ip, 0, false
		}
		host = addr[1:end]
		if rest := addr[end+1:]; len(rest) > 0 {
			if rest[0] != ':' {
				return ip, 0, false
			}
			portText = rest[1:]
		}
	case bytes.Count(addr, colon) == 1:
		i := bytes.IndexByte(addr, ':')
		host, portText = addr[:i], addr[i+1:]
	}
	ip, err := netip.ParseAddr(bytesconv.String(host)) // neither ip's zone nor err is kept
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, 0, false
	}
	if portText != nil {
		p, err := strconv.ParseUint(bytesconv.String(portText), 10, 32)
		if err != nil || p < 1 || p > 65535 {
			return netip.Addr{}, 0, false
		}
		port = int(p)
	}
	return ip.Unmap(), port, true
}

var colon = []byte(":")
