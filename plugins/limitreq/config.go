package limitreq

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"

	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/plugins/pluginconf"
	"gw/plugins/redispolicy"
)

// Name is the key under a route's "plugins" object.
const Name = "limit-req"

// Priority places limit-req in the chain as APISIX does (higher runs first).
const Priority = 1001

func init() { plugins.Register(plugin{}) }

// plugin is limit-req as the host sees it: its buckets live in a shared-memory segment of
// its own (handler.go), and it only delays or rejects, leaving the request as it came.
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

// KeepsRequest: limit-req only delays or rejects.
func (plugin) KeepsRequest() bool { return true }

// maxRate is the highest rate: a bucket's clock counts in units of 100 ns (tickNanos),
// and an interval must be at least one. minRate, one request a year, keeps an interval,
// like the bucket (maxBucketTicks), far within the clock's 56 bits.
const (
	maxRate = 1e7
	minRate = 1.0 / (365 * 24 * 3600)
)

// Config is one limit-req configuration with APISIX's defaults applied. It is immutable
// once Parse returns it and safe to share between goroutines.
type Config struct {
	// Rate is the requests allowed per second, above 0.
	Rate float64 `json:"rate"`
	// Burst is how many requests beyond the rate are delayed rather than rejected.
	Burst float64 `json:"burst"`
	// KeyType says how Key is read: "var" (one variable, such as remote_addr) or
	// "var_combination" (a string like "$remote_addr $http_x").
	KeyType string `json:"key_type"`
	Key     string `json:"key"`
	// RejectedCode is the status of a rejected request, 200-599.
	RejectedCode int `json:"rejected_code"`
	// RejectedMsg, when set, is sent as {"error_msg": RejectedMsg} with a rejection.
	RejectedMsg string `json:"rejected_msg,omitempty"`
	// NoDelay lets requests within burst through at once instead of delaying them.
	NoDelay bool `json:"nodelay"`
	// AllowDegradation lets requests through, unlimited, when the limiter is unavailable:
	// Redis unreachable or slower than redis_timeout, or, with policy local, a key's
	// bucket that cannot be taken within maxTries (its slot changing owner under it each
	// time), where it would otherwise be a 500.
	AllowDegradation bool `json:"allow_degradation"`
	// Policy is where buckets live: "local" (this gateway's workers, in shared memory),
	// "redis" or "redis-cluster" (every gateway on those servers).
	Policy string `json:"policy"`
	// Redis is the redis policies' servers; zero with policy local.
	Redis redispolicy.Config `json:"-"`
	// Disable turns the plugin off on this route while keeping its configuration.
	Disable bool `json:"disable,omitempty"`
}

// Parse decodes one limit-req configuration strictly, applies the defaults and validates
// it. The error names the offending field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{KeyType: "var", RejectedCode: 503, Policy: "local"}
	var hasRate, hasBurst, hasKey bool
	for _, m := range members {
		switch m.Name {
		case "rate":
			c.Rate, err = number(m)
			if err == nil && (c.Rate < minRate || c.Rate > maxRate) {
				err = fmt.Errorf("rate: must be at least one request a year (%g) and at most %d a second, got %s", minRate,
					int64(maxRate), m.Show())
			}
			hasRate = true
		case "burst":
			c.Burst, err = number(m)
			if err == nil && c.Burst < 0 {
				err = fmt.Errorf("burst: must be at least 0, got %s", m.Show())
			}
			hasBurst = true
		case "key_type":
			c.KeyType, err = m.OneOf("var", "var_combination")
		case "key":
			c.Key, err = m.AnyString()
			hasKey = true
		case "rejected_code":
			var code int64
			code, err = m.IntIn(200, 599)
			c.RejectedCode = int(code)
		case "rejected_msg":
			c.RejectedMsg, err = m.NonEmptyString()
		case "nodelay":
			c.NoDelay, err = m.Bool()
		case "allow_degradation":
			c.AllowDegradation, err = m.Bool()
		case "policy":
			c.Policy, err = m.OneOf("local", "redis", "redis-cluster")
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			var handled bool
			if !sentinelOnly(m.Name) {
				handled, err = c.Redis.ParseMember(m)
			}
			if !handled {
				err = fmt.Errorf("%s: unknown field", m.Name)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case !hasRate:
		return nil, errors.New("rate: is required (the requests allowed per second)")
	case !hasBurst:
		return nil, errors.New("burst: is required (the requests beyond rate delayed rather than rejected; 0 for none)")
	case !hasKey:
		return nil, errors.New("key: is required (the variable to limit by, such as remote_addr)")
	}
	if err := c.Redis.Finish(c.Policy); err != nil {
		return nil, err
	}
	if _, err := limitkey.Parse(c.KeyType, c.Key); err != nil {
		return nil, err
	}
	if c.Burst/c.Rate*1e7 > maxBucketTicks {
		return nil, fmt.Errorf("burst: %s at rate %s is a bucket of %.0f seconds; at most %d", fmtNumber(c.Burst),
			fmtNumber(c.Rate), c.Burst/c.Rate, int64(maxBucketTicks/1e7))
	}
	return c, nil
}

// maxBucketTicks bounds burst/rate, the longest a request waits: a year, far past any
// client's patience, and far within a payload.
const maxBucketTicks = 365 * 24 * 3600 * 1e7

// number reads a JSON number.
func number(m pluginconf.Member) (float64, error) {
	var f float64
	if len(m.Value) == 0 || (m.Value[0] != '-' && (m.Value[0] < '0' || m.Value[0] > '9')) || json.Unmarshal(m.Value, &f) != nil ||
		math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: must be a number, got %s", m.Name, m.Show())
	}
	return f, nil
}

func fmtNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// canonical is the configuration as text, for the bucket key: a new configuration opens
// fresh buckets, as APISIX keys them by the configuration's version. It names fields
// rather than marshalling the struct, so that it never changes across binaries and
// buckets survive a binary upgrade.
func (c *Config) canonical() string {
	return "rate=" + fmtNumber(c.Rate) + ";burst=" + fmtNumber(c.Burst) + ";key_type=" + strconv.Quote(c.KeyType) +
		";key=" + strconv.Quote(c.Key) + ";nodelay=" + strconv.FormatBool(c.NoDelay)
}

// sentinelOnly names limit-count's redis-sentinel settings, which redispolicy passes over
// for that policy's sake: limit-req has no such policy, so they are unknown here.
func sentinelOnly(name string) bool {
	switch name {
	case "redis_sentinels", "redis_master_name", "redis_role", "redis_connect_timeout", "redis_read_timeout",
		"sentinel_username", "sentinel_password":
		return true
	}
	return false
}

// redisVersion is the configuration's version in its Redis keys (APISIX's conf_version):
// a CRC-32 of the canonical text and the redis settings, the same on every gateway.
func (c *Config) redisVersion() uint32 {
	text := c.canonical()
	for _, s := range c.Redis.Settings(c.Policy) {
		text += ";" + s.Name + "=" + s.Value
	}
	return crc32.ChecksumIEEE([]byte(text))
}
