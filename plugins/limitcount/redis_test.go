package limitcount

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/internal/testcert"
	"gw/internal/testnet"
	"gw/internal/testredis"
	"gw/plugins"
	"gw/plugins/redispolicy"
)

// redisConf is a limit-count configuration of count 2 with policy redis on s, plus more
// fields.
func redisConf(s *testredis.Server, more string) string { return redisConfN(s, 2, more) }

func redisConfN(s *testredis.Server, count int, more string) string {
	c := fmt.Sprintf(`{"count": %d, "time_window": 60, "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d`, count, s.Port)
	if more != "" {
		c += ", " + more
	}
	return c + "}"
}

// now is a request's clock for the redis policies, which read Redis's.
func now() time.Duration { return time.Duration(time.Now().UnixNano()) - epoch }

// APISIX t/plugin/limit-count-redis.t, TEST 2-6 (set route with redis host and port, up
// the limit): count 2, the third request is rejected, and the key is APISIX's.
func TestRedisWindow(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	raw := redisConf(s, `"rejected_code": 503, "key": "remote_addr", "redis_timeout": 1001`)
	a := f.build("1", raw)
	for i, want := range []request{
		{status: 200, limit: "2", remaining: "1", reset: "60"},
		{status: 200, limit: "2", remaining: "0", reset: "60"},
		{status: 503, limit: "2", remaining: "0", reset: "60"},
	} {
		got := do(a, "1", now(), "10.0.0.1")
		if got != want {
			t.Errorf("request %d: got %+v, want %+v", i+1, got, want)
		}
	}
	cfg, err := Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	key := "plugin-limit-count:v1:/apisix/routes/1:" + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(cfg.canonical()))), 10) + ":10.0.0.1"
	if v, err := s.Do("GET", key); err != nil || v != "3" {
		t.Errorf("GET %s = %q, %v; want 3 (rejected requests count in Redis, as in APISIX)", key, v, err)
	}
	if ttl, err := s.Do("TTL", key); err != nil || ttl != "60" && ttl != "59" {
		t.Errorf("TTL %s = %q, %v; want the window, 60", key, ttl, err)
	}
	// Another client has a window of its own.
	if got := do(a, "1", now(), "10.0.0.2"); got.status != 200 || got.remaining != "1" {
		t.Errorf("another client: %+v", got)
	}
}

// The key is the same wherever the route is built (APISIX #6760: a per-node part in the
// key made every node count alone); group keys are APISIX's, "<group>:<key>", so a gw and
// an APISIX sharing a Redis share a group's counters.
func TestRedisKeyIsTheSameOnEveryNode(t *testing.T) {
	s := testredis.Start(t)
	f1, f2 := newFixture(t, 64<<10, "evict"), newFixture(t, 64<<10, "evict")
	raw := redisConfN(s, 3, `"key": "http_x_user"`)
	a, b := f1.build("7", raw), f2.build("7", raw)
	var got []string
	for _, l := range []plugins.AccessPhase{a, b, a, b} {
		got = append(got, do(l, "7", now(), "10.0.0.1", "X-User", "ann").remaining)
	}
	if strings.Join(got, ",") != "2,1,0,0" {
		t.Errorf("remaining across two builds: %v, want 2,1,0,0", got)
	}
	g := f1.build("8", redisConf(s, `"group": "api", "key_type": "var_combination", "key": "$http_x_user-$arg_user"`))
	do(g, "8", now(), "10.0.0.1", "X-User", "ann")
	if v, err := s.Do("GET", "plugin-limit-count:v1:api:ann-arg-user"); err != nil || v != "1" {
		t.Errorf("group key: GET = %q, %v; want 1", v, err)
	}
	// A missing key counts by client address, as with the local policy.
	h := f1.build("9", redisConf(s, `"group": "users", "key": "http_x_user"`))
	do(h, "9", now(), "10.0.0.9")
	if v, err := s.Do("GET", "plugin-limit-count:v1:users:10.0.0.9"); err != nil || v != "1" {
		t.Errorf("fallback to remote_addr: GET = %q, %v; want 1", v, err)
	}
}

// A limit holds exactly across limiters and concurrent requests: count N, 3N requests
// from 30 goroutines over two instances, exactly N pass, and they see every
// X-RateLimit-Remaining from N-1 down to 0 once, as N requests in a row would, though
// each instance counts its concurrent requests in batches (coalescer).
func TestRedisExactUnderConcurrency(t *testing.T) {
	s := testredis.Start(t)
	const n = 50
	raw := redisConfN(s, n, `"key_type": "constant", "key": "all"`)
	f := newFixture(t, 64<<10, "evict")
	limiters := []plugins.AccessPhase{f.build("1", raw), newFixture(t, 64<<10, "evict").build("1", raw)}
	var passed, rejected atomic.Int64
	var mu sync.Mutex
	remaining := map[string]int{}
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Go(func() {
			for range 3 * n / 30 {
				switch r := do(limiters[g%2], "1", now(), "10.0.0.1"); r.status {
				case 200:
					passed.Add(1)
					mu.Lock()
					remaining[r.remaining]++
					mu.Unlock()
				case 503:
					rejected.Add(1)
				default:
					t.Errorf("status %d: %s", r.status, r.body)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != n || rejected.Load() != 2*n {
		t.Errorf("passed %d, rejected %d; want %d and %d", passed.Load(), rejected.Load(), n, 2*n)
	}
	for i := range n {
		if got := remaining[strconv.Itoa(i)]; got != 1 {
			t.Errorf("X-RateLimit-Remaining %d seen %d times, want once (all seen: %v)", i, got, remaining)
		}
	}
}

// APISIX t/plugin/limit-count-redis.t TEST 7-8: after SCRIPT FLUSH the script is sent
// again (EVALSHA's NOSCRIPT falls back to EVAL).
func TestRedisScriptFlushed(t *testing.T) {
	s := testredis.Start(t)
	a := newFixture(t, 64<<10, "evict").build("1", redisConf(s, ""))
	if got := do(a, "1", now(), "10.0.0.1"); got.status != 200 {
		t.Fatalf("first request: %+v", got)
	}
	if _, err := s.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if got := do(a, "1", now(), "10.0.0.1"); got.status != 200 || got.remaining != "0" {
		t.Errorf("after SCRIPT FLUSH: %+v, want 200 with remaining 0", got)
	}
}

// APISIX t/plugin/limit-count-redis.t TEST 9-21: with the right password (and username)
// the limit works; a wrong one fails every request with 500 "failed to limit count",
// and the error log says why.
func TestRedisAuth(t *testing.T) {
	s := testredis.Start(t, "--requirepass", "foobared")
	if _, err := s.Do("ACL", "SETUSER", "alice", "on", ">somepassword", "~*", "+@all"); err == nil {
		t.Fatal("ACL without AUTH succeeded: requirepass is not on")
	}
	f := newFixture(t, 64<<10, "evict")
	good := f.build("1", redisConf(s, `"redis_password": "foobared"`))
	if got := do(good, "1", now(), "10.0.0.1"); got.status != 200 || got.remaining != "1" {
		t.Errorf("right password: %+v", got)
	}
	bad := f.build("2", redisConf(s, `"redis_password": "WRONG_foobared"`))
	if got := do(bad, "2", now(), "10.0.0.1"); got.status != 500 || got.body != "failed to limit count" {
		t.Errorf("wrong password: %+v, want 500 failed to limit count", got)
	}
	f.mu.Lock()
	logged := strings.Join(f.logs, "\n")
	f.mu.Unlock()
	if !strings.Contains(logged, "WRONGPASS") {
		t.Errorf("the error log does not say why: %q", logged)
	}
	badUser := f.build("3", redisConf(s, `"redis_username": "nobody", "redis_password": "foobared"`))
	if got := do(badUser, "3", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("unknown username: %+v, want 500", got)
	}
}

// APISIX t/plugin/limit-count-redis2.t TEST 1-5: redis_database is SELECTed; one out of
// range fails the requests.
func TestRedisDatabase(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	if got := do(f.build("1", redisConf(s, `"redis_database": 999999`)), "1", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("database out of range: %+v, want 500", got)
	}
	if got := do(f.build("1", redisConf(s, `"redis_database": 1`)), "1", now(), "10.0.0.1"); got.status != 200 {
		t.Errorf("database 1: %+v", got)
	}
	if n, err := s.Do("DBSIZE"); err != nil || n != "0" {
		t.Errorf("database 0 holds %q keys (%v), want 0", n, err)
	}
	if keys, err := s.Do("EVAL", "redis.call('select', 1) return redis.call('dbsize')", "0"); err != nil || keys != "1" {
		t.Errorf("database 1 holds %q keys (%v), want 1", keys, err)
	}
}

// APISIX t/plugin/limit-count-redis2.t TEST 6-7 (wrong port, allow_degradation): Redis
// unreachable fails a request with 500 at once, or lets it through with
// allow_degradation; a server that accepts and never answers is given redis_timeout and
// no more.
func TestRedisUnreachable(t *testing.T) {
	refused := freePort(t)
	silent := testnet.Serve(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
	f := newFixture(t, 64<<10, "evict")
	for _, tt := range []struct {
		name, more string
		want       int
	}{
		{"refused", fmt.Sprintf(`"redis_port": %d`, refused), 500},
		{"refused, allow_degradation", fmt.Sprintf(`"redis_port": %d, "allow_degradation": true`, refused), 200},
		{"silent", fmt.Sprintf(`"redis_port": %d, "redis_timeout": 300`, silent.Port), 500},
		{"silent, allow_degradation", fmt.Sprintf(`"redis_port": %d, "redis_timeout": 300, "allow_degradation": true`, silent.Port), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := fmt.Sprintf(`{"count": 2, "time_window": 60, "policy": "redis", "redis_host": "127.0.0.1", %s}`, tt.more)
			a := f.build("1", raw)
			for i := range 3 {
				start := time.Now()
				got := do(a, "1", now(), "10.0.0.1")
				took := time.Since(start)
				if got.status != tt.want || tt.want == 500 && got.body != "failed to limit count" {
					t.Errorf("request %d: %+v, want %d", i+1, got, tt.want)
				}
				if got.limit != "" {
					t.Errorf("request %d: quota headers without a count: %+v", i+1, got)
				}
				// redis_timeout (1 s by default) plus a generous margin for a shared machine.
				if took > 3*time.Second {
					t.Errorf("request %d took %v, past redis_timeout", i+1, took)
				}
			}
		})
	}
}

// Redis stopped and started again: requests fail meanwhile and count again after.
func TestRedisRestarted(t *testing.T) {
	s := testredis.Start(t)
	a := newFixture(t, 64<<10, "evict").build("1", redisConfN(s, 100, `"redis_timeout": 500`))
	if got := do(a, "1", now(), "10.0.0.1"); got.status != 200 {
		t.Fatalf("before: %+v", got)
	}
	s.Stop()
	if got := do(a, "1", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("Redis stopped: %+v, want 500", got)
	}
	s.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := do(a, "1", now(), "10.0.0.1")
		if got.status == 200 {
			if got.remaining != "99" {
				t.Errorf("after the restart: remaining %s, want 99 (a fresh Redis)", got.remaining)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %+v 10s after Redis restarted", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// APISIX t/plugin/limit-count-redis-cluster.t TEST 3-8: policy redis-cluster counts in the
// cluster, and one reachable seed among unreachable ones is enough.
func TestRedisCluster(t *testing.T) {
	c := testredis.StartCluster(t)
	f := newFixture(t, 64<<10, "evict")
	nodes, _ := json.Marshal(c.Addrs())
	raw := fmt.Sprintf(`{"count": 2, "time_window": 60, "key": "remote_addr", "policy": "redis-cluster",
		"redis_cluster_nodes": %s, "redis_cluster_name": "redis-cluster-1", "redis_timeout": 1001}`, nodes)
	a := f.build("1", raw)
	var got []int
	for range 3 {
		got = append(got, do(a, "1", now(), "10.0.0.1").status)
	}
	if fmt.Sprint(got) != "[200 200 503]" {
		t.Errorf("statuses %v, want [200 200 503]", got)
	}
	// Many keys, spread over the three nodes' slots.
	for i := range 30 {
		if r := do(a, "1", now(), fmt.Sprintf("10.0.1.%d", i)); r.status != 200 || r.remaining != "1" {
			t.Fatalf("client %d: %+v", i, r)
		}
	}
	spread := 0
	for _, n := range c.Nodes {
		if k, err := n.Do("DBSIZE"); err == nil && k != "0" {
			spread++
		}
	}
	if spread != 3 {
		t.Errorf("keys on %d of the 3 nodes, want all", spread)
	}
	seeds, _ := json.Marshal([]string{fmt.Sprintf("127.0.0.1:%d", freePort(t)), c.Addrs()[1], fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	one := f.build("2", fmt.Sprintf(`{"count": 9999, "time_window": 60, "policy": "redis-cluster",
		"redis_cluster_nodes": %s, "redis_cluster_name": "redis-cluster-1"}`, seeds))
	for i := range 5 {
		if r := do(one, "2", now(), "10.0.0.1"); r.status != 200 {
			t.Fatalf("one seed of three: request %d: %+v", i+1, r)
		}
	}
}

// APISIX t/plugin/limit-count-redis-cluster.t TEST 10-11: no seed reachable, with
// allow_degradation: requests pass.
func TestRedisClusterUnreachable(t *testing.T) {
	f := newFixture(t, 64<<10, "evict")
	raw := fmt.Sprintf(`{"count": 2, "time_window": 60, "policy": "redis-cluster", "redis_cluster_nodes": ["127.0.0.1:%d", "127.0.0.1:%d"],
		"redis_cluster_name": "c", "redis_timeout": 300, "allow_degradation": %%t}`, freePort(t), freePort(t))
	if got := do(f.build("1", fmt.Sprintf(raw, true)), "1", now(), "10.0.0.1"); got.status != 200 {
		t.Errorf("allow_degradation: %+v, want 200", got)
	}
	if got := do(f.build("1", fmt.Sprintf(raw, false)), "1", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("no degradation: %+v, want 500", got)
	}
}

// sync_interval (APISIX t/plugin/limit-count-redis-delayed-sync.t TEST 1-2): within one
// worker the limit is exact; the admitted requests reach Redis within an interval.
func TestRedisSyncInterval(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	raw := redisConfN(s, 5, `"sync_interval": 0.1, "key_type": "constant", "key": "k"`)
	a := f.build("1", raw)
	var statuses []int
	for range 8 {
		statuses = append(statuses, do(a, "1", now(), "10.0.0.1").status)
	}
	if fmt.Sprint(statuses) != "[200 200 200 200 200 503 503 503]" {
		t.Errorf("statuses %v, want five 200 then 503", statuses)
	}
	keys, _ := s.Do("KEYS", "plugin-limit-count:v1:*")
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := s.Do("GET", keys)
		if err == nil && v == "5" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis holds %q (%v) for %q 5s on, want 5", v, err, keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a's cleanup stops its syncer: unreachable before the flush, a collection would let
	// it go unflushed (it did on a busy machine). A route table keeps a served one.
	runtime.KeepAlive(a)
	// Another gateway's requests, counted in Redis, are seen here at the next window's
	// sync: here, none is left.
	b := newFixture(t, 64<<10, "evict").build("1", raw)
	if got := do(b, "1", now(), "10.0.0.1"); got.status != 503 {
		t.Errorf("a second limiter after the sync: %+v, want 503", got)
	}
}

// Limiters of one configuration share one client, closed with the last of them.
func TestRedisClientIsShared(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	raw := redisConf(s, "")
	a := f.build("1", raw).(*redisLimiter)
	b := f.build("2", raw).(*redisLimiter)
	if a.client != b.client {
		t.Error("two routes on one Redis have two clients")
	}
	other := f.build("3", redisConf(s, `"redis_timeout": 999`)).(*redisLimiter)
	if other.client == a.client {
		t.Error("two configurations share a client")
	}
	rc := a.client
	release(cleanupOf{client: rc})
	if rc.Closed() {
		t.Error("the first release closed a client another limiter uses")
	}
	release(cleanupOf{client: rc})
	if !rc.Closed() {
		t.Error("the last release left the client open")
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// APISIX t/plugin/limit-count-redis2.t TEST 10: the routes of a group must agree on their
// redis settings too.
func TestRedisGroupMustAgree(t *testing.T) {
	a := `{"count": 2, "time_window": 60, "group": "g", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 6379}`
	b := `{"count": 2, "time_window": 60, "group": "g", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": 6380}`
	stored := snapshotWith(routeWith("1", a))
	err := plugin{}.CheckWrite(stored, "routes/2", json.RawMessage(b))
	if err == nil || !strings.Contains(err.Error(), "group conf mismatched") || !strings.Contains(err.Error(), "redis_port") {
		t.Errorf("CheckWrite = %v, want group conf mismatched naming redis_port", err)
	}
	if err := (plugin{}).CheckWrite(stored, "routes/2", json.RawMessage(a)); err != nil {
		t.Errorf("CheckWrite of an agreeing route = %v", err)
	}
}

// redisAllocs is what a request through the redis policy allocates: the reply's array,
// made by the client (the key is a view of a reused buffer, coalescer). With
// sync_interval a request between syncs allocates nothing.
const redisAllocs = 1

func TestRedisAccessAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	for _, tt := range []struct {
		config string
		max    float64
	}{
		{redisConfN(s, 2000000000, `"key": "remote_addr"`), redisAllocs},
		{redisConfN(s, 2000000000, `"key_type": "var_combination", "key": "$remote_addr $http_x_user $arg_user"`), redisAllocs},
		{redisConfN(s, 2000000000, `"key": "remote_addr", "sync_interval": 30`), 0},
	} {
		a := f.build("1", tt.config)
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1234}, nil)
		ctx.Request.SetRequestURI("/hello?user=u")
		ctx.Request.Header.Set("X-User", "ann")
		route := &plugins.RouteInfo{ID: "1"}
		var status int
		allocs := testing.AllocsPerRun(1000, func() {
			c := plugins.AcquireCtx(&ctx, route, time.Now().UnixNano())
			if err := a.Access(c); err != nil {
				status = 500
			}
			c.ApplyResponseHeaders()
			plugins.ReleaseCtx(c)
		})
		if status != 0 {
			t.Fatalf("%s: Redis failed", tt.config)
		}
		t.Logf("%s: %v allocations per request", tt.config, allocs)
		if allocs > tt.max {
			t.Errorf("%s: %v allocations per request, want at most %v", tt.config, allocs, tt.max)
		}
	}
}

// A limiter no snapshot holds any more gives its client back when it is collected: the
// last one closes it.
func TestRedisClientClosedWithItsLastLimiter(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	l := f.build("1", redisConf(s, `"redis_timeout": 777`)).(*redisLimiter)
	if got := do(l, "1", now(), "10.0.0.1"); got.status != 200 {
		t.Fatalf("request: %+v", got)
	}
	rc := l.client
	l = nil
	deadline := time.Now().Add(10 * time.Second)
	for !rc.Closed() {
		if time.Now().After(deadline) {
			t.Fatal("the client is still open 10s after its last limiter was dropped")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// APISIX t/plugin/limit-count-redis3.t TEST 5-9: redis_ssl talks TLS; with
// redis_ssl_verify a certificate nobody vouches for fails the handshake, so requests get
// 500, or pass with allow_degradation.
func TestRedisTLS(t *testing.T) {
	cert := testcert.SelfSigned(t, testcert.Options{Names: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	s := testredis.StartTLS(t, cert.CertPEM, cert.KeyPEM)
	f := newFixture(t, 64<<10, "evict")
	if got := do(f.build("1", redisConf(s, `"redis_ssl": true`)), "1", now(), "10.0.0.1"); got.status != 200 || got.remaining != "1" {
		t.Errorf("redis_ssl: %+v, want 200 with remaining 1", got)
	}
	if got := do(f.build("1", redisConf(s, `"redis_ssl": true, "redis_ssl_verify": true, "redis_timeout": 300`)), "1", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("redis_ssl_verify with an unknown certificate: %+v, want 500", got)
	}
	if got := do(f.build("1", redisConf(s, `"redis_ssl": true, "redis_ssl_verify": true, "redis_timeout": 300, "allow_degradation": true`)), "1", now(), "10.0.0.1"); got.status != 200 || got.limit != "" {
		t.Errorf("redis_ssl_verify with allow_degradation: %+v, want 200 without quota headers", got)
	}
	if got := do(f.build("1", redisConf(s, `"redis_timeout": 300`)), "1", now(), "10.0.0.1"); got.status != 500 {
		t.Errorf("plain text to a TLS server: %+v, want 500", got)
	}
}

// APISIX resolves limit-count's secret references at request time (fetch_secrets):
// redis_host, redis_username and redis_password may be "$env://NAME" (or NAME/member of a
// JSON value). The counter key keeps the reference as written; one without a value, or a
// $secret:// manager's, fails the configuration naming the field.
func TestRedisSecretRefs(t *testing.T) {
	s := testredis.Start(t, "--requirepass", "foobared")
	env := map[string]string{"GW_REDIS_PASS": "foobared", "GW_REDIS_HOST": "127.0.0.1", "GW_REDIS": `{"pass":"foobared"}`}
	redispolicy.LookupEnv = func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	t.Cleanup(func() { redispolicy.LookupEnv = os.LookupEnv })

	f := newFixture(t, 64<<10, "evict")
	conf := fmt.Sprintf(`{"count": 2, "time_window": 60, "policy": "redis", "redis_host": "$env://GW_REDIS_HOST", "redis_port": %d, `+
		`"redis_password": "$ENV://GW_REDIS_PASS"}`, s.Port)
	l := f.build("1", conf).(*redisLimiter)
	if got := do(l, "1", now(), "10.0.0.1"); got.status != 200 || got.remaining != "1" {
		t.Errorf("password and host from $env://: %+v", got)
	}
	cfg, err := Parse(json.RawMessage(conf))
	if err != nil || cfg.Password != "$ENV://GW_REDIS_PASS" || !strings.Contains(cfg.canonical(), "$ENV://GW_REDIS_PASS") ||
		strings.Contains(cfg.canonical(), "foobared") {
		t.Errorf("the configuration must keep the reference as written (and the key no password): %v %+v", err, cfg)
	}
	member := f.build("2", redisConf(s, `"redis_password": "$env://GW_REDIS/pass"`))
	if got := do(member, "2", now(), "10.0.0.1"); got.status != 200 {
		t.Errorf("password from a JSON member: %+v", got)
	}

	for _, c := range []struct{ more, want string }{
		{`"redis_password": "$env://GW_UNSET"`, `redis_password: $env://GW_UNSET has no value in the gateway's environment (unset, empty, or without that member)`},
		{`"redis_password": "$env://GW_REDIS/nope"`, `redis_password: $env://GW_REDIS/nope has no value`},
		{`"redis_username": "$env://GW_UNSET"`, `redis_username: $env://GW_UNSET has no value`},
		{`"redis_password": "$secret://vault/1/pass"`, `redis_password: secret managers ($secret://) are not supported yet`},
		{`"redis_password": "$env://1BAD"`, `redis_password: "$env://1BAD": the name after $env:// must be an environment variable name`},
	} {
		_, err := Parse(json.RawMessage(redisConf(s, c.more)))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.more, err, c.want)
		}
	}
	_, err = Parse(json.RawMessage(`{"count": 2, "time_window": 60, "policy": "redis", "redis_host": "$env://GW_UNSET"}`))
	if err == nil || !strings.HasPrefix(err.Error(), "redis_host: $env://GW_UNSET has no value") {
		t.Errorf("redis_host without a value: %v", err)
	}
	// With policy local the redis fields are ignored, references included.
	if _, err := Parse(json.RawMessage(`{"count": 2, "time_window": 60, "redis_password": "$env://GW_UNSET"}`)); err != nil {
		t.Errorf("policy local with an unresolved redis_password: %v", err)
	}
}

// redis_keepalive_timeout is APISIX's pool idle timeout: the worker's connection closes
// once unused that long, and the next request dials again.
func TestRedisKeepaliveTimeoutClosesIdleConnections(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	l := f.build("1", redisConfN(s, 100, `"redis_keepalive_timeout": 1000`)).(*redisLimiter)
	clients := func() int {
		list, err := s.Do("CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "name=gw ")
	}
	if got := do(l, "1", now(), "10.0.0.1"); got.status != 200 {
		t.Fatalf("request: %+v", got)
	}
	if n := clients(); n != 1 {
		list, _ := s.Do("CLIENT", "LIST")
		t.Fatalf("%d gw connections after a request, want 1:\n%s", n, list)
	}
	// Used every 200 ms for a while: it stays open.
	for range 8 {
		time.Sleep(200 * time.Millisecond)
		if got := do(l, "1", now(), "10.0.0.1"); got.status != 200 {
			t.Fatalf("request: %+v", got)
		}
	}
	if n := clients(); n != 1 {
		list, _ := s.Do("CLIENT", "LIST")
		t.Fatalf("%d gw connections while in use, want 1:\n%s", n, list)
	}
	deadline := time.Now().Add(10 * time.Second)
	for clients() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection is still open 10s into a 1s keepalive timeout with no request")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := do(l, "1", now(), "10.0.0.1"); got.status != 200 || got.remaining != "90" {
		t.Fatalf("the request after the idle close: %+v, want 200 and the count kept", got)
	}
	if n := clients(); n != 1 {
		t.Fatalf("%d gw connections after dialing again, want 1", n)
	}
	runtime.KeepAlive(l)
}

// With sync_interval a node's workers count one key together in shared memory: two
// limiters of one route on one node's segments (as two workers) admit exactly count
// between them, and the node adds its requests to Redis once an interval, not once per
// worker.
func TestRedisSyncIntervalSharedByWorkers(t *testing.T) {
	s := testredis.Start(t)
	f := newFixture(t, 64<<10, "evict")
	raw := redisConfN(s, 10, `"sync_interval": 0.2, "key_type": "constant", "key": "k"`)
	a, b := f.build("1", raw), f.build("1", raw)
	if a.(*redisLimiter).sync == b.(*redisLimiter).sync {
		t.Fatal("the two limiters share a syncer: they are not two workers")
	}
	admitted := 0
	for i := range 16 {
		w := a
		if i%2 == 1 {
			w = b
		}
		if got := do(w, "1", now(), "10.0.0.1"); got.status == 200 {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("two workers of one node admitted %d of 16 requests, want exactly count (10)", admitted)
	}
	keys, _ := s.Do("KEYS", "plugin-limit-count:v1:*")
	if !waitFor(t, 5*time.Second, func() bool { v, _ := s.Do("GET", keys); return v == "10" }) {
		v, _ := s.Do("GET", keys)
		t.Fatalf("Redis holds %q for %q, want the node's 10 admissions", v, keys)
	}

	// Flushes: one per interval for the node. A wider limit, requests on both workers
	// for 2s (about 10 intervals); flushing per worker would make about 20.
	raw = redisConfN(s, 1_000_000, `"sync_interval": 0.2, "key_type": "constant", "key": "busy"`)
	a, b = f.build("2", raw), f.build("2", raw)
	do(a, "2", now(), "10.0.0.1") // the first request syncs inline
	if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sent := 0
	for time.Since(start) < 2*time.Second {
		for _, w := range []plugins.AccessPhase{a, b} {
			if got := do(w, "2", now(), "10.0.0.1"); got.status != 200 {
				t.Fatalf("request: %+v", got)
			}
			sent++
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	busy, _ := s.Do("KEYS", "plugin-limit-count:v1:*busy")
	if !waitFor(t, 5*time.Second, func() bool { v, _ := s.Do("GET", busy); return v == strconv.Itoa(sent+1) }) {
		v, _ := s.Do("GET", busy)
		t.Fatalf("Redis holds %q, want the %d requests of both workers", v, sent+1)
	}
	stats, _ := s.Do("INFO", "commandstats")
	flushes := 0
	for _, line := range strings.Split(stats, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			calls, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, ":")+1:], "calls="), ",")
			n, _ := strconv.Atoi(calls)
			flushes += n
		}
	}
	intervals := int(elapsed/(200*time.Millisecond)) + 2 // and the wait for the last flush
	t.Logf("%d requests over %s on two workers: %d flushes for about %d intervals", sent, elapsed.Round(time.Millisecond), flushes, intervals)
	if flushes < 2 || flushes > intervals+intervals/2 {
		t.Fatalf("%d flushes in about %d intervals, want about one per interval for the node", flushes, intervals)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
