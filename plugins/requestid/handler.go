package requestid

import (
	"encoding/json"
	"sync"

	"gw/plugins"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var _ plugins.AccessPhase = (*Config)(nil)

// ids are the pooled buffers an id is made in; the Ctx copies it where it goes.
var ids = sync.Pool{New: func() any { b := make([]byte, 0, 64); return &b }}

// Access gives the request its id, as APISIX's rewrite does: the client's own when it
// sent a non-empty header_name, else a new one, set on the request sent upstream (where
// later plugins read it as $http_x_request_id). With include_in_response the response
// carries it too, unless the upstream's response has that header already.
func (c *Config) Access(pc *plugins.Ctx) error {
	if id := pc.RequestHeader(c.HeaderName); len(id) > 0 {
		if c.IncludeInResponse {
			pc.AddResponseHeaderIfAbsent(c.HeaderName, id)
		}
		return nil
	}
	buf := ids.Get().(*[]byte)
	id := c.appendID((*buf)[:0])
	pc.SetRequestHeader(c.HeaderName, id)
	if c.IncludeInResponse {
		pc.AddResponseHeaderIfAbsent(c.HeaderName, id)
	}
	*buf = id
	ids.Put(buf)
	return nil
}

func (c *Config) appendID(dst []byte) []byte {
	switch c.Algorithm {
	case UUIDv7:
		return appendUUIDv7(dst)
	case NanoID:
		return appendNanoID(dst)
	case RangeID:
		return appendRangeID(dst, c.Length, c.CharSet)
	}
	return appendUUID(dst)
}
