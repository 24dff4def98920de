package limitconn

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

func buildRedisLimiter(t *testing.T, raw string, logs *[]string) *redisLimiter {
	t.Helper()
	var mu sync.Mutex
	env := &plugins.Env{Route: &plugins.RouteInfo{ID: "1"}, Shared: &plugins.Shared{Logf: func(f string, a ...any) {
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
	l.sleep = func(time.Duration) {}
	return l
}

// Two gateways (two limiters of one route on one Redis) count one key's requests in
// flight together: conn 1 and burst 1 take two, the third is rejected, and a request that
// ends gives its place back, on whichever gateway it ends. The key is a sorted set that
// expires (key_ttl).
func TestRedisInFlightAcrossGateways(t *testing.T) {
	s := testredis.Start(t)
	raw := fmt.Sprintf(`{"conn": 1, "burst": 1, "default_conn_delay": 0.01, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d, "key_ttl": 60}`, s.Port)
	a, b := buildRedisLimiter(t, raw, nil), buildRedisLimiter(t, raw, nil)
	code1, _, r1 := begin(a, "10.0.0.1")
	code2, _, r2 := begin(b, "10.0.0.1")
	code3, _, r3 := begin(a, "10.0.0.1")
	if code1 != 200 || code2 != 200 || code3 != 503 {
		t.Fatalf("three requests in flight on two gateways: %d %d %d, want 200 200 503", code1, code2, code3)
	}
	r3.end(a) // rejected: gives nothing back
	if code, _, r := begin(b, "10.0.0.1"); code != 503 {
		t.Fatalf("after a rejected request ended: %d, want 503 still", code)
	} else {
		r.end(b)
	}
	r1.end(a)
	code4, _, r4 := begin(b, "10.0.0.1")
	if code4 != 200 {
		t.Fatalf("after a request ended: %d, want 200", code4)
	}
	keys, _ := s.Do("KEYS", "limit_conn:*")
	if !strings.HasPrefix(keys, "limit_conn:/apisix/routes/1:") || !strings.HasSuffix(keys, ":10.0.0.1") {
		t.Errorf("keys %q", keys)
	}
	if ttl, _ := s.Do("TTL", keys); ttl == "-1" || ttl == "-2" {
		t.Errorf("the set has TTL %s, want key_ttl", ttl)
	}
	r2.end(b)
	r4.end(b)
	if n, _ := s.Do("ZCARD", keys); n != "0" {
		t.Errorf("%s requests still counted after all ended", n)
	}
}

// Exact under concurrency: 40 requests at once over two gateways, conn 3 and burst 2,
// none ending: exactly 5 take a place.
func TestRedisInFlightExact(t *testing.T) {
	s := testredis.Start(t)
	raw := fmt.Sprintf(`{"conn": 3, "burst": 2, "default_conn_delay": 0.01, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d}`, s.Port)
	a, b := buildRedisLimiter(t, raw, nil), buildRedisLimiter(t, raw, nil)
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			code, _, _ := begin(l, "10.0.0.1")
			mu.Lock()
			got[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if got[200] != 5 || got[503] != 35 {
		t.Fatalf("statuses %v, want exactly conn + burst (5) passed", got)
	}
}

// Redis down: 500 "failed to limit conn", or pass with allow_degradation.
func TestRedisInFlightUnreachable(t *testing.T) {
	s := testredis.Start(t)
	port := s.Port
	s.Stop()
	var logs []string
	base := fmt.Sprintf(`"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d, "redis_timeout": 300`, port)
	l := buildRedisLimiter(t, "{"+base+"}", &logs)
	if code, body, r := begin(l, "10.0.0.1"); code != 500 || body != "failed to limit conn" {
		t.Errorf("Redis down: %d %q", code, body)
	} else {
		r.end(l)
	}
	if len(logs) == 0 || !strings.HasPrefix(logs[0], "limit-conn: failed to limit conn with redis 127.0.0.1:") {
		t.Errorf("error log %q", logs)
	}
	degraded := buildRedisLimiter(t, "{"+base+`, "allow_degradation": true}`, nil)
	if code, _, r := begin(degraded, "10.0.0.1"); code != 200 {
		t.Errorf("Redis down with allow_degradation: %d", code)
	} else {
		r.end(degraded)
	}
}

// The same on a three-node cluster: the set is one key, on whichever node holds its slot.
func TestRedisInFlightCluster(t *testing.T) {
	c := testredis.StartCluster(t)
	nodes, _ := json.Marshal(c.Addrs())
	raw := fmt.Sprintf(`{"conn": 1, "burst": 1, "default_conn_delay": 0.01, "key": "remote_addr", "policy": "redis-cluster", "redis_cluster_nodes": %s, "redis_cluster_name": "c1"}`, nodes)
	a, b := buildRedisLimiter(t, raw, nil), buildRedisLimiter(t, raw, nil)
	code1, body, r1 := begin(a, "10.0.0.1")
	code2, _, r2 := begin(b, "10.0.0.1")
	code3, _, r3 := begin(a, "10.0.0.1")
	if code1 != 200 || code2 != 200 || code3 != 503 {
		t.Fatalf("three requests in flight on two gateways: %d %d %d (%s), want 200 200 503", code1, code2, code3, body)
	}
	r3.end(a)
	r1.end(a)
	code4, _, r4 := begin(b, "10.0.0.1")
	if code4 != 200 {
		t.Fatalf("after a request ended: %d, want 200", code4)
	}
	r2.end(b)
	r4.end(b)
}
