package syslog

import (
	"encoding/json"
	"os"
	"strconv"
	"time"

	"gw/plugins"
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
	l, err := logentry.NewLogger(cfg.Format, cfg.Entry, cfg.Batch, newSender(cfg).send, Name, env)
	if err != nil {
		return nil, err
	}
	l.Header, l.NewLine = header, true
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
	socket logentry.Socket
	data   []byte
}

func newSender(cfg *Config) *sender {
	network := "tcp"
	if cfg.UDP {
		network = "udp"
	}
	return &sender{socket: logentry.Socket{Network: network, Addr: cfg.Addr, TLS: cfg.TLS, ServerName: cfg.Host,
		Timeout: cfg.Timeout, Peer: "the syslog server"}}
}

func (s *sender) send(entries [][]byte) error {
	s.data = s.data[:0]
	for _, e := range entries {
		s.data = append(s.data, e...)
	}
	return s.socket.Write(s.data)
}
