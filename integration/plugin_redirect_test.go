package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// redirect through the binary: uri with variables, regex_uri that falls through to the
// upstream when it does not match, http_to_https by method, encode_uri and
// append_query_string; a configuration naming two ways is a 400.
func TestPluginRedirect(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "2")
	route := func(id, uri, redirect string) {
		in.mustPut("/apisix/admin/routes/"+id, fmt.Sprintf(`{"uri":%q,"plugins":{"redirect":%s},"upstream":{"nodes":{%q:1}}}`, uri, redirect, up.addr))
	}
	// t/plugin/redirect.t TEST 7, 15, 34, 37, 43.
	route("1", "/hello", `{"uri":"$uri/test/a${arg_name}c"}`)
	route("2", "/secure/*", `{"http_to_https":true}`)
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uris":["/test/*","/plain"],"plugins":{"redirect":`+
		`{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301,"encode_uri":true}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	route("4", "/query", `{"uri":"$uri?type=string","append_query_string":true}`)

	noFollow := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, tc := range []struct {
		method, path, host string
		wantStatus         int
		wantLocation       string
	}{
		{"GET", "/hello?name=json", "", 302, "/hello/test/ajsonc"},               // TEST 8
		{"GET", "/secure/a?b=1", "foo.com", 301, "https://foo.com/secure/a?b=1"}, // TEST 16
		{"POST", "/secure/a", "foo.com", 308, "https://foo.com/secure/a"},        // TEST 31
		{"HEAD", "/secure/a", "foo.com", 301, "https://foo.com/secure/a"},        // TEST 33
		{"GET", "/test/with%20space", "", 301, "http://test.com/with%20space"},   // TEST 38
		{"GET", "/plain", "", 200, ""},                                           // TEST 36: no match, proxied
		{"GET", "/query?name=json", "", 302, "/query?type=string&name=json"},     // TEST 44
	} {
		req, _ := http.NewRequest(tc.method, "http://"+in.data+tc.path, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || resp.Header.Get("Location") != tc.wantLocation {
			t.Errorf("%s %s: %d Location %q, want %d %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.wantStatus, tc.wantLocation)
		}
		if tc.wantStatus == 200 && string(body) != "hello world" {
			t.Errorf("%s %s: body %q", tc.method, tc.path, body)
		}
	}

	// TEST 25 and 48: refused, and route 2 redirects as before.
	for body, want := range map[string]string{
		`{"uri":"/secure/*","plugins":{"redirect":{"http_to_https":true,"uri":"/hello"}}}`:                              "set one of uri, regex_uri and http_to_https",
		`{"uri":"/secure/*","plugins":{"redirect":{"http_to_https":true,"append_query_string":true}}}`:                  "only one of `http_to_https` and `append_query_string` can be configured.",
		`{"uri":"/secure/*","plugins":{"redirect":{"uri":"$uri/$bad_var/bar"}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`: `unknown variable \"bad_var\"`,
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/2", body)
		if status != 400 || !strings.Contains(resp, want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", body, status, resp, want)
		}
	}
	req, _ := http.NewRequest("GET", "http://"+in.data+"/secure/x", nil)
	req.Host = "foo.com"
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 {
		t.Errorf("after refused writes: %d, want 301", resp.StatusCode)
	}
}
