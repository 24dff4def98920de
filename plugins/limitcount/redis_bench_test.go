package limitcount

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/testredis"
	"gw/plugins"
)

// benchmarkRedis runs requests through a redis-policy limiter from 64 goroutines per
// processor, as a worker with many connections does, and reports the process's CPU time
// per request (cpu-ns/op): wall time per request says how fast Redis answers, CPU time
// what a request costs the worker.
func benchmarkRedis(b *testing.B, more string) {
	s := testredis.Start(b)
	a := newFixture(b, 64<<10, "evict").build("1", redisConfN(s, 2000000000, more))
	route := &plugins.RouteInfo{ID: "1"}
	var seq atomic.Uint32
	var failed atomic.Int64
	b.SetParallelism(64)
	b.ReportAllocs()
	start := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := seq.Add(1)
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(10, 0, byte(g>>8), byte(g)), Port: 40000}, nil)
		ctx.Request.SetRequestURI("/hello")
		for pb.Next() {
			c := plugins.AcquireCtx(&ctx, route, time.Now().UnixNano())
			if a.Access(c) != nil {
				failed.Add(1)
			}
			plugins.ReleaseCtx(c)
			ctx.Response.Header.Reset()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(scriptCalls(b, s))/float64(b.N), "calls/op")
	if failed.Load() != 0 {
		b.Fatalf("%d requests failed", failed.Load())
	}
}

// scriptCalls is how many times s ran a script (EVALSHA or EVAL).
func scriptCalls(b *testing.B, s *testredis.Server) int64 {
	stats, err := s.Do("INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	var calls int64
	for _, line := range strings.Split(stats, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				n, _, _ := strings.Cut(rest, ",")
				v, _ := strconv.ParseInt(n, 10, 64)
				calls += v
			}
		}
	}
	return calls
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRedisAccess gives each goroutine a key of its own: no request has a
// concurrent one to join (coalescer), each is a call to Redis.
func BenchmarkRedisAccess(b *testing.B) { benchmarkRedis(b, `"key": "remote_addr"`) }

// BenchmarkRedisAccessOneKey counts every goroutine's requests against one key, as
// benchmark/redis.sh's single client does: concurrent requests join into one call.
func BenchmarkRedisAccessOneKey(b *testing.B) {
	benchmarkRedis(b, `"key_type": "constant", "key": "all"`)
}

func BenchmarkRedisAccessSyncInterval(b *testing.B) {
	benchmarkRedis(b, `"key": "remote_addr", "sync_interval": 0.5`)
}
