package worker

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/errlog"
	"gw/plugins"
	"gw/shm"
	"gw/worker/proxy"
)

// unbuildable holds objects as an older binary, a hand edit or another tool might have
// stored them: each decodes, and each fails only when built. The service and two routes
// name a plugin this binary does not have; one route's path is not one.
const unbuildable = `{
	"version": 7,
	"upstreams": [
		{"id": "ok", "type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": 1, "weight": 1}]}
	],
	"services": [{"id": "s-bad", "plugins": {"no-such-plugin": {}}}],
	"routes": [
		{"id": "uses-ch", "uri": "/uses-ch", "upstream_id": "ch"},
		{"id": "uses-s-bad", "uri": "/uses-s-bad", "service_id": "s-bad", "upstream_id": "ok"},
		{"id": "gone", "uri": "/gone", "upstream_id": "deleted-with-force"},
		{"id": "bad-path", "uri": "no-slash"},
		{"id": "bad-plugin", "uri": "/bad-plugin", "upstream_id": "ok", "plugins": {"no-such-plugin": {}}},
		{"id": "fine", "uri": "/fine", "upstream_id": "ok"}
	],
	"consumers": [], "plugin_configs": [], "global_rules": [], "ssls": []
}`

func decodeSnapshot(t *testing.T, text string) *conf.Snapshot {
	t.Helper()
	var snap conf.Snapshot
	if err := json.Unmarshal([]byte(text), &snap); err != nil {
		t.Fatal(err)
	}
	return &snap
}

func testShared(t testing.TB) *plugins.Shared {
	t.Helper()
	cfg := conf.Default()
	shared := &plugins.Shared{Segments: map[string]*shm.Segment{}, Config: cfg, Logf: t.Logf}
	for name, spec := range plugins.Segments() {
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
		if err != nil {
			t.Fatalf("segment %s: %v", name, err)
		}
		t.Cleanup(func() { seg.Close() })
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				t.Fatal(err)
			}
		}
		shared.Segments[name] = seg
	}
	return shared
}

func leftOutKeys(leftOut []conf.LeftOut) map[string]string {
	keys := map[string]string{}
	for _, l := range leftOut {
		keys[l.Key()] = l.Reason
	}
	return keys
}

// serve answers one GET for path from t, as the worker's handler does.
func serve(w *Worker, path string) (int, string) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI(path)
	req.Header.SetHost("gw.test")
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	w.handle(&ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Body())
}

// withPanickingUpstream adds upstream "ch", whose weights no longer decode (the Admin API
// refuses them) but which an older binary could have stored: its chash ring's size
// overflowed, a panic inside the balancer's build before the build capped it. Set in Go,
// past the decoder's check, it stands for any build that panics.
func withPanickingUpstream(snap *conf.Snapshot) *conf.Snapshot {
	snap.Upstreams = append(snap.Upstreams, conf.Upstream{ID: "ch", Type: "chash", Key: "remote_addr", Nodes: conf.Nodes{
		{Host: "127.0.0.1", Port: 1980, Weight: math.MaxInt}, {Host: "127.0.0.1", Port: 1981, Weight: math.MaxInt}}})
	return snap
}

func TestCompileLeavesOutWhatFailsToBuildAndServesTheRest(t *testing.T) {
	snap := withPanickingUpstream(decodeSnapshot(t, unbuildable))
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	table, leftOut, err := compile(snap, pools, testShared(t))
	if err != nil {
		t.Fatal(err)
	}
	got := leftOutKeys(leftOut)
	for key, reason := range map[string]string{
		"upstreams/ch":      "",
		"services/s-bad":    "no-such-plugin",
		"routes/bad-path":   `must start with "/"`,
		"routes/bad-plugin": "no-such-plugin",
	} {
		if !strings.Contains(got[key], reason) {
			t.Errorf("left out %s: %q, want a reason with %q", key, got[key], reason)
		}
	}
	if _, ok := got["upstreams/ch"]; !ok || len(got) != 4 {
		t.Errorf("left out %v, want exactly the four objects that fail", got)
	}

	w := &Worker{log: errlog.New(io.Discard, "test"), conns: newConnTracker()}
	w.table.Store(table)
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		// A route whose upstream is left out, or was deleted with ?force=true, is still
		// routed and answers 503 naming what it lacks.
		{"/uses-ch", 503, "upstream ch not found"},
		{"/gone", 503, "upstream deleted-with-force not found"},
		// Its service's plugins cannot run, so nothing of the route does.
		{"/uses-s-bad", 503, "service s-bad not found"},
		// A route left out is not routed at all: fail closed, never without its plugins.
		{"/bad-plugin", 404, "Route Not Found"},
		// Everything else serves: port 1 refuses, so the proxy's 502 proves it was tried.
		{"/fine", 502, ""},
	} {
		status, body := serve(w, c.path)
		if status != c.status || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, status, body, c.status, c.body)
		}
	}
}

func TestAGlobalRuleThatCannotBeBuiltClosesTheGateway(t *testing.T) {
	for _, c := range []struct{ name, snapshot string }{
		{"fails here", `{"version":1,"routes":[{"id":"r","uri":"/r","upstream":{"type":"roundrobin","nodes":[{"host":"127.0.0.1","port":1,"weight":1}]}}],
			"global_rules":[{"id":"g1","plugins":{"no-such-plugin":{}}}]}`},
		{"left out by the master", `{"version":1,"routes":[{"id":"r","uri":"/r","upstream":{"type":"roundrobin","nodes":[{"host":"127.0.0.1","port":1,"weight":1}]}}],
			"left_out":[{"kind":"global_rules","id":"g1","reason":"does not decode"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pools := proxy.NewPools()
			t.Cleanup(pools.Close)
			table, _, err := compile(decodeSnapshot(t, c.snapshot), pools, testShared(t))
			if err != nil {
				t.Fatal(err)
			}
			w := &Worker{log: errlog.New(io.Discard, "test"), conns: newConnTracker()}
			w.table.Store(table)
			for _, path := range []string{"/r", "/unrouted"} {
				// Serving without the rule could let in what it refuses (key-auth as a
				// global rule): every request is refused instead, naming the rule.
				if status, body := serve(w, path); status != 503 || !strings.Contains(body, "global rule g1") {
					t.Errorf("GET %s: %d %q, want 503 naming global rule g1", path, status, body)
				}
			}
		})
	}
}

func TestCheckerFindsWhatTheWorkerWouldLeaveOut(t *testing.T) {
	shared := testShared(t)
	checker := NewChecker(shared.Segments, errlog.New(io.Discard, "check"))
	leftOut, err := checker.Check(withPanickingUpstream(decodeSnapshot(t, unbuildable)), conf.Default())
	if err != nil {
		t.Fatal(err)
	}
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	_, compiled, err := compile(withPanickingUpstream(decodeSnapshot(t, unbuildable)), pools, shared)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := leftOutKeys(leftOut), leftOutKeys(compiled); len(got) != len(want) || len(got) == 0 {
		t.Fatalf("checker left out %v, a worker %v: they must agree", got, want)
	} else {
		for key := range want {
			if _, ok := got[key]; !ok {
				t.Errorf("checker did not leave out %s", key)
			}
		}
	}
}

func TestLoadRefusesASnapshotItCannotServeAsSent(t *testing.T) {
	shared := testShared(t)
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	w := &Worker{log: errlog.New(io.Discard, "test"), conns: newConnTracker(), pools: pools, shared: shared,
		certs: newCertStore("", errlog.New(io.Discard, "test"))}
	good := `{"version":1,"routes":[{"id":"fine","uri":"/fine","upstream":{"type":"roundrobin","nodes":[{"host":"127.0.0.1","port":1,"weight":1}]}}]}`
	if v, err := w.load([]byte(good)); err != nil || v != 1 {
		t.Fatalf("load of a good snapshot: %d %v", v, err)
	}
	// The master did not leave these out: the worker must not serve a snapshot that
	// differs from the one the Admin API acknowledged.
	_, err := w.load([]byte(unbuildable))
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "services/s-bad") {
		t.Fatalf("load of a snapshot with unbuildable objects: %v, want an error naming services/s-bad", err)
	}
	if w.table.Load().version != 1 {
		t.Errorf("after the refused snapshot the worker serves version %d, want 1", w.table.Load().version)
	}
	// With the master's verdict in LeftOut (and the objects removed), it serves.
	snap := decodeSnapshot(t, unbuildable)
	leftOut, err := NewChecker(shared.Segments, errlog.New(io.Discard, "check")).Check(decodeSnapshot(t, unbuildable), conf.Default())
	if err != nil {
		t.Fatal(err)
	}
	snap.LeaveOut(leftOut)
	payload, _ := json.Marshal(snap)
	if v, err := w.load(payload); err != nil || v != 7 {
		t.Fatalf("load with the master's left-out list: %d %v", v, err)
	}
}

func TestGuardTurnsAPanicIntoAnErrorAndLogsTheStack(t *testing.T) {
	var logged string
	err := guard(func(format string, args ...any) { logged = fmt.Sprintf(format, args...) }, func() error {
		var nodes []int
		_ = nodes[3] // index out of range: a bug in a build
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "BUG: building it panicked: runtime error: index out of range") {
		t.Fatalf("guard returned %v, want the panic as an error", err)
	}
	if strings.Contains(err.Error(), "goroutine") || !strings.Contains(logged, "check_test.go") {
		t.Errorf("the stack belongs in the log, not the error: error %q, logged %q", err, logged)
	}
}

func TestLoadDeltaAppliesOneWriteFromTheVersionServed(t *testing.T) {
	shared := testShared(t)
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	w := &Worker{log: errlog.New(io.Discard, "test"), conns: newConnTracker(), pools: pools, shared: shared,
		certs: newCertStore("", errlog.New(io.Discard, "test"))}
	if _, err := w.load([]byte(`{"version":3,"routes":[{"id":"a","uri":"/a","plugins":{}}]}`)); err != nil {
		t.Fatal(err)
	}
	put := func(from, to uint64, id, uri string) []byte {
		return mustMarshal(t, &conf.Delta{From: from, To: to, Changes: []conf.Change{
			conf.ChangeOf("routes", conf.ID(id), &conf.Route{ID: conf.ID(id), URI: uri, Plugins: map[string]json.RawMessage{}})}})
	}
	if v, err := w.loadDelta(put(3, 4, "b", "/b")); err != nil || v != 4 {
		t.Fatalf("a delta from the version served: %d %v", v, err)
	}
	for path, want := range map[string]int{"/a": 503, "/b": 503, "/c": 404} {
		if status, _ := serve(w, path); status != want {
			t.Errorf("GET %s after the delta: %d, want %d", path, status, want)
		}
	}
	// Already held: acknowledged as is.
	if v, err := w.loadDelta(put(3, 4, "b", "/b")); err != nil || v != 4 {
		t.Errorf("a delta the worker holds: %d %v, want 4 acknowledged", v, err)
	}
	// From another version: refused, so the master sends the whole snapshot.
	if _, err := w.loadDelta(put(5, 6, "c", "/c")); err == nil || !strings.Contains(err.Error(), "serves version 4") {
		t.Errorf("a delta from version 5 to a worker at 4: %v, want a refusal", err)
	}
	if status, _ := serve(w, "/c"); status != 404 {
		t.Errorf("a refused delta was served: GET /c %d", status)
	}
}
