package tcplogger

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
)

var _ plugins.LogPhase = (*logentry.Logger)(nil)

// Build makes the route's instance, a logentry.Logger with a processor of its own.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	format, err := logentry.FormatFor(cfg.Format, env)
	if err != nil {
		return nil, fmt.Errorf("plugin_metadata: %w", err)
	}
	l := &logentry.Logger{Format: format, Options: cfg.Entry}
	var logf func(string, ...any)
	if env.Shared != nil {
		l.Options.Version, logf = env.Shared.Version, env.Shared.Logf
	}
	s := &sender{cfg: cfg}
	l.Proc = batch.New(cfg.Batch, s.send, batch.CountersOf(env.Shared, Name), logf)
	return l, nil
}

// sender writes batches, a connection each, as tcp-logger.lua; used by one processor's
// goroutine.
type sender struct {
	cfg  *Config
	data []byte
}

func (s *sender) send(entries [][]byte) error {
	s.data = logentry.Concat(s.data[:0], entries, s.cfg.Batch.BatchMaxSize)
	conn, err := net.DialTimeout("tcp", s.cfg.Addr, s.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("failed to connect to TCP server %s: %w", s.cfg.Addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(s.cfg.Timeout))
	if s.cfg.TLS {
		tc := tls.Client(conn, &tls.Config{ServerName: s.cfg.ServerName, InsecureSkipVerify: true}) //nolint:gosec // APISIX's tcp-logger does not verify
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("failed to perform TLS handshake to TCP server %s: %w", s.cfg.Addr, err)
		}
		conn = tc
	}
	if _, err := conn.Write(s.data); err != nil {
		return fmt.Errorf("failed to send data to TCP server %s: %w", s.cfg.Addr, err)
	}
	return nil
}
