package limitconn

import (
	"encoding/json"
	"net"
	"os"
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

// fixture is one worker's view of a fresh limit-conn segment.
type fixture struct {
	t     testing.TB
	seg   *shm.Segment
	table *shm.KeyedTable
	mu    sync.Mutex
	slept []time.Duration
}

func newFixture(t testing.TB) *fixture { return newFixtureOf(t, 64<<10) }

// newFixtureOf makes a segment of size bytes, header included.
func newFixtureOf(t testing.TB, size int64) *fixture {
	t.Helper()
	cfg := conf.Config{Shm: conf.Shm{LimitConn: size}}
	seg, err := shm.Create(segmentSpec.Layout, segmentSpec.Size(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := segmentSpec.Init(seg); err != nil {
		t.Fatal(err)
	}
	table, err := shm.OpenKeyedTable(seg, tableMagic)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, seg: seg, table: table}
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
	l.sleep = func(d time.Duration) {
		f.mu.Lock()
		f.slept = append(f.slept, d)
		f.mu.Unlock()
	}
	return l
}

// request is one request in flight: its Ctx, held until end.
type request struct {
	ctx *fasthttp.RequestCtx
	c   *plugins.Ctx
}

// begin runs the access phase of a request from client and returns its status (200 when
// it passes) and the request, whose log phase end runs.
func begin(l phases, client string) (int, string, *request) {
	req := &fasthttp.Request{}
	req.SetRequestURI("http://gw.test/hello")
	ctx := &fasthttp.RequestCtx{}
	ctx.Init(req, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, nil)
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, time.Now().UnixNano())
	r := &request{ctx, c}
	if err := l.Access(c); err != nil {
		return 500, err.Error(), r
	}
	if c.Answered() {
		return ctx.Response.StatusCode(), string(ctx.Response.Body()), r
	}
	return 200, "", r
}

// phases is a limit-conn instance: the shared table's or Redis's.
type phases interface {
	plugins.AccessPhase
	plugins.LogPhase
}

func (r *request) end(l phases) {
	l.Log(r.c)
	plugins.ReleaseCtx(r.c)
}

// inFlight is the key's count for client on l's route, read from the table.
func (f *fixture) inFlight(l *limiter, client string) uint64 {
	var req fasthttp.Request
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	e, ok := f.table.Find(l.keys.Fingerprint(c))
	if !ok {
		return 0
	}
	p, _ := e.Load()
	return countOf(p)
}

// t/plugin/limit-conn.t TEST 5 and 6 ("exceeding the burst"): conn 2, burst 1, ten at
// once: three pass (the third delayed), seven get 503.
func TestExceedingTheBurst(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "rejected_code": 503, "key": "remote_addr"}`)
	var held []*request
	var got []int
	for i := 0; i < 10; i++ {
		code, _, r := begin(l, "10.0.0.1")
		got = append(got, code)
		if code == 200 {
			held = append(held, r)
		} else {
			r.end(l)
		}
	}
	want := []int{200, 200, 200, 503, 503, 503, 503, 503, 503, 503}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	if len(f.slept) != 1 || f.slept[0] != 100*time.Millisecond {
		t.Fatalf("delays %v, want the third's 100ms", f.slept)
	}
	if n := f.inFlight(l, "10.0.0.1"); n != 3 {
		t.Fatalf("in flight %d, want 3", n)
	}
	// Another key has its own count.
	if code, _, r := begin(l, "10.0.0.2"); code != 200 {
		t.Fatalf("another client: %d", code)
	} else {
		r.end(l)
	}
	// Ending a request frees its place.
	held[0].end(l)
	if code, _, r := begin(l, "10.0.0.1"); code != 200 {
		t.Fatalf("after one ended: %d", code)
	} else {
		held[0] = r
	}
	for _, r := range held {
		r.end(l)
	}
	if n := f.inFlight(l, "10.0.0.1"); n != 0 {
		t.Fatalf("in flight %d after every request ended, want 0", n)
	}
}

// The log phase runs for every instance of a chain, also one whose access phase did not
// run (an earlier plugin answered) or rejected: those give back nothing.
func TestLogWithoutAccessGivesBackNothing(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "rejected_code": 429, "rejected_msg": "busy"}`)
	_, _, first := begin(l, "10.0.0.1")
	code, body, second := begin(l, "10.0.0.1")
	if code != 429 || body != `{"error_msg":"busy"}` {
		t.Fatalf("second: %d %q", code, body)
	}
	second.end(l) // rejected: holds nothing
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	l.Log(c) // never through Access
	plugins.ReleaseCtx(c)
	if n := f.inFlight(l, "10.0.0.1"); n != 1 {
		t.Fatalf("in flight %d, want the first's 1", n)
	}
	first.end(l)
}

// Delays follow resty.limit.conn: unit delay × floor((in flight - 1) / conn), and the
// unit moves halfway to each request's latency unless only_use_default_delay.
func TestDelays(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 2, "burst": 4, "default_conn_delay": 1, "key": "remote_addr", "only_use_default_delay": true}`)
	var held []*request
	for i := 0; i < 6; i++ {
		_, _, r := begin(l, "10.0.0.1")
		held = append(held, r)
	}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 2 * time.Second} // in flight 3, 4, 5, 6
	if len(f.slept) != len(want) {
		t.Fatalf("delays %v, want %v", f.slept, want)
	}
	for i := range want {
		if f.slept[i] != want[i] {
			t.Fatalf("delays %v, want %v", f.slept, want)
		}
	}
	for _, r := range held {
		r.c.UpstreamNanos = int64(100 * time.Millisecond)
		r.end(l)
	}
	if got := l.unitDelay.Load(); got != int64(time.Second) {
		t.Fatalf("only_use_default_delay: unit %v", time.Duration(got))
	}
	adaptive := f.build("2", `{"conn": 1, "burst": 1, "default_conn_delay": 1, "key": "remote_addr"}`)
	_, _, r := begin(adaptive, "10.0.0.1")
	r.c.UpstreamNanos = int64(100 * time.Millisecond)
	r.end(adaptive)
	if got := adaptive.unitDelay.Load(); got != int64(550*time.Millisecond) {
		t.Fatalf("adaptive unit %v, want 550ms", time.Duration(got))
	}
}

// Exact across workers: many requests at once from many goroutines (workers share the
// segment exactly as goroutines do): never more than conn + burst in flight, and the
// count returns to 0.
func TestExactUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 5, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	var inFlight, most atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				code, _, r := begin(l, "10.0.0.1")
				if code == 200 {
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					inFlight.Add(-1)
				}
				r.end(l)
			}
		}()
	}
	wg.Wait()
	if most.Load() > 5 || most.Load() < 1 {
		t.Fatalf("at most %d in flight at once, want 1-5", most.Load())
	}
	if n := f.inFlight(l, "10.0.0.1"); n != 0 {
		t.Fatalf("in flight %d after all ended", n)
	}
}

// A worker killed with requests in flight: the master's release, given its pid, gives back
// exactly what it held, and frees its ledger.
func TestMasterGivesBackWhatADeadWorkerHeld(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 3, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	if !l.hasLedger {
		t.Fatal("no ledger claimed")
	}
	for i := 0; i < 3; i++ {
		begin(l, "10.0.0.1") // never ended: the worker "dies" holding them
	}
	begin(l, "10.0.0.2")
	if code, _, _ := begin(l, "10.0.0.1"); code != 503 {
		t.Fatalf("fourth: %d, want 503", code)
	}
	released, keys := releaseLedgers(f.table, uint64(os.Getpid())&pidMask)
	if released != 4 || keys != 2 {
		t.Fatalf("released %d on %d keys, want 4 on 2", released, keys)
	}
	if n := f.inFlight(l, "10.0.0.1"); n != 0 {
		t.Fatalf("in flight %d after the release, want 0", n)
	}
	if again, _ := releaseLedgers(f.table, uint64(os.Getpid())&pidMask); again != 0 {
		t.Fatalf("a second release gave back %d", again)
	}
}

// Killed between the ledger's swap and the count's: the ledger says one more than the
// count got; the release gives back what the count has, never below 0.
func TestReleaseAfterACrashBetweenLedgerAndCount(t *testing.T) {
	f := newFixture(t)
	l := f.build("1", `{"conn": 3, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	_, _, r := begin(l, "10.0.0.1")
	fp := l.keys.Fingerprint(r.c)
	count, _ := f.table.Find(fp)
	if _, ok := l.addLedger(ledgerKey(f.table, fp, l.ledger), count, time.Now().UnixNano()); !ok {
		t.Fatal("ledger")
	}
	// The count's swap never happened: the ledger says 2, the count 1.
	released, _ := releaseLedgers(f.table, uint64(os.Getpid())&pidMask)
	if released != 2 {
		t.Fatalf("released %d, want the ledger's 2", released)
	}
	if p, _ := count.Load(); countOf(p) != 0 {
		t.Fatalf("count %d, want 0", countOf(p))
	}
}

func TestAccessAndLogAllocateNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race too")
	}
	f := newFixture(t)
	l := f.build("1", `{"conn": 100, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	route := &plugins.RouteInfo{ID: "1"}
	allocs := testing.AllocsPerRun(1000, func() {
		c := plugins.AcquireCtx(&ctx, route, 0)
		if err := l.Access(c); err != nil || c.Answered() {
			t.Fatal("rejected")
		}
		c.UpstreamNanos = 1000
		l.Log(c)
		plugins.ReleaseCtx(c)
	})
	if allocs != 0 {
		t.Fatalf("Access and Log allocate %.1f times per request", allocs)
	}
}

func BenchmarkAccessAndLog(b *testing.B) {
	f := newFixture(b)
	l := f.build("1", `{"conn": 100, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		l.Access(c)
		c.UpstreamNanos = 1000
		l.Log(c)
	}
}

// A key's count and its ledger entry in one bucket: the count is idle (0) from its insert
// until the request's place is added, and the ledger's insert took its slot, then the
// count's next insert the ledger's, for ever (a worker spun in make test's fuzz seeds;
// bounded since, it answered 500 "failed to limit conn" on an empty table). With one
// bucket every key's two entries share it.
func TestCountAndLedgerShareABucket(t *testing.T) {
	f := newFixtureOf(t, shm.HeaderSize+64+128) // the table's header and one bucket
	if c := f.table.Capacity(); c != 7 {
		t.Fatalf("the table holds %d slots, want one bucket of 7", c)
	}
	l := f.build("1", `{"conn": 2, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	if !l.hasLedger {
		t.Fatal("the limiter has no ledger: the test needs one")
	}
	var held []*request
	for _, client := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		code, body, r := begin(l, client)
		if code != 200 {
			t.Fatalf("a request from %s in a table with room answered %d %s", client, code, body)
		}
		held = append(held, r)
	}
	if n := f.inFlight(l, "10.0.0.1"); n != 2 {
		t.Fatalf("10.0.0.1 has %d in flight, want 2", n)
	}
	// The owner, three counts and three ledger entries fill the bucket: a fourth key
	// finds it full, and is answered as a full table.
	if code, body, _ := begin(l, "10.0.0.4"); code != 500 || body != errFull.Error() {
		t.Fatalf("a fourth key in a full bucket answered %d %q, want 500 %q", code, body, errFull)
	}
	for _, r := range held {
		r.end(l)
	}
	for _, client := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		if n := f.inFlight(l, client); n != 0 {
			t.Fatalf("%s has %d in flight after every request ended", client, n)
		}
	}
	if code, body, r := begin(l, "10.0.0.4"); code != 200 {
		t.Fatalf("a fourth key once the others are idle answered %d %s", code, body)
	} else {
		r.end(l)
	}
}
