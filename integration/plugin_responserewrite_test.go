package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// bigUpstream answers /big with a 100 KiB body (streamed by gw: larger than it buffers)
// and /chunked with a body of unknown length, both ending in "THE END".
func bigUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("hello world\n", 100<<10/12) + "THE END"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("ETag", `"v1"`)
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length: chunked
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		}
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// response-rewrite through the real binary, on streamed bodies: headers and status change
// and the body streams on untouched; a filter reads it whole; a body replaces it; a 401
// from key-auth is rewritten as well.
func TestResponseRewrite(t *testing.T) {
	node := bigUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	route := func(id, uri, plugins string) {
		in.mustPut("/apisix/admin/routes/"+id, fmt.Sprintf(`{"uri":%q,"plugins":%s,"upstream":{"nodes":{%q:1}}}`, uri, plugins, node))
	}
	// t/plugin/response-rewrite.t TEST 23/24 "rewrite header with variables"; TEST 8 the status.
	route("1", "/big", `{"response-rewrite":{"status_code":203,"headers":{"set":{"X-A":"$remote_addr","X-Route":"$route_id"},"add":["X-Added: 1"],"remove":["X-Upstream"]}}}`)
	// response-rewrite2.t's filters, on a chunked body.
	route("2", "/chunked", `{"response-rewrite":{"filters":[{"regex":"hello","scope":"global","replace":"bye"},{"regex":"THE (END)","replace":"$1!"}]}}`)
	// TEST 4/5 "set header(rewrite header and body)".
	route("3", "/replaced", `{"proxy-rewrite":{"uri":"/big"},"response-rewrite":{"body":"new body\n","headers":{"X-Server-id":3,"Content-Type":""}}}`)
	route("4", "/guarded", `{"key-auth":{},"response-rewrite":{"status_code":403,"body":"{\"message\":\"forbidden\"}"}}`)
	// TEST 18-20 "http status code as expr": vars decide per response, on its status (here
	// key-auth's 401, or the node's 200) and headers, and the request's variables.
	route("5", "/vars/guarded", `{"key-auth":{},"response-rewrite":{"status_code":403,"body":"denied","vars":[["status","==",401]]}}`)
	route("6", "/vars/miss", `{"proxy-rewrite":{"uri":"/big"},"response-rewrite":{"status_code":403,"body":"x","vars":[["status","==",500]]}}`)
	route("7", "/vars/header", `{"proxy-rewrite":{"uri":"/big"},"response-rewrite":{"headers":{"set":{"X-Matched":"yes"}},`+
		`"vars":[["sent_http_x_upstream","==","yes"],["arg_mark","==","1"]]}}`)

	in.overBothProtocols(func() {
		resp, body := in.get("/big")
		if resp.StatusCode != 203 || !strings.HasSuffix(body, "THE END") || len(body) < 100<<10-12 {
			t.Errorf("/big: %d, %d bytes ending %q", resp.StatusCode, len(body), body[max(0, len(body)-10):])
		}
		for h, want := range map[string]string{"X-A": "127.0.0.1", "X-Route": "1", "X-Added": "1", "X-Upstream": "", "ETag": `"v1"`} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("/big: %s %q, want %q", h, got, want)
			}
		}
		resp, body = in.get("/chunked")
		if resp.StatusCode != 200 || strings.Contains(body, "hello") || !strings.HasSuffix(body, "bye world\nEND!") || resp.Header.Get("ETag") != "" {
			t.Errorf("/chunked: %d, ETag %q, %d bytes ending %q", resp.StatusCode, resp.Header.Get("ETag"), len(body), body[max(0, len(body)-20):])
		}
		resp, body = in.get("/replaced")
		if resp.StatusCode != 200 || body != "new body\n" || resp.Header.Get("X-Server-id") != "3" || resp.Header.Get("Content-Type") != "" {
			t.Errorf("/replaced: %d %q, X-Server-id %q, Content-Type %q", resp.StatusCode, body, resp.Header.Get("X-Server-id"), resp.Header.Get("Content-Type"))
		}
		resp, body = in.get("/guarded")
		if resp.StatusCode != 403 || body != `{"message":"forbidden"}` {
			t.Errorf("/guarded: %d %q, want key-auth's 401 rewritten to 403", resp.StatusCode, body)
		}
		if resp, body = in.get("/vars/guarded"); resp.StatusCode != 403 || body != "denied" {
			t.Errorf("/vars/guarded: %d %q, want the 401 rewritten (status == 401)", resp.StatusCode, body)
		}
		if resp, body = in.get("/vars/miss"); resp.StatusCode != 200 || !strings.HasSuffix(body, "THE END") {
			t.Errorf("/vars/miss: %d, %d bytes, want the node's answer untouched (status is not 500)", resp.StatusCode, len(body))
		}
		if resp, _ = in.get("/vars/header?mark=1"); resp.Header.Get("X-Matched") != "yes" {
			t.Errorf("/vars/header?mark=1: X-Matched %q, want yes", resp.Header.Get("X-Matched"))
		}
		if resp, _ = in.get("/vars/header?mark=2"); resp.Header.Get("X-Matched") != "" {
			t.Errorf("/vars/header?mark=2: X-Matched %q, want none", resp.Header.Get("X-Matched"))
		}
	})
	// The worker keeps serving, its node connections intact, after the streams were cut.
	for range 3 {
		if resp, body := in.get("/big"); resp.StatusCode != 203 || !strings.HasSuffix(body, "THE END") {
			t.Fatalf("/big again: %d, %d bytes", resp.StatusCode, len(body))
		}
	}
	// TEST 2 "add plugin with wrong status_code", TEST 17 vars, and variables gw cannot read.
	for cfg, want := range map[string]string{
		`{"response-rewrite":{"status_code":180}}`:                         "status_code: must be an integer from 200 to 598, got 180",
		`{"response-rewrite":{"vars":[[]]}}`:                               "vars: failed to validate the 'vars' expression: rule too short",
		`{"response-rewrite":{"vars":[["upstream_status","==",200]]}}`:     `unknown variable \"upstream_status\"`,
		`{"limit-count":{"count":1,"time_window":60,"key":"sent_http_a"}}`: `variable \"sent_http_a\" is the response's`,
		`{"response-rewrite":{"headers":{"X-B":"$balancer_ip"}}}`:          `unknown variable \"balancer_ip\"`,
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/9", `{"uri":"/x","plugins":`+cfg+`}`)
		if status != 400 || !strings.Contains(resp, want) {
			t.Errorf("PUT %s: %d %s, want 400 with %q", cfg, status, resp, want)
		}
	}
}
