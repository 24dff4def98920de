package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gw/internal/testredis"
)

// Two gateways of two workers each on one Redis enforce one limit exactly: count=100,
// 600 requests split over both (APISIX #6760: counted per node, each let 100 through).
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
			for range 2 {
				in := newInstance(t, "")
				in.start("--workers", "2")
				in.putLimitedRoute("1", "/exact", up.addr, config)
				gateways = append(gateways, in)
			}
			results := make(chan burst, 2)
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
			if passed != 100 || rejected != 500 || errors != 0 {
				t.Fatalf("passed %d, rejected %d, %d errors over two gateways; want exactly 100 and 500\nerror.log:\n%s",
					passed, rejected, errors, lastLines(gateways[0].errorLog(), 20))
			}
			// Both gateways see the same window: one more request on either is rejected.
			for i, in := range gateways {
				if status, remaining := in.remaining("/exact"); status != 503 || remaining != 0 {
					t.Errorf("gateway %d after the burst: %d with remaining %d, want 503 and 0", i+1, status, remaining)
				}
			}
		})
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

// sync_interval: counted in each worker and reconciled every interval; one gateway of one
// worker admits exactly count, and what it admitted reaches Redis within the interval,
// where a second gateway sees it.
func TestLimitCountRedisSyncInterval(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	config := fmt.Sprintf(`{"count": 50, "time_window": 60, "key_type": "constant", "key": "all", "sync_interval": 0.2,
		"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d}`, s.Port)
	a := newInstance(t, "")
	a.start("--workers", "1")
	a.putLimitedRoute("1", "/synced", up.addr, config)
	got := sendBurst(t, a.data, "/synced", 200, 20)
	if got.statuses[200] != 50 || got.statuses[503] != 150 || got.errors != 0 {
		t.Fatalf("one worker: %v and %d errors, want exactly 50 passed", got.statuses, got.errors)
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
