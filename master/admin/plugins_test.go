package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"gw/plugins"
	_ "gw/plugins/all"
)

// holds reports whether got, a JSON object, holds every member of want with the same
// value, recursively: lib/test_admin.lua's comparison in APISIX's tests.
func holds(got, want any) bool {
	wantObj, ok := want.(map[string]any)
	if !ok {
		return jsonText(got) == jsonText(want)
	}
	gotObj, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wantObj {
		if !holds(gotObj[k], v) {
			return false
		}
	}
	return true
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// t/admin/plugins.t TEST 1 "get plugins' name": every plugin once, highest priority
// first.
func TestPluginList(t *testing.T) {
	f := newFixture(t)
	w := f.call("GET", "/apisix/admin/plugins/list", "")
	var names []string
	if err := json.Unmarshal(w.Body.Bytes(), &names); w.Code != 200 || err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if got, want := len(names), len(plugins.Names()); got != want {
		t.Fatalf("%d plugins listed, %d registered: %v", got, want, names)
	}
	seen := map[string]bool{}
	for i, name := range names {
		p, ok := plugins.Lookup(name)
		if !ok || seen[name] {
			t.Fatalf("%q listed: unknown, or twice: %v", name, names)
		}
		seen[name] = true
		if i > 0 {
			if prev, _ := plugins.Lookup(names[i-1]); prev.Priority() < p.Priority() {
				t.Errorf("%s (%d) listed after %s (%d): want highest priority first", name, p.Priority(), names[i-1], prev.Priority())
			}
		}
	}
}

func TestPluginSchemas(t *testing.T) {
	cases := []struct {
		name, target string
		status       int
		want         string // for 200, members the answer must hold; else the whole body
	}{
		// t/admin/plugins.t TEST 6 "get plugin basic-auth schema".
		{"basic-auth", "/apisix/admin/plugins/basic-auth", 200,
			`{"properties":{},"title":"work with route or service object","type":"object"}`},
		// TEST 7 "get plugin basic-auth schema by schema_type".
		{"basic-auth consumer", "/apisix/admin/plugins/basic-auth?schema_type=consumer", 200,
			`{"title":"work with consumer object","required":["username","password"],` +
				`"properties":{"username":{"type":"string"},"password":{"type":"string"}},"type":"object"}`},
		// TEST 5 "get plugin prometheus schema".
		{"prometheus", "/apisix/admin/plugins/prometheus", 200, `{"properties":{},"type":"object"}`},
		// t/admin/schema.t TEST 7 "get plugin's schema": qr/"required":\["count","time_window"\]/.
		{"limit-count by schema", "/apisix/admin/schema/plugins/limit-count", 200, `{"required":["count","time_window"]}`},
		// t/admin/schema.t TEST 13 "get plugin prometheus schema": qr/"disable":\{"type":"boolean"\}/.
		{"prometheus by schema", "/apisix/admin/schema/plugins/prometheus", 200, `{"properties":{"disable":{"type":"boolean"}}}`},
		{"key-auth consumer", "/apisix/admin/schema/plugins/key-auth?schema_type=consumer", 200,
			`{"required":["key"],"properties":{"key":{"type":"string"}}}`},
		{"proxy-rewrite", "/apisix/admin/plugins/proxy-rewrite", 200, `{"type":"object","properties":{"uri":{"type":"string"}}}`},
		// t/admin/plugins.t TEST 2 "invalid plugin"; t/admin/schema.t TEST 8 "get not exist plugin".
		{"unknown plugin", "/apisix/admin/plugins/asdf", 404, `{"error_msg":"plugin not found in subsystem http"}`},
		{"unknown plugin by schema", "/apisix/admin/schema/plugins/no-exist", 404, `{"error_msg":"plugin not found in subsystem http"}`},
		{"no plugin", "/apisix/admin/plugins", 404, `{"error_msg":"plugin not found in subsystem http"}`},
		// plugins.lua: a plugin without a consumer_schema is 400 "not found schema".
		{"no consumer schema", "/apisix/admin/plugins/limit-count?schema_type=consumer", 400, `{"error_msg":"not found schema"}`},
		// TEST 13 "check with wrong plugin subsystem", TEST 14 "... in wrong subsystem".
		{"wrong subsystem", "/apisix/admin/plugins?subsystem=asdf", 400, `{"error_msg":"unsupported subsystem: asdf"}`},
		{"stream subsystem", "/apisix/admin/plugins/limit-count?subsystem=stream", 404, `{"error_msg":"plugin not found in subsystem stream"}`},
		{"http subsystem", "/apisix/admin/plugins/limit-count?subsystem=http", 200, `{"required":["count","time_window"]}`},
		// t/admin/schema.t TEST 3 "get not exist schema": 400.
		{"object schema", "/apisix/admin/schema/noexits", 400,
			`{"error_msg":"not found schema: noexits; the schemas of objects are not supported yet, those of plugins are at /apisix/admin/schema/plugins/{name}"}`},
		// TEST 4 "get all plugins": key-auth with its priority, schemas and type.
		{"all", "/apisix/admin/plugins?all=true", 200,
			`{"key-auth":{"priority":2500,"type":"auth","consumer_schema":{"required":["key"]}},"limit-count":{"priority":1002,"schema":{"required":["count","time_window"]}}}`},
		{"all wrong subsystem", "/apisix/admin/plugins?all=true&subsystem=asdf", 400, `{"error_msg":"unsupported subsystem: asdf"}`},
		{"stream list", "/apisix/admin/plugins/list?subsystem=stream", 200, `[]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call("GET", tc.target, "")
			if strings.HasPrefix(tc.want, "[") {
				if w.Code != tc.status || !jsonEqual(w.Body.String(), tc.want) {
					t.Errorf("%d %s, want %d %s", w.Code, w.Body, tc.status, tc.want)
				}
				return
			}
			if tc.status != 200 {
				expect(t, w, tc.status, tc.want)
				return
			}
			var got, want any
			if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil {
				t.Fatalf("%d %s, want 200 and JSON", w.Code, w.Body)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !holds(got, want) {
				t.Errorf("answer %s does not hold %s", w.Body, tc.want)
			}
		})
	}
}

// plugins?all=true lists every plugin once, each with the schemas its own endpoints
// answer, and nothing for the stream subsystem.
func TestAllPlugins(t *testing.T) {
	f := newFixture(t)
	w := f.call("GET", "/apisix/admin/plugins?all=true", "")
	var all map[string]struct {
		Priority       int             `json:"priority"`
		Schema         json.RawMessage `json:"schema"`
		MetadataSchema json.RawMessage `json:"metadata_schema"`
		ConsumerSchema json.RawMessage `json:"consumer_schema"`
		Type           string          `json:"type"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &all); w.Code != 200 || err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if len(all) != len(plugins.Names()) {
		t.Errorf("%d plugins, %d registered", len(all), len(plugins.Names()))
	}
	withMetadata := 0
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		got := all[name]
		if got.Priority != p.Priority() || !jsonEqual(string(got.Schema), string(p.(plugins.Described).Schema())) {
			t.Errorf("%s: priority %d, schema %s", name, got.Priority, got.Schema)
		}
		cd, auth := p.(plugins.ConsumerDescribed)
		if auth != (got.Type == "auth") || (auth && !jsonEqual(string(got.ConsumerSchema), string(cd.ConsumerSchema()))) {
			t.Errorf("%s: type %q, consumer_schema %s", name, got.Type, got.ConsumerSchema)
		}
		md, hasMetadata := p.(plugins.MetadataOwner)
		if hasMetadata {
			withMetadata++
		}
		if hasMetadata != (got.MetadataSchema != nil) || (hasMetadata && !jsonEqual(string(got.MetadataSchema), string(md.MetadataSchema()))) {
			t.Errorf("%s: metadata_schema %s", name, got.MetadataSchema)
		}
	}
	if withMetadata == 0 {
		t.Error("no plugin with plugin_metadata is registered: the metadata_schema check saw none")
	}
	w = f.call("GET", "/apisix/admin/plugins?all=true&subsystem=stream", "")
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != "{}" {
		t.Errorf("stream: %d %s", w.Code, w.Body)
	}
}

// The answer is the plugin's schema itself, compact, for every plugin and both kinds.
func TestPluginSchemaIsThePlugins(t *testing.T) {
	f := newFixture(t)
	for _, name := range plugins.Names() {
		p, _ := plugins.Lookup(name)
		for _, target := range []string{"/apisix/admin/plugins/" + name, "/apisix/admin/schema/plugins/" + name} {
			w := f.call("GET", target, "")
			if w.Code != 200 || !jsonEqual(w.Body.String(), string(p.(plugins.Described).Schema())) {
				t.Errorf("GET %s: %d %s", target, w.Code, w.Body)
			}
			if strings.Contains(strings.TrimSpace(w.Body.String()), "\n") {
				t.Errorf("GET %s: not compact", target)
			}
		}
	}
}

// Like every admin endpoint they need a key, a viewer's will do, and they only read.
func TestPluginSchemasNeedAKeyAndOnlyRead(t *testing.T) {
	f := newFixture(t)
	for _, target := range []string{"/apisix/admin/plugins/limit-count", "/apisix/admin/schema/plugins/limit-count", "/apisix/admin/plugins/list"} {
		w := f.callWith(f.h, "GET", target, "", "127.0.0.1:40000", nil)
		expect(t, w, 401, `{"error_msg":"failed to check token","description":"missing apikey"}`)
		w = f.callWith(f.h, "GET", target, "", "127.0.0.1:40000", map[string]string{"X-API-KEY": viewerKey})
		if w.Code != 200 {
			t.Errorf("viewer GET %s: %d %s", target, w.Code, w.Body)
		}
		// t/admin/schema.t TEST 4 and 5 "wrong method": PUT and POST are 404.
		for _, method := range []string{"PUT", "POST", "DELETE", "PATCH"} {
			expect(t, f.call(method, target, `{}`), 404, `{"error_msg":"not found"}`)
		}
	}
	if f.store.Revision() != 0 {
		t.Errorf("reading schemas changed the store")
	}
}
