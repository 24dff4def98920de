package limitcount

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
	"gw/shm"
)

// fixture is one worker's view of a fresh limit-count segment.
type fixture struct {
	t    testing.TB
	seg  *shm.Segment
	segs map[string]*shm.Segment // seg and the sync_interval tables' segments, by name
	cfg  conf.Config
	logs []string
	mu   sync.Mutex
}

func newFixture(t testing.TB, segmentBytes int64, onFull string) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.cfg.Shm.LimitCount, f.cfg.Shm.LimitCountOnFull = segmentBytes, onFull
	seg, err := shm.Create(segmentSpec.Layout, segmentSpec.Size(&f.cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := segmentSpec.Init(seg); err != nil {
		t.Fatal(err)
	}
	f.seg = seg
	f.segs = map[string]*shm.Segment{Name: seg}
	for _, spec := range []*plugins.SegmentSpec{plugins.Segments()[syncCountsLayout.Name], plugins.Segments()[syncWindowsLayout.Name]} {
		s, err := shm.Create(spec.Layout, spec.Size(&f.cfg))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := spec.Init(s); err != nil {
			t.Fatal(err)
		}
		f.segs[spec.Layout.Name] = s
	}
	return f
}

func (f *fixture) env(routeID string, snap *conf.Snapshot) *plugins.Env {
	return &plugins.Env{
		Route: &plugins.RouteInfo{ID: routeID, Name: "route-" + routeID},
		Shared: &plugins.Shared{
			Segments: f.segs,
			Config:   &f.cfg,
			Logf: func(format string, args ...any) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.logs = append(f.logs, fmt.Sprintf(format, args...))
			},
		},
		Snapshot: snap,
	}
}

func (f *fixture) build(routeID, raw string) plugins.AccessPhase {
	f.t.Helper()
	return f.buildIn(routeID, raw, nil)
}

func (f *fixture) buildIn(routeID, raw string, snap *conf.Snapshot) plugins.AccessPhase {
	f.t.Helper()
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), f.env(routeID, snap))
	if l, ok := instance.(*redisLimiter); ok && l.sync != nil {
		// The syncer reads the fixture's segments, closed by earlier cleanups (which
		// run after this one).
		f.t.Cleanup(func() { l.sync.stop(); <-l.sync.exited })
	}
	if err != nil {
		f.t.Fatalf("build %s: %v", raw, err)
	}
	a, ok := instance.(plugins.AccessPhase)
	if !ok {
		f.t.Fatalf("build %s gave %T, not an AccessPhase", raw, instance)
	}
	return a
}

// request is one request's outcome as a client sees it.
type request struct {
	status                  int
	body                    string
	limit, remaining, reset string
}

// do runs a request from client through a, at clock time at, and returns what the
// client would see (200 when the plugin lets it through).
func do(a plugins.AccessPhase, routeID string, at time.Duration, client string, headers ...string) request {
	var req fasthttp.Request
	req.SetRequestURI("http://gw.test/hello?user=arg-user")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, nil)
	c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: routeID}, int64(epoch+at))
	defer plugins.ReleaseCtx(c)
	if err := a.Access(c); err != nil {
		return request{status: 500, body: err.Error()} // as the worker answers a fault
	}
	if !c.Answered() {
		ctx.Response.SetStatusCode(200)
	}
	c.ApplyResponseHeaders()
	h := &ctx.Response.Header
	return request{
		status: ctx.Response.StatusCode(), body: string(ctx.Response.Body()),
		limit: string(h.Peek("X-RateLimit-Limit")), remaining: string(h.Peek("X-RateLimit-Remaining")), reset: string(h.Peek("X-RateLimit-Reset")),
	}
}

// epoch is an arbitrary clock origin for the injected clock.
const epoch = time.Duration(1_700_000_000) * time.Second

func TestWindowThroughThePlugin(t *testing.T) {
	f := newFixture(t, 64<<10, "evict")
	a := f.build("1", `{"count": 2, "time_window": 60}`)
	steps := []struct {
		at   time.Duration
		want request
	}{
		{0, request{200, "", "2", "1", "60"}},
		{1500 * time.Millisecond, request{200, "", "2", "0", "59"}},
		{2 * time.Second, request{503, "", "2", "0", "58"}},
		{59*time.Second + 990*time.Millisecond, request{503, "", "2", "0", "1"}}, // never 0 while rejected
		{60 * time.Second, request{200, "", "2", "1", "60"}},                     // a fresh window, anchored here
		{61 * time.Second, request{200, "", "2", "0", "59"}},
		{62 * time.Second, request{503, "", "2", "0", "58"}},
	}
	for i, s := range steps {
		if got := do(a, "1", s.at, "10.0.0.1"); got != s.want {
			t.Fatalf("step %d at %v: got %+v, want %+v", i, s.at, got, s.want)
		}
	}
	// Another client has its own window.
	if got := do(a, "1", 62*time.Second, "10.0.0.2"); got.status != 200 || got.remaining != "1" {
		t.Fatalf("second client: %+v", got)
	}
}

func TestRejectionAndHeaders(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		third   request // the third request of a count-2 window
		noQuota bool
	}{
		{"defaults", `{"count": 2, "time_window": 10}`, request{503, "", "2", "0", "10"}, false},
		{"rejected_code", `{"count": 2, "time_window": 10, "rejected_code": 429}`, request{429, "", "2", "0", "10"}, false},
		{"rejected_msg", `{"count": 2, "time_window": 10, "rejected_msg": "slow \"down\""}`,
			request{503, `{"error_msg":"slow \"down\""}`, "2", "0", "10"}, false},
		{"no quota headers", `{"count": 2, "time_window": 10, "show_limit_quota_header": false, "rejected_code": 403}`,
			request{403, "", "", "", ""}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 64<<10, "evict")
			a := f.build("1", tt.config)
			first := do(a, "1", 0, "10.0.0.1")
			if tt.noQuota != (first.limit == "") {
				t.Fatalf("first response headers: %+v", first)
			}
			do(a, "1", 0, "10.0.0.1")
			if got := do(a, "1", 0, "10.0.0.1"); got != tt.third {
				t.Fatalf("third request: got %+v, want %+v", got, tt.third)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	type req struct {
		client  string
		headers []string
	}
	tests := []struct {
		name   string
		config string
		reqs   []req
		want   []int // statuses with count 1
	}{
		{"remote_addr", `{"count": 1, "time_window": 60}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.1", nil}, {"::ffff:10.0.0.2", nil}}, []int{200, 200, 503, 503}},
		{"IPv6 clients", `{"count": 1, "time_window": 60}`,
			[]req{{"2001:db8::1", nil}, {"2001:db8::2", nil}, {"2001:db8::1", nil}}, []int{200, 200, 503}},
		{"header", `{"count": 1, "time_window": 60, "key": "http_x_user"}`,
			[]req{{"10.0.0.1", []string{"X-User", "ann"}}, {"10.0.0.1", []string{"x-user", "bob"}}, {"10.0.0.2", []string{"X-USER", "ann"}}},
			[]int{200, 200, 503}},
		{"missing header falls back to the client address", `{"count": 1, "time_window": 60, "key": "http_x_user"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.1", []string{"X-User", ""}}, {"10.0.0.2", []string{"X-User", "ann"}}},
			[]int{200, 200, 503, 200}},
		{"query argument", `{"count": 1, "time_window": 60, "key": "arg_user"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}}, []int{200, 503}},
		{"route_id", `{"count": 1, "time_window": 60, "key": "route_id"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}}, []int{200, 503}},
		{"server_addr", `{"count": 1, "time_window": 60, "key": "server_addr"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}}, []int{200, 503}},
		{"empty key is missing", `{"count": 1, "time_window": 60, "key": ""}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.1", nil}}, []int{200, 200, 503}},
		{"consumer_name without a consumer is missing", `{"count": 1, "time_window": 60, "key": "consumer_name"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.1", nil}}, []int{200, 200, 503}},
		{"constant", `{"count": 1, "time_window": 60, "key_type": "constant", "key": "everyone"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}}, []int{200, 503}},
		{"var_combination", `{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr ${http_x_user}"}`,
			[]req{{"10.0.0.1", []string{"X-User", "ann"}}, {"10.0.0.1", []string{"X-User", "bob"}}, {"10.0.0.1", []string{"X-User", "ann"}}, {"10.0.0.2", []string{"X-User", "ann"}}},
			[]int{200, 200, 503, 200}},
		{"var_combination fallback", `{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "${http_x_user ?? anonymous}"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.3", []string{"X-User", "ann"}}}, []int{200, 503, 200}},
		{"var_combination with empty values only uses the client address", `{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$http_x_user"}`,
			[]req{{"10.0.0.1", []string{"X-User", ""}}, {"10.0.0.2", []string{"X-User", ""}}, {"10.0.0.1", nil}}, []int{200, 200, 503}},
		{"var_combination with nothing resolved uses the client address", `{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "user:$http_x_user"}`,
			[]req{{"10.0.0.1", nil}, {"10.0.0.2", nil}, {"10.0.0.1", nil}, {"10.0.0.3", []string{"X-User", "ann"}}, {"10.0.0.4", []string{"X-User", "ann"}}},
			[]int{200, 200, 503, 200, 503}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 64<<10, "evict")
			a := f.build("7", tt.config)
			for i, r := range tt.reqs {
				if got := do(a, "7", time.Duration(i)*time.Second, r.client, r.headers...); got.status != tt.want[i] {
					t.Fatalf("request %d (%s %v): status %d, want %d", i, r.client, r.headers, got.status, tt.want[i])
				}
			}
		})
	}
}

// The counter key holds the route and the configuration: a new configuration opens a fresh
// window, the same configuration on a rebuilt snapshot (another route edit) keeps it.
func TestCounterKey(t *testing.T) {
	f := newFixture(t, 64<<10, "evict")
	a := f.build("1", `{"count": 2, "time_window": 60}`)
	do(a, "1", 0, "10.0.0.1")
	do(a, "1", 0, "10.0.0.1")
	rebuilt := f.build("1", `{"time_window": 60.0, "count": 2}`)
	if got := do(rebuilt, "1", time.Second, "10.0.0.1"); got.status != 503 {
		t.Fatalf("same configuration after a rebuild: %+v, want the window kept", got)
	}
	changed := f.build("1", `{"count": 3, "time_window": 60}`)
	if got := do(changed, "1", time.Second, "10.0.0.1"); got.status != 200 || got.remaining != "2" {
		t.Fatalf("new count: %+v, want a fresh window", got)
	}
	otherRoute := f.build("2", `{"count": 2, "time_window": 60}`)
	if got := do(otherRoute, "2", time.Second, "10.0.0.1"); got.status != 200 || got.remaining != "1" {
		t.Fatalf("another route: %+v, want its own window", got)
	}
}

func snapshotWith(routes ...conf.Route) *conf.Snapshot {
	return &conf.Snapshot{Version: 1, Routes: routes}
}

func routeWith(id, raw string) conf.Route {
	return conf.Route{ID: conf.ID(id), URI: "/" + id, Plugins: map[string]json.RawMessage{Name: json.RawMessage(raw)}}
}

func TestGroup(t *testing.T) {
	f := newFixture(t, 64<<10, "evict")
	const g = `{"count": 2, "time_window": 60, "group": "shared"}`
	snap := snapshotWith(routeWith("1", g), routeWith("2", g), routeWith("3", `{"count": 2, "time_window": 60}`))
	one, two := f.buildIn("1", g, snap), f.buildIn("2", g, snap)
	do(one, "1", 0, "10.0.0.1")
	if got := do(two, "2", 0, "10.0.0.1"); got.remaining != "0" {
		t.Fatalf("second route of the group: %+v, want the shared counter spent", got)
	}
	if got := do(one, "1", 0, "10.0.0.1"); got.status != 503 {
		t.Fatalf("third request in the group: %+v", got)
	}

	const other = `{"count": 5, "time_window": 60, "group": "shared"}`
	bad := snapshotWith(routeWith("1", g), routeWith("2", other))
	mismatched := f.buildIn("2", other, bad)
	if err := mismatched.Access(nil); err != errGroupMismatched {
		t.Fatalf("route of a mismatched group: %v, want its fault, which the worker answers 500", err)
	}
	if got := do(mismatched, "2", 0, "10.0.0.9"); got.status != 500 || got.body != "failed to limit count: group conf mismatched" {
		t.Fatalf("route of a mismatched group: %+v, want 500 in APISIX's words", got)
	}
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], `group "shared" is configured differently on route 1`) {
		t.Fatalf("logs: %q", f.logs)
	}
	// A service's configuration counts for the routes that use it and do not set their own.
	svcSnap := &conf.Snapshot{Version: 2,
		Routes:   []conf.Route{routeWith("1", g), {ID: "2", URI: "/2", ServiceID: "s"}},
		Services: []conf.Service{{ID: "s", Plugins: map[string]json.RawMessage{Name: json.RawMessage(other)}}},
	}
	if err := f.buildIn("1", g, svcSnap).Access(nil); err != errGroupMismatched {
		t.Fatalf("route of a group mismatched through a service: %v, want its fault", err)
	}
}

func TestBuild(t *testing.T) {
	f := newFixture(t, 64<<10, "evict")
	if instance, err := (plugin{}).Build(json.RawMessage(`{"count": 1, "time_window": 1, "disable": true}`), f.env("1", nil)); err != nil || instance != nil {
		t.Errorf("disabled: %v %v, want no instance", instance, err)
	}
	for _, tc := range []struct {
		name string
		env  *plugins.Env
		raw  string
	}{
		{"invalid configuration", f.env("1", nil), `{"count": 0, "time_window": 1}`},
		{"no segment", &plugins.Env{Shared: &plugins.Shared{}}, `{"count": 1, "time_window": 1}`},
		{"segment not initialised", func() *plugins.Env {
			seg, err := shm.Create(Layout, 4096)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { seg.Close() })
			return &plugins.Env{Shared: &plugins.Shared{Segments: map[string]*shm.Segment{Name: seg}}}
		}(), `{"count": 1, "time_window": 1}`},
	} {
		if _, err := (plugin{}).Build(json.RawMessage(tc.raw), tc.env); err == nil {
			t.Errorf("%s: built", tc.name)
		}
	}
	if got := segmentDataSize(&conf.Config{}); got != 10<<20-shm.HeaderSize {
		t.Errorf("default data size %d", got)
	}
	if got := segmentDataSize(&conf.Config{Shm: conf.Shm{LimitCount: 65541}}); got%8 != 0 || got+shm.HeaderSize > 65541 {
		t.Errorf("data size for 65541 bytes: %d", got)
	}
}

func TestFullSegment(t *testing.T) {
	for _, tc := range []struct {
		onFull, config string
		want           int
	}{
		{"evict", `{"count": 1, "time_window": 60}`, 200},
		{"reject", `{"count": 1, "time_window": 60}`, 503},
		{"reject", `{"count": 1, "time_window": 60, "allow_degradation": true}`, 200},
	} {
		f := newFixture(t, 64<<10, tc.onFull)
		a := f.build("1", tc.config)
		capacity, _, _ := stats(f.seg, Ticks(int64(epoch)))
		rejected := 0
		for i := 0; i < int(capacity)+2000; i++ {
			client := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			if do(a, "1", 0, client).status != 200 {
				rejected++
			}
		}
		_, used, evictions := stats(f.seg, Ticks(int64(epoch)))
		// What the metrics export reads.
		if got := segmentSpec.Evictions(f.seg); got != evictions {
			t.Errorf("%s: the export reads %d evictions, the table holds %d", tc.onFull, got, evictions)
		}
		if free := freeBytesAt(f.seg, Ticks(int64(epoch))); free < 0 || free > f.seg.Size()/5 {
			t.Errorf("%s: the export reads %d bytes free of %d in a table at least 80%% full", tc.onFull, free, f.seg.Size())
		}
		if free := freeBytesAt(f.seg, Ticks(int64(epoch+2*time.Minute))); free != f.seg.Size() {
			t.Errorf("%s: %d bytes free of %d once every window has ended", tc.onFull, free, f.seg.Size())
		}
		if used > capacity || used < capacity*8/10 {
			t.Errorf("%s: %d of %d slots used", tc.onFull, used, capacity)
		}
		last := do(a, "1", 0, "192.0.2.1")
		if last.status != tc.want {
			t.Errorf("%s %s: a new client in a full table got %d, want %d", tc.onFull, tc.config, last.status, tc.want)
		}
		switch tc.onFull {
		case "evict":
			if evictions == 0 || rejected != 0 {
				t.Errorf("evict: %d evictions, %d rejected", evictions, rejected)
			}
		case "reject":
			if evictions != 0 || refusals(t, f.seg) == 0 {
				t.Errorf("reject: %d evictions, %d refusals", evictions, refusals(t, f.seg))
			}
		}

		if len(f.logs) == 0 || !strings.Contains(f.logs[0], "shared memory full") {
			t.Errorf("%s: no log of the full table: %q", tc.onFull, f.logs)
		}
		if len(f.logs) > 1 {
			t.Errorf("%s: logged %d times within a second", tc.onFull, len(f.logs))
		}
	}
}

func refusals(t *testing.T, seg *shm.Segment) uint64 {
	t.Helper()
	tbl, err := OpenWindowTable(seg)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Refusals()
}

func TestAccessAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	f := newFixture(t, 64<<10, "evict")
	for _, config := range []string{
		`{"count": 2000000000000, "time_window": 60, "rejected_code": 503, "key": "remote_addr"}`,
		`{"count": 1, "time_window": 60, "key_type": "var_combination", "key": "$remote_addr $http_x_user $arg_user $server_port"}`,
		`{"count": 1, "time_window": 60, "key": "route_id", "rejected_msg": "no"}`,
	} {
		a := f.build("1", config)
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1234}, nil)
		ctx.Request.SetRequestURI("/hello?user=u")
		ctx.Request.Header.Set("X-User", "ann")
		route := &plugins.RouteInfo{ID: "1"}
		allocs := testing.AllocsPerRun(1000, func() {
			c := plugins.AcquireCtx(&ctx, route, time.Now().UnixNano())
			a.Access(c)
			c.ApplyResponseHeaders()
			plugins.ReleaseCtx(c)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per request", config, allocs)
		}
	}
}

// The key's value is hashed as limit-count always hashed it: an address in its 4 or
// 16 bytes, a port in 2, big-endian. A binary upgrade keeps the shared table, and with it
// every live window, only while these stay the same.
func TestFingerprintsKeepTheirForm(t *testing.T) {
	var base shm.KeyHash // the zero hash: the table's secret plays no part here
	base.WriteString("route\x00" + "1\x00")
	tests := []struct {
		key, client string
		want        []byte
	}{
		{"remote_addr", "10.0.0.1", []byte{10, 0, 0, 1}},
		{"remote_addr", "::ffff:10.0.0.1", []byte{10, 0, 0, 1}},
		{"remote_addr", "2001:db8::1", []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"remote_port", "10.0.0.1", []byte{40000 >> 8, 40000 & 0xff}},
		{"http_x_user", "10.0.0.1", []byte("ann")},
		{"http_x_none", "10.0.0.1", []byte{10, 0, 0, 1}}, // no value: the client's address
	}
	for _, tt := range tests {
		cfg, err := Parse(json.RawMessage(`{"count": 1, "time_window": 60, "key": "` + tt.key + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		ks, err := newKeySource(base, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var req fasthttp.Request
		req.SetRequestURI("/hello")
		req.Header.Set("X-User", "ann")
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tt.client), Port: 40000}, nil)
		c := plugins.AcquireCtx(&ctx, &plugins.RouteInfo{ID: "1"}, 0)
		want := base
		want.Write(tt.want)
		if got := ks.fingerprint(c); got != want.Sum() {
			t.Errorf("key %s from %s: the fingerprint is not of %v", tt.key, tt.client, tt.want)
		}
		plugins.ReleaseCtx(c)
	}
}
