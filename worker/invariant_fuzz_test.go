package worker

// This file checks the promise the master and the workers make together, so it drives the
// master's Admin API handler from the worker's tests (a test-only import upwards): what
// the Admin API accepts, every worker serves exactly as written, and no sequence of writes
// can leave a worker that does not serve.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"gw/conf"
	"gw/internal/errlog"
	"gw/master/admin"
	"gw/master/store"
	_ "gw/plugins/all"
	"gw/worker/proxy"
)

// invariantFixture is an Admin API whose builder is the workers' own Checker and whose
// publisher loads every snapshot into a worker, as the master does over IPC.
type invariantFixture struct {
	t       testing.TB
	h       *admin.Handler
	w       *Worker
	checker *Checker
	cfg     *conf.Config
	served  *conf.Snapshot // what the worker serves, nil until servedSnapshot makes it
	version uint64         // the version the worker serves
	// fuzzed makes Publish point every node at loopback (loopbackOnly): fuzzed
	// addresses must reach no other machine.
	fuzzed bool
}

func newInvariantFixture(t testing.TB) *invariantFixture {
	shared := testShared(t)
	shared.Logf = func(string, ...any) {}
	quiet := errlog.New(io.Discard, "fuzz")
	// BuildOnly: nothing resolves or dials in the background; requests only reach
	// loopback (see loadPublished).
	pools := proxy.NewPoolsWith(proxy.Options{BuildOnly: true})
	t.Cleanup(pools.Close)
	fx := &invariantFixture{
		t: t, cfg: shared.Config, checker: NewChecker(shared.Segments, quiet),
		w: &Worker{log: quiet, conns: newConnTracker(), pools: pools, shared: shared, certs: newCertStore("", quiet)},
	}
	s := store.OpenMemory()
	t.Cleanup(func() { s.Close() })
	fx.h = admin.New(admin.Options{
		Store:     s,
		Builder:   fx,
		Publisher: fx,
		Keys:      []conf.AdminKey{{Name: "admin", Key: conf.DefaultAdminKey, Role: conf.RoleAdmin}},
		Allow:     []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}},
	})
	empty := s.Snapshot()
	if _, err := fx.w.load(mustMarshal(t, empty)); err != nil {
		t.Fatal(err)
	}
	fx.checker.Reset(empty)
	return fx
}

func (fx *invariantFixture) Check(d *conf.Delta) ([]conf.LeftOut, error) {
	return fx.checker.CheckDelta(d, fx.cfg)
}

func (fx *invariantFixture) LeftOut() []conf.LeftOut {
	return fx.w.leftOut
}

// Publish hands the delta to the worker as the master does: encoded, sent, decoded and
// applied. The worker must take it: the Admin API is about to acknowledge it.
func (fx *invariantFixture) Publish(_ context.Context, d *conf.Delta) error {
	d.From = fx.version
	fx.checker.Commit(d, fx.cfg)
	if fx.fuzzed {
		loopbackOnly(d)
	}
	payload := mustMarshal(fx.t, d)
	if _, err := fx.w.loadDelta(payload); err != nil {
		fx.t.Fatalf("the worker refused a delta the Admin API is acknowledging: %v\n%s", err, payload)
	}
	fx.version = d.To
	fx.served = nil // made when asked for: a whole snapshot costs what the config holds
	return nil
}

// servedSnapshot is the snapshot the worker serves, whole.
func (fx *invariantFixture) servedSnapshot() *conf.Snapshot {
	if fx.served == nil {
		fx.served = snapshotOf(fx.w.table.Load(), fx.w.snap, fx.w.leftOut)
	}
	return fx.served
}

func mustMarshal(t testing.TB, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// loopbackOnly points every node d puts at 127.0.0.1:1, where nothing listens, so that
// requests through fuzzed routes reach no other machine. Addresses change nothing a build
// checks beyond their syntax, which the Admin API has already checked.
func loopbackOnly(d *conf.Delta) {
	local := func(u *conf.Upstream) {
		if u == nil {
			return
		}
		nodes := slices.Clone(u.Nodes) // the store's decoded object shares them
		for i := range nodes {
			nodes[i].Host, nodes[i].Port = "127.0.0.1", 1
		}
		u.Nodes = nodes
		u.Checks = nil // active checks are the master's; nothing to probe here
	}
	for i := range d.Changes {
		c := &d.Changes[i]
		if c.Upstream != nil {
			u := *c.Upstream
			local(&u)
			c.Upstream = &u
		}
		if c.Service != nil && c.Service.Upstream != nil {
			svc, u := *c.Service, *c.Service.Upstream
			local(&u)
			svc.Upstream, c.Service = &u, &svc
		}
		if c.Route != nil && c.Route.Upstream != nil {
			r, u := *c.Route, *c.Route.Upstream
			local(&u)
			r.Upstream, c.Route = &u, &r
		}
	}
}

func (fx *invariantFixture) send(method, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/", bytes.NewReader(body))
	// Set after NewRequest, which would refuse a fuzzed path that is no request target.
	r.URL.Path, r.URL.RawQuery, _ = strings.Cut(path, "?")
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("X-API-KEY", conf.DefaultAdminKey)
	w := httptest.NewRecorder()
	fx.h.ServeHTTP(w, r)
	return w
}

// requestEveryRoute sends one request down each served route; whatever the status, the
// worker must answer.
func (fx *invariantFixture) requestEveryRoute() {
	for _, r := range fx.servedSnapshot().Routes {
		for _, path := range r.Paths() {
			path = strings.NewReplacer("*", "x", ":", "x").Replace(path)
			if !strings.HasPrefix(path, "/") {
				path = "/" + path
			}
			if status, _ := serve(fx.w, path); status == 0 {
				fx.t.Fatalf("route %s: GET %s got no answer", r.ID, path)
			}
		}
	}
}

// invariantSeeds are sequences of writes, one per line: METHOD PATH BODY. The first two
// are the writes that once took a node down: an upstream whose chash ring overflows, and
// a forced delete of an upstream a route uses.
var invariantSeeds = []string{
	"PUT /apisix/admin/upstreams/ch {\"type\":\"chash\",\"key\":\"remote_addr\",\"nodes\":{\"127.0.0.1:1980\":100000000000000000,\"127.0.0.1:1981\":1}}\n" +
		"PUT /apisix/admin/routes/r1 {\"uri\":\"/r1\",\"upstream_id\":\"ch\"}\n",
	"PUT /apisix/admin/upstreams/u1 {\"nodes\":{\"127.0.0.1:1980\":1}}\n" +
		"PUT /apisix/admin/routes/r1 {\"uri\":\"/r1\",\"upstream_id\":\"u1\"}\n" +
		"DELETE /apisix/admin/upstreams/u1?force=true \n" +
		"PUT /apisix/admin/routes/r2 {\"uri\":\"/r2\",\"upstream\":{\"nodes\":{\"127.0.0.1:1980\":1}}}\n",
	"PUT /apisix/admin/services/s1 {\"upstream\":{\"nodes\":{\"127.0.0.1:1980\":1}},\"plugins\":{\"key-auth\":{}}}\n" +
		"PUT /apisix/admin/routes/r1 {\"uri\":\"/r1/*\",\"service_id\":\"s1\"}\n" +
		"DELETE /apisix/admin/services/s1?force=true \n",
	"PUT /apisix/admin/plugin_configs/p1 {\"plugins\":{\"limit-count\":{\"count\":1,\"time_window\":60}}}\n" +
		"PUT /apisix/admin/routes/r1 {\"uri\":\"/r1\",\"plugin_config_id\":\"p1\",\"upstream\":{\"nodes\":{\"127.0.0.1:1980\":1}}}\n" +
		"PATCH /apisix/admin/plugin_configs/p1 {\"plugins\":{\"limit-count\":{\"count\":2,\"time_window\":1}}}\n" +
		"DELETE /apisix/admin/plugin_configs/p1?force=true \n",
	"PUT /apisix/admin/consumers/jack {\"username\":\"jack\",\"plugins\":{\"key-auth\":{\"key\":\"k\"},\"limit-count\":{\"count\":1,\"time_window\":1}}}\n" +
		"PUT /apisix/admin/global_rules/g {\"plugins\":{\"key-auth\":{}}}\n" +
		"PUT /apisix/admin/routes/r1 {\"uris\":[\"/a\",\"/b/:id\"],\"hosts\":[\"*.example.com\"],\"upstream\":{\"type\":\"ewma\",\"nodes\":[{\"host\":\"a.example\",\"port\":80,\"weight\":1}]}}\n" +
		"DELETE /apisix/admin/consumers/jack \n",
	"PUT /apisix/admin/upstreams/u {\"type\":\"chash\",\"hash_on\":\"header\",\"key\":\"x-user\",\"nodes\":[{\"host\":\"127.0.0.1\",\"port\":80,\"weight\":3,\"priority\":-1}],\"retries\":2,\"timeout\":{\"connect\":1,\"send\":2,\"read\":3}}\n" +
		"PUT /apisix/admin/routes/r {\"uri\":\"/r\",\"upstream_id\":\"u\",\"timeout\":{\"connect\":1e300,\"send\":1,\"read\":1}}\n" +
		"PATCH /apisix/admin/upstreams/u {\"nodes\":{\"127.0.0.1:82\":0}}\n",
}

// FuzzAdminWritesKeepEveryWorkerServing sends a fuzzed sequence of Admin API writes.
// After each accepted one, the snapshot the handler publishes must load in a worker (the
// publisher fails the test otherwise) and every route must answer a request; a refused
// write must change nothing the worker serves. No write may panic the handler or the
// worker, or answer 5xx.
func FuzzAdminWritesKeepEveryWorkerServing(f *testing.F) {
	for _, seed := range invariantSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		fx := newInvariantFixture(t)
		fx.fuzzed = true
		for n, line := range bytes.Split(script, []byte("\n")) {
			if n == 16 {
				break // long scripts add time, not cases
			}
			method, rest, _ := bytes.Cut(line, []byte(" "))
			path, body, _ := bytes.Cut(rest, []byte(" "))
			switch string(method) {
			case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete:
			default:
				continue
			}
			target := string(path)
			if !strings.HasPrefix(target, admin.Prefix+"/") {
				continue
			}
			before := fx.version
			w := fx.send(string(method), target, body)
			if w.Code >= 500 {
				t.Fatalf("%s %s %q: %d %s", method, target, body, w.Code, w.Body)
			}
			if w.Code >= 300 && fx.version != before {
				t.Fatalf("%s %s %q: refused with %d, yet a snapshot was published", method, target, body, w.Code)
			}
			fx.requestEveryRoute()
		}
	})
}

func TestTheWritesThatOnceTookANodeDownAreRefusedOrServed(t *testing.T) {
	fx := newInvariantFixture(t)
	// An upstream whose ring would overflow is refused, naming the field; nothing changes.
	w := fx.send("PUT", "/apisix/admin/upstreams/ch", []byte(`{"type":"chash","key":"remote_addr","nodes":{"127.0.0.1:1980":100000000000000000,"127.0.0.1:1981":1}}`))
	if w.Code != 400 || !strings.Contains(w.Body.String(), "weight") || fx.version != 0 {
		t.Fatalf("PUT of an overflowing chash upstream: %d %s (published: %v), want 400 naming the weight and nothing published", w.Code, w.Body, fx.version != 0)
	}
	// A forced delete of an upstream a route uses: the route stays and answers 503 naming
	// it, and an unrelated write is then served at once.
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/apisix/admin/upstreams/u1", `{"nodes":{"127.0.0.1:1980":1}}`},
		{"PUT", "/apisix/admin/routes/r1", `{"uri":"/r1","upstream_id":"u1"}`},
		{"DELETE", "/apisix/admin/upstreams/u1?force=true", ``},
		{"PUT", "/apisix/admin/routes/r2", `{"uri":"/r2","upstream":{"nodes":{"127.0.0.1:1980":1}}}`},
	} {
		if w := fx.send(c.method, c.path, []byte(c.body)); w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
	if status, body := serve(fx.w, "/r1"); status != 503 || !strings.Contains(body, "upstream u1 not found") {
		t.Errorf("GET /r1 after its upstream was deleted with force: %d %s, want 503 naming u1", status, body)
	}
	if status, _ := serve(fx.w, "/r2"); status != 502 { // served: its node refuses
		t.Errorf("GET /r2, written after the forced delete: %d, want it routed (502 from the closed port)", status)
	}
}
