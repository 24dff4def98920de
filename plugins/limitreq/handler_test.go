package limitreq

import (
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
	"gw/shm"
)

// fixture is one worker's view of a fresh limit-req segment, with a clock that moves only
// when told (or when a request sleeps, as a client waiting for it would see).
type fixture struct {
	t     testing.TB
	seg   *shm.Segment
	clock atomic.Int64
	slept []time.Duration
	mu    sync.Mutex
}

// epoch is an arbitrary clock origin for the injected clock.
const epoch = int64(1_700_000_000) * int64(time.Second)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t}
	cfg := conf.Config{Shm: conf.Shm{LimitReq: 64 << 10}}
	seg, err := shm.Create(segmentSpec.Layout, segmentSpec.Size(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := segmentSpec.Init(seg); err != nil {
		t.Fatal(err)
	}
	f.seg = seg
	f.clock.Store(epoch)
	return f
}

func (f *fixture) build(routeID, raw string) *limiter {
	f.t.Helper()
	env := &plugins.Env{
		Route:  &plugins.RouteInfo{ID: routeID},
		Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: f.seg}},
	}
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		f.t.Fatalf("build %s: %v", raw, err)
	}
	l := instance.(*limiter)
	l.now = f.clock.Load
	l.sleep = func(d time.Duration) {
		f.mu.Lock()
		f.slept = append(f.slept, d)
		f.mu.Unlock()
		f.clock.Add(int64(d))
	}
	return l
}

func (f *fixture) advance(d time.Duration) { f.clock.Add(int64(d)) }

// do runs one request from client through l and returns the status the client sees (200
// when the plugin lets it through) and its body.
func do(l plugins.AccessPhase, client string, headers ...string) (int, string) {
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := l.Access(c); err != nil {
		return 500, err.Error()
	}
	if !c.Answered() {
		return 200, ""
	}
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

func statuses(l *limiter, n int, client string) []int {
	var got []int
	for i := 0; i < n; i++ {
		code, _ := do(l, client)
		got = append(got, code)
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

// t/plugin/limit-req.t TEST 3 and 4 ("not exceeding the burst"): rate 4, burst 2, four
// pipelined requests all pass, each delayed to its turn.
func TestWithinBurstIsDelayedNotRejected(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"rate": 4, "burst": 2, "rejected_code": 503, "key": "remote_addr"}`)
	if got := statuses(l, 4, "10.0.0.1"); !equal(got, []int{200, 200, 200, 200}) {
		t.Fatalf("statuses %v", got)
	}
	want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}
	if len(f.slept) != len(want) || f.slept[0] != want[0] || f.slept[1] != want[1] || f.slept[2] != want[2] {
		t.Fatalf("delays %v, want %v", f.slept, want)
	}
}

// nginx's semantics at one instant: burst requests beyond the first are delayed by
// excess/rate, 1/rate apart, and the next is rejected.
func TestBurstAtOneInstant(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"rate": 4, "burst": 2, "key": "remote_addr"}`)
	l.sleep = func(d time.Duration) { f.slept = append(f.slept, d) } // concurrent clients: no one waits for another
	if got := statuses(l, 4, "10.0.0.1"); !equal(got, []int{200, 200, 200, 503}) {
		t.Fatalf("statuses %v", got)
	}
	if len(f.slept) != 2 || f.slept[0] != 250*time.Millisecond || f.slept[1] != 500*time.Millisecond {
		t.Fatalf("delays %v, want [250ms 500ms]", f.slept)
	}
	// The bucket leaks at rate: 250 ms on, one more fits.
	f.advance(250 * time.Millisecond)
	if got := statuses(l, 2, "10.0.0.1"); !equal(got, []int{200, 503}) {
		t.Fatalf("after 250ms: %v", got)
	}
	// Another client has its own bucket.
	if got := statuses(l, 1, "10.0.0.2"); !equal(got, []int{200}) {
		t.Fatalf("second client: %v", got)
	}
}

// t/plugin/limit-req.t TEST 5 and 6 ("exceeding the burst"): rate 0.1, burst 0.1.
func TestExceedingTheBurst(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"rate": 0.1, "burst": 0.1, "rejected_code": 503, "key": "remote_addr"}`)
	if got := statuses(l, 4, "10.0.0.1"); !equal(got, []int{200, 503, 503, 503}) {
		t.Fatalf("statuses %v", got)
	}
	f.advance(10 * time.Second)
	if got := statuses(l, 2, "10.0.0.1"); !equal(got, []int{200, 503}) {
		t.Fatalf("10s on: %v", got)
	}
}

func TestNodelayAndRejection(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"rate": 1, "burst": 1, "key": "remote_addr", "nodelay": true, "rejected_code": 429, "rejected_msg": "slow down"}`)
	if got := statuses(l, 2, "10.0.0.1"); !equal(got, []int{200, 200}) {
		t.Fatalf("statuses %v", got)
	}
	if len(f.slept) != 0 {
		t.Fatalf("nodelay slept %v", f.slept)
	}
	if code, body := do(l, "10.0.0.1"); code != 429 || body != `{"error_msg":"slow down"}` {
		t.Fatalf("rejection %d %q", code, body)
	}
}

func TestKeys(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"rate": 1, "burst": 0, "key": "http_x_user"}`)
	check := func(client, user string, want int) {
		t.Helper()
		var headers []string
		if user != "" {
			headers = []string{"X-User", user}
		}
		if code, _ := do(l, client, headers...); code != want {
			t.Fatalf("%s %q: %d, want %d", client, user, code, want)
		}
	}
	check("10.0.0.1", "ann", 200)
	check("10.0.0.2", "bob", 200)
	check("10.0.0.3", "ann", 503) // ann's bucket, from another address
	check("10.0.0.1", "", 200)    // no header: the client's address
	check("10.0.0.1", "", 503)

	combo := f.build("2", `{"rate": 1, "burst": 0, "key_type": "var_combination", "key": "$remote_addr $http_x_user"}`)
	if got := statuses(combo, 1, "10.0.0.1"); !equal(got, []int{200}) {
		t.Fatalf("combination: %v", got)
	}
	if code, _ := do(combo, "10.0.0.1", "X-User", "ann"); code != 200 {
		t.Fatalf("combination with another user: %d", code)
	}
	// Routes have their own buckets, and a new configuration opens fresh ones.
	if got := statuses(f.build("3", `{"rate": 1, "burst": 0, "key": "http_x_user"}`), 1, "10.0.0.3"); !equal(got, []int{200}) {
		t.Fatalf("another route: %v", got)
	}
	if got := statuses(f.build("1", `{"rate": 2, "burst": 0, "key": "http_x_user"}`), 1, "10.0.0.1"); !equal(got, []int{200}) {
		t.Fatalf("a new configuration: %v", got)
	}
	if got := statuses(f.build("1", `{"rate": 1, "burst": 0, "key": "http_x_user"}`), 1, "10.0.0.1"); !equal(got, []int{503}) {
		t.Fatalf("the same configuration rebuilt (a reload): %v", got)
	}
}

// Exact across workers: requests at one instant from many goroutines (workers share the
// segment exactly as goroutines do) get burst+1 through, no more, no fewer.
func TestExactUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	const burst, clients = 50, 400
	l := f.build("1", `{"rate": 1, "burst": 50, "key": "remote_addr", "nodelay": true}`)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _ := do(l, "10.0.0.9"); code == 200 {
				passed.Add(1)
			}
		}()
	}
	wg.Wait()
	if passed.Load() != burst+1 {
		t.Fatalf("%d passed, want %d", passed.Load(), burst+1)
	}
}

func TestAccessAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	f := newFixture(t)
	l := f.build("1", `{"rate": 1000000, "burst": 1000000, "key_type": "var_combination", "key": "$remote_addr $http_x_user"}`)
	l.sleep = func(time.Duration) {}
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello")
	req.Header.Set("X-User", "ann")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := l.Access(c); err != nil || c.Answered() {
			t.Fatal("rejected")
		}
	})
	if allocs != 0 {
		t.Fatalf("Access allocates %.1f times per request", allocs)
	}
}

func BenchmarkAccess(b *testing.B) {
	f := newFixture(b)
	l := f.build("1", `{"rate": 10000000, "burst": 1000000000, "key": "remote_addr", "nodelay": true}`)
	l.now = wallNanos
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		l.Access(c)
	}
}

// A bucket that cannot be taken (its slot kept changing owner for maxTries attempts) is
// the limiter unavailable: a 500 error, or with allow_degradation the request passes
// unlimited, as APISIX's. Both limiters allow one request a second; while unavailable,
// the strict one fails every request and the lenient one passes five in a row (which,
// available, it would limit to one: the last check shows it does).
func TestUnavailableDegradesOnlyWithAllowDegradation(t *testing.T) {
	f := newFixture(t)
	strict := f.build("1", `{"rate": 1, "burst": 0, "key": "remote_addr"}`)
	lenient := f.build("2", `{"rate": 1, "burst": 0, "key": "remote_addr", "allow_degradation": true}`)
	strict.maxTries, lenient.maxTries = 0, 0 // every try lost to another key
	for i := range 5 {
		if code, body := do(strict, "10.0.0.1"); code != 500 || body != errContended.Error() {
			t.Fatalf("request %d without allow_degradation: %d %q, want 500 %q", i, code, body, errContended)
		}
		if code, body := do(lenient, "10.0.0.2"); code != 200 {
			t.Fatalf("request %d with allow_degradation: %d %q, want it through, unlimited", i, code, body)
		}
	}
	if len(f.slept) != 0 {
		t.Fatalf("delays %v while unavailable, want none", f.slept)
	}
	lenient.maxTries = maxTries
	if got := statuses(lenient, 2, "10.0.0.2"); !equal(got, []int{200, 503}) {
		t.Fatalf("available again: statuses %v, want [200 503]", got)
	}
}
