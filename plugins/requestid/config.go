package requestid

import (
	"encoding/json"
	"errors"
	"fmt"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "request-id"

// Priority places request-id in the chain as APISIX does (higher runs first): first of
// all but real-ip, so that every later plugin, and the upstream, see the id.
const Priority = 12015

func init() { plugins.Register(plugin{}) }

// plugin is request-id as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Algorithm is how an id is made.
type Algorithm uint8

// The algorithms gw makes ids with; APISIX's ksuid is refused as not supported yet.
const (
	UUID    Algorithm = iota // a random (version 4) UUID, APISIX's default
	UUIDv7                   // a time-ordered (version 7) UUID
	NanoID                   // 21 characters of nanoid's 64-character alphabet
	RangeID                  // range_id.length characters of range_id.char_set
)

// DefaultCharSet is APISIX's range_id.char_set, its "IGK" included.
const DefaultCharSet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIGKLMNOPQRSTUVWXYZ0123456789"

// MaxLength is the longest range_id gw makes. APISIX has no maximum; a header line has
// to fit the upstream's header buffer (nginx's is 1k-8k), and an id needs no more.
const MaxLength = 1024

// Config is one request-id configuration, with APISIX's defaults. It is immutable once
// Parse returns it and safe to share between goroutines.
type Config struct {
	HeaderName        []byte
	IncludeInResponse bool
	Algorithm         Algorithm
	// Length and CharSet are range_id's.
	Length  int
	CharSet []byte
}

// Parse decodes one request-id configuration strictly and applies APISIX's defaults. The
// error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{HeaderName: []byte("X-Request-Id"), IncludeInResponse: true, Length: 16, CharSet: []byte(DefaultCharSet)}
	for _, m := range members {
		switch m.Name {
		case "header_name":
			var s string
			if s, err = m.NonEmptyString(); err == nil {
				err = checkHeaderName(s)
				c.HeaderName = []byte(s)
			}
		case "include_in_response":
			c.IncludeInResponse, err = m.Bool()
		case "algorithm":
			var s string
			if s, err = m.OneOf("uuid", "nanoid", "range_id", "ksuid", "uuidv7"); err == nil {
				switch s {
				case "uuid":
					c.Algorithm = UUID
				case "uuidv7":
					c.Algorithm = UUIDv7
				case "nanoid":
					c.Algorithm = NanoID
				case "range_id":
					c.Algorithm = RangeID
				default:
					err = errors.New(`algorithm: "ksuid" is not supported yet; use uuidv7 for time-ordered ids`)
				}
			}
		case "range_id":
			err = c.parseRangeID(m)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: header_name, include_in_response, algorithm, range_id", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Config) parseRangeID(m pluginconf.Member) error {
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return fmt.Errorf("range_id: %w", err)
	}
	for _, f := range members {
		switch f.Name {
		case "length":
			var n int64
			n, err = f.IntIn(6, MaxLength)
			c.Length = int(n)
		case "char_set":
			var s string
			if s, err = f.AnyString(); err == nil && len(s) < 6 {
				err = fmt.Errorf("char_set: must be at least 6 characters, got %d", len(s))
			}
			for i := 0; err == nil && i < len(s); i++ {
				if s[i] <= 0x20 || s[i] >= 0x7f {
					err = fmt.Errorf("char_set: must be printable ASCII without spaces (the id goes in a header), got %q", s)
				}
			}
			c.CharSet = []byte(s)
		default:
			err = fmt.Errorf("%s: unknown field; range_id has length and char_set", f.Name)
		}
		if err != nil {
			return fmt.Errorf("range_id.%w", err)
		}
	}
	return nil
}

// checkHeaderName accepts an HTTP token: the header must be one the upstream can read.
func checkHeaderName(name string) error {
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if ch <= 0x20 || ch >= 0x7f || ch == ':' || ch == '"' || ch == '(' || ch == ')' || ch == ',' ||
			ch == '/' || ch == ';' || ch == '<' || ch == '=' || ch == '>' || ch == '?' || ch == '@' ||
			ch == '[' || ch == '\\' || ch == ']' || ch == '{' || ch == '}' {
			return fmt.Errorf("header_name: must be a header field name (letters, digits and !#$%%&'*+-.^_`|~), got %q", name)
		}
	}
	return nil
}
