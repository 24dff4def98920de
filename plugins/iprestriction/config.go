package iprestriction

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"unicode/utf8"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "ip-restriction"

// Priority places ip-restriction in the chain as APISIX does (higher runs first): before
// authentication, so a refused client costs no credential check.
const Priority = 3000

func init() { plugins.Register(plugin{}) }

// plugin is ip-restriction as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// DefaultMessage is APISIX's message for a refused address.
const DefaultMessage = "Your IP address is not allowed"

// Config is one ip-restriction configuration, compiled. It is immutable once Parse returns
// it and safe to share between goroutines.
type Config struct {
	// Prefixes is the whitelist or the blacklist, whichever is set; a plain address is a
	// /32 or /128.
	Prefixes []netip.Prefix
	// Whitelist says Prefixes are the only clients let through; otherwise they are the
	// clients refused.
	Whitelist bool
	// ResponseCode is 403 or 404; Body is {"message": <message>} as APISIX encodes it.
	ResponseCode int
	Body         []byte
}

// Parse decodes one ip-restriction configuration strictly and applies APISIX's defaults.
// The error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{ResponseCode: 403}
	message := DefaultMessage
	var lists int
	for _, m := range members {
		switch m.Name {
		case "whitelist", "blacklist":
			lists++
			c.Whitelist = m.Name == "whitelist"
			c.Prefixes, err = parsePrefixes(m)
		case "message":
			if message, err = m.NonEmptyString(); err == nil && utf8.RuneCountInString(message) > 1024 {
				err = fmt.Errorf("message: must be at most 1024 characters, got %d", utf8.RuneCountInString(message))
			}
		case "response_code":
			var code int64
			code, err = m.IntIn(403, 404)
			c.ResponseCode = int(code)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: whitelist, blacklist, message, response_code", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch lists {
	case 0:
		return nil, errors.New("configuration must set one of whitelist or blacklist")
	case 2:
		return nil, errors.New("whitelist, blacklist: set one of them, not both")
	}
	c.Body, _ = json.Marshal(struct {
		Message string `json:"message"`
	}{message})
	c.Body = append(c.Body, '\n')
	return c, nil
}

// parsePrefixes reads a non-empty array of IPv4 or IPv6 addresses and CIDRs.
func parsePrefixes(m pluginconf.Member) ([]netip.Prefix, error) {
	list, err := m.StringList(1)
	if err != nil {
		return nil, err
	}
	prefixes := make([]netip.Prefix, len(list))
	for i, s := range list {
		if prefixes[i], err = conf.ParseAddrOrPrefix(s); err != nil {
			return nil, fmt.Errorf("%s: item %d: invalid ip address: %w", m.Name, i+1, err)
		}
	}
	return prefixes, nil
}
