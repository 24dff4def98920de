package realip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "real-ip"

// Priority places real-ip in the chain as APISIX does (higher runs first): first of all,
// so that every other plugin sees the client it names.
const Priority = 23000

func init() { plugins.Register(plugin{}) }

// plugin is real-ip as the host sees it; its instance is the route's Config (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// forwardedFor is the source APISIX reads specially: the last address of the last
// X-Forwarded-For header, not the variable's whole value.
const forwardedFor = "http_x_forwarded_for"

// Config is one real-ip configuration, compiled. It is immutable once Parse returns it
// and safe to share between goroutines.
type Config struct {
	// Source is the variable holding the client's address, "ip" or "ip:port";
	// ForwardedFor is set when it is http_x_forwarded_for.
	Source       conf.Var
	ForwardedFor bool
	// Trusted are trusted_addresses: when set, only a TCP peer among them may name the
	// client; nil trusts every peer.
	Trusted []netip.Prefix
	// Recursive walks X-Forwarded-For from the right past the trusted addresses.
	Recursive bool
}

// Parse decodes one real-ip configuration strictly. The error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	hasSource := false
	for _, m := range members {
		switch m.Name {
		case "source":
			var s string
			if s, err = m.NonEmptyString(); err == nil {
				if c.Source, err = conf.ParseVar(s); err != nil {
					err = fmt.Errorf("source: %w", err)
				}
				c.ForwardedFor = s == forwardedFor
				hasSource = true
			}
		case "trusted_addresses":
			var list []string
			if list, err = m.StringList(1); err == nil {
				c.Trusted = make([]netip.Prefix, len(list))
				for i, s := range list {
					if c.Trusted[i], err = conf.ParseAddrOrPrefix(s); err != nil {
						err = fmt.Errorf("trusted_addresses: item %d: invalid ip address: %w", i+1, err)
						break
					}
				}
			}
		case "recursive":
			c.Recursive, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: source, trusted_addresses, recursive", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasSource {
		return nil, errors.New("source: is required (the variable holding the client's address, such as http_x_forwarded_for)")
	}
	return c, nil
}
