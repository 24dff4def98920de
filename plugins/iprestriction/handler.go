package iprestriction

import (
	"encoding/json"

	"gw/plugins"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var (
	_ plugins.AccessPhase   = (*Config)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: ip-restriction only lets a request through or answers it.
func (plugin) KeepsRequest() bool { return true }

var contentTypeJSON = []byte("application/json")

// Access answers ResponseCode with the message when the client's address is refused: on
// a whitelist, one no prefix covers; on a blacklist, one a prefix covers. A client
// without an IP address (not TCP) is on no list.
func (c *Config) Access(pc *plugins.Ctx) error {
	ip := pc.RemoteIP()
	listed := false
	for _, p := range c.Prefixes {
		if p.Contains(ip) {
			listed = true
			break
		}
	}
	if listed != c.Whitelist {
		pc.Respond(c.ResponseCode, contentTypeJSON, c.Body)
	}
	return nil
}
