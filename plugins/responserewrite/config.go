package responserewrite

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "response-rewrite"

// Priority places response-rewrite in the chain as APISIX does.
const Priority = 899

func init() { plugins.Register(plugin{}) }

// plugin is response-rewrite as the host sees it.
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is response-rewrite's configuration, compiled.
type Config struct {
	// StatusCode replaces the status when not 0.
	StatusCode int
	// Body replaces the body when HasBody (decoded already when body_base64).
	Body    []byte
	HasBody bool
	// Add, Set and Remove are the header operations, applied in that order as APISIX
	// applies them. The old form ({"X-Name": "value"}) is Set.
	Add, Set []Header
	Remove   []string
	Filters  []Filter
	// MaxBodySize bounds the body a filter reads; past it the body is truncated.
	MaxBodySize int
	// Vars, when not nil, is the condition for the whole rewrite: a response for which it
	// does not hold goes as it is.
	Vars *conf.Expr
}

// Header is one header operation: a name and a value that may hold variables. An empty
// value removes the field, as nginx does.
type Header struct {
	Name  string
	Value conf.Template
	// Raw is the value as written, for messages and tests.
	Raw string
}

// Filter is one regex substitution on the body.
type Filter struct {
	Regex *regexp.Regexp
	// Replace is the replacement in Go's regexp.Expand syntax, translated from
	// ngx.re.sub's ($1 and ${1}; $$ for a '$').
	Replace string
	Global  bool
}

const defaultMaxBodySize = 64 << 20 // APISIX's 67108864

// Parse decodes response-rewrite's configuration strictly and compiles it.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{MaxBodySize: defaultMaxBodySize}
	var body string
	var base64Body, hasFilters bool
	for _, m := range members {
		switch m.Name {
		case "status_code":
			var n int64
			n, err = m.IntIn(200, 598)
			c.StatusCode = int(n)
		case "body":
			body, err = m.AnyString()
			c.HasBody = true
		case "body_base64":
			base64Body, err = m.Bool()
		case "headers":
			err = parseHeaders(m, c)
		case "filters":
			c.Filters, err = parseFilters(m)
			hasFilters = true
		case "max_resp_body_size":
			var n int64
			n, err = m.PositiveInt(1 << 40)
			c.MaxBodySize = int(n)
		case "vars":
			// Read once the response is known, as APISIX's header_filter does: the
			// request's variables and the response's (status, sent_http_<name>).
			if c.Vars, err = conf.ParseResponseVars(m.Value); err != nil {
				err = fmt.Errorf("%s: %w", m.Name, err)
			}
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: status_code, body, body_base64, headers, filters, max_resp_body_size, vars", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.HasBody && hasFilters {
		return nil, errors.New("body: cannot be used with filters: body replaces the whole body, filters rewrite it; keep one")
	}
	c.Body = []byte(body)
	if base64Body {
		// APISIX's words.
		if body == "" {
			return nil, errors.New("invalid base64 content")
		}
		decoded, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			if decoded, err = base64.RawStdEncoding.DecodeString(body); err != nil {
				return nil, errors.New("invalid base64 content")
			}
		}
		c.Body = decoded
	}
	return c, nil
}

var (
	// APISIX's patterns for an "add" item: the schema's, and the one it splits it with.
	addPattern = regexp.MustCompile(`^[^:]+:[^:]*[^/]$`)
	addSplit   = regexp.MustCompile(`^([^:\s]+)\s*:\s*([^:]+)$`)
)

func parseHeaders(m pluginconf.Member, c *Config) error {
	var fields map[string]json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '{' || json.Unmarshal(m.Value, &fields) != nil {
		return fmt.Errorf("%s: must be an object, got %s", m.Name, m.Show())
	}
	if len(fields) == 0 {
		return fmt.Errorf("%s: must not be empty", m.Name)
	}
	if !newForm(fields) {
		var err error
		c.Set, err = headerSet(m.Name, fields)
		return err
	}
	members, err := pluginconf.Verbatim.Members(m.Value)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	for _, op := range members {
		path := m.Name + "." + op.Name
		switch op.Name {
		case "add":
			var items []string
			if op.Value[0] != '[' || json.Unmarshal(op.Value, &items) != nil || len(items) == 0 {
				return fmt.Errorf(`%s: must be a non-empty array of "Name: value" strings, got %s`, path, op.Show())
			}
			for i, item := range items {
				parts := addSplit.FindStringSubmatch(item)
				if !addPattern.MatchString(item) || parts == nil {
					return fmt.Errorf(`%s[%d]: must be "Name: value" (no ':' in the value, which must not end with '/'), got %q`, path, i, item)
				}
				h, err := header(fmt.Sprintf("%s[%d]", path, i), parts[1], parts[2])
				if err != nil {
					return err
				}
				c.Add = append(c.Add, h)
			}
		case "set":
			var set map[string]json.RawMessage
			if op.Value[0] != '{' || json.Unmarshal(op.Value, &set) != nil || len(set) == 0 {
				return fmt.Errorf("%s: must be a non-empty object of header names and values, got %s", path, op.Show())
			}
			if c.Set, err = headerSet(path, set); err != nil {
				return err
			}
		case "remove":
			var names []string
			if op.Value[0] != '[' || json.Unmarshal(op.Value, &names) != nil || len(names) == 0 {
				return fmt.Errorf("%s: must be a non-empty array of header names, got %s", path, op.Show())
			}
			for i, name := range names {
				if name == "" || strings.ContainsRune(name, ':') {
					return fmt.Errorf("%s[%d]: must be a header name without ':', got %q", path, i, name)
				}
			}
			c.Remove = names
		default:
			return fmt.Errorf("%s: unknown field; with add, set or remove, headers holds only those", path)
		}
	}
	return nil
}

// newForm reports whether headers is {"add": [...], "set": {...}, "remove": [...]}
// rather than the old {"Name": "value"}, as APISIX tells them: by an add, set or remove
// whose value is an array or an object.
func newForm(fields map[string]json.RawMessage) bool {
	for _, op := range []string{"add", "set", "remove"} {
		if v, ok := fields[op]; ok && len(v) > 0 && (v[0] == '[' || v[0] == '{') {
			return true
		}
	}
	return false
}

// headerSet reads {"Name": "value" or number}, in name order so a snapshot's build is
// the same each time.
func headerSet(path string, fields map[string]json.RawMessage) ([]Header, error) {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	var list []Header
	for _, name := range names {
		value := fields[name]
		if name == "" {
			return nil, fmt.Errorf("%s: invalid field length in header: a header name must not be empty", path)
		}
		if strings.ContainsRune(name, ':') {
			return nil, fmt.Errorf("%s: %q: a header name must not hold ':'", path, name)
		}
		var text string
		switch {
		case len(value) > 0 && value[0] == '"':
			_ = json.Unmarshal(value, &text)
		case isNumber(value):
			text = string(value)
		default:
			// APISIX's words, with the field named.
			return nil, fmt.Errorf("%s.%s: invalid type as header value: must be a string or a number, got %s", path, name, pluginconf.Verbatim.Show(value))
		}
		h, err := header(path+"."+name, name, text)
		if err != nil {
			return nil, err
		}
		list = append(list, h)
	}
	return list, nil
}

func isNumber(v json.RawMessage) bool {
	var n json.Number
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && json.Unmarshal(v, &n) == nil
}

func header(path, name, value string) (Header, error) {
	t, err := conf.ParseTemplate(value, conf.TemplateSyntax{})
	if err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return Header{Name: name, Value: t, Raw: value}, nil
}

func parseFilters(m pluginconf.Member) ([]Filter, error) {
	var raws []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &raws) != nil {
		return nil, fmt.Errorf("%s: must be an array of filters, got %s", m.Name, m.Show())
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%s: must hold at least one filter", m.Name)
	}
	list := make([]Filter, 0, len(raws))
	for i, raw := range raws {
		f, err := parseFilter(raw)
		if err != nil {
			return nil, fmt.Errorf("%s[%d].%w", m.Name, i, err)
		}
		list = append(list, f)
	}
	return list, nil
}

func parseFilter(raw json.RawMessage) (Filter, error) {
	members, err := pluginconf.Verbatim.Members(raw)
	if err != nil {
		return Filter{}, fmt.Errorf("%w", err)
	}
	var f Filter
	var pattern, options = "", "jo"
	var hasRegex, hasReplace bool
	for _, m := range members {
		switch m.Name {
		case "regex":
			pattern, err = m.NonEmptyString()
			hasRegex = true
		case "replace":
			var replace string
			if replace, err = m.AnyString(); err == nil {
				f.Replace, err = replacement(replace)
				if err != nil {
					err = fmt.Errorf("replace: %v, got %q", err, replace)
				}
			}
			hasReplace = true
		case "scope":
			var scope string
			scope, err = m.OneOf("once", "global")
			f.Global = scope == "global"
		case "options":
			options, err = m.AnyString()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: regex, replace, scope, options", m.Name)
		}
		if err != nil {
			return Filter{}, err
		}
	}
	switch {
	case !hasRegex:
		return Filter{}, errors.New("regex: is required")
	case !hasReplace:
		return Filter{}, errors.New("replace: is required")
	}
	flags, err := regexFlags(options)
	if err != nil {
		return Filter{}, fmt.Errorf("options: %v, got %q", err, options)
	}
	if f.Regex, err = regexp.Compile(flags + pattern); err != nil {
		return Filter{}, fmt.Errorf("regex: %q is not a regex RE2 compiles: %v", pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return f, nil
}

// regexFlags translates ngx.re's options into RE2's inline flags. j and o (JIT, compile
// once) mean nothing to RE2, u is its default; the others RE2 has not (x, a, D, J) are
// refused rather than ignored.
func regexFlags(options string) (string, error) {
	var flags strings.Builder
	for _, o := range options {
		switch o {
		case 'j', 'o', 'u':
		case 'i', 'm', 's':
			flags.WriteRune(o)
		default:
			return "", fmt.Errorf("option %q is not supported: gw's regexes are RE2, which takes i, m, s (and ignores j, o, u)", o)
		}
	}
	if flags.Len() == 0 {
		return "", nil
	}
	return "(?" + flags.String() + ")", nil
}

// replacement translates ngx.re.sub's replacement ($0-$99, ${N}, $$) into Go's
// regexp.Expand template, where "$1x" would read a group named "1x": every capture is
// braced. A '$' that starts none of these is refused, as ngx.re.sub refuses it.
func replacement(s string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			out.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			out.WriteString("$$")
			i++
		case len(rest) > 0 && isDigit(rest[0]):
			n := 1
			for n < len(rest) && n < 2 && isDigit(rest[n]) {
				n++
			}
			out.WriteString("${" + rest[:n] + "}")
			i += n
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			digits := ""
			if end > 1 {
				digits = rest[1:end]
			}
			if digits == "" || len(digits) > 2 || strings.TrimFunc(digits, func(r rune) bool { return r >= '0' && r <= '9' }) != "" {
				return "", errors.New("${...} must hold a capture number")
			}
			out.WriteString("${" + digits + "}")
			i += end + 1
		default:
			return "", errors.New("a '$' must start $N, ${N} or $$")
		}
	}
	return out.String(), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
