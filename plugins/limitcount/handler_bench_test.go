package limitcount

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/plugins"
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
