package tcplogger

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
const Name = "tcp-logger"

// Priority is APISIX's.
const Priority = 405

func init() {
	plugins.Register(plugin{logentry.PluginPart{MasterPart: batch.MasterPart{Plugin: Name}}})
}

// plugin is tcp-logger as the host sees it; the embedded PluginPart has its metadata,
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

// Config is one tcp-logger configuration, decoded and defaulted.
type Config struct {
	Addr string // host:port
	TLS  bool
	// ServerName is tls_options: the name the TLS handshake sends (SNI); the host when
	// empty. As in APISIX the collector's certificate is not verified.
	ServerName string
	Timeout    time.Duration
	Entry      logentry.Options
	Format     *logentry.Format
	Batch      batch.Config
}

const fields = "host, port, tls, tls_options, timeout, log_format, include_req_body, " + batch.Fields

// Parse decodes one tcp-logger configuration strictly, with APISIX's defaults (timeout
// 1000 ms, tls false, name "tcp logger").
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{Timeout: time.Second, Batch: batch.Defaults()}
	c.Batch.Name = "tcp logger"
	var host string
	var port int64 = -1
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		var err error
		if taken, err := c.Batch.Take(m); taken {
			return err
		}
		switch m.Name {
		case "host":
			host, err = m.NonEmptyString()
		case "port":
			port, err = m.IntIn(1, 65535)
		case "tls":
			c.TLS, err = m.Bool()
		case "tls_options":
			c.ServerName, err = m.AnyString()
		case "timeout":
			var n int64
			n, err = m.IntIn(1, 86_400_000)
			c.Timeout = time.Duration(n) * time.Millisecond
		case "log_format":
			c.Format, err = logentry.ParseFormat(m)
		case "include_req_body":
			c.Entry.RequestBody, err = m.Bool()
		case "include_resp_body", "include_req_body_expr", "include_resp_body_expr":
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
	case host == "":
		return nil, errors.New("host: required")
	case port < 0:
		return nil, errors.New("port: required")
	}
	c.Addr = net.JoinHostPort(host, strconv.FormatInt(port, 10))
	if c.ServerName == "" {
		c.ServerName = host
	}
	return c, nil
}
