package limitconn

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
const Name = "limit-conn"

// Priority places limit-conn in the chain as APISIX does (higher runs first).
const Priority = 1003

func init() { plugins.Register(plugin{}) }

// plugin is limit-conn as the host sees it: its counts live in a shared-memory segment of
// its own, its part in the master gives back what dead workers held (ledger.go), and it
// only delays or rejects, leaving the request as it came.
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

// KeepsRequest: limit-conn only delays or rejects.
func (plugin) KeepsRequest() bool { return true }

// Config is one limit-conn configuration with APISIX's defaults applied. It is immutable
// once Parse returns it and safe to share between goroutines.
type Config struct {
	// Conn is the requests in flight allowed per key.
	Conn int64 `json:"conn"`
	// Burst is how many more are delayed rather than rejected.
	Burst int64 `json:"burst"`
	// DefaultConnDelay is the seconds a request beyond conn waits per conn ahead of it,
	// at first: the worker then learns it from requests' latencies, unless
	// OnlyUseDefaultDelay.
	DefaultConnDelay    float64 `json:"default_conn_delay"`
	OnlyUseDefaultDelay bool    `json:"only_use_default_delay"`
	// KeyType says how Key is read: "var" or "var_combination".
	KeyType string `json:"key_type"`
	Key     string `json:"key"`
	// RejectedCode is the status of a rejected request, 200-599.
	RejectedCode int `json:"rejected_code"`
	// RejectedMsg, when set, is sent as {"error_msg": RejectedMsg} with a rejection.
	RejectedMsg string `json:"rejected_msg,omitempty"`
	// AllowDegradation lets requests through when the count cannot be kept (the
	// table's bucket for the key is full of keys in flight); without it they are
	// answered 500, as APISIX answers a failing shared dict.
	AllowDegradation bool `json:"allow_degradation"`
	// Policy is where counts live: "local" (this gateway's workers, in shared memory),
	// "redis" or "redis-cluster" (every gateway on those servers).
	Policy string `json:"policy"`
	// KeyTTL is the seconds a request in flight counts in Redis at most (APISIX's
	// key_ttl): what a gateway that died, or lost Redis, while holding it keeps held.
	KeyTTL int64 `json:"key_ttl,omitempty"`
	// Redis is the redis policies' servers; zero with policy local.
	Redis redispolicy.Config `json:"-"`
	// Disable turns the plugin off on this route while keeping its configuration.
	Disable bool `json:"disable,omitempty"`
}

// maxInFlight is the most requests in flight a key may have, conn + burst: what a count
// holds in its slot's payload (ledger.go).
const maxInFlight = countMax

// maxDelay bounds default_conn_delay: a day, far past any client's patience.
const maxDelay = 86400

// Parse decodes one limit-conn configuration strictly, applies the defaults and
// validates it. The error names the offending field and, where there is one, its value.
func Parse(raw json.RawMessage) (*Config, error) {
	members, err := pluginconf.Compact.Members(raw)
	if err != nil {
		return nil, err
	}
	c := &Config{KeyType: "var", RejectedCode: 503, Policy: "local"}
	var hasConn, hasBurst, hasDelay, hasKey bool
	for _, m := range members {
		switch m.Name {
		case "conn":
			if len(m.Value) > 0 && m.Value[0] == '"' {
				return nil, fmt.Errorf("conn: a variable (%s) is not supported yet; give a number", m.Show())
			}
			c.Conn, err = m.PositiveInt(maxInFlight)
			hasConn = true
		case "burst":
			if len(m.Value) > 0 && m.Value[0] == '"' {
				return nil, fmt.Errorf("burst: a variable (%s) is not supported yet; give a number", m.Show())
			}
			c.Burst, err = m.IntIn(0, maxInFlight)
			hasBurst = true
		case "default_conn_delay":
			c.DefaultConnDelay, err = number(m)
			if err == nil && (c.DefaultConnDelay <= 0 || c.DefaultConnDelay > maxDelay) {
				err = fmt.Errorf("default_conn_delay: must be above 0 and at most %d seconds, got %s", maxDelay, m.Show())
			}
			hasDelay = true
		case "only_use_default_delay":
			c.OnlyUseDefaultDelay, err = m.Bool()
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
		case "allow_degradation":
			c.AllowDegradation, err = m.Bool()
		case "policy":
			c.Policy, err = m.OneOf("local", "redis", "redis-cluster")
		case "key_ttl":
			c.KeyTTL, err = m.PositiveInt(math.MaxInt32)
		case "rules":
			err = errors.New("rules: not supported yet; use conn, burst and key")
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
	case !hasConn:
		return nil, errors.New("conn: is required (the requests in flight allowed per key)")
	case !hasBurst:
		return nil, errors.New("burst: is required (the requests beyond conn delayed rather than rejected; 0 for none)")
	case !hasDelay:
		return nil, errors.New("default_conn_delay: is required (the seconds a request beyond conn waits, at first)")
	case !hasKey:
		return nil, errors.New("key: is required (the variable to limit by, such as remote_addr)")
	}
	if c.Conn+c.Burst > maxInFlight {
		return nil, fmt.Errorf("burst: conn %d and burst %d allow %d requests in flight; at most %d", c.Conn, c.Burst,
			c.Conn+c.Burst, maxInFlight)
	}
	if err := c.Redis.Finish(c.Policy); err != nil {
		return nil, err
	}
	if c.Policy == "local" {
		c.KeyTTL = 0
	} else if c.KeyTTL == 0 {
		c.KeyTTL = 3600
	}
	if _, err := limitkey.Parse(c.KeyType, c.Key); err != nil {
		return nil, err
	}
	return c, nil
}

// sentinelOnly names limit-count's redis-sentinel settings, which redispolicy passes over
// for that policy's sake: limit-conn has no such policy, so they are unknown here.
func sentinelOnly(name string) bool {
	switch name {
	case "redis_sentinels", "redis_master_name", "redis_role", "redis_connect_timeout", "redis_read_timeout",
		"sentinel_username", "sentinel_password":
		return true
	}
	return false
}

// redisVersion is the configuration's version in its Redis key (APISIX's conf_version):
// a CRC-32 of the canonical text and the redis settings, the same on every gateway.
func (c *Config) redisVersion() uint32 {
	text := c.canonical() + ";key_ttl=" + strconv.FormatInt(c.KeyTTL, 10)
	for _, s := range c.Redis.Settings(c.Policy) {
		text += ";" + s.Name + "=" + s.Value
	}
	return crc32.ChecksumIEEE([]byte(text))
}

// number reads a JSON number.
func number(m pluginconf.Member) (float64, error) {
	var f float64
	if len(m.Value) == 0 || (m.Value[0] != '-' && (m.Value[0] < '0' || m.Value[0] > '9')) || json.Unmarshal(m.Value, &f) != nil ||
		math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: must be a number, got %s", m.Name, m.Show())
	}
	return f, nil
}

// canonical is the configuration as text, for the count's key: a changed limit opens
// fresh counts, as APISIX keys them by the configuration's version. It names fields
// rather than marshalling the struct, so that it never changes across binaries.
func (c *Config) canonical() string {
	return "conn=" + strconv.FormatInt(c.Conn, 10) + ";burst=" + strconv.FormatInt(c.Burst, 10) +
		";key_type=" + strconv.Quote(c.KeyType) + ";key=" + strconv.Quote(c.Key)
}
