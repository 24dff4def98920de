package apibreaker

import (
	"encoding/json"
	"errors"
	"fmt"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "api-breaker"

// Priority places api-breaker in the chain as APISIX does (higher runs first).
const Priority = 1005

func init() { plugins.Register(plugin{}) }

// plugin is api-breaker as the host sees it: its breakers live in a shared-memory segment
// of its own (handler.go), and it never changes the request.
type plugin struct{}

var (
	_ plugins.Plugin        = plugin{}
	_ plugins.RequestKeeper = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// KeepsRequest: api-breaker answers or lets the request through as it came.
func (plugin) KeepsRequest() bool { return true }

const (
	// maxBreakerSec bounds max_breaker_sec (97 days): a breaker's last opening is kept in
	// 24 bits of seconds, and an opening must be told from one a cycle earlier.
	maxBreakerSec = 1 << 23
	// maxFailures bounds unhealthy.failures: a breaker's count is 16 bits, and it must
	// reach 24 openings' worth (a break time of 2^24 s, past any max_breaker_sec).
	maxFailures = (1<<16 - 1) / (saturatedOpenings + 1)
	// maxSuccesses bounds healthy.successes, kept in 16 bits.
	maxSuccesses = 1<<16 - 1
)

// Config is one api-breaker configuration with APISIX's defaults applied. It is immutable
// once Parse returns it and safe to share between goroutines.
type Config struct {
	BreakResponseCode    int              `json:"break_response_code"`
	BreakResponseBody    *string          `json:"break_response_body,omitempty"`
	BreakResponseHeaders []ResponseHeader `json:"break_response_headers,omitempty"`
	MaxBreakerSec        int64            `json:"max_breaker_sec"`
	Unhealthy            Unhealthy        `json:"unhealthy"`
	Healthy              Healthy          `json:"healthy"`
	Disable              bool             `json:"disable,omitempty"`
}

// ResponseHeader is one header of the break response; Value may hold variables
// ("$remote_addr").
type ResponseHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	key   []byte
	value conf.Template
}

// Unhealthy says which upstream statuses count as failures (500-599) and how many open
// the breaker.
type Unhealthy struct {
	HTTPStatuses []int `json:"http_statuses"`
	Failures     int64 `json:"failures"`
}

// Healthy says which upstream statuses count as successes (200-499) and how many in a row
// close the breaker.
type Healthy struct {
	HTTPStatuses []int `json:"http_statuses"`
	Successes    int64 `json:"successes"`
}

// Parse decodes one api-breaker configuration strictly, applies the defaults and
// validates it. The error names the offending field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{
		MaxBreakerSec: 300,
		Unhealthy:     Unhealthy{HTTPStatuses: []int{500}, Failures: 3},
		Healthy:       Healthy{HTTPStatuses: []int{200}, Successes: 3},
	}
	hasCode := false
	for _, m := range members {
		switch m.Name {
		case "break_response_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.BreakResponseCode, hasCode = int(code), true
		case "break_response_body":
			var body string
			body, err = m.AnyString()
			c.BreakResponseBody = &body
		case "break_response_headers":
			c.BreakResponseHeaders, err = parseHeaders(m)
		case "max_breaker_sec":
			c.MaxBreakerSec, err = m.IntIn(3, maxBreakerSec)
		case "unhealthy":
			err = each(m, func(n pluginconf.Member) (err error) {
				switch n.Name {
				case "unhealthy.http_statuses":
					c.Unhealthy.HTTPStatuses, err = statuses(n, 500, 599)
				case "unhealthy.failures":
					c.Unhealthy.Failures, err = n.IntIn(1, maxFailures)
				default:
					err = fmt.Errorf("%s: unknown field", n.Name)
				}
				return err
			})
		case "healthy":
			err = each(m, func(n pluginconf.Member) (err error) {
				switch n.Name {
				case "healthy.http_statuses":
					c.Healthy.HTTPStatuses, err = statuses(n, 200, 499)
				case "healthy.successes":
					c.Healthy.Successes, err = n.IntIn(1, maxSuccesses)
				default:
					err = fmt.Errorf("%s: unknown field", n.Name)
				}
				return err
			})
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			err = fmt.Errorf("%s: unknown field", m.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasCode {
		return nil, errors.New("break_response_code: is required (the status answered while the breaker is open)")
	}
	return c, nil
}

// each calls fn with each member of m's object, named "m.member".
func each(m pluginconf.Member, fn func(pluginconf.Member) error) error {
	if err := m.Object(); err != nil {
		return err
	}
	members, err := pluginconf.Compact.Members(m.Value)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	for _, n := range members {
		n.Name = m.Name + "." + n.Name
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

// statuses reads a non-empty array of distinct statuses from lo to hi.
func statuses(m pluginconf.Member, lo, hi int64) ([]int, error) {
	var items []json.RawMessage
	if json.Unmarshal(m.Value, &items) != nil || len(m.Value) == 0 || m.Value[0] != '[' {
		return nil, fmt.Errorf("%s: must be an array of statuses, got %s", m.Name, m.Show())
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: must hold at least one status", m.Name)
	}
	var list []int
	for i, item := range items {
		n, ok := pluginconf.Integer(item)
		if !ok || n < lo || n > hi {
			return nil, fmt.Errorf("%s[%d]: must be an integer from %d to %d, got %s", m.Name, i, lo, hi, pluginconf.Compact.Show(item))
		}
		for _, seen := range list {
			if seen == int(n) {
				return nil, fmt.Errorf("%s[%d]: %d is listed twice", m.Name, i, n)
			}
		}
		list = append(list, int(n))
	}
	return list, nil
}

// parseHeaders reads break_response_headers: [{"key": ..., "value": ...}], both
// non-empty, the value a template of variables.
func parseHeaders(m pluginconf.Member) ([]ResponseHeader, error) {
	var items []json.RawMessage
	if len(m.Value) == 0 || m.Value[0] != '[' || json.Unmarshal(m.Value, &items) != nil {
		return nil, fmt.Errorf("%s: must be an array of {\"key\", \"value\"} objects, got %s", m.Name, m.Show())
	}
	var list []ResponseHeader
	for i, item := range items {
		name := fmt.Sprintf("%s[%d]", m.Name, i)
		members, err := pluginconf.Compact.Members(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var h ResponseHeader
		var hasKey, hasValue bool
		for _, n := range members {
			n.Name = name + "." + n.Name
			switch n.Name {
			case name + ".key":
				h.Key, err = n.NonEmptyString()
				h.key, hasKey = []byte(h.Key), true
			case name + ".value":
				h.Value, err = n.NonEmptyString()
				if err == nil {
					h.value, err = conf.ParseTemplate(h.Value, conf.TemplateSyntax{})
					if err != nil {
						err = fmt.Errorf("%s: %w", n.Name, err)
					}
				}
				hasValue = true
			default:
				err = fmt.Errorf("%s: unknown field", n.Name)
			}
			if err != nil {
				return nil, err
			}
		}
		if !hasKey || !hasValue {
			return nil, fmt.Errorf("%s: needs both key and value", name)
		}
		list = append(list, h)
	}
	return list, nil
}
