package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/conf"
	"gw/master/store"
	"gw/plugins"
)

const (
	adminKey  = conf.DefaultAdminKey
	viewerKey = "4054f7cf07e344346cd3f287985e76a2"
	epoch     = 1700000000
)

// recordingPublisher records the snapshot each published delta adds up to, as a worker
// holds it, and fails while err is set.
type recordingPublisher struct {
	mu        sync.Mutex
	snaps     []*conf.Snapshot
	deadlines []bool
	err       error
}

func (p *recordingPublisher) Publish(ctx context.Context, d *conf.Delta) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, hasDeadline := ctx.Deadline()
	prev := emptySnapshot()
	if n := len(p.snaps); n > 0 {
		prev = p.snaps[n-1]
	}
	p.snaps = append(p.snaps, prev.Apply(d))
	p.deadlines = append(p.deadlines, hasDeadline)
	return p.err
}

// emptySnapshot is what an empty store's Snapshot holds.
func emptySnapshot() *conf.Snapshot {
	return &conf.Snapshot{Routes: []conf.Route{}, Upstreams: []conf.Upstream{}, Services: []conf.Service{},
		Consumers: []conf.Consumer{}, PluginConfigs: []conf.PluginConfig{}, GlobalRules: []conf.GlobalRule{}, SSLs: []conf.SSL{}}
}

func (p *recordingPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.snaps)
}

func (p *recordingPublisher) last() *conf.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.snaps) == 0 {
		return nil
	}
	return p.snaps[len(p.snaps)-1]
}

type fixture struct {
	t     *testing.T
	h     *Handler
	store *store.Store
	pub   *recordingPublisher
	clock time.Time
}

func mustCIDR(t testing.TB, s string) *net.IPNet {
	t.Helper()
	_, network, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return network
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, store: s, pub: &recordingPublisher{}, clock: time.Unix(epoch, 0)}
	f.h = New(Options{
		Store: s,
		Keys: []conf.AdminKey{
			{Name: "admin", Key: adminKey, Role: "admin"},
			{Name: "viewer", Key: viewerKey, Role: "viewer"},
			{Name: "unset", Key: "", Role: "admin"},
		},
		Allow:     []*net.IPNet{mustCIDR(t, "127.0.0.0/8"), mustCIDR(t, "::1/128")},
		Publisher: f.pub,
		Version:   "1.2.3",
	})
	f.h.now = func() time.Time { return f.clock }
	return f
}

// call sends one admin request from 127.0.0.1 with the admin key, the way curl -d does
// (form Content-Type).
func (f *fixture) call(method, target, body string) *httptest.ResponseRecorder {
	f.t.Helper()
	return f.callWith(f.h, method, target, body, "127.0.0.1:40000", map[string]string{"X-API-KEY": adminKey})
}

func (f *fixture) callWith(h http.Handler, method, target, body, remote string, header map[string]string) *httptest.ResponseRecorder {
	f.t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.RemoteAddr = remote
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// expect checks status and, unless want is "", the body: JSON compared by value.
func expect(t *testing.T, w *httptest.ResponseRecorder, status int, want string) {
	t.Helper()
	if w.Code != status {
		t.Errorf("status = %d, want %d (body %s)", w.Code, status, w.Body)
	}
	got := w.Body.String()
	if want == "" {
		return
	}
	if !strings.HasSuffix(got, "}\n") {
		t.Errorf("body %q does not end with a JSON object and \\n", got)
	}
	if !jsonEqual(got, want) {
		t.Errorf("body:\n got %s\nwant %s", strings.TrimSpace(got), want)
	}
}

func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

const hello = `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`

const helloValue = `{"id":"1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}},` +
	`"create_time":1700000000,"update_time":1700000000}`

func TestHeadersOnEveryResponse(t *testing.T) {
	f := newFixture(t)
	responses := map[string]*httptest.ResponseRecorder{
		"created":   f.call("PUT", "/apisix/admin/routes/1", hello),
		"list":      f.call("GET", "/apisix/admin/routes", ""),
		"not found": f.call("GET", "/apisix/admin/routes/9", ""),
		"bad":       f.call("PUT", "/apisix/admin/routes/1", "{"),
		"head":      f.call("HEAD", "/apisix/admin", ""),
		"forbidden": f.callWith(f.h, "GET", "/apisix/admin/routes", "", "10.1.1.1:5", nil),
		"no key":    f.callWith(f.h, "GET", "/apisix/admin/routes", "", "127.0.0.1:5", nil),
	}
	for name, w := range responses {
		for header, want := range map[string]string{
			"Content-Type": "application/json", "Server": "gw/1.2.3", "X-API-VERSION": "v3",
		} {
			if got := w.Header().Get(header); got != want {
				t.Errorf("%s: %s = %q, want %q", name, header, got, want)
			}
		}
		if body := w.Body.String(); name != "head" && !strings.HasSuffix(body, "\n") {
			t.Errorf("%s: body %q does not end with \\n", name, body)
		}
	}
}

func TestPeerAllowList(t *testing.T) {
	f := newFixture(t)
	key := map[string]string{"X-API-KEY": adminKey}
	cases := []struct {
		name, remote string
		header       map[string]string
		internal     bool
		want         int
	}{
		{"loopback v4", "127.0.0.1:1", key, false, http.StatusOK},
		{"loopback other", "127.9.9.9:1", key, false, http.StatusOK},
		{"loopback v6", "[::1]:1", key, false, http.StatusOK},
		{"v4-mapped loopback", "[::ffff:127.0.0.1]:1", key, false, http.StatusOK},
		{"outside", "10.0.0.1:1", key, false, http.StatusForbidden},
		{"outside v6", "[2001:db8::1]:1", key, false, http.StatusForbidden},
		{"forged X-Forwarded-For", "10.0.0.1:1", map[string]string{"X-API-KEY": adminKey, "X-Forwarded-For": "127.0.0.1"}, false, http.StatusForbidden},
		{"forged X-Real-IP", "10.0.0.1:1", map[string]string{"X-API-KEY": adminKey, "X-Real-IP": "127.0.0.1"}, false, http.StatusForbidden},
		{"unix peer on TCP handler", "@", key, false, http.StatusForbidden},
		{"no key beats nothing", "10.0.0.1:1", nil, false, http.StatusForbidden},
		{"internal skips allow", "@", key, true, http.StatusOK},
		{"internal from anywhere", "10.0.0.1:1", key, true, http.StatusOK},
		{"internal still checks keys", "@", nil, true, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h http.Handler = f.h
			if tc.internal {
				h = f.h.Internal()
			}
			w := f.callWith(h, "GET", "/apisix/admin/routes", "", tc.remote, tc.header)
			if w.Code != tc.want {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tc.want, w.Body)
			}
			if tc.want == http.StatusForbidden {
				expect(t, w, http.StatusForbidden, `{"error_msg":"403 Forbidden"}`)
			}
		})
	}

	denyAll := New(Options{Store: f.store, Keys: []conf.AdminKey{{Key: adminKey, Role: "admin"}}})
	if w := f.callWith(denyAll, "GET", "/apisix/admin/routes", "", "127.0.0.1:1", key); w.Code != http.StatusForbidden {
		t.Errorf("empty Allow: status %d, want 403", w.Code)
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/routes/1", hello)
	failure := func(description string) string {
		return `{"error_msg":"failed to check token","description":"` + description + `"}`
	}
	cases := []struct {
		name, method, target string
		header               map[string]string
		cookie               string
		wantStatus           int
		wantBody             string
	}{
		{"missing", "GET", "/apisix/admin/routes", nil, "", 401, failure("missing apikey")},
		{"wrong", "GET", "/apisix/admin/routes", map[string]string{"X-API-KEY": "nope"}, "", 401, failure("wrong apikey")},
		{"prefix of the key", "GET", "/apisix/admin/routes", map[string]string{"X-API-KEY": adminKey[:31]}, "", 401, failure("wrong apikey")},
		{"header", "GET", "/apisix/admin/routes", map[string]string{"X-API-KEY": adminKey}, "", 200, ""},
		{"header name any case", "GET", "/apisix/admin/routes", map[string]string{"x-api-key": adminKey}, "", 200, ""},
		{"query", "GET", "/apisix/admin/routes?api_key=" + adminKey, nil, "", 200, ""},
		{"cookie", "GET", "/apisix/admin/routes", nil, adminKey, 200, ""},
		{"query before header", "GET", "/apisix/admin/routes?api_key=nope", map[string]string{"X-API-KEY": adminKey}, "", 401, failure("wrong apikey")},
		{"empty query falls through", "GET", "/apisix/admin/routes?api_key=", map[string]string{"X-API-KEY": adminKey}, "", 200, ""},
		{"viewer reads", "GET", "/apisix/admin/routes/1", map[string]string{"X-API-KEY": viewerKey}, "", 200, ""},
		{"viewer writes", "PUT", "/apisix/admin/routes/2", map[string]string{"X-API-KEY": viewerKey}, "", 401, failure("invalid method for role viewer")},
		{"viewer deletes", "DELETE", "/apisix/admin/routes/1", map[string]string{"X-API-KEY": viewerKey}, "", 401, failure("invalid method for role viewer")},
		{"auth before resource", "GET", "/apisix/admin/nothing", nil, "", 401, failure("missing apikey")},
		{"head needs no key", "HEAD", "/apisix/admin", nil, "", 200, ""},
		{"head with slash", "HEAD", "/apisix/admin/", nil, "", 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, strings.NewReader(hello))
			r.RemoteAddr = "127.0.0.1:1"
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			if tc.cookie != "" {
				r.AddCookie(&http.Cookie{Name: "x_api_key", Value: tc.cookie})
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantBody != "" {
				expect(t, w, tc.wantStatus, tc.wantBody)
			}
		})
	}
	if _, ok := f.store.Get(store.Routes, "2"); ok {
		t.Error("the viewer's PUT was stored")
	}
}

func TestRouting(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("GET", "/apisix/admin/stream_routes", ""), 404, `{"error_msg":"Unsupported resource type: stream_routes"}`)
	expect(t, f.call("GET", "/apisix/admin/", ""), 404, `{"error_msg":"Unsupported resource type: "}`)
	expect(t, f.call("GET", "/apisix/administrator", ""), 404, `{"error_msg":"404 Not Found"}`)
	expect(t, f.call("GET", "/other", ""), 404, `{"error_msg":"404 Not Found"}`)
	w := f.call("OPTIONS", "/apisix/admin/routes", "")
	expect(t, w, 405, "{\"error_msg\":\"not supported `OPTIONS` method for route\"}")
	if w.Header().Get("Allow") == "" {
		t.Error("405 without an Allow header")
	}
	if w := f.call("HEAD", "/apisix/admin", ""); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("HEAD /apisix/admin: %d %q, want 200 and no body", w.Code, w.Body)
	}
	for _, method := range []string{"GET", "PUT", "DELETE", "POST"} {
		expect(t, f.call(method, "/apisix/admin/routes/1/uri", `"/x"`), 400,
			`{"error_msg":"a sub path (/uri) is accepted only by PATCH"}`)
	}
}

func TestPutCreateThenReplace(t *testing.T) {
	f := newFixture(t)
	w := f.call("PUT", "/apisix/admin/routes/1", hello)
	expect(t, w, 201, `{"key":"/apisix/routes/1","value":`+helloValue+`}`)

	f.clock = f.clock.Add(time.Minute)
	w = f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/bye","plugins":{}}`)
	expect(t, w, 200, `{"key":"/apisix/routes/1","value":{"id":"1","uri":"/bye","plugins":{},`+
		`"create_time":1700000000,"update_time":1700000060}}`)

	w = f.call("GET", "/apisix/admin/routes/1", "")
	expect(t, w, 200, `{"key":"/apisix/routes/1","value":{"id":"1","uri":"/bye","plugins":{},`+
		`"create_time":1700000000,"update_time":1700000060},"createdIndex":1,"modifiedIndex":2}`)
}

// idRule starts conf's message for a value that is not an id.
const idRule = "id must be a string of 1-64 characters from [a-zA-Z0-9-_.] or a positive integer, got "

func TestPutIDs(t *testing.T) {
	cases := []struct {
		name, target, body string
		wantStatus         int
		wantBody           string // compared when set
		wantID             string // the stored id when the write succeeds
	}{
		{"path", "/apisix/admin/routes/r1", hello, 201, "", "r1"},
		{"body on collection", "/apisix/admin/routes", `{"id":"r2","uri":"/a","plugins":{}}`, 201, "", "r2"},
		{"body on collection with slash", "/apisix/admin/routes/", `{"id":"r2","uri":"/a","plugins":{}}`, 201, "", "r2"},
		{"integer body id", "/apisix/admin/routes", `{"id":7,"uri":"/a","plugins":{}}`, 201, "", "7"},
		{"path and equal body", "/apisix/admin/routes/3", `{"id":"3","uri":"/a","plugins":{}}`, 201, "", "3"},
		{"path and equal integer body", "/apisix/admin/routes/3", `{"id":3,"uri":"/a","plugins":{}}`, 201, "", "3"},
		{"path and other body", "/apisix/admin/routes/3", `{"id":"4","uri":"/a","plugins":{}}`, 400, `{"error_msg":"wrong route id"}`, ""},
		{"no id", "/apisix/admin/routes", `{"uri":"/a","plugins":{}}`, 400, `{"error_msg":"missing route id"}`, ""},
		{"no id upstream", "/apisix/admin/upstreams", `{"nodes":{"127.0.0.1:80":1}}`, 400, `{"error_msg":"missing upstream id"}`, ""},
		{"no id service", "/apisix/admin/services", `{}`, 400, `{"error_msg":"missing service id"}`, ""},
		{"boolean id", "/apisix/admin/routes", `{"id":true,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `boolean true"}`, ""},

		// APISIX's id schema: a string of id characters, or an integer >= 1. A number is
		// judged as a number, never by its text.
		{"long integer body id", "/apisix/admin/routes", `{"id":9223372036854775808,"uri":"/a","plugins":{}}`, 201, "", "9223372036854775808"},
		{"negative body id", "/apisix/admin/routes", `{"id":-100,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number -100"}`, ""},
		{"zero body id", "/apisix/admin/routes", `{"id":0,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number 0"}`, ""},
		{"minus zero body id", "/apisix/admin/routes", `{"id":-0,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number -0"}`, ""},
		{"fractional body id", "/apisix/admin/routes", `{"id":1.5,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number 1.5"}`, ""},
		{"exponent body id", "/apisix/admin/routes", `{"id":1e400,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number 1e400"}`, ""},
		{"integer written with an exponent", "/apisix/admin/routes", `{"id":1e3,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number 1e3"}`, ""},
		{"below int64", "/apisix/admin/routes", `{"id":-9223372036854775809,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number -9223372036854775809"}`, ""},
		{"negative body id with the same path", "/apisix/admin/routes/-1", `{"id":-1,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number -1"}`, ""},
		{"negative body id with another path", "/apisix/admin/routes/1", `{"id":-1,"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number -1"}`, ""},
		// In a path the id is text: "-1" and "0" match ^[a-zA-Z0-9-_.]+$, as in APISIX.
		{"path id -1 is a string", "/apisix/admin/routes/-1", hello, 201, "", "-1"},
		{"path id 0 is a string", "/apisix/admin/routes/0", hello, 201, "", "0"},
		{"path id 1.5 is a string", "/apisix/admin/routes/1.5", hello, 201, "", "1.5"},
		{"string body id -1", "/apisix/admin/routes", `{"id":"-1","uri":"/a","plugins":{}}`, 201, "", "-1"},
		// References follow the same schema.
		{"negative upstream_id", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":-1}`, 400,
			`{"error_msg":"invalid configuration: property \"upstream_id\" validation failed: ` + idRule + `number -1"}`, ""},
		{"exponent service_id", "/apisix/admin/routes/1", `{"uri":"/a","service_id":1e400}`, 400,
			`{"error_msg":"invalid configuration: property \"service_id\" validation failed: ` + idRule + `number 1e400"}`, ""},
		{"fractional plugin_config_id", "/apisix/admin/routes/1", `{"uri":"/a","plugin_config_id":1.5}`, 400,
			`{"error_msg":"invalid configuration: property \"plugin_config_id\" validation failed: ` + idRule + `number 1.5"}`, ""},
		{"bad characters", "/apisix/admin/routes/a*b", hello, 400, "", ""},
		{"dot dot", "/apisix/admin/routes/..", hello, 400, "", ""},
		{"too long", "/apisix/admin/routes/" + strings.Repeat("x", 65), hello, 400, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call("PUT", tc.target, tc.body)
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantBody != "" {
				expect(t, w, tc.wantStatus, tc.wantBody)
			}
			objects := f.store.List(store.Routes)
			if tc.wantID == "" {
				if tc.wantStatus == 400 && !strings.HasPrefix(w.Body.String(), `{"error_msg":`) {
					t.Errorf("400 body %s is not {\"error_msg\":...}", w.Body)
				}
				if len(objects) != 0 || f.store.Revision() != 0 {
					t.Errorf("rejected PUT stored %v", objects)
				}
				return
			}
			if len(objects) != 1 || objects[0].ID != tc.wantID {
				t.Fatalf("stored %v, want one route %s", objects, tc.wantID)
			}
			// The id's text: TestIntegerIDsAreKeptAsWritten checks its JSON type.
			var value struct{ ID conf.ID }
			if err := json.Unmarshal(objects[0].Value, &value); err != nil || string(value.ID) != tc.wantID {
				t.Errorf("stored value %s has id %q (%v), want %q", objects[0].Value, value.ID, err, tc.wantID)
			}
		})
	}
}

func TestBodies(t *testing.T) {
	big := `{"uri":"/a","plugins":{},"desc":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	cases := []struct {
		name, method, target, body string
		wantStatus                 int
		wantBody                   string
	}{
		{"invalid JSON", "PUT", "/apisix/admin/routes/1", `{"uri":`, 400,
			`{"error_msg":"invalid request body: unexpected EOF","req_body":"{\"uri\":"}`},
		{"trailing data", "PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{}} {}`, 400,
			`{"error_msg":"invalid request body: unexpected data after the JSON value","req_body":"{\"uri\":\"/a\",\"plugins\":{}} {}"}`},
		{"empty PUT", "PUT", "/apisix/admin/routes/1", ``, 400, `{"error_msg":"missing configurations"}`},
		{"null PUT", "PUT", "/apisix/admin/routes/1", `null`, 400, `{"error_msg":"missing configurations"}`},
		{"empty POST", "POST", "/apisix/admin/routes", ``, 400, `{"error_msg":"missing configurations"}`},
		{"array", "PUT", "/apisix/admin/routes/1", `[1]`, 400, `{"error_msg":"invalid configuration: the body must be a JSON object"}`},
		{"too big", "PUT", "/apisix/admin/routes/1", big, 413, ""},
		{"create_time", "PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{},"create_time":1}`, 400,
			`{"error_msg":"the property is forbidden: create_time"}`},
		{"update_time", "POST", "/apisix/admin/routes", `{"uri":"/a","plugins":{},"update_time":1}`, 400,
			`{"error_msg":"the property is forbidden: update_time"}`},
		{"upstream.create_time", "PUT", "/apisix/admin/routes/1",
			`{"uri":"/a","upstream":{"nodes":{"127.0.0.1:80":1},"create_time":1}}`, 400,
			`{"error_msg":"the property is forbidden: upstream.create_time"}`},
		{"unknown field", "PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{},"bogus":1}`, 400, ""},
		{"unknown plugin", "PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{"no-such-plugin":{}}}`, 400,
			`{"error_msg":"unknown plugin [no-such-plugin]; the plugins gw has are ` + strings.Join(plugins.Names(), ", ") + `"}`},
		{"POST with body id", "POST", "/apisix/admin/routes", `{"id":"1","uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"wrong route id, do not need it"}`},
		{"POST with path id", "POST", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{}}`, 400,
			`{"error_msg":"wrong route id, do not need it"}`},
		{"POST upstream with id", "POST", "/apisix/admin/upstreams", `{"id":"1","nodes":{"127.0.0.1:80":1}}`, 400,
			`{"error_msg":"wrong upstream id, do not need it"}`},

		// Text that encoding/json would store changed (U+FFFD for invalid UTF-8 and lone
		// surrogates), or NUL, is refused on the raw body, naming the field.
		{"invalid UTF-8 in uri", "PUT", "/apisix/admin/routes/1", "{\"uri\":\"/a\xff\",\"plugins\":{}}", 400,
			`{"error_msg":"invalid configuration: property \"uri\" validation failed: the string is not valid UTF-8 (byte 0xff); send text as UTF-8"}`},
		{"invalid UTF-8 in name", "POST", "/apisix/admin/routes", "{\"uri\":\"/a\",\"name\":\"caf\xe9\",\"plugins\":{}}", 400,
			`{"error_msg":"invalid configuration: property \"name\" validation failed: the string is not valid UTF-8 (byte 0xe9); send text as UTF-8"}`},
		{"invalid UTF-8 in desc", "PUT", "/apisix/admin/upstreams/1", "{\"desc\":\"\xc3\",\"nodes\":{\"127.0.0.1:80\":1}}", 400,
			`{"error_msg":"invalid configuration: property \"desc\" validation failed: the string is not valid UTF-8 (byte 0xc3); send text as UTF-8"}`},
		{"invalid UTF-8 in a label key", "PUT", "/apisix/admin/services/1", "{\"labels\":{\"\xff\":\"v\"}}", 400,
			`{"error_msg":"invalid configuration: property \"labels\" validation failed: a member name is not valid UTF-8 (byte 0xff); send text as UTF-8"}`},
		{"invalid UTF-8 in a label value", "PUT", "/apisix/admin/consumers/jack", "{\"username\":\"jack\",\"labels\":{\"env\":\"\xff\"}}", 400,
			`{"error_msg":"invalid configuration: property \"labels.env\" validation failed: the string is not valid UTF-8 (byte 0xff); send text as UTF-8"}`},
		{"invalid UTF-8 in an inline node", "PUT", "/apisix/admin/routes/1", "{\"uri\":\"/a\",\"upstream\":{\"nodes\":[{\"host\":\"a\xff\",\"port\":80,\"weight\":1}]}}", 400,
			`{"error_msg":"invalid configuration: property \"upstream.nodes[0].host\" validation failed: the string is not valid UTF-8 (byte 0xff); send text as UTF-8"}`},
		{"invalid UTF-8 in a PATCH", "PATCH", "/apisix/admin/routes/1", "{\"desc\":\"\xff\"}", 400,
			`{"error_msg":"invalid configuration: property \"desc\" validation failed: the string is not valid UTF-8 (byte 0xff); send text as UTF-8"}`},
		{"lone surrogate in uri", "PUT", "/apisix/admin/routes/1", `{"uri":"/a\ud800","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"uri\" validation failed: the string holds a lone UTF-16 surrogate (\\ud800), which is not a character; escape characters outside the BMP as a surrogate pair"}`},
		{"NUL in uri", "PUT", "/apisix/admin/routes/1", `{"uri":"/a\u0000","plugins":{}}`, 400,
			`{"error_msg":"invalid configuration: property \"uri\" validation failed: the string holds NUL (\\u0000), which no field accepts"}`},
		{"NUL in a plugin's configuration", "PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"a\u0000"}}}`, 400,
			`{"error_msg":"invalid configuration: property \"plugins.key-auth.key\" validation failed: the string holds NUL (\\u0000), which no field accepts"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call(tc.method, tc.target, tc.body)
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%.200s)", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantBody != "" {
				expect(t, w, tc.wantStatus, tc.wantBody)
			} else if !strings.HasPrefix(w.Body.String(), `{"error_msg":"`) {
				t.Errorf("body %.200s is not an error_msg", w.Body)
			}
			if f.store.Revision() != 0 || f.pub.count() != 0 {
				t.Errorf("rejected request changed the store (revision %d) or published (%d)", f.store.Revision(), f.pub.count())
			}
		})
	}
}

func TestPost(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:80":1}}`)
	w := f.call("POST", "/apisix/admin/routes", `{"uri":"/a","upstream_id":"u"}`)
	// Revision 1 was the upstream; NewID takes 2 and the write itself 3.
	expect(t, w, 201, `{"key":"/apisix/routes/00000000000000000002","value":{"id":"00000000000000000002","uri":"/a",`+
		`"upstream_id":"u","create_time":1700000000,"update_time":1700000000}}`)
	expect(t, f.call("GET", "/apisix/admin/routes/00000000000000000002", ""), 200,
		`{"key":"/apisix/routes/00000000000000000002","value":{"id":"00000000000000000002","uri":"/a",`+
			`"upstream_id":"u","create_time":1700000000,"update_time":1700000000},"createdIndex":3,"modifiedIndex":3}`)
	w = f.call("POST", "/apisix/admin/upstreams", `{"nodes":{"127.0.0.1:81":1}}`)
	if w.Code != 201 || !strings.Contains(w.Body.String(), `"key":"/apisix/upstreams/00000000000000000004"`) {
		t.Errorf("second POST: %d %s", w.Code, w.Body)
	}
	// A rejected POST consumes no id.
	before := f.store.Revision()
	f.call("POST", "/apisix/admin/routes", `{"uri":"/a","upstream_id":"missing"}`)
	if f.store.Revision() != before {
		t.Errorf("rejected POST moved the revision from %d to %d", before, f.store.Revision())
	}
}

func TestGet(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("GET", "/apisix/admin/routes", ""), 200, `{"list":[],"total":0}`)
	if got := f.call("GET", "/apisix/admin/routes", "").Body.String(); got != "{\"list\":[],\"total\":0}\n" {
		t.Errorf("empty list body = %q", got)
	}
	expect(t, f.call("GET", "/apisix/admin/routes/1", ""), 404, `{"message":"Key not found"}`)
	expect(t, f.call("GET", "/apisix/admin/upstreams/1", ""), 404, `{"message":"Key not found"}`)

	f.call("PUT", "/apisix/admin/routes/b", `{"uri":"/b","plugins":{}}`)
	f.call("PUT", "/apisix/admin/routes/a", `{"uri":"/a","plugins":{}}`)
	f.call("PUT", "/apisix/admin/routes/b", `{"uri":"/b2","plugins":{}}`)
	item := func(id, uri string, created, modified int) string {
		return `{"key":"/apisix/routes/` + id + `","value":{"id":"` + id + `","uri":"` + uri + `","plugins":{},` +
			`"create_time":1700000000,"update_time":1700000000},"createdIndex":` + itoa(created) + `,"modifiedIndex":` + itoa(modified) + `}`
	}
	expect(t, f.call("GET", "/apisix/admin/routes", ""), 200,
		`{"list":[`+item("b", "/b2", 1, 3)+`,`+item("a", "/a", 2, 2)+`],"total":2}`)
	expect(t, f.call("GET", "/apisix/admin/routes/a", ""), 200, item("a", "/a", 2, 2))
	expect(t, f.call("GET", "/apisix/admin/upstreams", ""), 200, `{"list":[],"total":0}`)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestGetPaging(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 12; i++ {
		f.call("PUT", "/apisix/admin/routes/"+itoa(i), `{"uri":"/a","plugins":{}}`)
	}
	ids := func(w *httptest.ResponseRecorder) (ids []string, total int) {
		var body struct {
			List []struct {
				Value struct{ ID string }
			}
			Total int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
		for _, it := range body.List {
			ids = append(ids, it.Value.ID)
		}
		return ids, body.Total
	}
	cases := []struct {
		query      string
		wantStatus int
		wantIDs    string
	}{
		{"", 200, "[0 1 2 3 4 5 6 7 8 9 10 11]"},
		{"?page=1&page_size=10", 200, "[0 1 2 3 4 5 6 7 8 9]"},
		{"?page=2&page_size=10", 200, "[10 11]"},
		{"?page=2", 200, "[10 11]"},
		{"?page=3&page_size=10", 200, "[]"},
		{"?page_size=9", 400, ""},
		{"?page_size=501", 400, ""},
		{"?page=0", 400, ""},
		{"?page=x", 400, ""},
	}
	for _, tc := range cases {
		w := f.call("GET", "/apisix/admin/routes"+tc.query, "")
		if w.Code != tc.wantStatus {
			t.Errorf("%s: status %d, want %d", tc.query, w.Code, tc.wantStatus)
			continue
		}
		if tc.wantStatus != 200 {
			continue
		}
		got, total := ids(w)
		if gotStr := "[" + strings.Join(got, " ") + "]"; gotStr != tc.wantIDs || total != 12 {
			t.Errorf("%s: ids %s total %d, want %s total 12", tc.query, gotStr, total, tc.wantIDs)
		}
	}
	expect(t, f.call("GET", "/apisix/admin/routes?page_size=5", ""), 400, `{"error_msg":"page_size must be between 10 and 500"}`)
}

func TestDelete(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/routes/1", hello)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 200, `{"deleted":"1","key":"/apisix/routes/1"}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 404, `{"message":"Key not found"}`)
	expect(t, f.call("GET", "/apisix/admin/routes/1", ""), 404, `{"message":"Key not found"}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes", ""), 400, `{"error_msg":"missing route id"}`)
	if f.pub.count() != 2 {
		t.Errorf("published %d times, want 2 (put, delete)", f.pub.count())
	}
	if snap := f.pub.last(); len(snap.Routes) != 0 || snap.Version != f.store.Revision() {
		t.Errorf("snapshot after delete: %+v", snap)
	}
}

func TestPatch(t *testing.T) {
	base := `{"uri":"/a","methods":["GET","POST"],"desc":"d",` +
		`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1,"127.0.0.2:80":1}}}`
	cases := []struct {
		name, target, body string
		wantStatus         int
		wantValue          string // the whole stored value after the call, when 200
		wantBody           string // the error body, when not 200
	}{
		{"merge nested, null deletes, arrays replace", "/apisix/admin/routes/1",
			`{"methods":["PUT"],"desc":null,"upstream":{"nodes":{"127.0.0.2:80":null,"127.0.0.3:80":5}}}`, 200,
			`{"id":"1","uri":"/a","methods":["PUT"],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1,"127.0.0.3:80":5}},` +
				`"create_time":1700000000,"update_time":1700000060}`, ""},
		{"empty patch touches update_time", "/apisix/admin/routes/1", `{}`, 200,
			`{"id":"1","uri":"/a","methods":["GET","POST"],"desc":"d",` +
				`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1,"127.0.0.2:80":1}},` +
				`"create_time":1700000000,"update_time":1700000060}`, ""},
		{"same id allowed", "/apisix/admin/routes/1", `{"id":"1"}`, 200, "", ""},
		{"same integer id allowed", "/apisix/admin/routes/1", `{"id":1}`, 200, "", ""},
		{"same id through the sub path", "/apisix/admin/routes/1/id", `1`, 200, "", ""},
		{"id that is not an id", "/apisix/admin/routes/1", `{"id":1.0}`, 400, "",
			`{"error_msg":"invalid configuration: property \"id\" validation failed: ` + idRule + `number 1.0"}`},
		{"sub path replaces", "/apisix/admin/routes/1/upstream/nodes", `{"127.0.0.9:80":2}`, 200,
			`{"id":"1","uri":"/a","methods":["GET","POST"],"desc":"d",` +
				`"upstream":{"type":"roundrobin","nodes":{"127.0.0.9:80":2}},` +
				`"create_time":1700000000,"update_time":1700000060}`, ""},
		{"sub path string", "/apisix/admin/routes/1/uri", `"/b"`, 200,
			`{"id":"1","uri":"/b","methods":["GET","POST"],"desc":"d",` +
				`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1,"127.0.0.2:80":1}},` +
				`"create_time":1700000000,"update_time":1700000060}`, ""},
		{"sub path creates parents", "/apisix/admin/routes/1/labels/env", `"prod"`, 200, "", ""},
		{"sub path through a scalar", "/apisix/admin/routes/1/uri/x", `"y"`, 400, "",
			`{"error_msg":"invalid sub-path: /uri"}`},
		{"sub path through an array", "/apisix/admin/routes/1/methods/0", `"PUT"`, 400, "",
			`{"error_msg":"invalid sub-path: /methods"}`},
		{"result invalid", "/apisix/admin/routes/1", `{"uri":null}`, 400, "", ""},
		{"sub path result invalid", "/apisix/admin/routes/1/methods", `"GET"`, 400, "", ""},
		{"other id", "/apisix/admin/routes/1", `{"id":"2"}`, 400, "", `{"error_msg":"wrong route id"}`},
		{"missing object", "/apisix/admin/routes/9", `{"desc":"x"}`, 404, "", `{"message":"Key not found"}`},
		{"no id", "/apisix/admin/routes", `{"desc":"x"}`, 400, "", `{"error_msg":"missing route id"}`},
		{"no body", "/apisix/admin/routes/1", ``, 400, "", `{"error_msg":"missing new configuration"}`},
		{"null body", "/apisix/admin/routes/1/desc", `null`, 400, "", `{"error_msg":"missing new configuration"}`},
		{"not an object", "/apisix/admin/routes/1", `"x"`, 400, "", `{"error_msg":"invalid configuration"}`},
		{"reference checked", "/apisix/admin/routes/1", `{"upstream":null,"upstream_id":"9"}`, 400, "",
			`{"error_msg":"failed to fetch upstream info by upstream id [9], response code: 404"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			expect(t, f.call("PUT", "/apisix/admin/routes/1", base), 201, "")
			before, _ := f.store.Get(store.Routes, "1")
			f.clock = f.clock.Add(time.Minute)
			w := f.call("PATCH", tc.target, tc.body)
			if w.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			after, _ := f.store.Get(store.Routes, "1")
			if tc.wantStatus != 200 {
				if tc.wantBody != "" {
					expect(t, w, tc.wantStatus, tc.wantBody)
				}
				if !reflect.DeepEqual(before, after) || f.pub.count() != 1 {
					t.Errorf("rejected PATCH changed %s to %s or published (%d)", before.Value, after.Value, f.pub.count())
				}
				return
			}
			expect(t, w, 200, `{"key":"/apisix/routes/1","value":`+string(after.Value)+`}`)
			if tc.wantValue != "" && !jsonEqual(string(after.Value), tc.wantValue) {
				t.Errorf("stored:\n got %s\nwant %s", after.Value, tc.wantValue)
			}
			if after.CreatedIndex != before.CreatedIndex || after.ModifiedIndex != before.ModifiedIndex+1 {
				t.Errorf("indexes %d/%d after %d/%d", after.CreatedIndex, after.ModifiedIndex, before.CreatedIndex, before.ModifiedIndex)
			}
		})
	}
}

// A body id is judged as JSON, even when its text is the path's: route "-1" is a valid
// string id, and the number -1 is not an id.
func TestPatchNumericBodyID(t *testing.T) {
	for _, id := range []string{"-1", "-0", "1.5", "1e400"} {
		t.Run(id, func(t *testing.T) {
			f := newFixture(t)
			expect(t, f.call("PUT", "/apisix/admin/routes/"+id, hello), 201, "")
			expect(t, f.call("PATCH", "/apisix/admin/routes/"+id, `{"id":`+id+`}`), 400,
				`{"error_msg":"invalid configuration: property \"id\" validation failed: `+idRule+`number `+id+`"}`)
			expect(t, f.call("PATCH", "/apisix/admin/routes/"+id, `{"id":"`+id+`"}`), 200, "")
		})
	}
}

func TestReferences(t *testing.T) {
	f := newFixture(t)
	missing := func(kind, id string) string {
		return `{"error_msg":"failed to fetch ` + kind + ` info by ` + kind + ` id [` + id + `], response code: 404"}`
	}
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":"9"}`), 400, missing("upstream", "9"))
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":9}`), 400, missing("upstream", "9"))
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","service_id":"s"}`), 400, missing("service", "s"))
	expect(t, f.call("PUT", "/apisix/admin/services/s", `{"upstream_id":"9"}`), 400, missing("upstream", "9"))
	if f.store.Revision() != 0 {
		t.Fatalf("rejected references changed the store")
	}

	expect(t, f.call("PUT", "/apisix/admin/upstreams/9", `{"nodes":{"127.0.0.1:80":1}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/services/s", `{"upstream_id":9}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":9}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/2", `{"uri":"/b","service_id":"s"}`), 201, "")

	expect(t, f.call("DELETE", "/apisix/admin/upstreams/9", ""), 400,
		`{"error_msg":"can not delete this upstream, route [1] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 200, "")
	expect(t, f.call("DELETE", "/apisix/admin/upstreams/9", ""), 400,
		`{"error_msg":"can not delete this upstream, service [s] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/services/s", ""), 400,
		`{"error_msg":"can not delete this service directly, route [2] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/services/s?force=true", ""), 200, `{"deleted":"1","key":"/apisix/services/s"}`)
	expect(t, f.call("DELETE", "/apisix/admin/upstreams/9", ""), 200, `{"deleted":"1","key":"/apisix/upstreams/9"}`)
}

// An upstream a traffic-split names is still used, wherever the plugin sits, in
// APISIX's words (t/plugin/traffic-split.t, apisix/admin/upstreams.lua delete_checker).
func TestUpstreamNamedByAPlugin(t *testing.T) {
	f := newFixture(t)
	split := `{"traffic-split":{"rules":[{"weighted_upstreams":[{"upstream_id":"u1","weight":1},{"weight":1}]}]}}`
	expect(t, f.call("PUT", "/apisix/admin/upstreams/u1", `{"nodes":{"127.0.0.1:80":1}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":`+split+`,"upstream":{"nodes":{"127.0.0.1:81":1}}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/global_rules/g", `{"plugins":`+split+`}`), 201, "")
	expect(t, f.call("DELETE", "/apisix/admin/upstreams/u1", ""), 400,
		`{"error_msg":"can not delete this upstream, plugin in route [1] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 200, "")
	expect(t, f.call("DELETE", "/apisix/admin/upstreams/u1", ""), 400,
		`{"error_msg":"can not delete this upstream, plugin in global_rules [g] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/upstreams/u1?force=true", ""), 200, `{"deleted":"1","key":"/apisix/upstreams/u1"}`)
}

// TestRejectedWritesChangeNothing runs every kind of rejected write against a populated
// store and checks the store, its revision and the publisher are untouched.
func TestRejectedWritesChangeNothing(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:80":1}}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":"u"}`), 201, "")
	snapshot := func() (uint64, []store.Object, []store.Object) {
		return f.store.Revision(), f.store.List(store.Routes), f.store.List(store.Upstreams)
	}
	rev, routes, upstreams := snapshot()
	published := f.pub.count()
	rejected := []struct{ method, target, body string }{
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":"nope"}`},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{"no-such":{}}}`},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a"}`},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a","create_time":5}`},
		{"PUT", "/apisix/admin/upstreams/u", `{"nodes":"x"}`},
		{"POST", "/apisix/admin/routes", `{"uri":1}`},
		{"PATCH", "/apisix/admin/routes/1", `{"uri":null}`},
		{"PATCH", "/apisix/admin/upstreams/u", `{"nodes":null}`},
		{"DELETE", "/apisix/admin/upstreams/u", ``},
		{"DELETE", "/apisix/admin/routes/nope", ``},
	}
	for _, call := range rejected {
		w := f.call(call.method, call.target, call.body)
		if w.Code < 400 {
			t.Errorf("%s %s %s: status %d, want a rejection", call.method, call.target, call.body, w.Code)
		}
		gotRev, gotRoutes, gotUpstreams := snapshot()
		if gotRev != rev || !reflect.DeepEqual(gotRoutes, routes) || !reflect.DeepEqual(gotUpstreams, upstreams) {
			t.Fatalf("%s %s changed the store", call.method, call.target)
		}
	}
	if f.pub.count() != published {
		t.Errorf("rejected writes published %d times", f.pub.count()-published)
	}
}

func TestPublishOncePerWrite(t *testing.T) {
	f := newFixture(t)
	writes := []struct {
		method, target, body string
		status               int
	}{
		{"PUT", "/apisix/admin/upstreams/u", `{"nodes":{"127.0.0.1:80":1}}`, 201},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream_id":"u"}`, 201},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/b","upstream_id":"u"}`, 200},
		{"POST", "/apisix/admin/services", `{"upstream_id":"u"}`, 201},
		{"PATCH", "/apisix/admin/routes/1", `{"uri":"/c"}`, 200},
		{"DELETE", "/apisix/admin/routes/1", ``, 200},
	}
	for i, call := range writes {
		w := f.call(call.method, call.target, call.body)
		if w.Code != call.status {
			t.Fatalf("%s %s: status %d, want %d (%s)", call.method, call.target, w.Code, call.status, w.Body)
		}
		if f.pub.count() != i+1 {
			t.Fatalf("after write %d: published %d times", i+1, f.pub.count())
		}
		snap := f.pub.last()
		want := f.store.Snapshot()
		if !reflect.DeepEqual(snap, want) {
			t.Errorf("write %d published %+v, want the store's %+v", i+1, snap, want)
		}
		if call.target == "/apisix/admin/routes/1" && call.method != "DELETE" {
			if len(snap.Routes) != 1 || !strings.Contains(call.body, string(snap.Routes[0].URI)) {
				t.Errorf("write %d: snapshot routes %+v do not hold %s", i+1, snap.Routes, call.body)
			}
		}
	}
	f.call("GET", "/apisix/admin/routes", "")
	f.call("GET", "/apisix/admin/upstreams/u", "")
	if f.pub.count() != len(writes) {
		t.Errorf("reads published")
	}
	for i, hadDeadline := range f.pub.deadlines {
		if !hadDeadline {
			t.Errorf("publication %d had no deadline", i+1)
		}
	}
}

func TestPublishFailureKeepsTheWrite(t *testing.T) {
	f := newFixture(t)
	f.pub.err = errors.New("worker 2 (pid 4242) did not acknowledge version 1")
	expect(t, f.call("PUT", "/apisix/admin/routes/1", hello), 503,
		`{"error_msg":"stored, but not yet served by every worker: worker 2 (pid 4242) did not acknowledge version 1"}`)
	expect(t, f.call("GET", "/apisix/admin/routes/1", ""), 200,
		`{"key":"/apisix/routes/1","value":`+helloValue+`,"createdIndex":1,"modifiedIndex":1}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 503,
		`{"error_msg":"stored, but not yet served by every worker: worker 2 (pid 4242) did not acknowledge version 1"}`)
	if _, ok := f.store.Get(store.Routes, "1"); ok {
		t.Error("the delete was not kept")
	}
	f.pub.err = nil
	expect(t, f.call("PUT", "/apisix/admin/routes/1", hello), 201, "")
}

// slowPublisher blocks until its context ends, as a worker that never acknowledges.
type slowPublisher struct{}

func (slowPublisher) Publish(ctx context.Context, _ *conf.Delta) error {
	<-ctx.Done()
	return errors.New("worker 1 lagged: " + ctx.Err().Error())
}

func TestPublishTimeout(t *testing.T) {
	f := newFixture(t)
	h := New(Options{
		Store: f.store, Keys: []conf.AdminKey{{Key: adminKey}}, Allow: []*net.IPNet{mustCIDR(t, "127.0.0.0/8")},
		Publisher: slowPublisher{}, PublishTimeout: 10 * time.Millisecond,
	})
	w := f.callWith(h, "PUT", "/apisix/admin/routes/1", hello, "127.0.0.1:1", map[string]string{"X-API-KEY": adminKey})
	expect(t, w, 503, `{"error_msg":"stored, but not yet served by every worker: worker 1 lagged: context deadline exceeded"}`)
}

func TestConcurrentWrites(t *testing.T) {
	f := newFixture(t)
	const writers = 4
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				w := f.call("POST", "/apisix/admin/routes", `{"uri":"/a","plugins":{}}`)
				if w.Code != 201 {
					t.Errorf("POST: %d %s", w.Code, w.Body)
				}
				f.call("GET", "/apisix/admin/routes", "")
			}
		}()
	}
	wg.Wait()
	if n := len(f.store.List(store.Routes)); n != writers*3 {
		t.Errorf("%d routes, want %d", n, writers*3)
	}
	// Writes publish in revision order: every snapshot is newer than the one before.
	f.pub.mu.Lock()
	defer f.pub.mu.Unlock()
	for i := 1; i < len(f.pub.snaps); i++ {
		if f.pub.snaps[i].Version <= f.pub.snaps[i-1].Version {
			t.Errorf("publication %d has version %d after %d", i, f.pub.snaps[i].Version, f.pub.snaps[i-1].Version)
		}
	}
}

func TestMergePatch(t *testing.T) {
	// The examples of RFC 7386, appendix A.
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tc := range cases {
		target, _ := decodeJSON([]byte(tc.target))
		patch, _ := decodeJSON([]byte(tc.patch))
		got := string(encodeJSON(mergePatch(target, patch)))
		if !jsonEqual(got, tc.want) {
			t.Errorf("merge %s with %s = %s, want %s", tc.target, tc.patch, got, tc.want)
		}
	}
}

func TestLargeNumbersSurvive(t *testing.T) {
	f := newFixture(t)
	body := `{"uri":"/a","plugins":{},"priority":9007199254740993}`
	w := f.call("PUT", "/apisix/admin/routes/1", body)
	if w.Code != 201 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	obj, _ := f.store.Get(store.Routes, "1")
	if !strings.Contains(string(obj.Value), `"priority":9007199254740993`) {
		t.Errorf("stored %s, lost the integer's precision", obj.Value)
	}
}

func FuzzPutRoute(f *testing.F) {
	f.Add([]byte(hello))
	f.Add([]byte(`{"uri":"/a","upstream_id":"9"}`))
	f.Add([]byte(`{"uri":"/a","plugins":{"limit-count":{"count":1,"time_window":1}}}`))
	f.Add([]byte(`{"id":1,"uri":"/a","plugins":{}}`))
	f.Add([]byte(`[`))
	// One store for every input: opening one per input would make fsync the fuzzer's pace.
	s, err := store.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	pub := &recordingPublisher{}
	h := New(Options{Store: s, Keys: []conf.AdminKey{{Key: adminKey}}, Allow: []*net.IPNet{mustCIDR(f, "127.0.0.0/8")}, Publisher: pub})
	f.Fuzz(func(t *testing.T, body []byte) {
		revision, published := s.Revision(), pub.count()
		r := httptest.NewRequest("PUT", "/apisix/admin/routes/1", strings.NewReader(string(body)))
		r.RemoteAddr = "127.0.0.1:1"
		r.Header.Set("X-API-KEY", adminKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case 200, 201:
			if s.Revision() != revision+1 || pub.count() != published+1 {
				t.Fatalf("accepted PUT: revision %d -> %d, published %d -> %d", revision, s.Revision(), published, pub.count())
			}
		case 400, 413:
			if s.Revision() != revision || pub.count() != published {
				t.Fatalf("rejected PUT changed the store")
			}
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if !strings.HasSuffix(w.Body.String(), "\n") || !json.Valid(w.Body.Bytes()) {
			t.Fatalf("body %q is not JSON ending in \\n", w.Body)
		}
	})
}

func BenchmarkGetRoute(b *testing.B) {
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := New(Options{Store: s, Keys: []conf.AdminKey{{Key: adminKey}}, Allow: []*net.IPNet{mustCIDR(b, "127.0.0.0/8")}})
	put := httptest.NewRequest("PUT", "/apisix/admin/routes/1", strings.NewReader(hello))
	put.RemoteAddr = "127.0.0.1:1"
	put.Header.Set("X-API-KEY", adminKey)
	h.ServeHTTP(httptest.NewRecorder(), put)
	r := httptest.NewRequest("GET", "/apisix/admin/routes/1", nil)
	r.RemoteAddr = "127.0.0.1:1"
	r.Header.Set("X-API-KEY", adminKey)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// deadlinePublisher records each publication's deadline.
type deadlinePublisher struct{ deadlines []time.Time }

func (p *deadlinePublisher) Publish(ctx context.Context, d *conf.Delta) error {
	deadline, _ := ctx.Deadline()
	p.deadlines = append(p.deadlines, deadline)
	return nil
}

// An import of many objects gets more than one write's PublishTimeout: workers build it
// for seconds on a busy machine, and it must not be reported as unserved for that. The
// deadlines are held to clock readings taken around each call, so no preemption between
// them can fail the test.
func TestABigImportGetsTimeToBeBuilt(t *testing.T) {
	f := newFixture(t)
	pub := &deadlinePublisher{}
	h := New(Options{
		Store: store.OpenMemory(), Keys: []conf.AdminKey{{Key: adminKey}}, Allow: []*net.IPNet{mustCIDR(t, "127.0.0.0/8")},
		Publisher: pub, PublishTimeout: time.Second,
	})
	var backup strings.Builder
	backup.WriteString(`{"gw_backup":1,"revision":0,"routes":[`)
	for i := range 2000 {
		if i > 0 {
			backup.WriteByte(',')
		}
		fmt.Fprintf(&backup, `{"id":"r%d","uri":"/r%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i)
	}
	backup.WriteString(`]}`)
	beforeImport := time.Now()
	if _, err := h.Import(context.Background(), []byte(backup.String()), "gwctl", "test"); err != nil {
		t.Fatal(err)
	}
	w := f.callWith(h, "PUT", "/apisix/admin/routes/1", hello, "127.0.0.1:1", map[string]string{"X-API-KEY": adminKey})
	afterPut := time.Now()
	expect(t, w, 201, "")
	if len(pub.deadlines) != 2 {
		t.Fatalf("%d publications, want the import's and the PUT's", len(pub.deadlines))
	}
	// 100 µs an object: 2,000 routes get 0.2 s on top of PublishTimeout, one route 100 µs.
	if imp := pub.deadlines[0].Sub(beforeImport); imp < 1200*time.Millisecond {
		t.Errorf("the import of 2,000 routes was given at most %v to be served, want PublishTimeout (1s) + 0.2s", imp)
	}
	if put := pub.deadlines[1].Sub(afterPut); put > time.Second+time.Millisecond {
		t.Errorf("a one-route PUT was given at least %v to be served, want PublishTimeout (1s) and 100µs", put)
	}
}
