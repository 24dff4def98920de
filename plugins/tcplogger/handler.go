package tcplogger

import (
	"encoding/json"

	"gw/plugins"
	"gw/plugins/logentry"
)

var _ plugins.LogPhase = (*logentry.Logger)(nil)

// Build makes the route's instance, a logentry.Logger with a processor of its own.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return logentry.NewLogger(cfg.Format, cfg.Entry, cfg.Batch, newSender(cfg).send, Name, env)
}

// sender writes batches, a connection each, as tcp-logger.lua; used by one processor's
// goroutine.
type sender struct {
	cfg    *Config
	socket logentry.Socket
	data   []byte
}

func newSender(cfg *Config) *sender {
	return &sender{cfg: cfg, socket: logentry.Socket{Network: "tcp", Addr: cfg.Addr, TLS: cfg.TLS,
		ServerName: cfg.ServerName, Timeout: cfg.Timeout, Peer: "TCP server"}}
}

func (s *sender) send(entries [][]byte) error {
	s.data = logentry.Concat(s.data[:0], entries, s.cfg.Batch.BatchMaxSize)
	return s.socket.Write(s.data)
}
