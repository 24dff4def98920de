package proxymirror

import (
	"encoding/json"
	"math"

	"gw/plugins"
)

// Build decodes a route's configuration and opens its client to the mirror.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	m := &mirror{cfg: c, client: newClient(c)}
	m.threshold = uint64(math.MaxUint64)
	if c.SampleRatio < 1 {
		m.threshold = uint64(c.SampleRatio * (1 << 63) * 2)
	}
	return m, nil
}

// mirror is one route's proxy-mirror.
type mirror struct {
	cfg    *Config
	client *client
	// threshold is sample_ratio as a share of the 64-bit hashes: a request is mirrored
	// when its hash is below it.
	threshold uint64
}

var (
	_ plugins.AccessPhase = (*mirror)(nil)
	_ plugins.LogPhase    = (*mirror)(nil)
)

// Access reads a sampled request's body whole, when it declares one of at most maxBody
// bytes, so that the log phase can copy it after the proxy has sent it.
func (m *mirror) Access(c *plugins.Ctx) error {
	if n := c.RequestContentLength(); n > 0 && n <= maxBody && m.sampled(c) {
		c.RequestBody()
	}
	return nil
}

// Log copies a sampled request that was proxied (no plugin answered it) and hands the
// copy to the senders. It never waits: a copy over a bound is dropped.
func (m *mirror) Log(c *plugins.Ctx) {
	if c.Answered() || !m.sampled(c) {
		return
	}
	var body []byte
	switch n := c.RequestContentLength(); {
	case n < 0 || n > maxBody:
		dropped.Add(1)
		return
	case n > 0:
		b, ok := c.RequestBody()
		if !ok {
			dropped.Add(1)
			return
		}
		body = b
	}
	cost := int64(len(body) + c.RequestSize())
	if !reserve(cost) {
		dropped.Add(1)
		return
	}
	if !m.client.send(c, body, cost) {
		dropped.Add(1)
	}
}

// sampled reports whether the request is one of sample_ratio's: a hash of its start
// time, so that the access and log phases of one request agree without keeping state.
func (m *mirror) sampled(c *plugins.Ctx) bool {
	if m.threshold == math.MaxUint64 {
		return true
	}
	return splitmix(uint64(c.StartNanos)) < m.threshold
}

// splitmix is splitmix64's finaliser: nearby start times hash far apart.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
