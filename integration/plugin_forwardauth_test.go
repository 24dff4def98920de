package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// forward-auth through the real binary, after t/plugin/forward-auth.t TEST 2 to 13: an
// auth service decides by Authorization; the upstream reports the X-User-ID it got.
func TestForwardAuth(t *testing.T) {
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.Header.Get("Authorization") {
		case "222":
			w.Header().Set("X-User-ID", "i-am-an-user")
			w.WriteHeader(200)
		case "post":
			if r.Method != "POST" || string(body) != "hello" {
				w.WriteHeader(400)
				return
			}
			w.Header().Set("X-User-ID", "poster")
		case "333":
			w.Header().Set("Location", "http://example.com/auth")
			w.WriteHeader(403)
			io.WriteString(w, "go away")
		default:
			w.WriteHeader(401)
			io.WriteString(w, "uri "+r.Header.Get("X-Forwarded-Uri"))
		}
	}))
	defer auth.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "user=%s body=%s", r.Header.Get("X-User-ID"), body)
	}))
	defer up.Close()
	node := strings.TrimPrefix(up.URL, "http://")

	in := newInstance(t, "")
	in.start("--workers", "2")
	fa := fmt.Sprintf(`{"uri":"%s/auth","request_headers":["Authorization"],"upstream_headers":["X-User-ID"],"client_headers":["Location"]}`, auth.URL)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"forward-auth":%s},"upstream":{"nodes":{%q:1}}}`, fa, node))
	// On a service, and POST: the body goes to the service and still to the upstream.
	in.mustPut("/apisix/admin/services/s1", fmt.Sprintf(`{"plugins":{"forward-auth":{"uri":"%s/auth","request_method":"POST",`+
		`"request_headers":["Authorization"],"upstream_headers":["X-User-ID"]}},"upstream":{"nodes":{%q:1}}}`, auth.URL, node))
	in.mustPut("/apisix/admin/routes/2", `{"uri":"/post","service_id":"s1"}`)
	// TEST 11 and 13: a service that is not there.
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/onerror","plugins":{"forward-auth":{"uri":"http://127.0.0.1:1/auth","status_on_error":503}},"upstream":{"nodes":{%q:1}}}`, node))
	in.mustPut("/apisix/admin/routes/4", fmt.Sprintf(`{"uri":"/degraded","plugins":{"forward-auth":{"uri":"http://127.0.0.1:1/auth","allow_degradation":true}},"upstream":{"nodes":{%q:1}}}`, node))

	// TEST 4: upstream_headers reach the upstream, and a client's own is not trusted.
	resp, body := in.get("/hello", "Authorization", "222", "X-User-ID", "admin")
	if resp.StatusCode != 200 || body != "user=i-am-an-user body=" {
		t.Errorf("222: %d %q", resp.StatusCode, body)
	}
	// TEST 5: the service's answer, with client_headers, is the client's.
	resp, body = in.get("/hello", "Authorization", "333")
	if resp.StatusCode != 403 || body != "go away" || resp.Header.Get("Location") != "http://example.com/auth" {
		t.Errorf("333: %d %q Location %q", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	resp, body = in.get("/hello?a=b", "Authorization", "nobody")
	if resp.StatusCode != 401 || body != "uri /hello?a=b" {
		t.Errorf("nobody: %d %q", resp.StatusCode, body)
	}
	status, body := call(t, "POST", "http://"+in.data+"/post", "hello", "Authorization", "post")
	if status != 200 || body != "user=poster body=hello" {
		t.Errorf("POST: %d %q", status, body)
	}
	if resp, _ := in.get("/onerror"); resp.StatusCode != 503 {
		t.Errorf("unreachable, status_on_error 503: %d", resp.StatusCode)
	}
	if resp, body := in.get("/degraded"); resp.StatusCode != 200 || body != "user= body=" {
		t.Errorf("unreachable, allow_degradation: %d %q", resp.StatusCode, body)
	}

	// As a global rule it guards every route.
	in.mustPut("/apisix/admin/global_rules/1", fmt.Sprintf(`{"plugins":{"forward-auth":{"uri":"%s/auth"}}}`, auth.URL))
	if resp, _ := in.get("/degraded"); resp.StatusCode != 401 {
		t.Errorf("global rule: %d, want the service's 401", resp.StatusCode)
	}

	// Bad configuration is a 400 naming the field, and changes nothing.
	status, body = in.adminCall("PUT", "/apisix/admin/routes/9", `{"uri":"/x","plugins":{"forward-auth":{"uri":"http://a.test","timeout":0}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "timeout: must be an integer from 1 to 60000, got 0") {
		t.Errorf("bad timeout: %d %s", status, body)
	}
	status, body = in.adminCall("PUT", "/apisix/admin/routes/9", `{"uri":"/x","plugins":{"forward-auth":{"request_method":"PUT","uri":"http://a.test"}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "request_method") || !strings.Contains(body, "PUT") {
		t.Errorf("bad method: %d %s", status, body)
	}
}
