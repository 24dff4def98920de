package limitcount

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"gw/plugins"
	"gw/plugins/pluginconf"
)

// Name is the key under a route's "plugins" object.
const Name = "limit-count"

// Priority places limit-count in the chain as APISIX does (higher runs first).
const Priority = 1002

func init() { plugins.Register(plugin{}) }

// plugin is limit-count as the host sees it: its counters live in a shared-memory
// segment of its own, its routes' instances share the snapshot's groups (handler.go), and
// it only counts, leaving the request as it came.
type plugin struct{}

var (
	_ plugins.Plugin          = plugin{}
	_ plugins.SnapshotChecker = plugin{}
	_ plugins.RequestKeeper   = plugin{}
)

func (plugin) Name() string  { return Name }
func (plugin) Priority() int { return Priority }

func (plugin) Validate(raw json.RawMessage) error {
	_, err := Parse(raw)
	return err
}

// KeepsRequest: limit-count only counts.
func (plugin) KeepsRequest() bool { return true }

const (
	// maxTimeWindow is the longest window the shared table keeps, in whole seconds
	// (10737418, 124 days): a longer one was cut to it without a word. APISIX has no
	// maximum.
	maxTimeWindow = int64(MaxWindowTicks * Tick / time.Second)
	// maxSaturatingWindow is the longest time_window a count above MaxUsed may have
	// (4294 s). The shared counter stops at MaxUsed, so a larger count never rejects;
	// that is what it says only while no key can send MaxUsed requests within one window,
	// and within this one that takes a million requests a second for one key, beyond
	// what one gateway serves. It keeps the limits users mean as "no limit": APISIX's
	// benchmark (count 2000000000000, time_window 60) and Kong's hour=999999999999 (seed
	// 004, time_window 3600).
	maxSaturatingWindow = MaxUsed / 1_000_000
)

// Config is one limit-count configuration with APISIX's defaults applied. It is immutable
// once Parse returns it and safe to share between goroutines.
type Config struct {
	// Count is the number of requests allowed per key in each window.
	Count int64 `json:"count"`
	// TimeWindow is the window length in seconds, at most maxTimeWindow; see Window.
	TimeWindow int64 `json:"time_window"`
	// KeyType says how Key is read: "var" (a variable such as remote_addr),
	// "var_combination" (a string like "$remote_addr $http_x") or "constant".
	KeyType string `json:"key_type"`
	Key     string `json:"key"`
	// RejectedCode is the status of a rejected request, 200-599.
	RejectedCode int `json:"rejected_code"`
	// RejectedMsg, when set, is sent as {"error_msg": RejectedMsg} with a rejection.
	RejectedMsg string `json:"rejected_msg,omitempty"`
	// Policy is where counters live: "local" (this gateway's shared memory), "redis" or
	// "redis-cluster" (RedisConfig's servers, shared by every gateway using them).
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
	// RedisConfig is the redis policies' servers; zero with policy local.
	RedisConfig
	// SyncInterval, in seconds, counts locally and reconciles with Redis this often
	// (APISIX 3.18's delayed sync); 0 sends every request to Redis (APISIX's -1).
	SyncInterval float64 `json:"sync_interval,omitempty"`
}

// Window is TimeWindow as a duration.
func (c *Config) Window() time.Duration { return time.Duration(c.TimeWindow) * time.Second }

// Parse decodes one limit-count configuration strictly, applies the defaults and
// validates it. The error names the offending field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
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
		switch m.Name {
		case "count":
			c.Count, err = m.PositiveInt(math.MaxInt64)
			hasCount = true
		case "time_window":
			c.TimeWindow, err = m.PositiveInt(maxTimeWindow)
			hasTimeWindow = true
		case "key_type":
			c.KeyType, err = m.OneOf("var", "var_combination", "constant")
		case "key":
			c.Key, err = m.AnyString()
		case "rejected_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.RejectedCode = int(code)
		case "rejected_msg":
			c.RejectedMsg, err = m.NonEmptyString()
		case "policy":
			c.Policy, err = m.OneOf("local", "redis", "redis-cluster", "redis-sentinel")
			if err == nil && c.Policy == "redis-sentinel" {
				err = fmt.Errorf("policy %q is not supported yet; use \"redis\", \"redis-cluster\" or \"local\"", c.Policy)
			}
		case "allow_degradation":
			c.AllowDegradation, err = m.Bool()
		case "show_limit_quota_header":
			c.ShowLimitQuotaHeader, err = m.Bool()
		case "group":
			c.Group, err = m.NonEmptyString()
		case "window_type":
			c.WindowType, err = m.OneOf("fixed", "sliding")
			if err == nil && c.WindowType != "fixed" {
				err = fmt.Errorf("window_type %q is not supported yet; use \"fixed\"", c.WindowType)
			}
		case "rules":
			err = errors.New("rules: not supported yet; use count and time_window")
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			var handled bool
			if handled, err = c.parseRedisMember(m); !handled {
				err = fmt.Errorf("%s: unknown field", m.Name)
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
	if err := c.finishRedis(); err != nil {
		return nil, err
	}
	if _, err := parseKey(c.KeyType, c.Key); err != nil {
		return nil, err
	}
	if c.Count > MaxUsed && c.TimeWindow > maxSaturatingWindow {
		return nil, fmt.Errorf("count: above %d (where the shared counter stops, so the limit never rejects) needs a time_window "+
			"of at most %d seconds, got count %d with time_window %d; lower one of them", int64(MaxUsed), maxSaturatingWindow,
			c.Count, c.TimeWindow)
	}
	return c, nil
}
