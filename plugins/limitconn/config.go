package limitconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gw/plugins"
	"gw/plugins/limitkey"
	"gw/plugins/pluginconf"
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
	// Policy is where counts live; only "local" (this gateway's workers) is supported.
	Policy string `json:"policy"`
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
			if err == nil && c.Policy != "local" {
				err = fmt.Errorf("policy: %q is not supported yet; use \"local\" (counts shared by every worker of this gateway)", c.Policy)
			}
		case "rules":
			err = errors.New("rules: not supported yet; use conn, burst and key")
		case "disable":
			c.Disable, err = m.Bool()
		case "_meta":
			err = m.Object()
		default:
			// The redis policies' settings are accepted without a look, so that a redis
			// configuration is refused for its policy rather than for its first setting.
			if !strings.HasPrefix(m.Name, "redis_") {
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
	if _, err := limitkey.Parse(c.KeyType, c.Key); err != nil {
		return nil, err
	}
	return c, nil
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
