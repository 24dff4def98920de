package admin

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"gw/conf"
	"gw/master/store"
	_ "gw/plugins/all"
)

// FuzzWrite sends one fuzzed write (PUT, POST or PATCH, any resource, any id or sub
// path, any body) through the real handler, over a store that already holds one object
// of each kind for references to name. It checks that the handler never panics or
// answers 5xx; that a refused write changes nothing and publishes nothing; and that an
// accepted one is stored once, published once, passes its own validator again, is
// accepted again when sent back as it was stored, and reaches the workers unchanged
// (the published snapshot survives the JSON trip over IPC).
func FuzzWrite(f *testing.F) {
	for _, seed := range []struct{ resource, method, id, body string }{
		{"routes", "PUT", "1", hello},
		{"routes", "PUT", "2", `{"uri":"/a","upstream_id":"1","service_id":1,"plugin_config_id":"1"}`},
		{"routes", "PUT", "2", `{"uri":"/a","upstream_id":"9"}`},
		{"routes", "POST", "", `{"uris":["/a/*","/b/:id"],"hosts":["*.example.com"],"methods":["GET"],"priority":2,"plugins":{}}`},
		{"routes", "PUT", "3", `{"uri":"/a","vars":[["arg_a","==","1"],["OR",["http_x","~~","^a"],["remote_addr","ipmatch",["10.0.0.0/8"]]]],"remote_addrs":["::1"],"plugins":{}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"limit-count":{"count":1,"time_window":1,"group":"g"}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"limit-count":{"count":0,"time_window":60}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"key-auth":{"header":"apikey","hide_credentials":true}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"proxy-rewrite":{"uri":"/x","host":"h","headers":{"set":{"X-A":"1"}}}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"proxy-rewrite":{"regex_uri":["^/a/(.*)","/$1"]}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"basic-auth":{}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{"no-such-plugin":{}}}`},
		{"routes", "PUT", "3", `{"uri":"/a","plugins":{},"create_time":1}`},
		{"routes", "PATCH", "1", `{"uri":"/b","upstream":{"nodes":{"127.0.0.1:81":2}}}`},
		{"routes", "PATCH", "1/uri", `"/c"`},
		{"routes", "PATCH", "1/plugins", `{"prometheus":{}}`},
		{"routes", "PATCH", "1", `{"upstream":{"create_time":1}}`},
		{"routes", "PATCH", "9", `{"uri":"/b"}`},
		{"upstreams", "PUT", "2", `{"type":"chash","hash_on":"header","key":"x-user","nodes":[{"host":"a.example","port":80,"weight":1,"priority":-1}],"retries":2,"timeout":{"connect":1,"send":2,"read":3}}`},
		{"upstreams", "PUT", "2", `{"nodes":{"a:1":1},"keepalive_pool":{"size":1,"idle_timeout":0,"requests":1},"scheme":"https","pass_host":"rewrite","upstream_host":"h"}`},
		{"upstreams", "PATCH", "1", `{"nodes":{"127.0.0.1:82":0}}`},
		{"services", "PUT", "2", `{"upstream_id":"1","hosts":["a.com"],"plugins":{"limit-count":{"count":5,"time_window":10}}}`},
		{"consumers", "PUT", "", `{"username":"jill","plugins":{"key-auth":{"key":"k2"}}}`},
		{"consumers", "PUT", "jill", `{"username":"jill","plugins":{"key-auth":{"key":"k1"}}}`},
		{"consumers", "PUT", "jill", `{"plugins":{"basic-auth":{"username":"u","password":"p"}}}`},
		{"consumers", "PUT", "jill", `{"username":"jill","plugins":{"limit-count":{"count":1,"time_window":1}}}`},
		{"plugin_configs", "PUT", "2", `{"plugins":{"proxy-rewrite":{"uri":"/x"}}}`},
		{"plugin_configs", "PATCH", "1", `{"plugins":{"limit-count":{"count":1,"time_window":1}}}`},
		{"global_rules", "PUT", "2", `{"plugins":{"prometheus":{}}}`},
		{"global_rules", "PUT", "2", `{"id":"3","plugins":{}}`},
		{"routes", "PUT", "a/b", `[`},
		{"routes", "POST", "", ``},
		{"routes", "PUT", strings.Repeat("x", 65), `{"uri":"/a","plugins":{}}`},
	} {
		f.Add(seed.resource, seed.method, seed.id, []byte(seed.body))
	}
	resourceNames := slices.Sorted(maps.Keys(resources))
	methods := []string{http.MethodPut, http.MethodPost, http.MethodPatch}
	f.Fuzz(func(t *testing.T, resource, method, id string, body []byte) {
		// Names that are no resource or method pick one, so that most inputs reach a
		// validator; unknown names have their own unit tests.
		if resources[resource] == nil {
			resource = resourceNames[checksum(resource)%len(resourceNames)]
		}
		if !slices.Contains(methods, method) {
			method = methods[checksum(method)%len(methods)]
		}
		fx := newFuzzFixture(t)
		revision, published := fx.store.Revision(), fx.pub.count()

		target := Prefix + "/" + resource
		if method != http.MethodPost {
			target += "/" + id
		}
		w := fx.send(method, target, body)
		if !strings.HasSuffix(w.Body.String(), "\n") || !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %s: body %q is not JSON ending in \\n", method, target, w.Body)
		}
		switch w.Code {
		case http.StatusOK, http.StatusCreated:
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
			if fx.store.Revision() != revision || fx.pub.count() != published {
				t.Fatalf("%s %s %q: refused with %d, yet the store or the workers changed", method, target, body, w.Code)
			}
			return
		default:
			t.Fatalf("%s %s %q: status %d: %s", method, target, body, w.Code, w.Body)
		}

		if fx.pub.count() != published+1 || fx.store.Revision() <= revision {
			t.Fatalf("%s %s %q: accepted, but revision %d -> %d and %d publications", method, target, body,
				revision, fx.store.Revision(), fx.pub.count()-published)
		}
		var answer item
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%s %s: answer %s: %v", method, target, w.Body, err)
		}
		res := resources[resource]
		storedID := strings.TrimPrefix(answer.Key, "/apisix/"+string(res.kind)+"/")
		obj, ok := fx.store.Get(res.kind, storedID)
		if !ok {
			t.Fatalf("%s %s: answered %s, which is not stored", method, target, answer.Key)
		}
		if err := res.validate(obj.Value); err != nil {
			t.Fatalf("%s %s %q: stored %s, which its validator refuses: %v", method, target, body, obj.Value, err)
		}

		sent, err := json.Marshal(fx.pub.lastDelta())
		if err != nil {
			t.Fatalf("published delta does not encode: %v", err)
		}
		var received conf.Delta
		if err := json.Unmarshal(sent, &received); err != nil {
			t.Fatalf("published delta %s does not decode: %v", sent, err)
		}
		if !reflect.DeepEqual(&received, fx.pub.lastDelta()) {
			t.Fatalf("the delta published after %s %s %q changes on its way to the workers:\n%s", method, target, body, sent)
		}
		if snap := fx.pub.last(); !reflect.DeepEqual(snap.Routes, fx.store.Snapshot().Routes) {
			t.Fatalf("after %s %s %q the published deltas add up to routes %+v, the store holds %+v", method, target, body, snap.Routes, fx.store.Snapshot().Routes)
		}

		// What was stored, sent back without the server's fields, is accepted as is.
		again := withoutServerFields(t, obj.Value)
		if w := fx.send(http.MethodPut, Prefix+"/"+resource+"/"+storedID, again); w.Code != http.StatusOK {
			t.Fatalf("%s %s %q stored %s; sending it back answers %d: %s", method, target, body, obj.Value, w.Code, w.Body)
		}
	})
}

// checksum maps a name to a number, to pick a resource or method for it.
func checksum(s string) int {
	sum := 0
	for i := range len(s) {
		sum += int(s[i])
	}
	return sum
}

// withoutServerFields removes create_time and update_time where PUT refuses them.
func withoutServerFields(t *testing.T, value []byte) []byte {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(value, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "create_time")
	delete(obj, "update_time")
	for _, nested := range []string{"upstream", "plugins"} {
		var inner map[string]json.RawMessage
		if json.Unmarshal(obj[nested], &inner) != nil || inner == nil {
			continue
		}
		delete(inner, "create_time")
		delete(inner, "update_time")
		obj[nested] = mustJSON(t, inner)
	}
	return mustJSON(t, obj)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type fuzzFixture struct {
	t     *testing.T
	h     *Handler
	store *store.Store
	pub   *countingPublisher
}

// fuzzBase is one object of each kind, for a fuzzed write to reference or patch.
var fuzzBase = []struct{ resource, id, body string }{
	{"upstreams", "1", `{"nodes":{"127.0.0.1:1980":1}}`},
	{"services", "1", `{"upstream_id":"1"}`},
	{"plugin_configs", "1", `{"plugins":{"prometheus":{}}}`},
	{"consumers", "jack", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`},
	{"routes", "1", hello},
	{"global_rules", "1", `{"plugins":{"prometheus":{}}}`},
}

// newFuzzFixture builds a handler over a fresh in-memory store holding fuzzBase: a fresh
// one per input keeps every input independent of the ones before it.
func newFuzzFixture(t *testing.T) *fuzzFixture {
	s, err := store.OpenBackend(memBackend{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fx := &fuzzFixture{t: t, store: s, pub: &countingPublisher{}}
	fx.h = New(Options{
		Store:     s,
		Keys:      []conf.AdminKey{{Name: "admin", Key: adminKey, Role: conf.RoleAdmin}},
		Allow:     []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}},
		Publisher: fx.pub,
	})
	for _, obj := range fuzzBase {
		if w := fx.send(http.MethodPut, Prefix+"/"+obj.resource+"/"+obj.id, []byte(obj.body)); w.Code != http.StatusCreated {
			t.Fatalf("base %s/%s: %d %s", obj.resource, obj.id, w.Code, w.Body)
		}
	}
	return fx
}

// send makes one request with the admin key from loopback. The path is set after
// NewRequest, which would refuse a fuzzed one that is not a valid request target.
func (fx *fuzzFixture) send(method, path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/", strings.NewReader(string(body)))
	r.URL.Path = path
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("X-API-KEY", adminKey)
	w := httptest.NewRecorder()
	fx.h.ServeHTTP(w, r)
	return w
}

// countingPublisher keeps the last delta, the snapshot the deltas add up to, and counts
// publications.
type countingPublisher struct {
	mu    sync.Mutex
	n     int
	snap  *conf.Snapshot
	delta *conf.Delta
}

func (p *countingPublisher) Publish(_ context.Context, d *conf.Delta) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.snap == nil {
		p.snap = emptySnapshot()
	}
	p.snap, p.delta = p.snap.Apply(d), d
	return nil
}

func (p *countingPublisher) lastDelta() *conf.Delta {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delta
}

func (p *countingPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *countingPublisher) last() *conf.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

// memBackend persists nothing: fuzzing needs a fresh store per input, without a
// directory and an fsync per write.
type memBackend struct{}

func (memBackend) Load([]store.Kind) ([]store.Object, uint64, error) { return nil, 0, nil }
func (memBackend) Put(store.Object) error                            { return nil }
func (memBackend) Delete(store.Kind, string, uint64) error           { return nil }
func (memBackend) SetRevision(uint64) error                          { return nil }
func (memBackend) Close() error                                      { return nil }
