package httplogger

import (
	"encoding/json"

	"gw/plugins"
	"gw/plugins/logentry"
)

// handler is one route's http-logger: the shared log phase (logentry.Logger) with a
// processor that POSTs. Log is safe for concurrent use.
type handler struct{ *logentry.Logger }

// bodyHandler is a handler with include_resp_body, which reads a streamed body in the
// response phase; the others have no response phase to run.
type bodyHandler struct{ handler }

var (
	_ plugins.LogPhase      = handler{}
	_ plugins.ResponsePhase = bodyHandler{}
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: http-logger only reads the request.
func (plugin) KeepsRequest() bool { return true }

// Build makes the route's instance, with a processor of its own: a new snapshot's
// instance starts a new one, and the old one's goroutine ends once it has sent what it
// holds.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	l, err := logentry.NewJoinedLogger(cfg.Format, cfg.Entry, cfg.Batch, joined(cfg), newSender(cfg).send, Name, env)
	if err != nil {
		return nil, err
	}
	if cfg.Entry.ResponseBody {
		return bodyHandler{handler{l}}, nil
	}
	return handler{l}, nil
}

// maxLoggedBody is the largest streamed response body include_resp_body reads for the
// log: one of known length up to it is read whole before it goes to the client; a larger
// one, or one of unknown length, streams unlogged, since reading it would hold or cut
// the client's response.
const maxLoggedBody = 1 << 20

// Response reads a streamed response body for include_resp_body (see maxLoggedBody).
func (h bodyHandler) Response(c *plugins.Ctx) {
	if !c.ResponseStreamed() {
		return
	}
	if n := contentLength(c.ResponseHeader([]byte("Content-Length"))); n >= 0 && n <= maxLoggedBody {
		c.ReadResponseBody(maxLoggedBody)
	}
}

func contentLength(v []byte) int {
	if len(v) == 0 || len(v) > 9 {
		return -1
	}
	n := 0
	for _, d := range v {
		if d < '0' || d > '9' {
			return -1
		}
		n = n*10 + int(d-'0')
	}
	return n
}
