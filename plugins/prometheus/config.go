package prometheus

import (
	"encoding/json"
	"fmt"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "prometheus"

// Priority places prometheus in the chain as APISIX does (higher runs first).
const Priority = 500

func init() {
	plugins.Register(plugins.Plugin{
		Name:         Name,
		Priority:     Priority,
		Validate:     pluginconf.ValidateWith(Parse),
		Build:        build,
		KeepsRequest: true,
		Segment: &plugins.SegmentSpec{
			Layout: SegmentLayout,
			Size:   SegmentSize,
			Init:   InitSegment,
		},
	})
}

// Config is one prometheus configuration. It is immutable once Parse returns it.
type Config struct {
	// PreferName labels series with the route's and service's names instead of their ids
	// (falling back to the id when an object has no name).
	PreferName bool `json:"prefer_name"`
	// Disable turns the plugin off on this route while keeping its configuration.
	Disable bool `json:"disable,omitempty"`
}

// Parse decodes one prometheus configuration strictly. The error names the offending
// field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{}
	// Each, not Members: a member's error is reported before anything wrong after it,
	// as prometheus always has.
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) (err error) {
		switch m.Name {
		case "prefer_name":
			c.PreferName, err = m.Bool()
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field", m.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
