package admin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// valueID is the "id" of an answer's value as JSON text, `1` or `"1"`.
func valueID(t *testing.T, body []byte) string {
	t.Helper()
	var answer struct {
		Value struct {
			ID json.RawMessage `json:"id"`
		} `json:"value"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return string(answer.Value.ID)
}

// An integer id is kept as the client wrote it wherever APISIX keeps it, and made the
// path's text wherever APISIX's check_conf sets conf.id to the path's id.
func TestIntegerIDsAreKeptAsWritten(t *testing.T) {
	cases := []struct {
		name, method, target, body string
		wantKey, wantID            string
	}{
		// t/admin/routes2.t TEST 6 "not unwanted data, PUT": PUT /apisix/admin/routes with
		// {"id": 1, ...} answers {"key":"/apisix/routes/1","value":{"id":1,...}}.
		{"route on the collection", "PUT", "/apisix/admin/routes", `{"id":1,"methods":["GET"],"uri":"/index.html",` +
			`"upstream":{"nodes":{"127.0.0.1:8080":1},"type":"roundrobin"}}`, "/apisix/routes/1", `1`},
		// t/admin/upstream.t TEST 11 and t/admin/services.t TEST 14 PUT {"id": 1} to the
		// collection the same way (to test other rules); their valid forms are stored so.
		{"upstream on the collection", "PUT", "/apisix/admin/upstreams", `{"id":1,"nodes":{"127.0.0.1:8080":1},"type":"roundrobin"}`,
			"/apisix/upstreams/1", `1`},
		{"service on the collection", "PUT", "/apisix/admin/services", `{"id":1}`, "/apisix/services/1", `1`},
		{"plugin config on the collection", "PUT", "/apisix/admin/plugin_configs", `{"id":1,"plugins":{}}`, "/apisix/plugin_configs/1", `1`},
		// A string stays a string.
		{"string on the collection", "PUT", "/apisix/admin/routes", `{"id":"1","uri":"/a","plugins":{}}`, "/apisix/routes/1", `"1"`},
		// resource.lua's check_conf: id = id or conf.id, then conf.id = id. With an id in
		// the path that is the path's text, whatever the body's type.
		{"route with the path's id", "PUT", "/apisix/admin/routes/1", `{"id":1,"uri":"/a","plugins":{}}`, "/apisix/routes/1", `"1"`},
		{"route with the path's id only", "PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{}}`, "/apisix/routes/1", `"1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call(tc.method, tc.target, tc.body)
			if w.Code != 201 {
				t.Fatalf("status = %d, want 201 (%s)", w.Code, w.Body)
			}
			var answer struct{ Key string }
			if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Key != tc.wantKey {
				t.Errorf("key = %q (%v), want %q", answer.Key, err, tc.wantKey)
			}
			if got := valueID(t, w.Body.Bytes()); got != tc.wantID {
				t.Errorf("answer's value.id = %s, want %s (%s)", got, tc.wantID, w.Body)
			}
			get := f.call("GET", Prefix+strings.TrimPrefix(tc.wantKey, "/apisix"), "")
			if got := valueID(t, get.Body.Bytes()); get.Code != 200 || got != tc.wantID {
				t.Errorf("GET: %d, value.id = %s, want %s (%s)", get.Code, got, tc.wantID, get.Body)
			}
		})
	}
}

// The object behind an integer id is the one its text names: a PUT to the path replaces
// it (t/admin/routes.t TEST 13 "id in the rule" stores by the body's id, and later tests
// of the file address it as /routes/1), and a body id of 1 on /routes/1 is the same id.
func TestIntegerIDNamesTheSameObjectAsItsText(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/routes", `{"id":1,"uri":"/a","plugins":{}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes", `{"id":"1","uri":"/b","plugins":{}}`), 200, "")
	expect(t, f.call("PUT", "/apisix/admin/routes", `{"id":1,"uri":"/c","plugins":{}}`), 200, "")
	if got := valueID(t, f.call("GET", "/apisix/admin/routes/1", "").Body.Bytes()); got != `1` {
		t.Errorf("value.id = %s, want 1", got)
	}
	// APISIX's PATCH runs check_conf with the path's id too, so the id becomes its text.
	w := f.call("PATCH", "/apisix/admin/routes/1", `{"desc":"d"}`)
	if got := valueID(t, w.Body.Bytes()); w.Code != 200 || got != `"1"` {
		t.Errorf("PATCH: %d, value.id = %s, want \"1\" (%s)", w.Code, got, w.Body)
	}
	if n := len(f.store.List("routes")); n != 1 {
		t.Errorf("%d routes stored, want 1", n)
	}
}

// Refused integer ids, each from APISIX's tests; the message starts as APISIX's does and
// says what was given.
func TestIntegerIDsRefused(t *testing.T) {
	const refused = `{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number `
	cases := []struct{ name, target, body, want string }{
		// t/admin/routes.t TEST 14, t/admin/services.t TEST 11, t/admin/upstream.t TEST 9
		// "integer id less than 1".
		{"route -100", "/apisix/admin/routes", `{"id":-100,"uri":"/index.html"}`, refused + `-100"}`},
		{"service -100", "/apisix/admin/services", `{"id":-100}`, refused + `-100"}`},
		{"upstream -100", "/apisix/admin/upstreams", `{"id":-100,"nodes":{"127.0.0.1:8080":1},"type":"roundrobin"}`, refused + `-100"}`},
		// id_schema's integer has minimum 1; 1.5 is no integer.
		{"route 0", "/apisix/admin/routes", `{"id":0,"uri":"/a"}`, refused + `0"}`},
		{"route -1", "/apisix/admin/routes", `{"id":-1,"uri":"/a"}`, refused + `-1"}`},
		{"route 1.5", "/apisix/admin/routes", `{"id":1.5,"uri":"/a"}`, refused + `1.5"}`},
		// t/admin/routes.t TEST 12, t/admin/upstream.t TEST 7, t/admin/services.t TEST 9
		// "invalid id": a body id other than the path's.
		{"route 3 on /1", "/apisix/admin/routes/1", `{"id":3,"uri":"/index.html"}`, `{"error_msg":"wrong route id"}`},
		{"upstream 3 on /1", "/apisix/admin/upstreams/1", `{"id":3,"nodes":{"127.0.0.1:8080":1},"type":"roundrobin"}`,
			`{"error_msg":"wrong upstream id"}`},
		{"service 3 on /1", "/apisix/admin/services/1", `{"id":3}`, `{"error_msg":"wrong service id"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			expect(t, f.call("PUT", tc.target, tc.body), 400, tc.want)
			if f.store.Revision() != 0 {
				t.Errorf("a refused PUT changed the store (revision %d)", f.store.Revision())
			}
		})
	}
	// t/admin/routes.t TEST 17 "wrong route id, do not need it": POST with an id.
	f := newFixture(t)
	expect(t, f.call("POST", "/apisix/admin/routes", `{"id":1,"plugins":{},"uri":"/index.html"}`), 400,
		`{"error_msg":"wrong route id, do not need it"}`)
}

// An export of an integer id imports back as the integer.
func TestImportKeepsIntegerIDs(t *testing.T) {
	source := newFixture(t)
	expect(t, source.call("PUT", "/apisix/admin/routes", `{"id":1,"uri":"/a","plugins":{}}`), 201, "")
	target := newFixture(t)
	if _, err := target.h.Import(context.Background(), source.h.Export(), "gwctl", "control socket"); err != nil {
		t.Fatal(err)
	}
	if got := valueID(t, target.call("GET", "/apisix/admin/routes/1", "").Body.Bytes()); got != `1` {
		t.Errorf("imported value.id = %s, want 1", got)
	}
}
