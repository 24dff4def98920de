package brotli

import (
	"encoding/json"
	"fmt"

	"gw/plugins"
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
	// Types are the media types compressed; nil is "*": every type.
	Types     []string
	MinLength int64
	// CompLevel is Brotli's quality, 0 to 11.
	CompLevel int
	// LGWin is the window's base-2 logarithm, 10 to 24, 0 for the encoder's choice.
	LGWin int
	// HTTPVersion is the lowest request version served compressed: 11 or 10.
	HTTPVersion int
	Vary        bool
}

// Parse decodes brotli's configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Types: []string{"text/html"}, MinLength: 20, CompLevel: 6, LGWin: 19, HTTPVersion: 11}
	for _, m := range members {
		var n int64
		switch m.Name {
		case "types":
			c.Types, err = types(m)
		case "min_length":
			c.MinLength, err = m.PositiveInt(1 << 62)
		// mode (Brotli's hint: generic, text, font) and lgblock (the input block size)
		// tune only the size of the output, and the Go encoder takes neither: a value
		// other than 0 (the encoder's choice) is refused rather than ignored.
		case "mode":
			if n, err = m.IntIn(0, 2); err == nil && n != 0 {
				err = fmt.Errorf("%s: %d is not supported yet: the Go encoder has no mode hint (it only tunes the size); leave it out or give 0", m.Name, n)
			}
		case "comp_level":
			n, err = m.IntIn(0, 11)
			c.CompLevel = int(n)
		case "lgwin":
			if n, err = m.IntIn(0, 24); err == nil && n > 0 && n < 10 {
				err = fmt.Errorf("%s: must be 0 or from 10 to 24, got %s", m.Name, m.Show())
			}
			c.LGWin = int(n)
		case "lgblock":
			if n, err = m.IntIn(0, 24); err == nil && n > 0 && n < 16 {
				err = fmt.Errorf("%s: must be 0 or from 16 to 24, got %s", m.Name, m.Show())
			} else if err == nil && n != 0 {
				err = fmt.Errorf("%s: %d is not supported yet: the Go encoder chooses its own input block size; leave it out or give 0", m.Name, n)
			}
		case "http_version":
			switch string(m.Value) {
			case "1.1":
				c.HTTPVersion = 11
			case "1.0", "1":
				c.HTTPVersion = 10
			default:
				err = fmt.Errorf("%s: must be 1.1 or 1.0, got %s", m.Name, m.Show())
			}
		case "vary":
			c.Vary, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: types, min_length, mode, comp_level, lgwin, lgblock, http_version, vary", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func types(m pluginconf.Member) ([]string, error) {
	if string(m.Value) == `"*"` {
		return nil, nil
	}
	var list []string
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &list) != nil || len(list) == 0 {
		return nil, fmt.Errorf(`%s: must be "*" or a non-empty array of media types, got %s`, m.Name, m.Show())
	}
	for i, t := range list {
		if t == "" {
			return nil, fmt.Errorf("%s[%d]: must not be empty", m.Name, i)
		}
	}
	return list, nil
}
