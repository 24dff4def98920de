package syslog

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gw/plugins"
	"gw/plugins/batch"
	"gw/plugins/logentry"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "syslog"

// Priority is APISIX's.
const Priority = 401

func init() {
	plugins.Register(plugin{logentry.PluginPart{MasterPart: batch.MasterPart{Plugin: Name}}})
}

// plugin is syslog as the host sees it; the embedded PluginPart has its metadata,
// its drops' segment and metrics.
type plugin struct{ logentry.PluginPart }

var (
	_ plugins.Plugin        = plugin{}
	_ plugins.MetadataOwner = plugin{}
	_ plugins.SegmentOwner  = plugin{}
	_ plugins.RequestKeeper = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one syslog configuration, decoded and defaulted.
type Config struct {
	logentry.SocketConfig
	UDP     bool // sock_type "udp"
	TLS     bool // the handshake names Host
	Timeout time.Duration
}

const fields = "host, port, sock_type, tls, timeout, log_format, include_req_body, " + batch.Fields

// Parse decodes one syslog configuration strictly, with APISIX's defaults (sock_type
// tcp, timeout 3000 ms, name "sys logger").
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{SocketConfig: logentry.NewSocketConfig("sys logger"), Timeout: 3 * time.Second}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		if taken, err := c.Take(m); taken {
			return err
		}
		var err error
		switch m.Name {
		case "sock_type":
			var t string
			t, err = m.OneOf("tcp", "udp")
			c.UDP = t == "udp"
		case "tls":
			c.TLS, err = m.Bool()
		case "timeout":
			var n int64
			n, err = m.IntIn(1, 86_400_000)
			c.Timeout = time.Duration(n) * time.Millisecond
		case "flush_limit", "drop_limit", "pool_size":
			// lua-resty-logger-socket's buffer and pool: gw's batch processor and its
			// bounds stand in for them.
			err = fmt.Errorf("%s: is not supported yet", m.Name)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s", m.Name, fields)
		}
		return err
	})
	if err == nil {
		err = c.Check()
	}
	switch {
	case err != nil:
		return nil, err
	case c.TLS && c.UDP:
		return nil, errors.New(`tls: needs sock_type "tcp"`)
	}
	return c, nil
}
