package brotli

import (
	"encoding/json"
	"fmt"

	"gw/plugins"
	"gw/plugins/encoding"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "brotli"

// Priority places brotli in the chain as APISIX does, just before gzip.
const Priority = 996

func init() { plugins.Register(plugin{}) }

// plugin is brotli as the host sees it.
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is brotli's configuration, with APISIX's defaults.
type Config struct {
	encoding.Common
	// CompLevel is Brotli's quality, 0 to 11.
	CompLevel int
	// LGWin is the window's base-2 logarithm, 10 to 24, 0 for the encoder's choice.
	LGWin int
}

// Parse decodes brotli's configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Common: encoding.DefaultCommon(), CompLevel: 6, LGWin: 19}
	for _, m := range members {
		if known, err := c.Common.Decode(m); known {
			if err != nil {
				return nil, err
			}
			continue
		}
		var n int64
		switch m.Name {
		case "comp_level":
			n, err = m.IntIn(0, 11)
			c.CompLevel = int(n)
		case "lgwin":
			if n, err = m.IntIn(0, 24); err == nil && n > 0 && n < 10 {
				err = fmt.Errorf("%s: must be 0 or from 10 to 24, got %s", m.Name, m.Show())
			}
			c.LGWin = int(n)
		// mode (Brotli's hint: generic, text, font) and lgblock (the input block size)
		// tune only the size of the output, and the Go encoder takes neither: a value
		// other than 0 (the encoder's choice) is refused rather than ignored.
		case "mode":
			if n, err = m.IntIn(0, 2); err == nil && n != 0 {
				err = fmt.Errorf("%s: %d is not supported yet: the Go encoder has no mode hint (it only tunes the size); leave it out or give 0", m.Name, n)
			}
		case "lgblock":
			if n, err = m.IntIn(0, 24); err == nil && n > 0 && n < 16 {
				err = fmt.Errorf("%s: must be 0 or from 16 to 24, got %s", m.Name, m.Show())
			} else if err == nil && n != 0 {
				err = fmt.Errorf("%s: %d is not supported yet: the Go encoder chooses its own input block size; leave it out or give 0", m.Name, n)
			}
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s, mode, comp_level, lgwin, lgblock", m.Name, encoding.CommonFields)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}
