package syslog

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
	"gw/plugins/vars"
)

var _ plugins.LogPhase = (*logentry.Logger)(nil)

// Build makes the route's instance: a logentry.Logger that frames each entry as an RFC
// 5424 message.
func (plugin) Build(raw json.RawMessage, env *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	format, err := logentry.FormatFor(cfg.Format, env)
	if err != nil {
		return nil, fmt.Errorf("plugin_metadata: %w", err)
	}
	l := &logentry.Logger{Format: format, Options: cfg.Entry, Header: header, NewLine: true}
	var logf func(string, ...any)
	if env.Shared != nil {
		l.Options.Version, logf = env.Shared.Version, env.Shared.Logf
	}
	s := &sender{cfg: cfg}
	l.Proc = batch.New(cfg.Batch, s.send, batch.CountersOf(env.Shared, Name), logf)
	return l, nil
}

// pid is the worker's, the message's PROCID.
var pid = strconv.Itoa(os.Getpid())

// header writes an RFC 5424 header as APISIX's rfc5424.encode("SYSLOG", "INFO", host,
// "apisix", pid, msg): PRI 46 (facility 5, severity 6), version 1, the UTC time to the
// millisecond, HOSTNAME the request's host ("-" without one), APP-NAME, PROCID, no
// MSGID and no structured data.
func header(dst []byte, c *plugins.Ctx) []byte {
	dst = append(dst, "<46>1 "...)
	dst = time.Now().UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
	dst = append(dst, ' ')
	if host := vars.HostName(c.Host()); len(host) > 0 {
		dst = append(dst, host...)
	} else {
		dst = append(dst, '-')
	}
	dst = append(dst, " apisix "...)
	dst = append(dst, pid...)
	return append(dst, " - - "...)
}

// sender writes batches of messages, a connection or a datagram each.
type sender struct {
	cfg  *Config
	data []byte
}

func (s *sender) send(entries [][]byte) error {
	s.data = s.data[:0]
	for _, e := range entries {
		s.data = append(s.data, e...)
	}
	network := "tcp"
	if s.cfg.UDP {
		network = "udp"
	}
	conn, err := net.DialTimeout(network, s.cfg.Addr, s.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("failed to connect to the syslog server %s: %w", s.cfg.Addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(s.cfg.Timeout))
	if s.cfg.TLS {
		tc := tls.Client(conn, &tls.Config{ServerName: s.cfg.Host, InsecureSkipVerify: true}) //nolint:gosec // as APISIX's logger socket
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("failed to perform the TLS handshake with the syslog server %s: %w", s.cfg.Addr, err)
		}
		conn = tc
	}
	if _, err := conn.Write(s.data); err != nil {
		return fmt.Errorf("failed to send to the syslog server %s: %w", s.cfg.Addr, err)
	}
	return nil
}
