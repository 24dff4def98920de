package limitreq

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/internal/testredis"
	"gw/plugins"
)

// buildRedisLimiter builds route routeID's limit-req over Redis, as a gateway would, and
// records its waits instead of sleeping them.
func buildRedisLimiter(t *testing.T, routeID, raw string, logs *[]string) (*redisLimiter, *[]time.Duration) {
	t.Helper()
	var mu sync.Mutex
	env := &plugins.Env{Route: &plugins.RouteInfo{ID: routeID}, Shared: &plugins.Shared{Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if logs != nil {
			*logs = append(*logs, fmt.Sprintf(f, a...))
		}
	}}}
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		t.Fatalf("build %s: %v", raw, err)
	}
	l := instance.(*redisLimiter)
	var slept []time.Duration
	l.sleep = func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		slept = append(slept, d)
	}
	return l, &slept
}

func redisConf(port int, more string) string {
	return fmt.Sprintf(`{"rate": 0.1, "burst": 4, "key": "remote_addr", "nodelay": true, "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d%s}`,
		port, more)
}

// Two gateways (two limiters of one route on one Redis) share one bucket exactly: at
// rate 0.1 and burst 4, 40 concurrent requests pass 5 (the first, then burst), whichever
// gateway they reach (APISIX's four commands could let two take the last place). The
// bucket's keys are APISIX's.
func TestRedisBucketExactAcrossGateways(t *testing.T) {
	s := testredis.Start(t)
	raw := redisConf(s.Port, "")
	a, _ := buildRedisLimiter(t, "1", raw, nil)
	b, _ := buildRedisLimiter(t, "1", raw, nil)
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			code, _ := do(l, "10.0.0.1")
			mu.Lock()
			got[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if got[200] != 5 || got[503] != 35 {
		t.Fatalf("statuses %v, want exactly 5 passed (1 + burst 4) and 35 rejected", got)
	}
	keys, _ := s.Do("KEYS", "limit_req:*")
	cfg, _ := Parse(json.RawMessage(raw))
	prefix := fmt.Sprintf("limit_req:/apisix/routes/1:%d:10.0.0.1", cfg.redisVersion())
	if !strings.Contains(keys, prefix+"excess") || !strings.Contains(keys, prefix+"last") {
		t.Errorf("keys %q, want %sexcess and %slast", keys, prefix, prefix)
	}
	if ttl, _ := s.Do("PTTL", prefix+"excess"); ttl == "-1" || ttl == "-2" {
		t.Errorf("the bucket's key has PTTL %s: it must expire once drained", ttl)
	}
	// Another client has a bucket of its own.
	if code, _ := do(a, "10.0.0.2"); code != 200 {
		t.Errorf("another client: %d, want 200", code)
	}
}

// Without nodelay a request within burst waits its turn, excess/rate (t/plugin/limit-req-redis.t:
// rate 4 and burst 2, the third request of a burst waits about half a second).
func TestRedisBucketDelays(t *testing.T) {
	s := testredis.Start(t)
	l, slept := buildRedisLimiter(t, "1", fmt.Sprintf(`{"rate": 4, "burst": 2, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d}`, s.Port), nil)
	var codes []int
	for range 4 {
		code, _ := do(l, "10.0.0.1")
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 200 503]" {
		t.Fatalf("statuses %v, want three passed (1 + burst 2) then 503", codes)
	}
	if len(*slept) != 2 {
		t.Fatalf("waits %v, want two (the first request waits nothing)", *slept)
	}
	// 1 and 2 requests of excess at 4 a second, less what leaked between the requests.
	if w := (*slept)[0]; w < 100*time.Millisecond || w > 250*time.Millisecond {
		t.Errorf("the second request waits %s, want about 250ms", w)
	}
	if w := (*slept)[1]; w < 350*time.Millisecond || w > 500*time.Millisecond {
		t.Errorf("the third request waits %s, want about 500ms", w)
	}
}

// Redis unreachable: 500 "failed to limit req" within redis_timeout, logged; with
// allow_degradation the request passes.
func TestRedisBucketUnreachable(t *testing.T) {
	s := testredis.Start(t)
	port := s.Port
	s.Stop()
	var logs []string
	l, _ := buildRedisLimiter(t, "1", redisConf(port, `, "redis_timeout": 300`), &logs)
	start := time.Now()
	code, body := do(l, "10.0.0.1")
	if code != 500 || body != "failed to limit req" {
		t.Errorf("Redis down: %d %q, want 500 failed to limit req", code, body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the answer took %s with redis_timeout 300ms", took)
	}
	if len(logs) == 0 || !strings.HasPrefix(logs[0], "limit-req: failed to limit req with redis 127.0.0.1:") {
		t.Errorf("error log %q", logs)
	}
	degraded, _ := buildRedisLimiter(t, "2", redisConf(port, `, "redis_timeout": 300, "allow_degradation": true`), nil)
	if code, _ := do(degraded, "10.0.0.1"); code != 200 {
		t.Errorf("Redis down with allow_degradation: %d, want 200", code)
	}
}

// A three-node cluster: the bucket's two keys share a slot (a hash tag), so the script
// runs, and the limit is as exact.
func TestRedisBucketCluster(t *testing.T) {
	c := testredis.StartCluster(t)
	nodes, _ := json.Marshal(c.Addrs())
	raw := fmt.Sprintf(`{"rate": 0.1, "burst": 2, "key": "remote_addr", "nodelay": true, "policy": "redis-cluster", "redis_cluster_nodes": %s, "redis_cluster_name": "c1"}`, nodes)
	a, _ := buildRedisLimiter(t, "1", raw, nil)
	b, _ := buildRedisLimiter(t, "1", raw, nil)
	var codes []int
	for i := range 6 {
		l := a
		if i%2 == 1 {
			l = b
		}
		code, body := do(l, fmt.Sprintf("10.0.0.%d", 1+i/6))
		if code == 500 {
			t.Fatalf("request %d: 500 %s", i, body)
		}
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 200 503 503 503]" {
		t.Fatalf("statuses %v, want 1 + burst 2 passed", codes)
	}
}
