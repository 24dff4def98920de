package limitcount

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gw/plugins"
)

// Name is the key under a route's "plugins" object.
const Name = "limit-count"

// Priority places limit-count in the chain as APISIX does (higher runs first).
const Priority = 1002

func init() {
	plugins.Register(plugins.Plugin{
		Name:     Name,
		Priority: Priority,
		Validate: func(raw json.RawMessage) error {
			_, err := Parse(raw)
			return err
		},
		Build:         build,
		Segment:       segmentSpec,
		CheckSnapshot: CheckGroups,
	})
}

// maxTimeWindow keeps TimeWindow representable as a time.Duration.
const maxTimeWindow = math.MaxInt64 / int64(time.Second)

// Config is one limit-count configuration with APISIX's defaults applied. It is immutable
// once Parse returns it and safe to share between goroutines.
type Config struct {
	// Count is the number of requests allowed per key in each window.
	Count int64 `json:"count"`
	// TimeWindow is the window length in seconds; see Window.
	TimeWindow int64 `json:"time_window"`
	// KeyType says how Key is read: "var" (a variable such as remote_addr),
	// "var_combination" (a string like "$remote_addr $http_x") or "constant".
	KeyType string `json:"key_type"`
	Key     string `json:"key"`
	// RejectedCode is the status of a rejected request, 200-599.
	RejectedCode int `json:"rejected_code"`
	// RejectedMsg, when set, is sent as {"error_msg": RejectedMsg} with a rejection.
	RejectedMsg string `json:"rejected_msg,omitempty"`
	// Policy is where counters live; only "local" is supported.
	Policy string `json:"policy"`
	// AllowDegradation lets requests through when the counter store fails.
	AllowDegradation bool `json:"allow_degradation"`
	// ShowLimitQuotaHeader adds X-RateLimit-Limit, -Remaining and -Reset to responses.
	ShowLimitQuotaHeader bool `json:"show_limit_quota_header"`
	// Group, when set, makes every route with the same group share one counter.
	Group string `json:"group,omitempty"`
	// WindowType is "fixed": a window starts at a key's first request.
	WindowType string `json:"window_type"`
	// Disable turns the plugin off on this route while keeping its configuration.
	Disable bool `json:"disable,omitempty"`
}

// Window is TimeWindow as a duration.
func (c *Config) Window() time.Duration { return time.Duration(c.TimeWindow) * time.Second }

// Parse decodes one limit-count configuration strictly, applies the defaults and
// validates it. The error names the offending field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{
		KeyType:              "var",
		Key:                  "remote_addr",
		RejectedCode:         503,
		Policy:               "local",
		ShowLimitQuotaHeader: true,
		WindowType:           "fixed",
	}
	var hasCount, hasTimeWindow bool
	for _, m := range members {
		v := m.value
		switch m.name {
		case "count":
			c.Count, err = positiveInt(m.name, v, math.MaxInt64)
			hasCount = true
		case "time_window":
			c.TimeWindow, err = positiveInt(m.name, v, maxTimeWindow)
			hasTimeWindow = true
		case "key_type":
			c.KeyType, err = oneOf(m.name, v, "var", "var_combination", "constant")
		case "key":
			c.Key, err = str(m.name, v, 0)
		case "rejected_code":
			var code int64
			code, err = intIn(m.name, v, 200, 599)
			c.RejectedCode = int(code)
		case "rejected_msg":
			c.RejectedMsg, err = str(m.name, v, 1)
		case "policy":
			c.Policy, err = oneOf(m.name, v, "local", "redis", "redis-cluster", "redis-sentinel")
			if err == nil && c.Policy != "local" {
				err = fmt.Errorf("policy %q is not supported yet; use \"local\" (counters shared by every worker of this gateway)", c.Policy)
			}
		case "allow_degradation":
			c.AllowDegradation, err = boolean(m.name, v)
		case "show_limit_quota_header":
			c.ShowLimitQuotaHeader, err = boolean(m.name, v)
		case "group":
			c.Group, err = str(m.name, v, 1)
		case "window_type":
			c.WindowType, err = oneOf(m.name, v, "fixed", "sliding")
			if err == nil && c.WindowType != "fixed" {
				err = fmt.Errorf("window_type %q is not supported yet; use \"fixed\"", c.WindowType)
			}
		case "rules":
			err = errors.New("rules: not supported yet; use count and time_window")
		case "disable":
			c.Disable, err = boolean(m.name, v)
		case "_meta":
			err = object(m.name, v)
		default:
			// The redis policies' settings are accepted without a look, so that a redis
			// configuration is refused for its policy rather than for its first setting.
			if !isRedisField(m.name) {
				err = fmt.Errorf("%s: unknown field", m.name)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasCount {
		return nil, errors.New("count: is required (the requests allowed per key in each time_window)")
	}
	if !hasTimeWindow {
		return nil, errors.New("time_window: is required (the window length in seconds)")
	}
	return c, nil
}

func isRedisField(name string) bool {
	switch name {
	case "sync_interval", "sentinel_username", "sentinel_password":
		return true
	}
	return strings.HasPrefix(name, "redis_")
}

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, refusing anything else, a
// repeated name (encoding/json would silently keep the last) and trailing data.
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("configuration must be a JSON object, got %s", show(raw))
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: appears twice; keep one", name)
		}
		seen[name] = true
		members = append(members, member{name, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return members, nil
}

func positiveInt(name string, v json.RawMessage, max int64) (int64, error) {
	n, ok := integer(v)
	if !ok || n < 1 {
		return 0, fmt.Errorf("%s: must be an integer > 0, got %s", name, show(v))
	}
	if n > max {
		return 0, fmt.Errorf("%s: must be at most %d, got %s", name, max, show(v))
	}
	return n, nil
}

func intIn(name string, v json.RawMessage, min, max int64) (int64, error) {
	n, ok := integer(v)
	if !ok || n < min || n > max {
		return 0, fmt.Errorf("%s: must be an integer from %d to %d, got %s", name, min, max, show(v))
	}
	return n, nil
}

// integer reads a JSON number with an integral value; like JSON Schema, 60.0 and 6e1
// count as the integer 60.
func integer(v json.RawMessage) (int64, bool) {
	s := string(v)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

func str(name string, v json.RawMessage, minLen int) (string, error) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("%s: must be a string, got %s", name, show(v))
	}
	if len(s) < minLen {
		return "", fmt.Errorf("%s: must not be empty", name)
	}
	return s, nil
}

func oneOf(name string, v json.RawMessage, allowed ...string) (string, error) {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		for _, a := range allowed {
			if s == a {
				return a, nil
			}
		}
	}
	return "", fmt.Errorf("%s: must be one of %s, got %s", name, quoteAll(allowed), show(v))
}

func boolean(name string, v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: must be true or false, got %s", name, show(v))
}

func object(name string, v json.RawMessage) error {
	if len(v) == 0 || v[0] != '{' {
		return fmt.Errorf("%s: must be an object, got %s", name, show(v))
	}
	return nil
}

// show renders a raw value for "got ..." in messages, cut short so an error stays one line.
func show(v json.RawMessage) string {
	const max = 40
	var compact bytes.Buffer
	s := strings.TrimSpace(string(v))
	if json.Compact(&compact, v) == nil {
		s = compact.String()
	}
	if s == "" {
		return "nothing"
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
