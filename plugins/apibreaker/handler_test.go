package apibreaker

import (
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
	"gw/shm"
)

// fixture is one worker's view of a fresh api-breaker segment, with a clock in seconds
// that moves only when told.
type fixture struct {
	t     testing.TB
	seg   *shm.Segment
	clock atomic.Int64
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	cfg := conf.Config{Shm: conf.Shm{APIBreaker: 64 << 10}}
	seg, err := shm.Create(segmentSpec.Layout, segmentSpec.Size(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := segmentSpec.Init(seg); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, seg: seg}
	f.clock.Store(1_700_000_000)
	return f
}

func (f *fixture) build(routeID, raw string) *breaker {
	f.t.Helper()
	env := &plugins.Env{
		Route:  &plugins.RouteInfo{ID: routeID},
		Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: f.seg}},
	}
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		f.t.Fatalf("build %s: %v", raw, err)
	}
	b := instance.(*breaker)
	b.now = f.clock.Load
	return b
}

// response is what a client saw.
type response struct {
	status      int
	body        string
	contentType string
}

// do runs one request for path through b: the breaker's answer, or the upstream's code
// (upstream 0: no upstream contacted, a 502 from the gateway). The log phase follows.
func do(b *breaker, path string, upstream int) response {
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test" + path)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := b.Access(c); err != nil {
		return response{status: 500, body: err.Error()}
	}
	if !c.Answered() {
		c.UpstreamNanos = 1000
		ctx.Response.SetStatusCode(upstream)
		ctx.Response.Header.SetContentType("text/plain")
	}
	c.ApplyResponseHeaders()
	b.Log(c)
	return response{ctx.Response.StatusCode(), string(ctx.Response.Body()), string(ctx.Response.Header.ContentType())}
}

func codes(b *breaker, path string, upstream ...int) []int {
	var got []int
	for _, u := range upstream {
		got = append(got, do(b, path, u).status)
	}
	return got
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const test9 = `{"break_response_code": 599, "unhealthy": {"http_statuses": [500, 503], "failures": 3},
	"healthy": {"http_statuses": [200, 206], "successes": 3}}`

// t/plugin/api-breaker.t TEST 9 and 10 ("trigger breaker").
func TestTriggerBreaker(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", test9)
	if got := codes(b, "/api_breaker", 200, 500, 503, 500, 500, 500); !equal(got, []int{200, 500, 503, 500, 599, 599}) {
		t.Fatalf("codes %v", got)
	}
}

// t/plugin/api-breaker.t TEST 11 ("trigger reset status"): healthy answers in a row
// close the breaker and forget its count.
func TestResetStatus(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", test9)
	if got := codes(b, "/api_breaker", 500, 500, 200, 200, 200, 500, 500); !equal(got, []int{500, 500, 200, 200, 200, 500, 500}) {
		t.Fatalf("codes %v", got)
	}
	// Two unhealthy after the reset: the third opens it.
	if got := codes(b, "/api_breaker", 500, 500); !equal(got, []int{500, 599}) {
		t.Fatalf("after the reset: %v", got)
	}
}

// t/plugin/api-breaker.t TEST 12 ("trigger del healthy numeration"): open for 2 s, then
// half open; healthy answers close it; an unhealthy one between them restarts the
// healthy count.
func TestHalfOpenAndHealthyCount(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", test9)
	if got := codes(b, "/api_breaker", 500, 500, 500, 500); !equal(got, []int{500, 500, 500, 599}) {
		t.Fatalf("codes %v", got)
	}
	f.clock.Add(3)
	if got := codes(b, "/api_breaker", 200, 200, 200, 200, 500, 500, 500, 500); !equal(got, []int{200, 200, 200, 200, 500, 500, 500, 599}) {
		t.Fatalf("after 3s: %v", got)
	}
	// An unhealthy answer zeroes the healthy count: 200, 200, 500 keeps it open.
	f.clock.Add(3)
	if got := codes(b, "/api_breaker", 200, 200, 500); !equal(got, []int{200, 200, 500}) {
		t.Fatalf("half open: %v", got)
	}
}

// t/plugin/api-breaker.t TEST 19: failures 1, max_breaker_sec 10: the break doubles,
// 2, 4, 8, then stays at 10.
func TestBreakTimeDoubles(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 502, "max_breaker_sec": 10,
		"unhealthy": {"http_statuses": [500, 503], "failures": 1}, "healthy": {"successes": 3}}`)
	var traced []uint64
	b.breakTimeTrace = func(s uint64) { traced = append(traced, s) }
	counts := map[int]int{}
	var breaks []uint64
	for i := 0; i < 20; i++ {
		before := len(traced)
		code := do(b, "/api_breaker", 500).status
		counts[code]++
		if code == 500 && len(traced) > before {
			breaks = append(breaks, traced[len(traced)-1])
		}
		f.clock.Add(1)
	}
	if counts[500] != 4 || counts[502] != 16 {
		t.Fatalf("codes %v, want {500:4 502:16}", counts)
	}
	// Each half-open request that reached the upstream saw the break just ended.
	want := []uint64{2, 4, 8}
	if len(breaks) != len(want) {
		t.Fatalf("break times at each retry %v, want %v", breaks, want)
	}
	for i := range want {
		if breaks[i] != want[i] {
			t.Fatalf("break times at each retry %v, want %v", breaks, want)
		}
	}
	if traced[len(traced)-1] != 10 {
		t.Fatalf("last break time %d, want max_breaker_sec 10", traced[len(traced)-1])
	}
}

// t/plugin/api-breaker.t TEST 13 to 15: defaults (500 only, 3 failures), a body and
// headers on the break response (the last Content-Type wins).
func TestDefaultsAndBreakResponse(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 502, "break_response_body": "{\"message\":\"breaker opened.\"}",
		"break_response_headers": [{"key":"Content-Type","value":"application/json"},{"key":"Content-Type","value":"application/json+v1"},
		{"key":"X-Client","value":"$remote_addr"}], "unhealthy": {"failures": 3}, "healthy": {"successes": 3}}`)
	if got := codes(b, "/api_breaker", 200, 500, 503, 500, 500); !equal(got, []int{200, 500, 503, 500, 500}) {
		t.Fatalf("codes %v", got)
	}
	r := do(b, "/api_breaker", 500)
	if r.status != 502 || r.body != `{"message":"breaker opened."}` || r.contentType != "application/json+v1" {
		t.Fatalf("break response %+v", r)
	}
	// Another path has its own breaker.
	if r := do(b, "/other", 200); r.status != 200 {
		t.Fatalf("another path: %+v", r)
	}
	// Without a body, no headers: the bare code.
	bare := f.build("2", `{"break_response_code": 599, "break_response_headers": [{"key":"X-Gone","value":"1"}], "unhealthy": {"failures": 1}}`)
	do(bare, "/x", 500)
	if r := do(bare, "/x", 200); r.status != 599 || r.body != "" {
		t.Fatalf("bare break %+v", r)
	}
}

// A request the upstream never answered itself, but a node was tried: its 502 counts as
// nginx's $upstream_status. One no node saw counts nothing.
func TestOnlyUpstreamAnswersCount(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 599, "unhealthy": {"http_statuses": [502], "failures": 1}}`)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/p")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	ctx.Response.SetStatusCode(502) // a plugin's, or no node: UpstreamNanos stays -1
	b.Log(c)
	plugins.ReleaseCtx(c)
	if r := do(b, "/p", 200); r.status != 200 {
		t.Fatalf("counted an answer no upstream gave: %+v", r)
	}
	do(b, "/p", 502)
	if r := do(b, "/p", 200); r.status != 599 {
		t.Fatalf("a node's 502 did not count: %+v", r)
	}
}

// One breaker for every worker: unhealthy answers counted from many goroutines at once
// are all counted, so the breaker opens exactly on the failures-th.
func TestExactUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 599, "unhealthy": {"failures": 2000}}`)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				do(b, "/p", 500)
			}
		}()
	}
	wg.Wait()
	e, _ := b.table.Find(fingerprintOf(b, "/p"))
	p, _ := e.Load()
	if unhealthyOf(p) != 2000 || openedOf(p) == 0 {
		t.Fatalf("unhealthy %d opened %d, want 2000 and open", unhealthyOf(p), openedOf(p))
	}
	if r := do(b, "/p", 200); r.status != 599 {
		t.Fatalf("after 2000 failures: %+v", r)
	}
}

func fingerprintOf(b *breaker, path string) uint64 {
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test" + path)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	return b.fingerprint(c)
}

// The count saturates in its place of the failures cycle: the break stays at
// max_breaker_sec and the breaker keeps opening.
func TestSaturation(t *testing.T) {
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 599, "max_breaker_sec": 3, "unhealthy": {"failures": 1}}`)
	for i := 0; i < 100; i++ {
		do(b, "/p", 500)
		f.clock.Add(4) // past each break, so every request reaches the upstream
	}
	e, _ := b.table.Find(fingerprintOf(b, "/p"))
	p, _ := e.Load()
	if n := unhealthyOf(p); n > saturatedOpenings+1 || n < saturatedOpenings {
		t.Fatalf("unhealthy count %d, want it held at %d", n, saturatedOpenings)
	}
	f.clock.Add(-4)
	if r := do(b, "/p", 200); r.status != 599 {
		t.Fatalf("saturated breaker not open: %+v", r)
	}
}

func TestAccessAndLogAllocateNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	f := newFixture(t)
	b := f.build("1", `{"break_response_code": 502, "break_response_body": "open",
		"break_response_headers": [{"key":"X-Client","value":"$remote_addr"}], "unhealthy": {"failures": 1}}`)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/p")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	route := &plugins.RouteInfo{ID: "1"}
	for _, upstream := range []int{200, 500} { // closed, then open (the break response)
		allocs := testing.AllocsPerRun(1000, func() {
			c := plugins.AcquireCtx(&ctx, route, 0)
			b.Access(c)
			if !c.Answered() {
				c.UpstreamNanos = 1000
				ctx.Response.SetStatusCode(upstream)
			}
			c.ApplyResponseHeaders()
			b.Log(c)
			plugins.ReleaseCtx(c)
		})
		if allocs != 0 {
			t.Fatalf("upstream %d: Access and Log allocate %.1f times per request", upstream, allocs)
		}
	}
}

func BenchmarkAccessAndLog(b *testing.B) {
	f := newFixture(b)
	br := f.build("1", `{"break_response_code": 502, "unhealthy": {"failures": 3}}`)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/p")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	c.UpstreamNanos = 1000
	ctx.Response.SetStatusCode(200)
	b.ReportAllocs()
	for b.Loop() {
		br.Access(c)
		br.Log(c)
	}
}
