package tcplogger

import (
	"encoding/json"
	"fmt"
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
	logentry.SocketConfig
	TLS bool
	// ServerName is tls_options: the name the TLS handshake sends (SNI); the host when
	// empty. As in APISIX the collector's certificate is not verified.
	ServerName string
	Timeout    time.Duration
}

const fields = "host, port, tls, tls_options, timeout, log_format, include_req_body, " + batch.Fields

// Parse decodes one tcp-logger configuration strictly, with APISIX's defaults (timeout
// 1000 ms, tls false, name "tcp logger").
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{SocketConfig: logentry.NewSocketConfig("tcp logger"), Timeout: time.Second}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		if taken, err := c.Take(m); taken {
			return err
		}
		var err error
		switch m.Name {
		case "tls":
			c.TLS, err = m.Bool()
		case "tls_options":
			c.ServerName, err = m.AnyString()
		case "timeout":
			var n int64
			n, err = m.IntIn(1, 86_400_000)
			c.Timeout = time.Duration(n) * time.Millisecond
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s", m.Name, fields)
		}
		return err
	})
	if err == nil {
		err = c.Check()
	}
	if err != nil {
		return nil, err
	}
	if c.ServerName == "" {
		c.ServerName = c.Host
	}
	return c, nil
}
