package limitconn

import (
	"reflect"
	"strings"
	"testing"

	"gw/plugins/redispolicy"
)

func TestParse(t *testing.T) {
	accept := []struct {
		raw  string
		want Config
	}{
		// t/plugin/limit-conn.t TEST 1: sanity; TEST 3: add plugin.
		{`{"conn": 100, "burst": 50, "default_conn_delay": 0.1, "rejected_code": 503, "key": "remote_addr"}`,
			Config{Conn: 100, Burst: 50, DefaultConnDelay: 0.1, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "local"}},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 1, "key": "server_addr", "only_use_default_delay": true, "allow_degradation": true}`,
			Config{Conn: 1, DefaultConnDelay: 1, OnlyUseDefaultDelay: true, KeyType: "var", Key: "server_addr", RejectedCode: 503, Policy: "local", AllowDegradation: true}},
		{`{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "key_type": "var_combination", "key": "$consumer_name $remote_addr", "rejected_code": 429, "rejected_msg": "busy", "policy": "local", "disable": true, "_meta": {}}`,
			Config{Conn: 2, Burst: 1, DefaultConnDelay: 0.1, KeyType: "var_combination", Key: "$consumer_name $remote_addr", RejectedCode: 429, RejectedMsg: "busy", Policy: "local", Disable: true}},
		{`{"conn": 65535, "burst": 0, "default_conn_delay": 86400, "key": ""}`,
			Config{Conn: 65535, DefaultConnDelay: 86400, KeyType: "var", RejectedCode: 503, Policy: "local"}},
		// t/plugin/limit-conn-redis.t: the redis policy, with APISIX's key_ttl default.
		{`{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1"}`,
			Config{Conn: 2, Burst: 1, DefaultConnDelay: 0.1, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "redis", KeyTTL: 3600,
				Redis: redispolicy.Config{Host: "127.0.0.1", Port: 6379, Timeout: 1000, KeepaliveTimeout: 10000, KeepalivePool: 100}}},
		{`{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr", "key_ttl": 60, "redis_host": "127.0.0.1"}`,
			Config{Conn: 2, Burst: 1, DefaultConnDelay: 0.1, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "local"}},
	}
	for _, tt := range accept {
		c, err := Parse([]byte(tt.raw))
		if err != nil {
			t.Errorf("%s: %v", tt.raw, err)
			continue
		}
		c.Redis = c.Redis.Written()
		if !reflect.DeepEqual(*c, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.raw, *c, tt.want)
		}
	}
	reject := []struct{ raw, want string }{
		// t/plugin/limit-conn.t TEST 2: wrong value of key (conn missing); TEST 9:
		// missing key; TEST 10: wrong conn; TEST 34: wrong allow_degradation.
		{`{"burst": 50, "default_conn_delay": 0.1, "key": "remote_addr"}`, "conn: is required"},
		{`{"conn": 1, "burst": 1, "default_conn_delay": 0.1}`, "key: is required"},
		{`{"conn": -1, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr"}`, "conn: "},
		{`{"conn": 0, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr"}`, "conn: "},
		{`{"conn": 1, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr", "allow_degradation": "true"}`, "allow_degradation: "},
		{`{"conn": "$http_conn", "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr"}`, `conn: a variable ("$http_conn") is not supported yet`},
		{`{"conn": 1, "burst": "$http_burst", "default_conn_delay": 0.1, "key": "remote_addr"}`, "burst: a variable"},
		{`{"conn": 1.5, "burst": 1, "default_conn_delay": 0.1, "key": "remote_addr"}`, "conn: "},
		{`{"conn": 1, "default_conn_delay": 0.1, "key": "remote_addr"}`, "burst: is required"},
		{`{"conn": 1, "burst": -1, "default_conn_delay": 0.1, "key": "remote_addr"}`, "burst: "},
		{`{"conn": 60000, "burst": 6000, "default_conn_delay": 0.1, "key": "remote_addr"}`, "burst: conn 60000 and burst 6000 allow 66000 requests in flight; at most 65535"},
		{`{"conn": 1, "burst": 0, "key": "remote_addr"}`, "default_conn_delay: is required"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0, "key": "remote_addr"}`, "default_conn_delay: must be above 0"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": "1", "key": "remote_addr"}`, "default_conn_delay: must be a number"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "only_use_default_delay": 1}`, "only_use_default_delay: "},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "no_such_var"}`, "key: "},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "key_type": "constant"}`, "key_type: "},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "rejected_code": 600}`, "rejected_code: "},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "rejected_msg": ""}`, "rejected_msg: "},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis"}`, `redis_host: is required with policy "redis"`},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis", "redis_host": "h1", "key_ttl": 0}`, `key_ttl: must be an integer > 0, got 0`},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis", "redis_host": "h1", "redis_master_name": "m"}`, `redis_master_name: unknown field`},
		{`{"default_conn_delay": 0.1, "rules": [{"conn": 1, "burst": 0, "key": "remote_addr"}]}`, "rules: not supported yet"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "count": 1}`, "count: unknown field"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "disable": 1}`, "disable: "},
		{`"x"`, ""},
	}
	for _, tt := range reject {
		_, err := Parse([]byte(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}
