package admin

import (
	"strings"
	"testing"

	"gw/conf"
)

// fakeBuilder fails the objects named in fails when a delta puts them, and the objects
// breaks names when a delta changes the key they are listed under, as a worker's build
// would; before is what the served snapshot left out.
type fakeBuilder struct {
	fails  map[string]string // "routes/1" → reason
	breaks map[string][]string
	before []conf.LeftOut
}

func (b *fakeBuilder) Check(d *conf.Delta) ([]conf.LeftOut, error) {
	var failed []conf.LeftOut
	fail := func(key string) {
		if reason, ok := b.fails[key]; ok {
			kind, id, _ := strings.Cut(key, "/")
			failed = append(failed, conf.LeftOut{Kind: kind, ID: conf.ID(id), Reason: reason})
		}
	}
	for _, c := range d.Changes {
		if !c.Deleted() {
			fail(c.Key())
		}
		for _, broken := range b.breaks[c.Key()] {
			fail(broken)
		}
	}
	return failed, nil
}

func (b *fakeBuilder) LeftOut() []conf.LeftOut { return b.before }

func TestAWriteIsStoredOnlyIfItsSnapshotBuilds(t *testing.T) {
	f := newFixture(t)
	b := &fakeBuilder{fails: map[string]string{}, breaks: map[string][]string{"upstreams/u": {"routes/r"}}}
	f.h.opts.Builder = b
	expect(t, f.call("PUT", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:1980":1}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/r", `{"uri":"/r","upstream_id":"u"}`), 201, "")
	published, revision := f.pub.count(), f.store.Revision()

	// The written object fails to build: refused, naming it and why.
	b.fails["routes/r2"] = "no-such-plugin is not built"
	w := f.call("PUT", "/apisix/admin/routes/r2", `{"uri":"/r2","upstream_id":"u"}`)
	expect(t, w, 400, `{"error_msg":"invalid configuration: routes/r2 cannot be served: no-such-plugin is not built"}`)

	// The write makes another object fail: refused too, naming that one.
	b.fails["routes/r"] = "its upstream cannot be built"
	w = f.call("PATCH", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:1981":1}}`)
	expect(t, w, 400, `{"error_msg":"invalid configuration: this change would leave routes/r unservable: its upstream cannot be built"}`)
	if f.pub.count() != published || f.store.Revision() != revision {
		t.Fatalf("refused writes changed the store (revision %d → %d) or published (%d → %d)",
			revision, f.store.Revision(), published, f.pub.count())
	}

	// routes/r was left out at start: an unrelated write need not fix it, and the
	// snapshot published leaves it out, saying why.
	b.before = []conf.LeftOut{{Kind: "routes", ID: "r", Reason: "its upstream cannot be built"}}
	expect(t, f.call("PUT", "/apisix/admin/routes/r3", `{"uri":"/r3","upstream_id":"u"}`), 201, "")
	snap := f.pub.last()
	if !snap.IsLeftOut("routes", "r") || len(snap.Routes) != 1 || snap.Routes[0].ID != "r3" {
		t.Errorf("published routes %v, left out %v; want r3 served and r left out", snap.Routes, snap.LeftOut)
	}
	if snap.Version != f.store.Revision() {
		t.Errorf("published version %d, want the store's revision %d", snap.Version, f.store.Revision())
	}
	// A write to the left-out object itself must make it servable.
	w = f.call("PATCH", "/apisix/admin/routes/r", `{"desc":"still broken"}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "routes/r cannot be served") {
		t.Errorf("PATCH of a left-out route that still fails: %d %s, want 400", w.Code, w.Body)
	}
	// Deleting it is always possible.
	expect(t, f.call("DELETE", "/apisix/admin/routes/r", ""), 200, "")
}

func TestGetSaysWhyAStoredObjectIsLeftOut(t *testing.T) {
	f := newFixture(t)
	b := &fakeBuilder{}
	f.h.opts.Builder = b
	expect(t, f.call("PUT", "/apisix/admin/routes/r", `{"uri":"/r","plugins":{}}`), 201, "")
	b.before = []conf.LeftOut{{Kind: "routes", ID: "r", Reason: "does not build"}}
	for _, target := range []string{"/apisix/admin/routes/r", "/apisix/admin/routes"} {
		if w := f.call("GET", target, ""); !strings.Contains(w.Body.String(), `"left_out":"does not build"`) {
			t.Errorf("GET %s: %s, want the reason it is left out", target, w.Body)
		}
	}
	b.before = nil
	if w := f.call("GET", "/apisix/admin/routes/r", ""); strings.Contains(w.Body.String(), "left_out") {
		t.Errorf("GET of a served route: %s, want no left_out", w.Body)
	}
}
