package gzip

import (
	"encoding/json"
	"fmt"
	"math"

	"gw/plugins"
	"gw/plugins/encoding"
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
	encoding.Common
	// CompLevel is gzip's level, 1 (fastest) to 9 (smallest).
	CompLevel int
	// BuffersNumber and BuffersSize are nginx's gzip_buffers: their product bounds the
	// body a streamed response's compressor takes in before it sends what it holds
	// (see FlushAfter).
	BuffersNumber, BuffersSize int64
}

// Parse decodes gzip's configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Common: encoding.DefaultCommon(), CompLevel: 1, BuffersNumber: defaultBuffersNumber, BuffersSize: defaultBuffersSize}
	for _, m := range members {
		if known, err := c.Common.Decode(m); known {
			if err != nil {
				return nil, err
			}
			continue
		}
		switch m.Name {
		case "comp_level":
			var n int64
			n, err = m.IntIn(1, 9)
			c.CompLevel = int(n)
		case "buffers":
			err = buffers(m, c)
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s, comp_level, buffers", m.Name, encoding.CommonFields)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// defaultBuffersNumber and defaultBuffersSize are APISIX's defaults for buffers.
const (
	defaultBuffersNumber = 32
	defaultBuffersSize   = 4096
)

// buffers reads nginx's gzip_buffers, number and size each at least 1 as APISIX's schema
// has them.
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
	return nil
}

// FlushAfter is how many bytes of a streamed body the compressor may take in before gw
// sends what it holds (a sync flush): buffers.number × buffers.size, as nginx's
// gzip_buffers bounds the compressed output it keeps in flight. nginx's buffers hold
// compressed bytes; gw hands those to the server as soon as the compressor emits them,
// so the bound that means something here is the body held in the compressor: with
// {"number": 1, "size": 4096} a node's body reaches the client at least every 4 KiB of
// it (or at each piece the node sends, when larger), compressed slightly less well.
func (c *Config) FlushAfter() int {
	return int(min(c.BuffersNumber*c.BuffersSize, math.MaxInt32))
}
