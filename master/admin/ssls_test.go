package admin

import (
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"gw/internal/testcert"
)

// testSSL is a generated certificate and key (no private key is committed).
type testSSL struct{ cert, key string }

func newTestSSL(t *testing.T, name string) testSSL {
	t.Helper()
	c := testcert.SelfSigned(t, testcert.Options{Names: []string{name}, Serial: big.NewInt(1), NotAfter: time.Now().Add(time.Hour)})
	return testSSL{cert: c.CertPEM, key: c.KeyPEM}
}

// body is an ssl object for these snis, with extra fields merged in.
func (c testSSL) body(extra map[string]any, snis ...string) string {
	fields := map[string]any{"cert": c.cert, "key": c.key, "snis": snis}
	for k, v := range extra {
		fields[k] = v
	}
	b, _ := json.Marshal(fields)
	return string(b)
}

func TestSSLWrites(t *testing.T) {
	a := newTestSSL(t, "a.test")
	b := newTestSSL(t, "b.test")
	tests := []struct {
		name    string
		setup   [][3]string // method, path, body: each must succeed
		method  string
		path    string
		body    string
		status  int
		wantMsg string // in the body
	}{
		{name: "create", method: "PUT", path: "/ssls/1", body: a.body(nil, "a.test"), status: 201},
		{name: "post", method: "POST", path: "/ssls", body: a.body(nil, "a.test"), status: 201},
		{name: "replace own name", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")}},
			method: "PUT", path: "/ssls/1", body: b.body(nil, "a.test"), status: 200},
		{name: "name taken", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test", "*.a.test")}},
			method: "PUT", path: "/ssls/2", body: b.body(nil, "x.test", "A.TEST"), status: 400, wantMsg: `sni \"a.test\" is already served by ssl 1`},
		{name: "wildcard taken", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "*.a.test")}},
			method: "POST", path: "/ssls", body: b.body(nil, "*.a.test"), status: 400, wantMsg: `sni \"*.a.test\" is already served by ssl 1`},
		{name: "exact beside a wildcard", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "*.a.test")}},
			method: "PUT", path: "/ssls/2", body: b.body(nil, "www.a.test"), status: 201},
		{name: "standby may share", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")}},
			method: "PUT", path: "/ssls/2", body: b.body(map[string]any{"status": 0}, "a.test"), status: 201},
		{name: "enabling a standby refused", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")},
			{"PUT", "/ssls/2", b.body(map[string]any{"status": 0}, "a.test")}},
			method: "PATCH", path: "/ssls/2", body: `{"status":1}`, status: 400, wantMsg: "already served by ssl 1"},
		{name: "patch sni", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")}},
			method: "PATCH", path: "/ssls/1", body: `{"snis":["c.test"]}`, status: 200},
		{name: "patch a key of another cert", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")}},
			method: "PATCH", path: "/ssls/1/key", body: jsonString(b.key), status: 400, wantMsg: `property \"key\" validation failed: does not match`},
		{name: "bad sni", method: "PUT", path: "/ssls/1", body: a.body(nil, "a..test"), status: 400,
			wantMsg: `property \"snis\" validation failed: failed to validate item 1: must be a host name`},
		{name: "missing id", method: "PUT", path: "/ssls", body: a.body(nil, "a.test"), status: 400, wantMsg: "missing ssl id"},
		{name: "delete", setup: [][3]string{{"PUT", "/ssls/1", a.body(nil, "a.test")}},
			method: "DELETE", path: "/ssls/1", status: 200, wantMsg: `"key":"/apisix/ssls/1"`},
		{name: "delete missing", method: "DELETE", path: "/ssls/1", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for _, s := range tt.setup {
				if w := f.call(s[0], Prefix+s[1], s[2]); w.Code >= 300 {
					t.Fatalf("setup %s %s: %d %s", s[0], s[1], w.Code, w.Body)
				}
			}
			w := f.call(tt.method, Prefix+tt.path, tt.body)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.wantMsg) {
				t.Fatalf("%s %s = %d %s\nwant %d with %s", tt.method, tt.path, w.Code, w.Body, tt.status, tt.wantMsg)
			}
			if strings.Contains(w.Body.String(), keyLine(a.key)) || strings.Contains(w.Body.String(), keyLine(b.key)) {
				t.Errorf("answer holds private key material: %s", w.Body)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// keyLine is the first line of a PEM key's base64 text: enough to spot a leak.
func keyLine(pemText string) string { return strings.Split(pemText, "\n")[1] }

// TestSSLKeysNeverShown checks every answer that carries an ssl, and the echo of a
// malformed body, for its private key.
func TestSSLKeysNeverShown(t *testing.T) {
	f := newFixture(t)
	a := newTestSSL(t, "a.test")
	extra := newTestSSL(t, "a.test")
	body := a.body(map[string]any{"certs": []string{extra.cert}, "keys": []string{extra.key}}, "a.test")
	answers := map[string]*http.Response{}
	for _, c := range []struct{ name, method, path, body string }{
		{"PUT", "PUT", "/ssls/1", body},
		{"POST", "POST", "/ssls", body[:len(body)-1] + `,"snis":["b.test"]}`},
		{"PATCH", "PATCH", "/ssls/1", `{"desc":"renewed"}`},
		{"GET", "GET", "/ssls/1", ""},
		{"list", "GET", "/ssls", ""},
		{"malformed body", "PUT", "/ssls/9", body[:len(body)-2]},
	} {
		w := f.call(c.method, Prefix+c.path, c.body)
		answers[c.name] = w.Result()
		text := w.Body.String()
		if strings.Contains(text, "PRIVATE KEY") || strings.Contains(text, keyLine(a.key)) || strings.Contains(text, keyLine(extra.key)) {
			t.Errorf("%s answer (%d) holds a private key: %s", c.name, w.Code, text)
		}
		if c.name != "malformed body" && !strings.Contains(text, "BEGIN CERTIFICATE") {
			t.Errorf("%s answer (%d) lacks the certificate: %s", c.name, w.Code, text)
		}
	}
	if answers["malformed body"].StatusCode != 400 {
		t.Errorf("malformed body: status %d, want 400", answers["malformed body"].StatusCode)
	}
	// The store and the workers still have the keys.
	obj, _ := f.store.Get("ssls", "1")
	if !strings.Contains(string(obj.Value), `"key":`) || !strings.Contains(string(obj.Value), `"keys":`) {
		t.Errorf("stored ssl lost its keys: %s", obj.Value)
	}
	if snap := f.pub.last(); len(snap.SSLs) != 2 || snap.SSLs[0].Key != a.key {
		t.Errorf("published snapshot lacks the ssls or their keys")
	}
}

func TestWithoutFields(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"cert":"c","key":"k","snis":["a"]}`, `{"cert":"c","snis":["a"]}`},
		{`{"key":"k"}`, `{}`},
		{`{"keys":["k1","k2"],"id":"1"}`, `{"id":"1"}`},
		{`{"a":{"key":"nested stays"}}`, `{"a":{"key":"nested stays"}}`},
		{`{}`, `{}`},
		{`[1]`, `[1]`},
		{`"text"`, `"text"`},
	}
	for _, tt := range tests {
		if got := string(withoutFields([]byte(tt.in), sslSecretFields)); got != tt.want {
			t.Errorf("withoutFields(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := string(withoutFields([]byte(`{"key":"k"}`), nil)); got != `{"key":"k"}` {
		t.Errorf("no hidden fields: got %s", got)
	}
}

// An ssl an upstream presents as its client certificate (tls.client_cert_id, in an
// upstream or inline in a route or a service) is deleted only with ?force=true, as an
// upstream a route uses; the refusal changes nothing.
func TestSSLInUseByUpstream(t *testing.T) {
	f := newFixture(t)
	client := newTestSSL(t, "client.test")
	server := newTestSSL(t, "server.test")
	upstream := func(certID string) string {
		return `{"scheme":"https","nodes":{"127.0.0.1:443":1},"tls":{"client_cert_id":` + certID + `}}`
	}
	clientBody, _ := json.Marshal(map[string]any{"type": "client", "cert": client.cert, "key": client.key})
	expect(t, f.call("PUT", Prefix+"/ssls/c", string(clientBody)), 201, "")
	expect(t, f.call("PUT", Prefix+"/ssls/7", string(clientBody)), 201, "")
	expect(t, f.call("PUT", Prefix+"/ssls/s", server.body(nil, "server.test")), 201, "")
	expect(t, f.call("PUT", Prefix+"/upstreams/u", upstream(`"c"`)), 201, "")
	expect(t, f.call("PUT", Prefix+"/upstreams/n", upstream(`7`)), 201, "") // an integer id
	expect(t, f.call("PUT", Prefix+"/services/sv", `{"upstream":`+upstream(`"c"`)+`}`), 201, "")
	expect(t, f.call("PUT", Prefix+"/routes/1", `{"uri":"/a","upstream":`+upstream(`"c"`)+`}`), 201, "")

	refused := func(path, by string) {
		t.Helper()
		before := f.store.Revision()
		expect(t, f.call("DELETE", Prefix+path, ""), 400,
			`{"error_msg":"can not delete this ssl, `+by+` is still using it now"}`)
		if f.store.Revision() != before {
			t.Fatalf("a refused DELETE %s changed the store", path)
		}
	}
	refused("/ssls/c", "route [1]")
	expect(t, f.call("DELETE", Prefix+"/routes/1", ""), 200, "")
	refused("/ssls/c", "service [sv]")
	expect(t, f.call("DELETE", Prefix+"/services/sv", ""), 200, "")
	refused("/ssls/c", "upstream [u]")
	refused("/ssls/7", "upstream [n]")

	// An ssl nothing presents is deleted as before; force deletes one in use.
	expect(t, f.call("DELETE", Prefix+"/ssls/s", ""), 200, `{"deleted":"1","key":"/apisix/ssls/s"}`)
	expect(t, f.call("DELETE", Prefix+"/ssls/c?force=true", ""), 200, `{"deleted":"1","key":"/apisix/ssls/c"}`)
	// Once its upstream lets go, the other one goes without force.
	expect(t, f.call("PATCH", Prefix+"/upstreams/n", `{"tls":null}`), 200, "")
	expect(t, f.call("DELETE", Prefix+"/ssls/7", ""), 200, `{"deleted":"1","key":"/apisix/ssls/7"}`)
}
