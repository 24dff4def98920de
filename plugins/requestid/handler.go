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

var (
	_ plugins.AccessPhase  = (*Config)(nil)
	_ plugins.HeaderEditor = plugin{}
)

// EditsOnlyHeaders: request-id only sets its header, through the Ctx, so its routes keep
// sending the client's header block as it came, with the id (proxy.Info.Pristine).
func (plugin) EditsOnlyHeaders() bool { return true }

// ids are the pooled buffers a range_id longer than stackID is made in; the Ctx copies
// it where it goes.
var ids = sync.Pool{New: func() any { b := make([]byte, 0, MaxLength); return &b }}

// stackID is the longest id made on the stack: every uuid, uuidv7 and nanoid, and the
// range_ids up to it, skipping the pool's Get and Put.
const stackID = 64

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
	if c.Algorithm == RangeID && c.Length > stackID {
		buf := ids.Get().(*[]byte)
		*buf = c.appendID((*buf)[:0])
		c.give(pc, *buf)
		ids.Put(buf)
		return nil
	}
	var stack [stackID]byte
	c.give(pc, c.appendID(stack[:0]))
	return nil
}

// give sets id on the request sent upstream and, with include_in_response, queues it for
// the response; both copy it.
func (c *Config) give(pc *plugins.Ctx, id []byte) {
	pc.SetRequestHeader(c.HeaderName, id)
	if c.IncludeInResponse {
		pc.AddResponseHeaderIfAbsent(c.HeaderName, id)
	}
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
