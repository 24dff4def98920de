package limitcount

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"gw/plugins"
)

// defaults is APISIX's limit-count defaults around the two required fields.
func defaults(count, timeWindow int64) Config {
	return Config{
		Count:                count,
		TimeWindow:           timeWindow,
		KeyType:              "var",
		Key:                  "remote_addr",
		RejectedCode:         503,
		Policy:               "local",
		ShowLimitQuotaHeader: true,
		WindowType:           "fixed",
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		json string
		want func(c *Config) // changes from defaults(100, 60)
	}{
		{"seed: benchmark config", `{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`,
			func(c *Config) { c.Count = 2000000000000 }},
		{"seed: APISIX benchmark config", `{"count": 999999999, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`,
			func(c *Config) { c.Count = 999999999 }},
		{"required only", `{"count": 100, "time_window": 60}`, func(c *Config) {}},
		{"whitespace", " \n{ \"time_window\" : 60 ,\n \"count\" : 100 }\n", func(c *Config) {}},
		{"count 1", `{"count": 1, "time_window": 60}`, func(c *Config) { c.Count = 1 }},
		{"count max int64", `{"count": 9223372036854775807, "time_window": 60}`, func(c *Config) { c.Count = 9223372036854775807 }},
		{"integral float", `{"count": 100.0, "time_window": 6e1}`, func(c *Config) {}},
		{"time_window 1", `{"count": 100, "time_window": 1}`, func(c *Config) { c.TimeWindow = 1 }},
		{"time_window max", `{"count": 100, "time_window": 10737418}`, func(c *Config) { c.TimeWindow = 10737418 }},
		{"the counter's maximum over the longest window", `{"count": 4294967295, "time_window": 10737418}`,
			func(c *Config) { c.Count, c.TimeWindow = 4294967295, 10737418 }},
		{"past the counter's maximum in the longest window it allows", `{"count": 4294967296, "time_window": 4294}`,
			func(c *Config) { c.Count, c.TimeWindow = 4294967296, 4294 }},
		{"seed 004: Kong's hour=999999999999", `{"count": 999999999999, "time_window": 3600}`,
			func(c *Config) { c.Count, c.TimeWindow = 999999999999, 3600 }},
		{"key_type var_combination", `{"count": 100, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr $http_x"}`,
			func(c *Config) { c.KeyType, c.Key = "var_combination", "$remote_addr $http_x" }},
		{"key_type constant", `{"count": 100, "time_window": 60, "key_type": "constant", "key": "all"}`,
			func(c *Config) { c.KeyType, c.Key = "constant", "all" }},
		{"empty key", `{"count": 100, "time_window": 60, "key": ""}`, func(c *Config) { c.Key = "" }},
		{"rejected_code 200", `{"count": 100, "time_window": 60, "rejected_code": 200}`, func(c *Config) { c.RejectedCode = 200 }},
		{"rejected_code 599", `{"count": 100, "time_window": 60, "rejected_code": 599}`, func(c *Config) { c.RejectedCode = 599 }},
		{"rejected_code 429", `{"count": 100, "time_window": 60, "rejected_code": 429}`, func(c *Config) { c.RejectedCode = 429 }},
		{"rejected_msg", `{"count": 100, "time_window": 60, "rejected_msg": "slow down \u00e9"}`, func(c *Config) { c.RejectedMsg = "slow down é" }},
		{"policy local", `{"count": 100, "time_window": 60, "policy": "local"}`, func(c *Config) {}},
		{"local policy ignores redis settings", `{"count": 100, "time_window": 60, "policy": "local", "redis_host": "127.0.0.1", "redis_port": 6379, "sync_interval": -1}`,
			func(c *Config) {}},
		{"local policy checks but drops redis settings", `{"count": 100, "time_window": 60, "redis_cluster_nodes": ["a:1"], "redis_cluster_name": "c", "sync_interval": 0}`,
			func(c *Config) {}},
		// APISIX t/plugin/limit-count-redis.t TEST 2.
		{"policy redis", `{"count": 100, "time_window": 60, "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 6379, "redis_timeout": 1001, "redis_password": "x"}`,
			func(c *Config) {
				c.Policy = "redis"
				c.RedisConfig = RedisConfig{Host: "127.0.0.1", Port: 6379, Password: "x", Timeout: 1001, KeepaliveTimeout: 10000, KeepalivePool: 100}
			}},
		// APISIX t/plugin/limit-count-redis.t TEST 3 (default value: port and timeout).
		{"policy redis, defaults", `{"count": 100, "time_window": 60, "redis_host": "127.0.0.1", "policy": "redis"}`,
			func(c *Config) {
				c.Policy = "redis"
				c.RedisConfig = RedisConfig{Host: "127.0.0.1", Port: 6379, Timeout: 1000, KeepaliveTimeout: 10000, KeepalivePool: 100}
			}},
		{"policy redis, every setting", `{"count": 100, "time_window": 60, "policy": "redis", "redis_host": "redis.internal", "redis_port": 6380,
			"redis_username": "alice", "redis_password": "", "redis_database": 3, "redis_timeout": 50, "redis_ssl": true, "redis_ssl_verify": true,
			"redis_keepalive_timeout": 1000, "redis_keepalive_pool": 5, "sync_interval": 0.1}`,
			func(c *Config) {
				c.Policy, c.SyncInterval = "redis", 0.1
				c.RedisConfig = RedisConfig{Host: "redis.internal", Port: 6380, Username: "alice", Database: 3, Timeout: 50, SSL: true,
					SSLVerify: true, KeepaliveTimeout: 1000, KeepalivePool: 5}
			}},
		{"sync_interval -1 is off", `{"count": 100, "time_window": 60, "policy": "redis", "redis_host": "h1", "sync_interval": -1}`,
			func(c *Config) {
				c.Policy = "redis"
				c.RedisConfig = RedisConfig{Host: "h1", Port: 6379, Timeout: 1000, KeepaliveTimeout: 10000, KeepalivePool: 100}
			}},
		// APISIX t/plugin/limit-count-redis-cluster.t TEST 2.
		{"policy redis-cluster", `{"count": 100, "time_window": 60, "policy": "redis-cluster", "redis_cluster_nodes": ["127.0.0.1:5000", "[::1]:5001"],
			"redis_cluster_name": "redis-cluster-1", "redis_timeout": 1001, "redis_cluster_ssl": true, "redis_cluster_ssl_verify": false, "sync_interval": 59.9}`,
			func(c *Config) {
				c.Policy, c.SyncInterval = "redis-cluster", 59.9
				c.RedisConfig = RedisConfig{ClusterNodes: []string{"127.0.0.1:5000", "[::1]:5001"}, ClusterName: "redis-cluster-1", Timeout: 1001,
					ClusterSSL: true, KeepaliveTimeout: 10000, KeepalivePool: 100}
			}},
		{"allow_degradation", `{"count": 100, "time_window": 60, "allow_degradation": true}`, func(c *Config) { c.AllowDegradation = true }},
		{"hide quota headers", `{"count": 100, "time_window": 60, "show_limit_quota_header": false}`, func(c *Config) { c.ShowLimitQuotaHeader = false }},
		{"group", `{"count": 100, "time_window": 60, "group": "shared"}`, func(c *Config) { c.Group = "shared" }},
		{"window_type fixed", `{"count": 100, "time_window": 60, "window_type": "fixed"}`, func(c *Config) {}},
		{"disable", `{"count": 100, "time_window": 60, "disable": true}`, func(c *Config) { c.Disable = true }},
		{"_meta", `{"count": 100, "time_window": 60, "_meta": {"filter": [["arg_x", "==", "y"]], "anything": 1}}`, func(c *Config) {}},
		{"every field", `{"count": 5, "time_window": 10, "key_type": "var", "key": "http_x_user", "rejected_code": 429,
			"rejected_msg": "too many", "policy": "local", "allow_degradation": true, "show_limit_quota_header": false,
			"group": "g", "window_type": "fixed", "disable": false, "_meta": {}}`, func(c *Config) {
			*c = Config{Count: 5, TimeWindow: 10, KeyType: "var", Key: "http_x_user", RejectedCode: 429, RejectedMsg: "too many",
				Policy: "local", AllowDegradation: true, ShowLimitQuotaHeader: false, Group: "g", WindowType: "fixed"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(json.RawMessage(tt.json))
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.json, err)
			}
			want := defaults(100, 60)
			tt.want(&want)
			// The values the secret references resolved to are TestRedisSecretRefs's.
			got.RedisConfig = got.RedisConfig.Written()
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("Parse(%s)\n got %+v\nwant %+v", tt.json, *got, want)
			}
		})
	}
}

// A key naming a variable gw cannot read is refused, naming it, wherever it hides.
func TestParseRefusesUnknownVariables(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{`{"count": 1, "time_window": 60, "key": "no_such_var"}`, `key: unknown variable "no_such_var"; supported: uri,`},
		{`{"count": 1, "time_window": 60, "key": "$remote_addr"}`, `key: unknown variable "$remote_addr"`},
		{`{"count": 1, "time_window": 60, "key": "post_arg.user[?(@.a)]"}`, `key: invalid variable "post_arg.user[?(@.a)]": JSONPath filters and scripts`},
		{`{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr $nope"}`, `key: unknown variable "nope"`},
		{`{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr.$http_x"}`, `write ${remote_addr} when text follows`},
		{`{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "user-$1"}`, `$1: captures are filled by regex_uri`},
	} {
		_, err := Parse(json.RawMessage(tt.json))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tt.json, err, tt.want)
		}
	}
	// A constant is text, whatever it looks like.
	if _, err := Parse(json.RawMessage(`{"count": 1, "time_window": 60, "key_type": "constant", "key": "$nope"}`)); err != nil {
		t.Errorf("constant key: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	const base = `"count": 100, "time_window": 60`
	tests := []struct {
		name string
		json string
		want string // the whole message
	}{
		{"empty input", ``, `configuration must be a JSON object, got nothing`},
		{"null", `null`, `configuration must be a JSON object, got null`},
		{"array", `[1]`, `configuration must be a JSON object, got [1]`},
		{"string", `"x"`, `configuration must be a JSON object, got "x"`},
		{"broken JSON", `{"count": 100,`, `invalid JSON: EOF`},
		{"trailing data", `{` + base + `} {}`, `invalid JSON: data after the object`},
		{"missing count", `{"time_window": 60}`, `count: is required (the requests allowed per key in each time_window)`},
		{"missing time_window", `{"count": 100}`, `time_window: is required (the window length in seconds)`},
		{"empty object", `{}`, `count: is required (the requests allowed per key in each time_window)`},
		{"unknown field", `{` + base + `, "burst": 1}`, `burst: unknown field`},
		{"unknown field before count", `{"conut": 100, "time_window": 60}`, `conut: unknown field`},
		{"repeated field", `{` + base + `, "count": 5}`, `count: appears twice; keep one`},
		{"count zero", `{"count": 0, "time_window": 60}`, `count: must be an integer > 0, got 0`},
		{"count negative", `{"count": -1, "time_window": 60}`, `count: must be an integer > 0, got -1`},
		{"count string", `{"count": "100", "time_window": 60}`, `count: must be an integer > 0, got "100"`},
		{"count expression string", `{"count": "$http_limit", "time_window": 60}`, `count: must be an integer > 0, got "$http_limit"`},
		{"count fraction", `{"count": 1.5, "time_window": 60}`, `count: must be an integer > 0, got 1.5`},
		{"count null", `{"count": null, "time_window": 60}`, `count: must be an integer > 0, got null`},
		{"count bool", `{"count": true, "time_window": 60}`, `count: must be an integer > 0, got true`},
		{"count beyond int64", `{"count": 9223372036854775808, "time_window": 60}`, `count: must be an integer from 1 to 9223372036854775807, got 9223372036854775808`},
		{"time_window zero", `{"count": 100, "time_window": 0}`, `time_window: must be an integer > 0, got 0`},
		{"time_window string", `{"count": 100, "time_window": "60"}`, `time_window: must be an integer > 0, got "60"`},
		{"time_window duration string", `{"count": 100, "time_window": "1m"}`, `time_window: must be an integer > 0, got "1m"`},
		{"time_window too long", `{"count": 100, "time_window": 10737419}`, `time_window: must be an integer from 1 to 10737418, got 10737419`},
		{"time_window past time.Duration", `{"count": 100, "time_window": 9223372037}`, `time_window: must be an integer from 1 to 10737418, got 9223372037`},
		{"past the counter's maximum one second longer", `{"count": 4294967296, "time_window": 4295}`,
			`count: above 4294967295 (where the shared counter stops, so the limit never rejects) needs a time_window of at most 4294 seconds, got count 4294967296 with time_window 4295; lower one of them`},
		{"benchmark's count over a day", `{"count": 2000000000000, "time_window": 86400}`,
			`count: above 4294967295 (where the shared counter stops, so the limit never rejects) needs a time_window of at most 4294 seconds, got count 2000000000000 with time_window 86400; lower one of them`},
		{"key_type unknown", `{` + base + `, "key_type": "header"}`, `key_type: must be one of "var", "var_combination", "constant", got "header"`},
		{"key number", `{` + base + `, "key": 1}`, `key: must be a string, got 1`},
		{"rejected_code 199", `{` + base + `, "rejected_code": 199}`, `rejected_code: must be an integer from 200 to 599, got 199`},
		{"rejected_code 600", `{` + base + `, "rejected_code": 600}`, `rejected_code: must be an integer from 200 to 599, got 600`},
		{"rejected_code string", `{` + base + `, "rejected_code": "503"}`, `rejected_code: must be an integer from 200 to 599, got "503"`},
		{"rejected_msg empty", `{` + base + `, "rejected_msg": ""}`, `rejected_msg: must not be empty`},
		{"rejected_msg object", `{` + base + `, "rejected_msg": {"a": 1}}`, `rejected_msg: must be a string, got {"a":1}`},
		{"policy unknown", `{` + base + `, "policy": "memcached"}`, `policy: must be one of "local", "redis", "redis-cluster", "redis-sentinel", got "memcached"`},
		{"policy redis-sentinel", `{` + base + `, "policy": "redis-sentinel", "redis_sentinels": [{"host": "a", "port": 1}], "redis_master_name": "m", "sentinel_password": "p"}`,
			`policy "redis-sentinel" is not supported yet; use "redis", "redis-cluster" or "local"`},
		// APISIX t/plugin/limit-count-redis.t TEST 1 ("then clause did not match").
		{"policy redis without redis_host", `{` + base + `, "policy": "redis", "redis_port": 6379}`, `redis_host: is required with policy "redis"`},
		// APISIX t/plugin/limit-count-redis-cluster.t TEST 1 ("else clause did not match").
		{"policy redis-cluster without nodes", `{` + base + `, "policy": "redis-cluster", "redis_cluster_name": "c"}`,
			`redis_cluster_nodes: is required with policy "redis-cluster" (the cluster's "host:port" seeds)`},
		{"policy redis-cluster without a name", `{` + base + `, "policy": "redis-cluster", "redis_cluster_nodes": ["127.0.0.1:5000"]}`,
			`redis_cluster_name: is required with policy "redis-cluster"`},
		// APISIX t/plugin/limit-count-redis-cluster.t TEST 12.
		{"redis_cluster_ssl string", `{` + base + `, "policy": "redis-cluster", "redis_cluster_nodes": ["127.0.0.1:5000"], "redis_cluster_name": "c", "redis_cluster_ssl": "true"}`,
			`redis_cluster_ssl: must be true or false, got "true"`},
		{"redis_cluster_ssl_verify number", `{` + base + `, "redis_cluster_ssl_verify": 1}`, `redis_cluster_ssl_verify: must be true or false, got 1`},
		{"redis_host one character", `{` + base + `, "policy": "redis", "redis_host": "a"}`, `redis_host: must be at least 2 characters, got "a"`},
		{"redis_host number", `{` + base + `, "redis_host": 1}`, `redis_host: must be a string, got 1`},
		{"redis_port 0", `{` + base + `, "redis_port": 0}`, `redis_port: must be an integer from 1 to 65535, got 0`},
		{"redis_port 65536", `{` + base + `, "redis_port": 65536}`, `redis_port: must be an integer from 1 to 65535, got 65536`},
		{"redis_port string", `{` + base + `, "redis_port": "6379"}`, `redis_port: must be an integer from 1 to 65535, got "6379"`},
		{"redis_username empty", `{` + base + `, "redis_username": ""}`, `redis_username: must not be empty`},
		{"redis_password number", `{` + base + `, "redis_password": 1}`, `redis_password: must be a string, got 1`},
		{"redis_database negative", `{` + base + `, "redis_database": -1}`, `redis_database: must be an integer from 0 to 2147483647, got -1`},
		{"redis_timeout 0", `{` + base + `, "redis_timeout": 0}`, `redis_timeout: must be an integer > 0, got 0`},
		{"redis_timeout fraction", `{` + base + `, "redis_timeout": 0.5}`, `redis_timeout: must be an integer > 0, got 0.5`},
		{"redis_ssl string", `{` + base + `, "redis_ssl": "yes"}`, `redis_ssl: must be true or false, got "yes"`},
		{"redis_keepalive_timeout below a second", `{` + base + `, "redis_keepalive_timeout": 999}`,
			`redis_keepalive_timeout: must be an integer from 1000 to 2147483647, got 999`},
		{"redis_keepalive_pool 0", `{` + base + `, "redis_keepalive_pool": 0}`, `redis_keepalive_pool: must be an integer > 0, got 0`},
		{"redis_cluster_nodes empty", `{` + base + `, "redis_cluster_nodes": []}`,
			`redis_cluster_nodes: must be a non-empty array of "host:port" strings, got []`},
		{"redis_cluster_nodes string", `{` + base + `, "redis_cluster_nodes": "127.0.0.1:5000"}`,
			`redis_cluster_nodes: must be a non-empty array of "host:port" strings, got "127.0.0.1:5000"`},
		{"redis_cluster_nodes without a port", `{` + base + `, "redis_cluster_nodes": ["127.0.0.1:5000", "127.0.0.1"]}`,
			`redis_cluster_nodes[1]: must be "host:port" with a port from 1 to 65535, got "127.0.0.1"`},
		{"redis_cluster_nodes port 0", `{` + base + `, "redis_cluster_nodes": ["h:0"]}`,
			`redis_cluster_nodes[0]: must be "host:port" with a port from 1 to 65535, got "h:0"`},
		{"redis_cluster_name empty", `{` + base + `, "redis_cluster_name": ""}`, `redis_cluster_name: must not be empty`},
		{"unknown redis field", `{` + base + `, "policy": "redis", "redis_hots": "127.0.0.1"}`, `redis_hots: unknown field`},
		// APISIX init.lua's check_schema: "sync_interval should not be smaller than 0.1" and
		// "sync_interval should be smaller than time_window".
		{"sync_interval below 0.1", `{` + base + `, "policy": "redis", "redis_host": "h1", "sync_interval": 0.05}`,
			`sync_interval: should not be smaller than 0.1, got 0.05`},
		{"sync_interval 0", `{` + base + `, "policy": "redis", "redis_host": "h1", "sync_interval": 0}`,
			`sync_interval: should not be smaller than 0.1, got 0`},
		{"sync_interval negative", `{` + base + `, "policy": "redis", "redis_host": "h1", "sync_interval": -2}`,
			`sync_interval: should not be smaller than 0.1, got -2`},
		{"sync_interval the window", `{` + base + `, "policy": "redis", "redis_host": "h1", "sync_interval": 60}`,
			`sync_interval: should be smaller than time_window, got 60 with time_window 60`},
		{"sync_interval string", `{` + base + `, "sync_interval": "1s"}`, `sync_interval: must be a number of seconds, got "1s"`},
		{"allow_degradation string", `{` + base + `, "allow_degradation": "true"}`, `allow_degradation: must be true or false, got "true"`},
		{"show_limit_quota_header number", `{` + base + `, "show_limit_quota_header": 1}`, `show_limit_quota_header: must be true or false, got 1`},
		{"group empty", `{` + base + `, "group": ""}`, `group: must not be empty`},
		{"window_type sliding", `{` + base + `, "window_type": "sliding"}`, `window_type "sliding" is not supported yet; use "fixed"`},
		{"window_type unknown", `{` + base + `, "window_type": "rolling"}`, `window_type: must be one of "fixed", "sliding", got "rolling"`},
		{"rules", `{"rules": [{"count": 1, "time_window": 1, "key": "remote_addr"}]}`, `rules: not supported yet; use count and time_window`},
		{"disable string", `{` + base + `, "disable": "yes"}`, `disable: must be true or false, got "yes"`},
		{"_meta not an object", `{` + base + `, "_meta": []}`, `_meta: must be an object, got []`},
		{"long value cut short", `{"count": "` + strings.Repeat("é", 30) + `", "time_window": 60}`,
			`count: must be an integer > 0, got "` + strings.Repeat("é", 19) + `...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(json.RawMessage(tt.json))
			if err == nil {
				t.Fatalf("Parse(%s) = %+v, want error %q", tt.json, *c, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("Parse(%s)\n got error %q\nwant       %q", tt.json, err, tt.want)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	c := defaults(1, 90)
	if got := c.Window(); got != 90*time.Second {
		t.Fatalf("Window() = %v, want 1m30s", got)
	}
}

// The longest time_window Parse accepts is one the shared table keeps whole: a longer
// one used to be cut to the table's maximum.
func TestLongestWindowIsKeptWhole(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"count": 1, "time_window": 10737418}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(WindowTicks(c.Window())) * Tick; got != c.Window() {
		t.Errorf("a window of %v is kept as %v", c.Window(), got)
	}
	if _, err := Parse(json.RawMessage(`{"count": 1, "time_window": 10737419}`)); err == nil {
		t.Errorf("a window past the table's maximum was accepted")
	}
}

func TestRegistered(t *testing.T) {
	p, ok := plugins.Lookup("limit-count")
	if !ok {
		t.Fatal("limit-count is not registered")
	}
	if p.Priority() != 1002 {
		t.Errorf("priority = %d, want 1002 as in APISIX", p.Priority())
	}
	if err := p.Validate(json.RawMessage(`{"count": 1, "time_window": 1}`)); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
	if err := p.Validate(json.RawMessage(`{"count": 0, "time_window": 1}`)); err == nil {
		t.Error("Validate(count 0) = nil, want an error")
	}
	err := plugins.ValidateAll(map[string]json.RawMessage{"limit-count": json.RawMessage(`{"count": 1}`)})
	if err == nil || err.Error() != "failed to check the configuration of plugin limit-count err: time_window: is required (the window length in seconds)" {
		t.Errorf("ValidateAll error = %v", err)
	}
}

// FuzzParse checks that no input panics and that what Parse accepts is valid and survives
// a round trip through its own JSON form.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`,
		`{"count": 1, "time_window": 1, "policy": "redis", "redis_host": "h"}`,
		`{"count": 1, "time_window": 2, "policy": "redis", "redis_host": "hh", "sync_interval": 0.5}`,
		`{"count": 1, "time_window": 1, "policy": "redis-cluster", "redis_cluster_nodes": ["a:1"], "redis_cluster_name": "c"}`,
		`{"count": 1.0, "time_window": 1, "_meta": {"x": [1]}}`, `{}`, `[`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if c.Count < 1 || c.TimeWindow < 1 || c.Window() <= 0 || c.RejectedCode < 200 || c.RejectedCode > 599 || c.Policy == "redis-sentinel" || c.WindowType != "fixed" ||
			c.Policy == "redis" && (c.Host == "" || c.Port == 0 || c.Timeout < 1) || c.Policy == "redis-cluster" && (len(c.ClusterNodes) == 0 || c.ClusterName == "") ||
			c.SyncInterval != 0 && (c.SyncInterval < 0.1 || c.SyncInterval >= float64(c.TimeWindow)) {
			t.Fatalf("accepted an invalid config: %+v", *c)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %s: got %+v, %v; want %+v", out, again, err, *c)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	raw := json.RawMessage(`{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}
