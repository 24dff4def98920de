package udplogger

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
const Name = "udp-logger"

// Priority is APISIX's.
const Priority = 400

func init() {
	plugins.Register(plugin{logentry.PluginPart{MasterPart: batch.MasterPart{Plugin: Name}}})
}

// plugin is udp-logger as the host sees it; the embedded PluginPart has its metadata,
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

// Config is one udp-logger configuration, decoded and defaulted.
type Config struct {
	logentry.SocketConfig
	Timeout time.Duration
}

const fields = "host, port, timeout, log_format, include_req_body, " + batch.Fields

// Parse decodes one udp-logger configuration strictly, with APISIX's defaults (timeout
// 3 s, name "udp logger").
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{SocketConfig: logentry.NewSocketConfig("udp logger"), Timeout: 3 * time.Second}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		if taken, err := c.Take(m); taken {
			return err
		}
		var err error
		switch m.Name {
		case "timeout":
			var n int64
			n, err = m.IntIn(1, 86400)
			c.Timeout = time.Duration(n) * time.Second
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
	return c, nil
}
