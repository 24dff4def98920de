package uriblocker

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
	_ plugins.AccessPhase   = (*Config)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: uri-blocker only lets a request through or answers it.
func (plugin) KeepsRequest() bool { return true }

var contentTypeJSON = []byte("application/json")

// subjects are the pooled buffers that hold a request's URI while the rules run.
var subjects = sync.Pool{New: func() any { return new([]byte) }}

// Access answers RejectedCode when a rule matches the request's URI as APISIX reads it:
// its request_uri, which APISIX rebuilds from the normalised path ($uri .. $is_args ..
// $args) so that "/./internal/x" cannot slip past "^/internal/".
func (c *Config) Access(pc *plugins.Ctx) error {
	if c.Blocked == nil {
		return nil
	}
	buf := subjects.Get().(*[]byte)
	subject := append((*buf)[:0], pc.Path()...)
	if q := pc.QueryString(); len(q) > 0 {
		subject = append(subject, '?')
		subject = append(subject, q...)
	}
	blocked := c.Blocked.Match(subject)
	*buf = subject
	subjects.Put(buf)
	if blocked {
		var contentType []byte
		if c.RejectedBody != nil {
			contentType = contentTypeJSON
		}
		pc.Respond(c.RejectedCode, contentType, c.RejectedBody)
	}
	return nil
}
