package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingUpstream answers "hello world" and counts what reaches it.
func countingUpstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Vary", "Accept-Encoding")
		io.WriteString(w, "hello world")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &hits
}

// cors through the real binary: the preflight is answered by the gateway and never
// reaches the upstream nor key-auth, a 401 carries the headers, and the upstream's own
// Vary is kept beside cors's.
func TestCORS(t *testing.T) {
	node, hits := countingUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`)
	// t/plugin/cors.t TEST 15 "set route(auth plugins fails)", with a list of origins.
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"key-auth":{},"cors":{`+
		`"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2",`+
		`"expose_headers":"ex-headr1","max_age":50,"allow_credential":true}},"upstream":{"nodes":{%q:1}}}`, node))

	// t/plugin/cors.t TEST 14 "options return directly".
	resp, body := in.do("OPTIONS", "/hello", "Origin", "http://sub2.domain.com", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 200 || body != "" || hits.Load() != 0 {
		t.Fatalf("preflight: %d %q, upstream hit %d times; want 200, no body, no hit", resp.StatusCode, body, hits.Load())
	}
	want := map[string]string{
		"Access-Control-Allow-Origin": "http://sub2.domain.com", "Access-Control-Allow-Methods": "GET,POST",
		"Access-Control-Allow-Headers": "headr1,headr2", "Access-Control-Expose-Headers": "ex-headr1",
		"Access-Control-Max-Age": "50", "Access-Control-Allow-Credentials": "true", "Vary": "Origin",
	}
	for h, v := range want {
		if got := resp.Header.Get(h); got != v {
			t.Errorf("preflight: %s %q, want %q", h, got, v)
		}
	}
	// t/plugin/cors.t TEST 16 "auth failed still work".
	resp, body = in.do("GET", "/hello", "Origin", "http://sub.domain.com")
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "http://sub.domain.com" {
		t.Errorf("no key: %d %q with Access-Control-Allow-Origin %q; want 401 with the origin", resp.StatusCode, body, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, body = in.do("GET", "/hello", "Origin", "http://sub.domain.com", "apikey", "auth-one")
	if resp.StatusCode != 200 || body != "hello world" || resp.Header.Get("Access-Control-Allow-Origin") != "http://sub.domain.com" {
		t.Errorf("with key: %d %q, Access-Control-Allow-Origin %q", resp.StatusCode, body, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if vary := strings.Join(resp.Header.Values("Vary"), ","); vary != "Accept-Encoding,Origin" {
		t.Errorf("Vary %q, want the upstream's and cors's: Accept-Encoding,Origin", vary)
	}
	// t/plugin/cors.t TEST 10 "cors specified no match origin".
	resp, _ = in.do("GET", "/hello", "Origin", "http://sub3.domain.com", "apikey", "auth-one")
	if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != 200 || got != "" {
		t.Errorf("unlisted origin: %d with Access-Control-Allow-Origin %q, want 200 and none", resp.StatusCode, got)
	}
}

// cors as a global rule serves every route, and its preflight answers before routing
// has a route's plugins to run.
func TestCORSGlobalRuleAndBadConfig(t *testing.T) {
	node, hits := countingUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putRoute("1", "/hello", node)
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"cors":{"allow_origins_by_regex":["\\.test\\.com$"]}}}`)
	resp, _ := in.do("GET", "/hello", "Origin", "http://a.test.com")
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://a.test.com" {
		t.Errorf("global rule: Access-Control-Allow-Origin %q, want http://a.test.com", got)
	}
	resp, _ = in.do("OPTIONS", "/hello", "Origin", "http://a.test.com", "Access-Control-Request-Method", "GET")
	if resp.StatusCode != 200 || hits.Load() != 1 {
		t.Errorf("global preflight: %d, upstream hits %d; want 200 and the one GET", resp.StatusCode, hits.Load())
	}
	// t/plugin/cors.t TEST 24 "should not set * to allow_origins when allow_credential is true".
	for body, want := range map[string]string{
		`{"uri":"/x","plugins":{"cors":{"allow_origins":"*","allow_credential":true}}}`: "failed to check the configuration of plugin cors err: you can not set '*' for other option when 'allow_credential' is true",
		`{"uri":"/x","plugins":{"cors":{"allow_origins_by_metadata":["a","a"]}}}`:       `allow_origins_by_metadata[1]: \"a\" appears twice`,
		`{"uri":"/x","plugins":{"cors":{"allow_origins_by_regex":["(?<=a)"]}}}`:         "allow_origins_by_regex[0]",
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/2", body)
		if status != 400 || !strings.Contains(resp, want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", body, status, resp, want)
		}
	}
}

// allow_origins_by_metadata through the real binary (t/plugin/cors3.t): the route names
// lists kept in plugin_metadata/cors, every worker serves a metadata write at once, and a
// bad metadata write is refused naming the entry and changes nothing.
func TestCORSAllowOriginsByMetadata(t *testing.T) {
	node, _ := countingUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/plugin_metadata/cors", `{"allow_origins":{"key_1":"https://domain.com","key_2":"https://sub.domain.com,https://sub2.domain.com"}}`)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"cors":{"allow_origins":"https://test.com",`+
		`"allow_origins_by_metadata":["key_1","key_2"]}},"upstream":{"nodes":{%q:1}}}`, node))
	allowed := func(origin string) string {
		t.Helper()
		resp, body := in.do("GET", "/hello", "Origin", origin)
		if resp.StatusCode != 200 || body != "hello world" {
			t.Fatalf("Origin %s: %d %q", origin, resp.StatusCode, body)
		}
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	// Several requests each, so both workers answer.
	for i := 0; i < 4; i++ {
		for origin, want := range map[string]string{
			"https://domain.com":      "https://domain.com",      // key_1 (TEST 9)
			"https://sub2.domain.com": "https://sub2.domain.com", // key_2 (TEST 10)
			"https://test.com":        "https://test.com",        // allow_origins (TEST 5)
			"http://foo.example.org":  "",                        // none (TEST 8)
		} {
			if got := allowed(origin); got != want {
				t.Errorf("Origin %s: Access-Control-Allow-Origin %q, want %q", origin, got, want)
			}
		}
	}
	// A bad entry: refused, naming it, and the stored lists still serve.
	status, body := in.adminCall("PUT", "/apisix/admin/plugin_metadata/cors", `{"allow_origins":{"key_1":"domain.com"}}`)
	if status != 400 || !strings.Contains(body, "allow_origins.key_1") {
		t.Errorf("bad metadata: %d %s, want 400 naming allow_origins.key_1", status, body)
	}
	if got := allowed("https://domain.com"); got != "https://domain.com" {
		t.Errorf("after a refused write: %q", got)
	}
	// key_1 now allows every origin (TEST 12), and the old one no longer by itself.
	in.mustPut("/apisix/admin/plugin_metadata/cors", `{"allow_origins":{"key_1":"*"}}`)
	for i := 0; i < 4; i++ {
		if got := allowed("http://foo.example.org"); got != "http://foo.example.org" {
			t.Errorf("after the metadata write: Access-Control-Allow-Origin %q, want the Origin echoed", got)
		}
		if got := allowed("https://sub2.domain.com"); got != "https://sub2.domain.com" {
			t.Errorf("key_1 \"*\" allows every origin: %q", got)
		}
	}
	// Without metadata, only allow_origins is left.
	if status, body := in.adminCall("DELETE", "/apisix/admin/plugin_metadata/cors", ""); status != 200 {
		t.Fatalf("DELETE plugin_metadata/cors: %d %s", status, body)
	}
	if got := allowed("http://foo.example.org"); got != "" {
		t.Errorf("metadata deleted: Access-Control-Allow-Origin %q, want none", got)
	}
	if got := allowed("https://test.com"); got != "https://test.com" {
		t.Errorf("metadata deleted, allow_origins: %q", got)
	}
}
