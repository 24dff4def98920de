package redirect

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "redirect"

// Priority places redirect in the chain as APISIX does (higher runs first): after
// authentication and the limits, before prometheus.
const Priority = 900

func init() { plugins.Register(plugin{}) }

// plugin is redirect as the host sees it; its instance is a route's *Redirect
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one redirect configuration, compiled. It is immutable once Parse returns it
// and safe to share between goroutines. Exactly one of URI, Regex and HTTPToHTTPS is set.
type Config struct {
	// URI is the Location, variables expanded.
	URI *conf.Template
	// Regex and Replacement are regex_uri: the first match in the decoded path is
	// replaced, captures ($1, ${1}) filled; no match, no redirect.
	Regex       *regexp.Regexp
	Replacement []replacementPart
	// HTTPToHTTPS redirects a request that is not https to https, 301 for GET and HEAD
	// and 308 for the rest.
	HTTPToHTTPS bool
	RetCode     int
	// EncodeURI percent-encodes the Location's path as nginx's ngx_escape_uri does;
	// AppendQueryString adds the client's query.
	EncodeURI, AppendQueryString bool
}

// replacementPart is literal text, or (capture >= 0) a capture of Regex.
type replacementPart struct {
	text    string
	capture int
}

// Parse decodes one redirect configuration strictly and applies APISIX's defaults. The
// error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{RetCode: 302}
	var kinds []string
	for _, m := range members {
		switch m.Name {
		case "uri":
			var s string
			if s, err = m.AnyString(); err == nil {
				err = c.parseURI(s)
			}
			kinds = append(kinds, m.Name)
		case "regex_uri":
			err = c.parseRegexURI(m)
			kinds = append(kinds, m.Name)
		case "http_to_https":
			c.HTTPToHTTPS, err = m.Bool()
			kinds = append(kinds, m.Name)
		case "ret_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.RetCode = int(code)
		case "encode_uri":
			c.EncodeURI, err = m.Bool()
		case "append_query_string":
			c.AppendQueryString, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: uri, regex_uri, http_to_https, ret_code, encode_uri, append_query_string", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch len(kinds) {
	case 0:
		return nil, errors.New("configuration must set one of uri, regex_uri or http_to_https")
	case 1:
	default:
		return nil, fmt.Errorf("%s and %s: set one of uri, regex_uri and http_to_https, not several", kinds[0], kinds[1])
	}
	if c.HTTPToHTTPS && c.AppendQueryString {
		return nil, errors.New("only one of `http_to_https` and `append_query_string` can be configured.")
	}
	return c, nil
}

// parseURI reads uri: at least 2 characters, in APISIX's template syntax ($name,
// ${name}, \$name kept as written); a variable gw cannot read is refused, as in
// proxy-rewrite's uri.
func (c *Config) parseURI(s string) error {
	if len(s) < 2 {
		return fmt.Errorf("uri: must be at least 2 characters, got %q", s)
	}
	t, err := conf.ParseTemplate(s, conf.TemplateSyntax{})
	if err != nil {
		return fmt.Errorf("uri: %w (write ${name} when text follows a variable)", err)
	}
	c.URI = &t
	return nil
}

// parseRegexURI reads [regex, replacement]; the replacement is ngx.re.sub's: $0..$99,
// ${N} and $$.
func (c *Config) parseRegexURI(m pluginconf.Member) error {
	items, err := m.StringList(0)
	if err != nil {
		return err
	}
	if len(items) != 2 {
		return fmt.Errorf("regex_uri: must be [regex, replacement], got %d item(s)", len(items))
	}
	pattern, replacement := items[0], items[1]
	if c.Regex, err = regexp.Compile(pattern); err != nil {
		return fmt.Errorf("regex_uri: invalid regex_uri (%s, %s), err:%v (gw uses Go's RE2 syntax: no look-around or back-references)", pattern, replacement, err)
	}
	if c.Replacement, err = parseReplacement(replacement, c.Regex.NumSubexp()); err != nil {
		return fmt.Errorf("regex_uri: invalid regex_uri (%s, %s), err:%v", pattern, replacement, err)
	}
	return nil
}

func parseReplacement(s string, captures int) ([]replacementPart, error) {
	var parts []replacementPart
	text := []byte(nil)
	flush := func() {
		if len(text) > 0 {
			parts = append(parts, replacementPart{text: string(text), capture: -1})
			text = nil
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			text = append(text, s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case len(rest) > 0 && rest[0] == '$':
			text = append(text, '$')
			i++
		case len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9':
			n := 1
			for n < len(rest) && n < 2 && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			k, _ := strconv.Atoi(rest[:n])
			if k > captures {
				return nil, fmt.Errorf("$%d: the regex has only %d capture(s)", k, captures)
			}
			flush()
			parts = append(parts, replacementPart{capture: k})
			i += n
		case len(rest) > 1 && rest[0] == '{':
			end := 1
			for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
				end++
			}
			if end == 1 || end > 3 || end >= len(rest) || rest[end] != '}' {
				return nil, fmt.Errorf("invalid capturing variable name at %q", s[i:])
			}
			k, _ := strconv.Atoi(rest[1:end])
			if k > captures {
				return nil, fmt.Errorf("${%d}: the regex has only %d capture(s)", k, captures)
			}
			flush()
			parts = append(parts, replacementPart{capture: k})
			i += end + 1
		default:
			return nil, fmt.Errorf("invalid capturing variable name at %q", s[i:])
		}
	}
	flush()
	return parts, nil
}

// httpsTemplate is http_to_https's Location: https, the client's host, port unless it
// is 443, and the request target as the client sent it.
func httpsTemplate(port int) conf.Template {
	s := "https://$host$request_uri"
	if port != 0 && port != 443 {
		s = "https://$host:" + strconv.Itoa(port) + "$request_uri"
	}
	t, err := conf.ParseTemplate(s, conf.TemplateSyntax{})
	if err != nil {
		panic("BUG: redirect: " + err.Error())
	}
	return t
}

// tlsPort is the port of the first TLS listener of cfg, 0 without one (APISIX picks one
// of apisix.ssl.listen at random; gw the first, so that every request gets one answer).
func tlsPort(cfg *conf.Config) int {
	if cfg == nil || !cfg.SSL.Enabled || len(cfg.SSL.Listen) == 0 {
		return 0
	}
	addr := cfg.SSL.Listen[0]
	if _, p, err := net.SplitHostPort(addr); err == nil {
		addr = p
	}
	port, _ := strconv.Atoi(addr)
	return port
}
