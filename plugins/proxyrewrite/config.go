package proxyrewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "proxy-rewrite"

// Priority places proxy-rewrite in the chain as APISIX does (higher runs first): after
// authentication and before limit-count.
const Priority = 1008

func init() { plugins.Register(plugin{}) }

// plugin is proxy-rewrite as the host sees it; its instance is the route's Config
// (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one proxy-rewrite configuration, compiled. It is immutable once Parse returns
// it and safe to share between goroutines.
type Config struct {
	// URI, when set, replaces the path; it may name variables and hold a '?' and query.
	URI *conf.Template
	// RegexURI are the [regex, replacement] pairs; the first regex that matches the
	// decoded path is substituted (first match only), the rest are ignored.
	RegexURI []regexRewrite
	// Host, when set, is the Host header sent upstream; it wins over pass_host.
	Host []byte
	// Method, when set, is the method sent upstream.
	Method []byte
	// Headers are applied in APISIX's order: add, then set, then remove.
	Add, Set []headerValue
	Remove   [][]byte
	// RealRequestURI is use_real_request_uri_unsafe: the request target is the client's as
	// sent, not rebuilt from the normalised path (realRequestURI in handler.go).
	RealRequestURI bool
	// readsNames is set when a template reads the route's, service's or consumer's names.
	readsNames bool
	// forwarded are the X-Forwarded-* headers add, set or remove name, which the plugin
	// takes over from the proxy (plugins.Ctx.TakeForwarded) before changing them.
	forwarded plugins.Forwarded
}

type regexRewrite struct {
	re          *regexp.Regexp
	replacement conf.Template
	// prefix is set when re is ^<literal>(.*), the usual way to strip or swap a path
	// prefix (nginx's proxy_pass with a URI part does the same with a string compare):
	// find then compares bytes instead of running the regexp, which allocates its
	// indexes. dotAll says whether (.*) crosses a newline ((?s)).
	prefix     []byte
	prefixOnly bool
	dotAll     bool
}

// find is re.FindSubmatchIndex(subject), written into dst when re is a literal prefix and
// a capture of the rest, where it allocates nothing.
func (rw *regexRewrite) find(subject []byte, dst *[4]int) []int {
	if !rw.prefixOnly {
		return rw.re.FindSubmatchIndex(subject)
	}
	if !bytes.HasPrefix(subject, rw.prefix) {
		return nil
	}
	end := len(subject)
	if !rw.dotAll {
		// A greedy (.*) stops at the first newline, the match with it.
		if nl := bytes.IndexByte(subject[len(rw.prefix):], '\n'); nl >= 0 {
			end = len(rw.prefix) + nl
		}
	}
	*dst = [4]int{0, end, len(rw.prefix), end}
	return dst[:]
}

// literalPrefix reports whether pattern, as regexp.Compile reads it, is ^<literal>(.*) with
// a case-sensitive literal and a greedy star, and returns the literal and whether . takes
// newlines. A literal holding U+FFFD is left to the regexp, which matches it against any
// byte that is not UTF-8.
func literalPrefix(pattern string) (prefix []byte, dotAll, ok bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false, false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) != 3 {
		return nil, false, false
	}
	begin, lit, capture := re.Sub[0], re.Sub[1], re.Sub[2]
	if begin.Op != syntax.OpBeginText || lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 ||
		capture.Op != syntax.OpCapture || capture.Cap != 1 || len(capture.Sub) != 1 {
		return nil, false, false
	}
	star := capture.Sub[0]
	if star.Op != syntax.OpStar || star.Flags&syntax.NonGreedy != 0 || len(star.Sub) != 1 {
		return nil, false, false
	}
	switch star.Sub[0].Op {
	case syntax.OpAnyCharNotNL:
	case syntax.OpAnyChar:
		dotAll = true
	default:
		return nil, false, false
	}
	for _, r := range lit.Rune {
		if r == utf8.RuneError {
			return nil, false, false
		}
	}
	return []byte(string(lit.Rune)), dotAll, true
}

// headerValue is one header name with its values (one, or several from an array).
type headerValue struct {
	name   []byte
	values []conf.Template
}

// methods is APISIX's method enum for proxy-rewrite.
var methods = []string{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "MKCOL", "COPY", "MOVE",
	"PROPFIND", "LOCK", "UNLOCK", "PATCH", "TRACE"}

// Parse decodes one proxy-rewrite configuration strictly and compiles its templates and
// regexes. The error names the offending field.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	for _, m := range members {
		switch m.Name {
		case "uri":
			var s string
			if s, err = m.NonEmptyString(); err == nil {
				err = c.parseURI(s)
			}
		case "regex_uri":
			c.RegexURI, err = parseRegexURI(m)
		case "host":
			c.Host, err = parseHost(m)
		case "method":
			var s string
			if s, err = m.NonEmptyString(); err == nil && !slices.Contains(methods, s) {
				err = fmt.Errorf("method: must be one of %s, got %s", strings.Join(methods, ", "), m.Show())
			}
			c.Method = []byte(s)
		case "headers":
			err = c.parseHeaders(m)
		case "use_real_request_uri_unsafe":
			c.RealRequestURI, err = m.Bool()
		case "scheme":
			err = errors.New("scheme: removed in APISIX 3.0; set the upstream's scheme instead")
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: uri, regex_uri, host, method, headers, use_real_request_uri_unsafe", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	// APISIX's schema asks for one property, any of them (minProperties = 1): one that
	// changes nothing, use_real_request_uri_unsafe false or _meta, is served as nothing.
	if len(members) == 0 {
		return nil, errors.New("configuration must set at least one of uri, regex_uri, host, method, headers or use_real_request_uri_unsafe")
	}
	c.readsNames = c.templatesReadNames()
	c.forwarded = c.forwardedNamed()
	return c, nil
}

// forwardedNamed is the set of the proxy's X-Forwarded-* headers c's header operations
// name.
func (c *Config) forwardedNamed() plugins.Forwarded {
	var set plugins.Forwarded
	mark := func(name []byte) {
		switch {
		case strings.EqualFold(string(name), plugins.HeaderForwardedProto):
			set |= plugins.ForwardedProto
		case strings.EqualFold(string(name), plugins.HeaderForwardedHost):
			set |= plugins.ForwardedHost
		case strings.EqualFold(string(name), plugins.HeaderForwardedPort):
			set |= plugins.ForwardedPort
		}
	}
	for _, list := range [][]headerValue{c.Add, c.Set} {
		for i := range list {
			mark(list[i].name)
		}
	}
	for _, name := range c.Remove {
		mark(name)
	}
	return set
}

func (c *Config) parseURI(s string) error {
	if len(s) > 4096 || s[0] != '/' {
		return fmt.Errorf("uri: must start with \"/\" and be at most 4096 characters, got %s", pluginconf.Verbatim.Show([]byte(strconv.Quote(s))))
	}
	t, err := conf.ParseTemplate(s, uriSyntax)
	if err != nil {
		return fmt.Errorf("uri: %w", err)
	}
	c.URI = &t
	return nil
}

// parseRegexURI reads [regex, replacement, regex, replacement, ...].
func parseRegexURI(m pluginconf.Member) ([]regexRewrite, error) {
	var items []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &items) != nil {
		return nil, fmt.Errorf("regex_uri: must be an array of strings [regex, replacement, ...], got %s", m.Show())
	}
	if len(items) < 2 || len(items)%2 != 0 {
		return nil, fmt.Errorf("regex_uri: must hold pairs of [regex, replacement], got %d item(s)", len(items))
	}
	strs := make([]string, len(items))
	for i, item := range items {
		if len(item) == 0 || item[0] != '"' || json.Unmarshal(item, &strs[i]) != nil {
			return nil, fmt.Errorf("regex_uri: item %d must be a string, got %s", i+1, pluginconf.Verbatim.Show(item))
		}
	}
	var rewrites []regexRewrite
	for i := 0; i < len(strs); i += 2 {
		pattern, replacement := strs[i], strs[i+1]
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("regex_uri: invalid regex_uri(%s, %s): %v (gw uses Go's RE2 syntax: no look-around or back-references)", pattern, replacement, err)
		}
		tpl, err := parseReplacement(replacement, re.NumSubexp())
		if err != nil {
			return nil, fmt.Errorf("regex_uri: invalid regex_uri(%s, %s): %v", pattern, replacement, err)
		}
		rw := regexRewrite{re: re, replacement: tpl}
		rw.prefix, rw.dotAll, rw.prefixOnly = literalPrefix(pattern)
		rewrites = append(rewrites, rw)
	}
	return rewrites, nil
}

// parseHost is APISIX's ^[0-9a-zA-Z-.]+(:\d{1,5})?$.
func parseHost(m pluginconf.Member) ([]byte, error) {
	s, err := m.NonEmptyString()
	if err != nil {
		return nil, err
	}
	name, port, hasPort := strings.Cut(s, ":")
	ok := name != "" && (!hasPort || port != "" && len(port) <= 5 && isDigits(port))
	for i := 0; ok && i < len(name); i++ {
		ok = isWordChar(name[i]) && name[i] != '_' || name[i] == '-' || name[i] == '.'
	}
	if !ok {
		return nil, fmt.Errorf("host: must be a host name of letters, digits, '-' and '.', optionally with :port, got %s", m.Show())
	}
	return []byte(s), nil
}

// parseHeaders reads APISIX 3.x's {"add": {}, "set": {}, "remove": []} or the older flat
// {"name": "value"} (which sets).
func (c *Config) parseHeaders(m pluginconf.Member) error {
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return fmt.Errorf("headers: %w", err)
	}
	if len(members) == 0 {
		return errors.New("headers: must not be empty")
	}
	structured := false
	for _, h := range members {
		switch h.Name {
		case "add", "set", "remove":
			structured = structured || h.Value[0] == '{' || h.Value[0] == '['
		}
	}
	if !structured {
		c.Set, err = headerValues("headers", members, false)
		return err
	}
	for _, h := range members {
		path := "headers." + h.Name
		switch h.Name {
		case "add", "set":
			var list []pluginconf.Member
			if list, err = pluginconf.Verbatim.Members(h.Value); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if len(list) == 0 {
				return fmt.Errorf("%s: must not be empty", path)
			}
			values, err := headerValues(path, list, true)
			if err != nil {
				return err
			}
			if h.Name == "add" {
				c.Add = values
			} else {
				c.Set = values
			}
		case "remove":
			var names []json.RawMessage
			if h.Value[0] != '[' || json.Unmarshal(h.Value, &names) != nil || len(names) == 0 {
				return fmt.Errorf("%s: must be a non-empty array of header names, got %s", path, h.Show())
			}
			for i, raw := range names {
				var name string
				if raw[0] != '"' || json.Unmarshal(raw, &name) != nil {
					return fmt.Errorf("%s: item %d must be a string, got %s", path, i+1, pluginconf.Verbatim.Show(raw))
				}
				if err := checkHeaderName(name); err != nil {
					return fmt.Errorf("%s: item %d: %w", path, i+1, err)
				}
				c.Remove = append(c.Remove, []byte(name))
			}
		default:
			return fmt.Errorf("headers.%s: unknown field; with add, set or remove, headers holds only those", h.Name)
		}
	}
	return nil
}

// headerValues reads {name: value}: a string, a number, or (arrays true) a non-empty
// array of them.
func headerValues(path string, list []pluginconf.Member, arrays bool) ([]headerValue, error) {
	var out []headerValue
	for _, h := range list {
		fieldPath := path + "." + h.Name
		if err := checkHeaderName(h.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", fieldPath, err)
		}
		var raws []json.RawMessage
		if arrays && h.Value[0] == '[' {
			if json.Unmarshal(h.Value, &raws) != nil || len(raws) == 0 {
				return nil, fmt.Errorf("%s: must be a string, a number or a non-empty array of them, got %s", fieldPath, h.Show())
			}
		} else {
			raws = []json.RawMessage{h.Value}
		}
		hv := headerValue{name: []byte(h.Name)}
		for _, raw := range raws {
			text, err := headerText(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fieldPath, err)
			}
			tpl, err := conf.ParseTemplate(text, headerSyntax)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fieldPath, err)
			}
			hv.values = append(hv.values, tpl)
		}
		out = append(out, hv)
	}
	return out, nil
}

// headerText reads a header value given as a string or a number; control characters
// are refused, as APISIX's validate_header_value does.
func headerText(raw json.RawMessage) (string, error) {
	var text string
	switch {
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", err
		}
	case raw[0] == '-' || isDigit(raw[0]):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return "", fmt.Errorf("invalid number %s", raw)
		}
		text = strconv.FormatFloat(f, 'f', -1, 64)
	default:
		return "", fmt.Errorf("must be a string or a number, got %s", pluginconf.Verbatim.Show(raw))
	}
	for i := 0; i < len(text); i++ {
		if text[i] < 0x20 || text[i] >= 0x7f {
			return "", fmt.Errorf("invalid value character in header: %q", text)
		}
	}
	return text, nil
}

// checkHeaderName is APISIX's validate_header_field: printable ASCII, no ':' or space.
func checkHeaderName(name string) error {
	if name == "" {
		return errors.New("invalid field length in header")
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= 0x20 || name[i] >= 0x7f || name[i] == ':' {
			return fmt.Errorf("invalid field character in header: %q", name)
		}
	}
	return nil
}
