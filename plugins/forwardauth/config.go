package forwardauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "forward-auth"

// Priority places forward-auth in the chain as APISIX does (higher runs first): after
// key-auth (2500) and before proxy-rewrite (1008).
const Priority = 2002

func init() { plugins.Register(plugin{}) }

// plugin is forward-auth as the host sees it; its instance is a handler (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// The defaults and bounds of APISIX's schema.
const (
	defaultStatusOnError    = 403
	defaultTimeout          = 3000 * time.Millisecond
	defaultKeepaliveTimeout = 60000 * time.Millisecond
	defaultKeepalivePool    = 5
	defaultMaxReqBodySize   = 64 << 20
	maxTimeoutMillis        = 60000
)

// Config is one forward-auth configuration, decoded and defaulted. It is immutable once
// Parse returns it.
type Config struct {
	// URI is the authorization service's URL, http or https; Target is it parsed.
	URI    string
	Target target
	// Method is GET or POST; POST sends the request's body, at most MaxReqBodySize bytes.
	Method         string
	MaxReqBodySize int64
	// RequestHeaders are the client's headers sent to the service, UpstreamHeaders the
	// service's headers copied onto the proxied request on a 2xx, ClientHeaders the
	// service's headers copied onto the client's answer otherwise. Names are canonical
	// (Header-Name): they are matched case-insensitively.
	RequestHeaders, UpstreamHeaders, ClientHeaders [][]byte
	// ExtraHeaders are sent to the service, their values expanded per request.
	ExtraHeaders []extraHeader
	// Timeout bounds each call whole: connecting, waiting for a connection, sending and
	// reading the answer.
	Timeout time.Duration
	// Keepalive keeps connections to the service open between calls, idle for at most
	// KeepaliveTimeout; KeepalivePool is APISIX's idle pool size (see README).
	Keepalive        bool
	KeepaliveTimeout time.Duration
	KeepalivePool    int64
	// AllowDegradation lets a request through when the service cannot be reached;
	// otherwise it is answered StatusOnError.
	AllowDegradation bool
	StatusOnError    int
	SSLVerify        bool
}

// extraHeader is one of extra_headers: a name and its value's template.
type extraHeader struct {
	name  []byte
	value conf.Template
}

// target is where the service is: the address to dial, whether with TLS, the Host header
// and the request target (path and query).
type target struct {
	addr, host, requestURI string
	tls                    bool
}

var known = "uri, request_method, request_headers, extra_headers, upstream_headers, client_headers, timeout, " +
	"keepalive, keepalive_timeout, keepalive_pool, allow_degradation, status_on_error, ssl_verify, max_req_body_size"

// Parse decodes one forward-auth configuration strictly and applies APISIX's defaults.
// The error names the offending field and value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{
		Method: "GET", MaxReqBodySize: defaultMaxReqBodySize, Timeout: defaultTimeout,
		Keepalive: true, KeepaliveTimeout: defaultKeepaliveTimeout, KeepalivePool: defaultKeepalivePool,
		StatusOnError: defaultStatusOnError, SSLVerify: true,
	}
	for _, m := range members {
		var n int64
		switch m.Name {
		case "uri":
			if c.URI, err = m.NonEmptyString(); err == nil {
				c.Target, err = parseTarget(c.URI)
			}
		case "request_method":
			c.Method, err = m.OneOf("GET", "POST")
		case "max_req_body_size":
			c.MaxReqBodySize, err = m.PositiveInt(1 << 53)
		case "request_headers":
			c.RequestHeaders, err = headerNames(m)
		case "upstream_headers":
			c.UpstreamHeaders, err = headerNames(m)
		case "client_headers":
			c.ClientHeaders, err = headerNames(m)
		case "extra_headers":
			c.ExtraHeaders, err = parseExtraHeaders(m)
		case "timeout":
			n, err = m.IntIn(1, maxTimeoutMillis)
			c.Timeout = time.Duration(n) * time.Millisecond
		case "keepalive":
			c.Keepalive, err = m.Bool()
		case "keepalive_timeout":
			n, err = m.IntIn(1000, 1<<40)
			c.KeepaliveTimeout = time.Duration(n) * time.Millisecond
		case "keepalive_pool":
			c.KeepalivePool, err = m.PositiveInt(1 << 31)
		case "allow_degradation":
			c.AllowDegradation, err = m.Bool()
		case "status_on_error":
			n, err = m.IntIn(200, 599)
			c.StatusOnError = int(n)
		case "ssl_verify":
			c.SSLVerify, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: %s", m.Name, known)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.URI == "" {
		return nil, errors.New("uri: required")
	}
	return c, nil
}

// parseTarget reads the service's URL: http or https, with a host, no user info and no
// fragment.
func parseTarget(s string) (target, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return target{}, fmt.Errorf("uri: must be an http or https URL with a host, got %q", s)
	}
	t := target{host: u.Host, tls: u.Scheme == "https", requestURI: u.RequestURI()}
	t.addr = u.Host
	if u.Port() == "" {
		port := "80"
		if t.tls {
			port = "443"
		}
		t.addr = strings.TrimSuffix(strings.TrimPrefix(u.Hostname(), "["), "]")
		if strings.Contains(t.addr, ":") {
			t.addr = "[" + t.addr + "]"
		}
		t.addr += ":" + port
	}
	return t, nil
}

// headerNames reads an array of header names.
func headerNames(m pluginconf.Member) ([][]byte, error) {
	var list []string
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &list) != nil {
		return nil, fmt.Errorf("%s: must be an array of header names, got %s", m.Name, m.Show())
	}
	names := make([][]byte, len(list))
	for i, name := range list {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("%s[%d]: must be a header name, got %q", m.Name, i, name)
		}
		names[i] = []byte(textproto.CanonicalMIMEHeaderKey(name))
	}
	return names, nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110's token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// headerSyntax is extra_headers' values: variables gw knows, no captures.
var headerSyntax = conf.TemplateSyntax{}

// parseExtraHeaders reads extra_headers: an object of at least one header whose values
// are strings that may name variables, in name order so that every build sends them
// alike.
func parseExtraHeaders(m pluginconf.Member) ([]extraHeader, error) {
	var set map[string]json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '{' || json.Unmarshal(m.Value, &set) != nil || len(set) == 0 {
		return nil, fmt.Errorf("%s: must be an object of at least one header, got %s", m.Name, m.Show())
	}
	headers := make([]extraHeader, 0, len(set))
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if strings.IndexByte(name, ':') >= 0 || !validHeaderName(name) {
			return nil, fmt.Errorf("%s: %q is not a header name", m.Name, name)
		}
		var value string
		if raw := set[name]; len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &value) != nil {
			return nil, fmt.Errorf("%s.%s: must be a string, got %s", m.Name, name, pluginconf.Compact.Show(raw))
		}
		t, err := conf.ParseTemplate(value, headerSyntax)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %v", m.Name, name, err)
		}
		headers = append(headers, extraHeader{name: []byte(name), value: t})
	}
	return headers, nil
}
