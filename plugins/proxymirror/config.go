package proxymirror

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
const Name = "proxy-mirror"

// Priority places proxy-mirror in the chain as APISIX does (higher runs first): just
// before proxy-rewrite (1008).
const Priority = 1010

func init() { plugins.Register(plugin{}) }

// plugin is proxy-mirror as the host sees it; its instance is a mirror (handler.go).
type plugin struct{}

var _ plugins.Plugin = plugin{}

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// Config is one proxy-mirror configuration, decoded and defaulted. It is immutable once
// Parse returns it.
type Config struct {
	// Host is the mirror, "http://host[:port]" or "https://...", as written; Addr is the
	// address to dial and TLS whether to speak TLS there.
	Host string
	Addr string
	TLS  bool
	// Path, when set, replaces the request's path (PathConcatMode "replace") or prefixes
	// it ("prefix").
	Path           string
	PathConcatMode string
	// SampleRatio is the share of requests mirrored, 0.00001 to 1.
	SampleRatio float64
}

// The patterns of APISIX's schema. grpc and grpcs hosts are refused apart: gw mirrors
// HTTP/1.1 only.
var (
	hostPattern = regexp.MustCompile(`^(http(s)?|grpc(s)?):\/\/([\da-zA-Z.-]+|\[[\da-fA-F:]+\])(:\d+)?$`)
	pathPattern = regexp.MustCompile(`^/[^?&]+$`)
)

// Parse decodes one proxy-mirror configuration strictly and applies APISIX's defaults.
// The error names the offending field and value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{PathConcatMode: "replace", SampleRatio: 1}
	for _, m := range members {
		switch m.Name {
		case "host":
			if c.Host, err = m.NonEmptyString(); err == nil {
				err = c.parseHost()
			}
		case "path":
			if c.Path, err = m.NonEmptyString(); err == nil && !pathPattern.MatchString(c.Path) {
				err = fmt.Errorf("path: must start with / and hold no ? or &, got %q", c.Path)
			}
		case "path_concat_mode":
			c.PathConcatMode, err = m.OneOf("replace", "prefix")
		case "sample_ratio":
			err = json.Unmarshal(m.Value, &c.SampleRatio)
			if err != nil || m.Value[0] == '"' || c.SampleRatio < 0.00001 || c.SampleRatio > 1 {
				err = fmt.Errorf("sample_ratio: must be a number from 0.00001 to 1, got %s", m.Show())
			}
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field; known fields: host, path, path_concat_mode, sample_ratio", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.Host == "" {
		return nil, errors.New("host: required")
	}
	return c, nil
}

// parseHost reads host: a scheme, an IP address or name, and maybe a port, nothing else.
func (c *Config) parseHost() error {
	m := hostPattern.FindStringSubmatch(c.Host)
	if m == nil {
		return fmt.Errorf(`host: must be "http://" or "https://" then a host and maybe a port, without a path, got %q`, c.Host)
	}
	scheme, name, port := m[1], m[4], strings.TrimPrefix(m[5], ":")
	if scheme == "grpc" || scheme == "grpcs" {
		return fmt.Errorf("host: %s mirrors are not supported yet, got %q", scheme, c.Host)
	}
	c.TLS = scheme == "https"
	if port == "" {
		port = "80"
		if c.TLS {
			port = "443"
		}
	} else if n := atoi(port); n < 1 || n > 65535 {
		return fmt.Errorf("host: the port must be from 1 to 65535, got %q", c.Host)
	}
	c.Addr = name + ":" + port
	return nil
}

func atoi(s string) int {
	n := 0
	for _, d := range s {
		if n > 65535 {
			return n
		}
		n = n*10 + int(d-'0')
	}
	return n
}
