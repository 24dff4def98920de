package syslog

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
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
	Addr    string // host:port
	UDP     bool   // sock_type "udp"
	TLS     bool
	Host    string // for TLS's server name
	Timeout time.Duration
	Entry   logentry.Options
	Format  *logentry.Format
	Batch   batch.Config
}

const fields = "host, port, sock_type, tls, timeout, log_format, include_req_body, " + batch.Fields

// Parse decodes one syslog configuration strictly, with APISIX's defaults (sock_type
// tcp, timeout 3000 ms, name "sys logger").
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{Timeout: 3 * time.Second, Batch: batch.Defaults()}
	c.Batch.Name = "sys logger"
	var port int64 = -1
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		var err error
		if taken, err := c.Batch.Take(m); taken {
			return err
		}
		switch m.Name {
		case "host":
			c.Host, err = m.NonEmptyString()
		case "port":
			port, err = m.IntIn(1, 65535)
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
		case "log_format":
			c.Format, err = logentry.ParseFormat(m)
		case "include_req_body":
			c.Entry.RequestBody, err = m.Bool()
		case "flush_limit", "drop_limit", "pool_size", "include_resp_body", "include_req_body_expr", "include_resp_body_expr":
			// lua-resty-logger-socket's buffer and pool: gw's batch processor and its
			// bounds stand in for them.
			err = fmt.Errorf("%s: is not supported yet", m.Name)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s", m.Name, fields)
		}
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case c.Host == "":
		return nil, errors.New("host: required")
	case port < 0:
		return nil, errors.New("port: required")
	case c.TLS && c.UDP:
		return nil, errors.New(`tls: needs sock_type "tcp"`)
	}
	c.Addr = net.JoinHostPort(c.Host, strconv.FormatInt(port, 10))
	return c, nil
}
