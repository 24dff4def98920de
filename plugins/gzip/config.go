package gzip

import (
	"encoding/json"
	"fmt"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "gzip"

// Priority places gzip in the chain as APISIX does.
const Priority = 995

func init() { plugins.Register(plugin{}) }

// plugin is gzip as the host sees it.
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is gzip's configuration, with APISIX's defaults.
type Config struct {
	// Types are the media types compressed (Content-Type without its parameters); nil
	// is "*": every type.
	Types []string
	// MinLength is the shortest Content-Length compressed.
	MinLength int64
	// CompLevel is gzip's level, 1 (fastest) to 9 (smallest).
	CompLevel int
	// HTTPVersion is the lowest request version served compressed: 11 (HTTP/1.1) or 10.
	HTTPVersion int
	// BuffersNumber and BuffersSize are nginx's gzip_buffers. Only the default is
	// accepted (see buffers): gw's compressor sizes its own.
	BuffersNumber, BuffersSize int64
	// Vary adds Vary: Accept-Encoding to the responses that may be compressed.
	Vary bool
}

// Parse decodes gzip's configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Types: []string{"text/html"}, MinLength: 20, CompLevel: 1, HTTPVersion: 11, BuffersNumber: defaultBuffersNumber, BuffersSize: defaultBuffersSize}
	for _, m := range members {
		switch m.Name {
		case "types":
			c.Types, err = types(m)
		case "min_length":
			c.MinLength, err = m.PositiveInt(1 << 62)
		case "comp_level":
			var n int64
			n, err = m.IntIn(1, 9)
			c.CompLevel = int(n)
		case "http_version":
			switch string(m.Value) {
			case "1.1":
				c.HTTPVersion = 11
			case "1.0", "1":
				c.HTTPVersion = 10
			default:
				err = fmt.Errorf("%s: must be 1.1 or 1.0, got %s", m.Name, m.Show())
			}
		case "buffers":
			err = buffers(m, c)
		case "vary":
			c.Vary, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: types, min_length, comp_level, http_version, buffers, vary", m.Name)
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

// defaultBuffersNumber and defaultBuffersSize are APISIX's defaults for buffers.
const (
	defaultBuffersNumber = 32
	defaultBuffersSize   = 4096
)

// buffers reads nginx's gzip_buffers. gw compresses a body held whole (up to 32 KiB)
// into one growing buffer, so the number and size of nginx's output buffers cannot mean
// anything here: any other than the default is refused rather than accepted and ignored.
func buffers(m pluginconf.Member, c *Config) error {
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	for _, b := range members {
		b.Name = m.Name + "." + b.Name
		switch b.Name {
		case "buffers.number":
			c.BuffersNumber, err = b.PositiveInt(1 << 31)
		case "buffers.size":
			c.BuffersSize, err = b.PositiveInt(1 << 31)
		default:
			err = fmt.Errorf("%s: unknown field; buffers holds number and size", b.Name)
		}
		if err != nil {
			return err
		}
	}
	if c.BuffersNumber != defaultBuffersNumber || c.BuffersSize != defaultBuffersSize {
		return fmt.Errorf(`%s: {"number": %d, "size": %d} is not supported yet: gw compresses a body into one buffer of its own; `+
			`leave buffers out (or give APISIX's default {"number": 32, "size": 4096})`, m.Name, c.BuffersNumber, c.BuffersSize)
	}
	return nil
}
