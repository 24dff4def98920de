package forwardauth

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestParse holds every accept and reject of Parse; the first rows are
// t/plugin/forward-auth.t TEST 1 (sanity), APISIX's own schema cases.
func TestParse(t *testing.T) {
	cases := []struct {
		name, cfg string
		wantErr   string // "" accepts
	}{
		// t/plugin/forward-auth.t TEST 1: sanity.
		{"uri only", `{"uri":"http://127.0.0.1:8199"}`, ""},
		{"uri required", `{"request_headers":["test"]}`, "uri: required"},
		{"uri a number", `{"uri":3233}`, "uri: must be a string, got 3233"},
		{"request_headers a string", `{"uri":"http://127.0.0.1:8199","request_headers":"test"}`,
			`request_headers: must be an array of header names, got "test"`},
		{"POST", `{"uri":"http://127.0.0.1:8199","request_method":"POST"}`, ""},
		{"PUT", `{"uri":"http://127.0.0.1:8199","request_method":"PUT"}`,
			`request_method: must be one of "GET", "POST", got "PUT"`},
		// gw's own.
		{"every field", `{"uri":"https://auth.test/check?x=1","request_method":"POST","max_req_body_size":10,
			"request_headers":["Authorization"],"upstream_headers":["X-User-ID"],"client_headers":["Location"],
			"extra_headers":{"X-Tenant":"$arg_tenant"},"timeout":100,"keepalive":false,"keepalive_timeout":1000,
			"keepalive_pool":1,"allow_degradation":true,"status_on_error":503,"ssl_verify":false,"_meta":{}}`, ""},
		{"not http", `{"uri":"ftp://auth.test/"}`, `uri: must be an http or https URL with a host, got "ftp://auth.test/"`},
		{"no host", `{"uri":"http:///x"}`, `uri: must be an http or https URL with a host, got "http:///x"`},
		{"relative", `{"uri":"/auth"}`, `uri: must be an http or https URL with a host, got "/auth"`},
		{"empty uri", `{"uri":""}`, "uri: must not be empty"},
		{"timeout 0", `{"uri":"http://a.test","timeout":0}`, "timeout: must be an integer from 1 to 60000, got 0"},
		{"timeout too long", `{"uri":"http://a.test","timeout":60001}`, "timeout: must be an integer from 1 to 60000, got 60001"},
		{"timeout a string", `{"uri":"http://a.test","timeout":"1"}`, `timeout: must be an integer from 1 to 60000, got "1"`},
		{"status_on_error 199", `{"uri":"http://a.test","status_on_error":199}`, "status_on_error: must be an integer from 200 to 599, got 199"},
		{"status_on_error 600", `{"uri":"http://a.test","status_on_error":600}`, "status_on_error: must be an integer from 200 to 599, got 600"},
		{"keepalive_timeout 999", `{"uri":"http://a.test","keepalive_timeout":999}`, "keepalive_timeout: must be an integer from 1000 to 1099511627776, got 999"},
		{"keepalive_pool 0", `{"uri":"http://a.test","keepalive_pool":0}`, "keepalive_pool: must be an integer > 0, got 0"},
		{"max_req_body_size 0", `{"uri":"http://a.test","max_req_body_size":0}`, "max_req_body_size: must be an integer > 0, got 0"},
		{"keepalive not bool", `{"uri":"http://a.test","keepalive":1}`, "keepalive: must be true or false, got 1"},
		{"ssl_verify not bool", `{"uri":"http://a.test","ssl_verify":"no"}`, `ssl_verify: must be true or false, got "no"`},
		{"allow_degradation not bool", `{"uri":"http://a.test","allow_degradation":null}`, "allow_degradation: must be true or false, got null"},
		{"bad header name", `{"uri":"http://a.test","upstream_headers":["X User"]}`, `upstream_headers[0]: must be a header name, got "X User"`},
		{"empty header name", `{"uri":"http://a.test","client_headers":[""]}`, `client_headers[0]: must be a header name, got ""`},
		{"header names not strings", `{"uri":"http://a.test","client_headers":[1]}`, "client_headers: must be an array of header names, got [1]"},
		{"extra_headers empty", `{"uri":"http://a.test","extra_headers":{}}`, "extra_headers: must be an object of at least one header, got {}"},
		{"extra_headers a number", `{"uri":"http://a.test","extra_headers":{"X-A":1}}`, "extra_headers.X-A: must be a string, got 1"},
		{"extra_headers colon", `{"uri":"http://a.test","extra_headers":{"X:A":"1"}}`, `extra_headers: "X:A" is not a header name`},
		{"extra_headers unknown variable", `{"uri":"http://a.test","extra_headers":{"X-A":"$nope"}}`, "extra_headers.X-A:"},
		{"unknown field", `{"uri":"http://a.test","url":"x"}`, "url: unknown field; known fields: uri,"},
		{"twice", `{"uri":"http://a.test","uri":"http://b.test"}`, "uri"},
		{"not an object", `[]`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(json.RawMessage(tc.cfg))
			switch {
			case tc.name == "not an object":
				if err == nil {
					t.Fatal("accepted an array")
				}
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one starting %q", err, tc.wantErr)
			}
		})
	}
}

// The defaults are APISIX's.
func TestParseDefaults(t *testing.T) {
	c, err := Parse(json.RawMessage(`{"uri":"http://auth.test/check?a=1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Method != "GET" || c.Timeout != 3*time.Second || !c.Keepalive || c.KeepaliveTimeout != 60*time.Second ||
		c.KeepalivePool != 5 || c.AllowDegradation || c.StatusOnError != 403 || !c.SSLVerify || c.MaxReqBodySize != 64<<20 {
		t.Fatalf("defaults: %+v", c)
	}
	if c.Target != (target{addr: "auth.test:80", host: "auth.test", requestURI: "/check?a=1"}) {
		t.Fatalf("target: %+v", c.Target)
	}
	c, _ = Parse(json.RawMessage(`{"uri":"https://[::1]"}`))
	if c.Target != (target{addr: "[::1]:443", host: "[::1]", requestURI: "/", tls: true}) {
		t.Fatalf("target: %+v", c.Target)
	}
}
