package opentelemetry

import (
	"encoding/json"
	"fmt"
	"strings"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "opentelemetry"

// Priority places opentelemetry in the chain as APISIX does: after real-ip and request-id
// (whose X-Request-Id trace_id_source may read), before every other plugin, so that a
// request a later plugin refuses (401, 429) is traced too.
const Priority = 12009

func init() { plugins.Register(plugin{}) }

// plugin is opentelemetry as the host sees it; its instance is a *handler (handler.go).
type plugin struct{}

var (
	_ plugins.Plugin       = plugin{}
	_ plugins.HeaderEditor = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

// EditsOnlyHeaders: opentelemetry changes only traceparent and tracestate, through the
// Ctx, so a route's request still goes upstream by the proxy's pristine path.
func (plugin) EditsOnlyHeaders() bool { return true }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// SamplerKind is one of APISIX's samplers.
type SamplerKind uint8

// The samplers (opentelemetry-lua's, which APISIX names).
const (
	AlwaysOff    SamplerKind = iota // record nothing (APISIX's default)
	AlwaysOn                        // record every request
	TraceIDRatio                    // record a fraction of traces, decided by the trace id
	ParentBase                      // follow the client's sampled flag; Root without one
)

var samplerNames = []string{"always_off", "always_on", "trace_id_ratio", "parent_base"}

// Sampler decides which requests' spans are recorded. Root is parent_base's sampler for
// a request without a valid traceparent; it is never ParentBase itself.
type Sampler struct {
	Kind     SamplerKind
	Fraction float64
	Root     *Sampler
}

// Attribute is one of additional_attributes: a variable whose value, when the request has
// one, becomes a span attribute named as configured.
type Attribute struct {
	Key string
	Var conf.Var
	key attrKey // Key, encoded
}

// HeaderAttribute is one of additional_header_prefix_attributes: a header name, or a
// prefix of header names when it ends in '*'.
type HeaderAttribute struct {
	// Key is the attribute's key for an exact name: the name as configured. A prefix's
	// attributes are keyed by each matching header's name, lower case, as APISIX's.
	Key string
	// Name is the header name or prefix, lower case, without the '*'.
	Name   string
	Prefix bool
	name   []byte  // Name, for lookups without a conversion
	key    attrKey // Key, encoded (exact names only)
}

// Config is one route's opentelemetry configuration, with APISIX's defaults. It is
// immutable once Parse returns it.
type Config struct {
	Sampler          Sampler
	Attributes       []Attribute
	HeaderAttributes []HeaderAttribute
}

// Parse decodes one opentelemetry configuration strictly. The error names the field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{Sampler: Sampler{Kind: AlwaysOff}}
	for _, m := range members {
		switch m.Name {
		case "sampler":
			c.Sampler, err = parseSampler(m, "sampler", true)
		case "additional_attributes":
			var names []string
			if names, err = m.StringList(0); err == nil {
				c.Attributes, err = parseAttributes(names)
			}
		case "additional_header_prefix_attributes":
			var names []string
			if names, err = m.StringList(0); err == nil {
				c.HeaderAttributes, err = parseHeaderAttributes(names)
			}
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: sampler, additional_attributes, additional_header_prefix_attributes", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// parseSampler reads sampler (top true) or sampler.options.root (top false, which may
// not be parent_base).
func parseSampler(m pluginconf.Member, path string, top bool) (Sampler, error) {
	s := Sampler{Kind: AlwaysOff}
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	var options json.RawMessage
	for _, f := range members {
		switch f.Name {
		case "name":
			allowed := samplerNames
			if !top {
				allowed = samplerNames[:3]
			}
			var name string
			if name, err = f.OneOf(allowed...); err == nil {
				for i, n := range samplerNames {
					if n == name {
						s.Kind = SamplerKind(i)
					}
				}
			}
		case "options":
			if err = f.Object(); err == nil {
				options = f.Value
			}
		default:
			err = fmt.Errorf("%s: unknown field; a sampler has name and options", f.Name)
		}
		if err != nil {
			return s, fmt.Errorf("%s.%w", path, err)
		}
	}
	if options == nil {
		return s, nil
	}
	opts, _ := pluginconf.Verbatim.Members(options)
	for _, f := range opts {
		switch {
		case f.Name == "fraction":
			s.Fraction, err = fraction(f)
		case f.Name == "root" && top:
			var root Sampler
			if root, err = parseSampler(f, path+".options.root", false); err == nil {
				s.Root = &root
			}
			if err != nil {
				return s, err
			}
		default:
			known := "fraction and root"
			if !top {
				known = "fraction"
			}
			err = fmt.Errorf("%s: unknown field; options has %s", f.Name, known)
		}
		if err != nil {
			return s, fmt.Errorf("%s.options.%w", path, err)
		}
	}
	return s, nil
}

// fraction reads trace_id_ratio's fraction, a number from 0 to 1. APISIX takes any
// number; one outside [0, 1] can only be a mistake, so gw refuses it.
func fraction(f pluginconf.Member) (float64, error) {
	var x float64
	if len(f.Value) == 0 || !(f.Value[0] == '-' || f.Value[0] >= '0' && f.Value[0] <= '9') || json.Unmarshal(f.Value, &x) != nil || x < 0 || x > 1 {
		return 0, fmt.Errorf("fraction: must be a number from 0 to 1, got %s", f.Show())
	}
	return x, nil
}

func parseAttributes(names []string) ([]Attribute, error) {
	attrs := make([]Attribute, 0, len(names))
	for i, name := range names {
		if name == "" {
			return nil, fmt.Errorf("additional_attributes: item %d must not be empty", i+1)
		}
		v, err := conf.ParseVar(strings.TrimPrefix(name, "$"))
		if err != nil {
			return nil, fmt.Errorf("additional_attributes: item %d: %w", i+1, err)
		}
		attrs = append(attrs, Attribute{Key: name, Var: v, key: newAttrKey(name)})
	}
	return attrs, nil
}

func parseHeaderAttributes(names []string) ([]HeaderAttribute, error) {
	attrs := make([]HeaderAttribute, 0, len(names))
	for i, name := range names {
		// As APISIX: a '*' ends a prefix only after at least one character.
		prefix := len(name) >= 2 && name[len(name)-1] == '*'
		base := name
		if prefix {
			base = name[:len(name)-1]
		}
		if !isToken(base) {
			return nil, fmt.Errorf("additional_header_prefix_attributes: item %d must be a header name, or a prefix of one ending in '*', got %q", i+1, name)
		}
		lowered := strings.ToLower(base)
		a := HeaderAttribute{Key: name, Name: lowered, Prefix: prefix, name: []byte(lowered)}
		if !prefix {
			a.key = newAttrKey(name)
		}
		attrs = append(attrs, a)
	}
	return attrs, nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch <= 0x20 || ch >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, ch) >= 0 {
			return false
		}
	}
	return true
}
