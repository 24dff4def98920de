package limitreq

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
		// t/plugin/limit-req.t TEST 1: sanity.
		{`{"rate": 1, "burst": 0, "rejected_code": 503, "key": "remote_addr"}`,
			Config{Rate: 1, Burst: 0, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "local"}},
		{`{"rate": 0.1, "burst": 0.1, "key": "server_addr", "key_type": "var", "nodelay": true, "allow_degradation": true}`,
			Config{Rate: 0.1, Burst: 0.1, KeyType: "var", Key: "server_addr", RejectedCode: 503, Policy: "local", NoDelay: true, AllowDegradation: true}},
		{`{"rate": 3, "burst": 2, "key": "consumer_name", "rejected_code": 429, "rejected_msg": "slow down", "policy": "local"}`,
			Config{Rate: 3, Burst: 2, KeyType: "var", Key: "consumer_name", RejectedCode: 429, RejectedMsg: "slow down", Policy: "local"}},
		{`{"rate": 1, "burst": 1, "key_type": "var_combination", "key": "$remote_addr $http_x_user", "disable": true, "_meta": {}}`,
			Config{Rate: 1, Burst: 1, KeyType: "var_combination", Key: "$remote_addr $http_x_user", RejectedCode: 503, Policy: "local", Disable: true}},
		{`{"rate": 1, "burst": 0, "key": ""}`, Config{Rate: 1, KeyType: "var", RejectedCode: 503, Policy: "local"}},
		{`{"rate": 10000000, "burst": 0, "key": "remote_addr"}`, Config{Rate: 1e7, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "local"}},
		// t/plugin/limit-req-redis.t TEST 1: the redis policy with APISIX's defaults.
		{`{"rate": 1, "burst": 2, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_timeout": 1001}`,
			Config{Rate: 1, Burst: 2, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "redis",
				Redis: redispolicy.Config{Host: "127.0.0.1", Port: 6379, Timeout: 1001, KeepaliveTimeout: 10000, KeepalivePool: 100}}},
		// The redis settings are checked, then dropped, with policy local.
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "redis_host": "127.0.0.1", "redis_port": 6380}`,
			Config{Rate: 1, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "local"}},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis-cluster", "redis_cluster_nodes": ["127.0.0.1:5000"], "redis_cluster_name": "c1"}`,
			Config{Rate: 1, KeyType: "var", Key: "remote_addr", RejectedCode: 503, Policy: "redis-cluster",
				Redis: redispolicy.Config{ClusterNodes: []string{"127.0.0.1:5000"}, ClusterName: "c1", Timeout: 1000, KeepaliveTimeout: 10000, KeepalivePool: 100}}},
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
		// t/plugin/limit-req.t TEST 2: wrong value of key (rate missing).
		{`{"burst": 0, "rejected_code": 503, "key": "remote_addr"}`, "rate: is required"},
		// TEST 7: wrong type; TEST 21: rate equal to 0.
		{`{"rate": -1, "burst": 0.1, "key": "remote_addr"}`, "rate: must be at least one request a year (3.1709791983764586e-08) and at most 10000000 a second, got -1"},
		{`{"rate": 0, "burst": 0, "key": "remote_addr"}`, "rate: must be at least one request a year"},
		{`{"rate": 1e-300, "burst": 0, "key": "remote_addr"}`, "rate: must be at least one request a year"},
		{`{"rate": 1e8, "burst": 0, "key": "remote_addr"}`, "rate: must be at least one request a year (3.1709791983764586e-08) and at most 10000000"},
		{`{"rate": "1", "burst": 0, "key": "remote_addr"}`, `rate: must be a number, got "1"`},
		{`{"rate": 1, "key": "remote_addr"}`, "burst: is required"},
		{`{"rate": 1, "burst": -1, "key": "remote_addr"}`, "burst: must be at least 0, got -1"},
		{`{"rate": 1, "burst": true, "key": "remote_addr"}`, "burst: must be a number, got true"},
		{`{"rate": 0.001, "burst": 1000000, "key": "remote_addr"}`, "burst: 1e+06 at rate 0.001 is a bucket of 1000000000 seconds; at most 31536000"},
		{`{"rate": 1, "burst": 0}`, "key: is required"},
		{`{"rate": 1, "burst": 0, "key": 1}`, "key: must be a string, got 1"},
		{`{"rate": 1, "burst": 0, "key": "no_such_var"}`, "key: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "key_type": "constant"}`, `key_type: must be one of "var", "var_combination", got "constant"`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "rejected_code": 600}`, "rejected_code: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "rejected_code": 199}`, "rejected_code: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "rejected_msg": ""}`, "rejected_msg: must not be empty"},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "nodelay": "yes"}`, "nodelay: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "allow_degradation": 1}`, "allow_degradation: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis"}`, `redis_host: is required with policy "redis"`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis-cluster", "redis_cluster_name": "c"}`, `redis_cluster_nodes: is required`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 0}`, `redis_port: must be an integer from 1 to 65535, got 0`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_sentinels": []}`, `redis_sentinels: unknown field`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "sync_interval": 1}`, `sync_interval: unknown field`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_password": "$env://GW_NO_SUCH_VAR"}`, `redis_password: $env://GW_NO_SUCH_VAR has no value`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "etcd"}`, `policy: must be one of`},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "count": 1}`, "count: unknown field"},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "_meta": 1}`, "_meta: "},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "disable": "no"}`, "disable: "},
		{`[]`, ""},
	}
	for _, tt := range reject {
		_, err := Parse([]byte(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}
