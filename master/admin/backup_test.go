package admin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gw/master/store"
)

// populate fills f through the Admin API with one object of every kind, references included.
func populate(t *testing.T, f *fixture) {
	t.Helper()
	for _, c := range []struct{ method, target, body string }{
		{"PUT", "/apisix/admin/upstreams/u1", `{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`},
		{"PUT", "/apisix/admin/services/s1", `{"upstream_id":"u1"}`},
		{"PUT", "/apisix/admin/plugin_configs/p1", `{"plugins":{"proxy-rewrite":{"uri":"/x"}}}`},
		{"PUT", "/apisix/admin/consumers", jack},
		{"PUT", "/apisix/admin/global_rules/g1", `{"plugins":{"prometheus":{}}}`},
		{"PUT", "/apisix/admin/routes/r1", `{"uri":"/r1","service_id":"s1","plugin_config_id":"p1","vars":[["arg_a",">","1"]]}`},
		{"POST", "/apisix/admin/routes", `{"uri":"/posted","upstream_id":"u1"}`},
	} {
		f.clock = f.clock.Add(time.Second)
		if w := f.call(c.method, c.target, c.body); w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.target, w.Code, w.Body)
		}
	}
}

// withoutRevision decodes a backup and drops its revision, which an import does not restore.
func withoutRevision(t *testing.T, backup []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(backup, &v); err != nil {
		t.Fatalf("backup is not JSON: %v\n%s", err, backup)
	}
	delete(v, "revision")
	return v
}

func TestExportWipeImportIsIdentical(t *testing.T) {
	source := newFixture(t)
	populate(t, source)
	backup := source.h.Export()

	target := newFixture(t)
	target.clock = target.clock.Add(time.Hour) // times must come from the backup, not the clock
	summary, err := target.h.Import(context.Background(), backup, "gwctl", "control socket")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary, "2 routes") || !strings.Contains(summary, "1 upstreams") {
		t.Errorf("summary = %q", summary)
	}
	if got, want := withoutRevision(t, target.h.Export()), withoutRevision(t, backup); !reflect.DeepEqual(got, want) {
		t.Errorf("after import:\n got %v\nwant %v", got, want)
	}
	if target.pub.count() != 1 {
		t.Errorf("import published %d times, want once", target.pub.count())
	}
	for _, kind := range store.Kinds() {
		if got, want := len(target.store.List(kind)), len(source.store.List(kind)); got != want {
			t.Errorf("%s: %d objects, want %d", kind, got, want)
		}
	}
	// Importing it again replaces each object with itself.
	if _, err := target.h.Import(context.Background(), backup, "gwctl", "control socket"); err != nil {
		t.Fatalf("second import: %v", err)
	}
	if got, want := withoutRevision(t, target.h.Export()), withoutRevision(t, backup); !reflect.DeepEqual(got, want) {
		t.Errorf("after a second import:\n got %v\nwant %v", got, want)
	}
}

func TestExportLayout(t *testing.T) {
	f := newFixture(t)
	populate(t, f)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(f.h.Export(), &top); err != nil {
		t.Fatal(err)
	}
	if string(top["gw_backup"]) != "1" || string(top["revision"]) != itoa(int(f.store.Revision())) {
		t.Errorf("gw_backup %s, revision %s", top["gw_backup"], top["revision"])
	}
	var routes []map[string]any
	if err := json.Unmarshal(top["routes"], &routes); err != nil || len(routes) != 2 {
		t.Fatalf("routes = %s (%v)", top["routes"], err)
	}
	if routes[0]["id"] != "r1" || routes[1]["uri"] != "/posted" {
		t.Errorf("routes not in creation order: %v", routes)
	}
	for _, kind := range store.Kinds() {
		if _, ok := top[string(kind)]; !ok {
			t.Errorf("no %q array, even empty", kind)
		}
	}
}

func TestImportReferencesWithinTheFileAndToTheStore(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/upstreams/stored", `{"nodes":{"127.0.0.1:80":1}}`)
	// The route comes first in the file, the upstream it names after it.
	backup := `{"gw_backup":1,
		"routes":[{"id":"a","uri":"/a","upstream_id":"infile"},{"id":7,"uri":"/b","upstream_id":"stored"}],
		"upstreams":[{"id":"infile","nodes":{"127.0.0.1:81":1}}]}`
	if _, err := f.h.Import(context.Background(), []byte(backup), "gwctl", "test"); err != nil {
		t.Fatal(err)
	}
	r, ok := f.store.Get(store.Routes, "7")
	if !ok || !strings.Contains(string(r.Value), `"id":7`) || !strings.Contains(string(r.Value), `"create_time":1700000000`) {
		t.Errorf("route 7 = %s %v; want the integer id as written and the import's time", r.Value, ok)
	}
	u, _ := f.store.Get(store.Upstreams, "infile")
	a, _ := f.store.Get(store.Routes, "a")
	if u.ModifiedIndex > a.ModifiedIndex {
		t.Errorf("upstream written after the route naming it (%d > %d): a crash in between would leave a dangling reference", u.ModifiedIndex, a.ModifiedIndex)
	}
}

func TestImportRejectsAndChangesNothing(t *testing.T) {
	good := `{"id":"ok","uri":"/ok","upstream":{"nodes":{"127.0.0.1:80":1}}}`
	cases := []struct {
		name, backup string
		want         []string // each must appear in the error
	}{
		{"not JSON", `{"gw_backup":1,`, []string{"not a gw backup"}},
		{"an array", `[]`, []string{"not a gw backup"}},
		{"trailing data", `{"gw_backup":1} {}`, []string{"not a gw backup", "data after"}},
		{"no format", `{"routes":[]}`, []string{`"gw_backup": must be 1`, "got nothing (missing)"}},
		{"other format", `{"gw_backup":2,"routes":[]}`, []string{`"gw_backup": must be 1`, "got 2"}},
		{"unknown kind", `{"gw_backup":1,"rootes":[]}`, []string{`"rootes": unknown kind`}},
		{"kind not an array", `{"gw_backup":1,"routes":{}}`, []string{`"routes": must be an array of objects`}},
		{"object not an object", `{"gw_backup":1,"routes":[` + good + `,5]}`, []string{"routes[1]: must be a JSON object, got 5"}},
		{"missing id", `{"gw_backup":1,"routes":[{"uri":"/a"}]}`, []string{`routes[0]: "id": must be a string or an integer, got nothing (missing)`}},
		{"id of a wrong type", `{"gw_backup":1,"routes":[{"id":true,"uri":"/a"}]}`, []string{`routes[0]: "id": must be a string or an integer, got true`}},
		{"negative integer id", `{"gw_backup":1,"routes":[{"id":-1,"uri":"/a","plugins":{}}]}`, []string{`routes[0]: "id": a number must be a positive integer written in digits, got -1`}},
		{"exponent id", `{"gw_backup":1,"routes":[{"id":1e400,"uri":"/a","plugins":{}}]}`, []string{`routes[0]: "id": a number must be a positive integer written in digits, got 1e400`}},
		{"bad id", `{"gw_backup":1,"routes":[{"id":"a/b","uri":"/a"}]}`, []string{`routes[0]: "id": must be 1 to 64 characters`, `got "a/b"`}},
		{"consumer without username", `{"gw_backup":1,"consumers":[{"plugins":{}}]}`, []string{`consumers[0]: "username"`}},
		{"duplicate id", `{"gw_backup":1,"routes":[` + good + `,` + good + `]}`, []string{`routes[1] (id "ok"): id "ok" is also used by routes[0]`}},
		{"bad field value", `{"gw_backup":1,"upstreams":[{"id":"u","type":"fastest","nodes":{"127.0.0.1:80":1}}]}`,
			[]string{`upstreams[0] (id "u"): `, "type", "fastest"}},
		{"dangling reference", `{"gw_backup":1,"routes":[` + good + `,{"id":"r","uri":"/r","upstream_id":"gone"}]}`,
			[]string{`routes[1] (id "r"): failed to fetch upstream info by upstream id [gone]`}},
		{"credential shared inside the file", `{"gw_backup":1,"consumers":[` +
			`{"username":"a","plugins":{"key-auth":{"key":"same"}}},{"username":"b","plugins":{"key-auth":{"key":"same"}}}]}`,
			[]string{"duplicate key of plugin key-auth"}},
		{"credential of a stored consumer", `{"gw_backup":1,"consumers":[{"username":"b","plugins":{"key-auth":{"key":"auth-one"}}}]}`,
			[]string{`consumers[0] (id "b"): duplicate key of plugin key-auth found with consumer: jack`}},
		{"invalid UTF-8", "{\"gw_backup\":1,\"routes\":[" + good + ",{\"id\":\"r\",\"uri\":\"/\xff\",\"plugins\":{}}]}",
			[]string{`property "routes[1].uri" validation failed: the string is not valid UTF-8 (byte 0xff)`}},
		{"NUL", `{"gw_backup":1,"upstreams":[{"id":"u","name":"\u0000","nodes":{"127.0.0.1:80":1}}]}`,
			[]string{`property "upstreams[0].name" validation failed: the string holds NUL`}},
		{"every problem listed", `{"gw_backup":1,"routes":[{"id":"x","uri":5},{"id":"y","uri":6}]}`,
			[]string{`routes[0] (id "x")`, `routes[1] (id "y")`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.call("PUT", "/apisix/admin/consumers", jack)
			before, revision, published := f.h.Export(), f.store.Revision(), f.pub.count()
			_, err := f.h.Import(context.Background(), []byte(tc.backup), "gwctl", "test")
			var importErr *ImportError
			if !errors.As(err, &importErr) {
				t.Fatalf("Import = %v, want an *ImportError", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("error %q does not say nothing changed", err)
			}
			if string(f.h.Export()) != string(before) || f.store.Revision() != revision || f.pub.count() != published {
				t.Error("a refused import changed the store or published")
			}
		})
	}
}

func TestImportCapsTheProblemsListed(t *testing.T) {
	f := newFixture(t)
	var routes []string
	for i := 0; i < maxReported+5; i++ {
		routes = append(routes, `{"id":"r`+itoa(i)+`","uri":5}`)
	}
	_, err := f.h.Import(context.Background(), []byte(`{"gw_backup":1,"routes":[`+strings.Join(routes, ",")+`]}`), "gwctl", "test")
	var importErr *ImportError
	if !errors.As(err, &importErr) || len(importErr.Problems) != maxReported || importErr.Omitted != 5 {
		t.Fatalf("Import = %v", err)
	}
	// One problem a line, under a verdict that counts them all.
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxReported+2 || !strings.HasSuffix(lines[0], itoa(maxReported+5)+" problems:") ||
		!strings.HasPrefix(lines[1], `  routes[0] (id "r0"): `) || lines[len(lines)-1] != "  and 5 more" {
		t.Errorf("error %q is not one problem a line, counting the rest", err)
	}
}

func TestImportIsAudited(t *testing.T) {
	f, _, audit := guardedFixture(t)
	backup := `{"gw_backup":1,"upstreams":[{"id":"u","nodes":{"127.0.0.1:80":1}}],"routes":[{"id":"r","uri":"/r","upstream_id":"u"}]}`
	if _, err := f.h.Import(context.Background(), []byte(backup), "gwctl import", "control socket"); err != nil {
		t.Fatal(err)
	}
	got := audit.records(t)
	if len(got) != 2 || got[0].Resource != "/apisix/admin/upstreams/u" || got[1].Resource != "/apisix/admin/routes/r" ||
		got[0].Key != "gwctl import" || got[0].Method != "IMPORT" || got[0].Peer != "control socket" {
		t.Errorf("audit = %+v", got)
	}
}

func TestImportOrderPutsReferencedKindsFirst(t *testing.T) {
	order := importOrder()
	pos := map[store.Kind]int{}
	for i, kind := range order {
		pos[kind] = i
	}
	if len(order) != len(store.Kinds()) {
		t.Fatalf("order %v misses kinds of %v", order, store.Kinds())
	}
	for _, res := range resources {
		for _, ref := range res.refs {
			if pos[ref.kind] > pos[res.kind] {
				t.Errorf("%s comes after %s, which references it", ref.kind, res.kind)
			}
		}
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte(`{"gw_backup":1,"upstreams":[{"id":"u","nodes":{"127.0.0.1:80":1}}],"routes":[{"id":"r","uri":"/r","upstream_id":"u"}]}`))
	f.Add([]byte(`{"gw_backup":1,"consumers":[{"username":"a","plugins":{"key-auth":{"key":"k"}}}]}`))
	f.Add([]byte(`{"gw_backup":1,"routes":[{"id":1,"uri":"/a","plugins":{"limit-count":{"count":1,"time_window":1}}}]}`))
	f.Add([]byte(`{"gw_backup":1,"routes":[5]}`))
	base, err := store.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer base.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		// A scratch copy per input: the same validation, without an fsync per object.
		s, err := base.Scratch()
		if err != nil {
			t.Fatal(err)
		}
		h := New(Options{Store: s})
		_, err = h.Import(context.Background(), data, "fuzz", "fuzz")
		var importErr *ImportError
		if err != nil && !errors.As(err, &importErr) {
			t.Fatalf("Import error of another kind: %v", err)
		}
		if err != nil && s.Revision() != 0 {
			t.Fatal("a refused import changed the store")
		}
	})
}
