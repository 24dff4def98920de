package limitcount

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/plugins"
	"gw/shm"
)

// benchmarkAccess runs requests through the plugin as the worker does (Ctx from the pool,
// Access, and with apply the queued headers set on the response by fasthttp), from
// clients distinct clients per goroutine.
func benchmarkAccess(b *testing.B, config string, clients int, apply bool) {
	f := newFixture(b, 10<<20, "evict")
	a := f.build("1", config)
	route := &plugins.RouteInfo{ID: "1"}
	var seq atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		g := seq.Add(1)
		ctxs := make([]fasthttp.RequestCtx, clients)
		for i := range ctxs {
			ip := net.IPv4(10, byte(g), byte(i>>8), byte(i))
			ctxs[i].Init(&fasthttp.Request{}, &net.TCPAddr{IP: ip, Port: 40000}, nil)
			ctxs[i].Request.SetRequestURI("/hello")
		}
		now := time.Now().UnixNano()
		i := 0
		for pb.Next() {
			ctx := &ctxs[i%clients]
			c := plugins.AcquireCtx(ctx, route, now)
			a.Access(c)
			if apply {
				c.ApplyResponseHeaders()
			}
			plugins.ReleaseCtx(c)
			ctx.Response.Header.Reset()
			i++
		}
	})
}

const seedConfig = `{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`

// The seeds' benchmark route, one client per goroutine: every request updates one word.
func BenchmarkAccessOneClient(b *testing.B) { benchmarkAccess(b, seedConfig, 1, false) }

func BenchmarkAccessManyClients(b *testing.B) { benchmarkAccess(b, seedConfig, 64, false) }

func BenchmarkAccessNoQuotaHeaders(b *testing.B) {
	benchmarkAccess(b, `{"count": 2000000000000, "time_window": 60, "show_limit_quota_header": false}`, 64, false)
}

// With the three X-RateLimit-* headers set on the response: most of the time is
// fasthttp's header validation in Ctx.ApplyResponseHeaders.
func BenchmarkAccessAndApplyHeaders(b *testing.B) { benchmarkAccess(b, seedConfig, 64, true) }

// benchmarkFingerprint is one request's key, in one goroutine: the part of Access the key
// costs, without the shared table's atomics that make BenchmarkAccess* noisy.
func benchmarkFingerprint(b *testing.B, config string) {
	cfg, err := Parse([]byte(config))
	if err != nil {
		b.Fatal(err)
	}
	var base shm.KeyHash
	ks, err := newKeySource(base, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 40000}, nil)
	ctx.Request.SetRequestURI("/hello?user=u")
	ctx.Request.Header.Set("X-User", "ann")
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	b.ReportAllocs()
	for b.Loop() {
		// A new request's query string, not yet parsed: fasthttp keeps parsed arguments
		// on the URI, and reading them again would cost less than a request pays.
		ctx.Request.URI().SetQueryString("user=u")
		ks.fingerprint(c)
	}
}

func BenchmarkFingerprintRemoteAddr(b *testing.B) { benchmarkFingerprint(b, seedConfig) }

func BenchmarkFingerprintHeader(b *testing.B) {
	benchmarkFingerprint(b, `{"count": 1, "time_window": 60, "key": "http_x_user"}`)
}

func BenchmarkFingerprintCombination(b *testing.B) {
	benchmarkFingerprint(b, `{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr $http_x_user $arg_user"}`)
}
