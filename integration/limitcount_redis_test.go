package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gw/internal/testredis"
)

// Three gateways of two workers each on one Redis enforce one limit exactly: count=100,
// 900 requests split over them (APISIX #6760: counted per node, each let 100 through).
// The same holds with policy redis-cluster on a three-node cluster.
func TestLimitCountRedisExactAcrossGateways(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	cluster := testredis.StartCluster(t)
	nodes, _ := json.Marshal(cluster.Addrs())
	for _, tt := range []struct{ name, policy string }{
		{"redis", fmt.Sprintf(`"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d`, s.Port)},
		{"redis-cluster", fmt.Sprintf(`"policy": "redis-cluster", "redis_cluster_nodes": %s, "redis_cluster_name": "c1"`, nodes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			config := `{"count": 100, "time_window": 60, "rejected_code": 503, "key": "remote_addr", ` + tt.policy + `}`
			var gateways []*instance
			for range 3 {
				in := newInstance(t, "")
				in.start("--workers", "2")
				in.putLimitedRoute("1", "/exact", up.addr, config)
				gateways = append(gateways, in)
			}
			results := make(chan burst, len(gateways))
			for _, in := range gateways {
				go func() { results <- sendBurst(t, in.data, "/exact", 300, 25) }()
			}
			passed, rejected, errors := 0, 0, 0
			for range gateways {
				b := <-results
				passed += b.statuses[200]
				rejected += b.statuses[503]
				errors += b.errors + len(b.statuses) - min(len(b.statuses), 2)
				for code, n := range b.statuses {
					if code != 200 && code != 503 {
						t.Errorf("%d answers %d", n, code)
					}
				}
			}
			if passed != 100 || rejected != 800 || errors != 0 {
				t.Fatalf("passed %d, rejected %d, %d errors over three gateways; want exactly 100 and 800\nerror.log:\n%s",
					passed, rejected, errors, lastLines(gateways[0].errorLog(), 20))
			}
			// Every gateway sees the same window: one more request on any is rejected.
			for i, in := range gateways {
				if status, remaining := in.remaining("/exact"); status != 503 || remaining != 0 {
					t.Errorf("gateway %d after the burst: %d with remaining %d, want 503 and 0", i+1, status, remaining)
				}
			}
		})
	}
}

// A redis configuration the plugin cannot serve is refused by the Admin API, naming the
// field, and changes nothing (APISIX t/plugin/limit-count-redis.t TEST 1,
// limit-count-redis-cluster.t TEST 1).
func TestLimitCountRedisRefusedConfigurations(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	for _, tt := range []struct{ plugin, want string }{
		{`{"count": 2, "time_window": 60, "policy": "redis", "redis_port": 6379}`, `redis_host: is required with policy \"redis\"`},
		{`{"count": 2, "time_window": 60, "policy": "redis-cluster", "redis_cluster_name": "c"}`, `redis_cluster_nodes: is required with policy \"redis-cluster\"`},
		{`{"count": 2, "time_window": 60, "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 70000}`, `redis_port: must be an integer from 1 to 65535, got 70000`},
		{`{"count": 2, "time_window": 60, "policy": "redis", "redis_host": "127.0.0.1", "sync_interval": 0.01}`, `sync_interval: should not be smaller than 0.1, got 0.01`},
	} {
		body := `{"uri":"/r","plugins":{"limit-count":` + tt.plugin + `},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", body)
		if status != 400 || !strings.Contains(resp, `"error_msg":"failed to check the configuration of plugin limit-count err: `+tt.want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %s", tt.plugin, status, resp, tt.want)
		}
	}
	if status, _ := in.adminCall("GET", "/apisix/admin/routes/1", ""); status != 404 {
		t.Errorf("a refused route was stored: GET answers %d", status)
	}
}

// Redis stopped: a route answers 500 {"error_msg":"failed to limit count"}, or passes
// with allow_degradation, and either answer comes within redis_timeout and a margin; the
// error log says what failed, rate-limited. Redis back: the limit counts again.
func TestLimitCountRedisDown(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	redis := fmt.Sprintf(`"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d, "redis_timeout": 500`, s.Port)
	in.putLimitedRoute("1", "/strict", up.addr, `{"count": 100, "time_window": 60, `+redis+`}`)
	in.putLimitedRoute("2", "/lenient", up.addr, `{"count": 100, "time_window": 60, "allow_degradation": true, `+redis+`}`)
	if status, remaining := in.remaining("/strict"); status != 200 || remaining != 99 {
		t.Fatalf("with Redis up: %d, remaining %d", status, remaining)
	}
	if status, remaining := in.remaining("/lenient"); status != 200 || remaining != 99 {
		t.Fatalf("with Redis up: %d, remaining %d", status, remaining)
	}
	// Redis hung (SIGSTOP): its connections stay open and nothing answers; every answer
	// still comes within redis_timeout.
	s.Pause()
	for _, path := range []string{"/strict", "/lenient", "/strict"} {
		start := time.Now()
		resp, _ := in.get(path)
		took := time.Since(start)
		want := map[string]int{"/strict": 500, "/lenient": 200}[path]
		if resp.StatusCode != want {
			t.Errorf("Redis hung: %s answers %d, want %d", path, resp.StatusCode, want)
		}
		if took > 500*time.Millisecond+2*time.Second {
			t.Errorf("Redis hung: %s answered in %v, past redis_timeout (500ms) and a margin", path, took)
		}
	}
	s.Resume()
	if !waitFor(10*time.Second, func() bool {
		status, remaining := in.remaining("/strict")
		return status == 200 && remaining < 99
	}) {
		t.Fatalf("the limit does not count again once Redis resumes\n%s", lastLines(in.errorLog(), 20))
	}
	s.Stop()
	for range 5 {
		start := time.Now()
		resp, body := in.get("/strict")
		took := time.Since(start)
		if resp.StatusCode != 500 || strings.TrimSpace(body) != `{"error_msg":"failed to limit count"}` {
			t.Errorf("Redis down: %d %s, want 500 {\"error_msg\":\"failed to limit count\"}", resp.StatusCode, body)
		}
		if took > 500*time.Millisecond+2*time.Second {
			t.Errorf("Redis down: the answer took %v, past redis_timeout (500ms) and a margin", took)
		}
		start = time.Now()
		resp, body = in.get("/lenient")
		took = time.Since(start)
		if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-RateLimit-Limit") != "" {
			t.Errorf("Redis down, allow_degradation: %d %q %v, want the upstream's 200 without quota headers", resp.StatusCode, body, resp.Header)
		}
		if took > 500*time.Millisecond+2*time.Second {
			t.Errorf("Redis down, allow_degradation: the answer took %v", took)
		}
	}
	if log := in.errorLog(); !strings.Contains(log, "limit-count: failed to limit count with redis 127.0.0.1:") {
		t.Errorf("the error log does not say Redis failed:\n%s", lastLines(log, 20))
	}
	s.Restart()
	if !waitFor(10*time.Second, func() bool {
		status, remaining := in.remaining("/strict")
		return status == 200 && remaining == 99 // a fresh Redis: a fresh window
	}) {
		t.Errorf("the limit does not count again once Redis is back\n%s", lastLines(in.errorLog(), 20))
	}
}

// sync_interval: counted in the node's shared memory and reconciled every interval; one
// gateway of two workers admits exactly count between them, and what it admitted
// reaches Redis within the interval, where a second gateway sees it.
func TestLimitCountRedisSyncInterval(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	config := fmt.Sprintf(`{"count": 50, "time_window": 60, "key_type": "constant", "key": "all", "sync_interval": 0.2,
		"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d}`, s.Port)
	a := newInstance(t, "")
	a.start("--workers", "2")
	a.putLimitedRoute("1", "/synced", up.addr, config)
	got := sendBurst(t, a.data, "/synced", 200, 20)
	if got.statuses[200] != 50 || got.statuses[503] != 150 || got.errors != 0 {
		t.Fatalf("two workers: %v and %d errors, want exactly 50 passed", got.statuses, got.errors)
	}
	if !waitFor(5*time.Second, func() bool {
		keys, _ := s.Do("KEYS", "plugin-limit-count:v1:*")
		v, err := s.Do("GET", keys)
		return err == nil && v == "50"
	}) {
		keys, _ := s.Do("KEYS", "plugin-limit-count:v1:*")
		v, err := s.Do("GET", keys)
		t.Fatalf("Redis holds %q (%v) for %q, want 50", v, err, keys)
	}
	b := newInstance(t, "")
	b.start("--workers", "1")
	b.putLimitedRoute("1", "/synced", up.addr, config)
	if status, remaining := b.remaining("/synced"); status != 503 || remaining != 0 {
		t.Errorf("a second gateway after the sync: %d with remaining %d, want 503 and 0", status, remaining)
	}
}
