package cors

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "cors"

// Priority places cors in the chain as APISIX does: before the auth plugins, so a
// preflight needs no credential and a 401 still carries the CORS headers.
const Priority = 4000

func init() { plugins.Register(plugin{}) }

// plugin is cors as the host sees it.
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is cors's configuration, with APISIX's defaults.
type Config struct {
	// AllowOrigins is "*", "**" (the request's Origin, whatever it is), "null" or a
	// comma-separated list of origins, each "scheme://host[:port]".
	AllowOrigins string
	AllowMethods string
	AllowHeaders string
	// ExposeHeaders is sent as Access-Control-Expose-Headers when not empty.
	ExposeHeaders string
	MaxAge        int64
	// AllowCredential sends Access-Control-Allow-Credentials: true; it refuses "*" in the
	// other options, as the CORS specification does.
	AllowCredential bool
	// AllowOriginsByRegex, when set, replaces AllowOrigins: an Origin matching any of
	// them (anywhere in it, as ngx.re.find) is allowed.
	AllowOriginsByRegex []string
	// TimingAllowOrigins and TimingAllowOriginsByRegex decide Timing-Allow-Origin as the
	// two above decide Access-Control-Allow-Origin; unset, none is sent.
	TimingAllowOrigins        string
	TimingAllowOriginsByRegex []string
	// AllowOriginsByMetadata names entries of the plugin's plugin_metadata allow_origins
	// (Metadata): an Origin one of them allows is echoed; one none allows falls back to
	// AllowOrigins (or AllowOriginsByRegex) only when AllowOrigins is not "*", as APISIX.
	AllowOriginsByMetadata []string
}

// originsPattern is APISIX's pattern for allow_origins and timing_allow_origins.
var originsPattern = regexp.MustCompile(`^(\*|\*\*|null|\w+://[^,]+(,\w+://[^,]+)*)$`)

// errStarWithCredential is APISIX's message, word for word.
var errStarWithCredential = errors.New("you can not set '*' for other option when 'allow_credential' is true")

// Parse decodes cors's configuration strictly and applies the defaults.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{AllowOrigins: "*", AllowMethods: "*", AllowHeaders: "*", MaxAge: 5}
	timingSet := false
	for _, m := range members {
		switch m.Name {
		case "allow_origins":
			c.AllowOrigins, err = originList(m)
		case "allow_methods":
			c.AllowMethods, err = m.AnyString()
		case "allow_headers":
			c.AllowHeaders, err = m.AnyString()
		case "expose_headers":
			c.ExposeHeaders, err = m.AnyString()
		case "max_age":
			c.MaxAge, err = maxAge(m)
		case "allow_credential":
			c.AllowCredential, err = m.Bool()
		case "allow_origins_by_regex":
			c.AllowOriginsByRegex, err = regexes(m)
		case "allow_origins_by_metadata":
			c.AllowOriginsByMetadata, err = metadataKeys(m)
		case "timing_allow_origins":
			c.TimingAllowOrigins, err = originList(m)
			timingSet = true
		case "timing_allow_origins_by_regex":
			c.TimingAllowOriginsByRegex, err = regexes(m)
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: allow_origins, allow_methods, allow_headers, expose_headers, max_age, allow_credential, allow_origins_by_regex, allow_origins_by_metadata, timing_allow_origins, timing_allow_origins_by_regex", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.AllowCredential && (c.AllowOrigins == "*" || c.AllowMethods == "*" || c.AllowHeaders == "*" ||
		c.ExposeHeaders == "*" || timingSet && c.TimingAllowOrigins == "*") {
		return nil, errStarWithCredential
	}
	return c, nil
}

func originList(m pluginconf.Member) (string, error) {
	s, err := m.AnyString()
	if err == nil && !originsPattern.MatchString(s) {
		err = fmt.Errorf(`%s: must be "*", "**", "null" or origins (scheme://host[:port]) separated by ',', got %s`, m.Name, m.Show())
	}
	return s, err
}

// maxAge reads any integer: -1 asks the browser not to cache, as APISIX documents.
func maxAge(m pluginconf.Member) (int64, error) {
	n, ok := pluginconf.Integer(m.Value)
	if !ok {
		return 0, fmt.Errorf("%s: must be an integer (seconds), got %s", m.Name, m.Show())
	}
	return n, nil
}

// metadataKeys reads allow_origins_by_metadata: a non-empty list of distinct names of 1 to
// 4096 bytes, as APISIX's schema. A name the metadata does not hold is accepted, as
// APISIX accepts it: it allows no origin until the metadata names it (a metadata write
// builds every route again).
func metadataKeys(m pluginconf.Member) ([]string, error) {
	var list []string
	if json.Unmarshal(m.Value, &list) != nil || len(m.Value) == 0 || m.Value[0] != '[' {
		return nil, fmt.Errorf("%s: must be an array of strings, got %s", m.Name, m.Show())
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: must hold at least one name", m.Name)
	}
	seen := map[string]bool{}
	for i, key := range list {
		switch {
		case key == "" || len(key) > 4096:
			return nil, fmt.Errorf("%s[%d]: must be 1 to 4096 bytes, got %d", m.Name, i, len(key))
		case seen[key]:
			return nil, fmt.Errorf("%s[%d]: %q appears twice; keep one", m.Name, i, key)
		}
		seen[key] = true
	}
	return list, nil
}

// Metadata is cors's plugin_metadata: named origin lists, {"allow_origins": {"company":
// "https://a.com,https://b.com"}}, each value as allow_origins is written, which routes
// reference by name in allow_origins_by_metadata. The Admin API's create_time and
// update_time are accepted.
type Metadata struct {
	AllowOrigins map[string]string
}

// ParseMetadata reads cors's plugin_metadata strictly.
func ParseMetadata(raw json.RawMessage) (*Metadata, error) {
	md := &Metadata{AllowOrigins: map[string]string{}}
	err := pluginconf.Compact.Each(raw, func(m pluginconf.Member) error {
		switch m.Name {
		case "allow_origins":
			if len(m.Value) == 0 || m.Value[0] != '{' {
				return fmt.Errorf("%s: must be an object of named origin lists, got %s", m.Name, m.Show())
			}
			return pluginconf.Compact.Each(m.Value, func(entry pluginconf.Member) error {
				s, err := originList(entry)
				if err != nil {
					return fmt.Errorf("allow_origins.%w", err)
				}
				md.AllowOrigins[entry.Name] = s
				return nil
			})
		case "create_time", "update_time":
			if _, ok := pluginconf.Integer(m.Value); !ok {
				return fmt.Errorf("%s: must be an integer, got %s", m.Name, m.Show())
			}
			return nil
		}
		return fmt.Errorf("%s: unknown field; known fields: allow_origins", m.Name)
	})
	if err != nil {
		return nil, err
	}
	return md, nil
}

// regexes reads a non-empty list of distinct regexes of 1 to 4096 bytes, each of which
// RE2 compiles (APISIX's are PCRE: one RE2 cannot run is refused here, not at request
// time).
func regexes(m pluginconf.Member) ([]string, error) {
	var list []string
	if json.Unmarshal(m.Value, &list) != nil || len(m.Value) == 0 || m.Value[0] != '[' {
		return nil, fmt.Errorf("%s: must be an array of strings, got %s", m.Name, m.Show())
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: must hold at least one regex", m.Name)
	}
	seen := map[string]bool{}
	for i, re := range list {
		switch {
		case re == "" || len(re) > 4096:
			return nil, fmt.Errorf("%s[%d]: must be 1 to 4096 bytes, got %d", m.Name, i, len(re))
		case seen[re]:
			return nil, fmt.Errorf("%s[%d]: %q appears twice; keep one", m.Name, i, re)
		}
		seen[re] = true
		if _, err := regexp.Compile(re); err != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not a regex RE2 compiles: %v", m.Name, i, re, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	return list, nil
}
