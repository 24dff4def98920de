package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The plugins of issue 22 answer an HTTP/2 client as they answer an HTTP/1.1 one: each
// route holds one plugin (two where one needs the other), and curl asks it once over
// HTTP/1.1 and once over h2c, which must give the same status and carry what APISIX's
// tests of that plugin look for. Plugins run on the worker's one request path whatever
// the protocol; this holds them to it.
func TestPluginsAnswerAlikeOverHTTP2(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	up := startUpstream(t, "hello")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`)
	cases := []struct {
		name    string
		plugins string
		args    []string // curl's, besides the protocol
		status  string
		want    string // in the response head or body, lower case
	}{
		// t/plugin/ip-restriction.t: a blacklisted client gets 403 and the message.
		{"ip-restriction", `"ip-restriction":{"blacklist":["127.0.0.0/8"]}`, nil, "403", "your ip address is not allowed"},
		// t/plugin/uri-blocker.t: a matching URI gets the rejected_code.
		{"uri-blocker", `"uri-blocker":{"block_rules":["^/p/uri-blocker"],"rejected_code":410}`, nil, "410", ""},
		// t/plugin/cors.t: an allowed origin is echoed back.
		{"cors", `"cors":{"allow_origins":"http://a.test"}`, []string{"-H", "Origin: http://a.test"}, "200", "access-control-allow-origin: http://a.test"},
		// t/plugin/fault-injection.t TEST 3: abort with status and body.
		{"fault-injection", `"fault-injection":{"abort":{"http_status":418,"body":"teapot"}}`, nil, "418", "teapot"},
		// t/plugin/response-rewrite.t: status and body replaced, a header set.
		{"response-rewrite", `"response-rewrite":{"status_code":202,"body":"rewritten","headers":{"set":{"X-Rewritten":"yes"}}}`, nil, "202", "x-rewritten: yes"},
		// t/plugin/redirect.t: ret_code and Location.
		{"redirect", `"redirect":{"uri":"/elsewhere","ret_code":301}`, nil, "301", "location: /elsewhere"},
		// t/plugin/request-id.t: the id in the response.
		{"request-id", `"request-id":{"include_in_response":true}`, nil, "200", "x-request-id: "},
		// t/plugin/real-ip.t with ip-restriction: the address from the header is the one checked.
		{"real-ip", `"real-ip":{"source":"http_x_real_ip","trusted_addresses":["127.0.0.0/8"]},"ip-restriction":{"whitelist":["10.0.0.1"]}`,
			[]string{"-H", "X-Real-IP: 10.0.0.1"}, "200", "hello"},
		// t/plugin/gzip.t: a text body compressed.
		{"gzip", `"gzip":{"types":["text/plain"],"min_length":1}`, []string{"-H", "Accept-Encoding: gzip"}, "200", "content-encoding: gzip"},
		// t/plugin/consumer-restriction.t: a consumer not on the whitelist gets 403.
		{"consumer-restriction", `"key-auth":{},"consumer-restriction":{"whitelist":["rose"]}`, []string{"-H", "apikey: jack-key"}, "403",
			"the consumer_name is forbidden"},
	}
	for i, c := range cases {
		in.mustPut(fmt.Sprintf("/apisix/admin/routes/%d", i+1), fmt.Sprintf(`{"uri":"/p/%s","plugins":{%s},"upstream":{"nodes":{%q:1}}}`,
			c.name, c.plugins, up.addr))
	}
	for _, c := range cases {
		url := "http://" + in.data + "/p/" + c.name
		for _, protocol := range []struct{ flag, version string }{{"--http1.1", "1.1"}, {"--http2-prior-knowledge", "2"}} {
			args := append([]string{protocol.flag, "-D", "-"}, c.args...)
			version, status, out := curlH2(t, append(args, url)...)
			if version != protocol.version || status != c.status || !strings.Contains(strings.ToLower(out), c.want) {
				t.Errorf("%s over HTTP/%s: HTTP/%s %s, want %s with %q:\n%s", c.name, protocol.version, version, status, c.status, c.want, out)
			}
		}
	}
}

// limit-req and limit-conn count HTTP/2 streams as they count HTTP/1.1 requests: limit-req
// refuses the burst's excess on one connection's streams, and limit-conn counts each
// stream in flight and frees its place when the stream ends, on a connection that stays
// open (t/plugin/limit-conn.t's rule, per request, not per connection).
func TestRateLimitsCountHTTP2Streams(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	up := startUpstream(t, "hello")
	held := startHeldUpstream(t)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/req","plugins":{"limit-req":{"rate":0.1,"burst":0,"key":"remote_addr","rejected_code":503,"nodelay":true}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	in.putLimitConnRoute("2", "/conn", held.addr, `{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"remote_addr","rejected_code":503}`)
	client := h2cClient()
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + in.data + path)
		if err != nil {
			t.Fatalf("GET %s over h2c: %v", path, err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("GET %s: %s, want HTTP/2", path, resp.Proto)
		}
		return resp.StatusCode, resp.Status
	}
	// rate 0.1/s, no burst: the first passes, the next (on the same connection) is refused.
	if code, _ := get("/req"); code != 200 {
		t.Fatalf("limit-req's first request over h2c: %d", code)
	}
	if code, _ := get("/req"); code != 503 {
		t.Fatalf("limit-req's second request over h2c: %d, want 503", code)
	}

	// limit-conn: one stream held at the upstream takes the one place...
	first := make(chan int, 1)
	go func() {
		code, _ := get("/conn")
		first <- code
	}()
	if !waitFor(10*time.Second, func() bool { return held.holding.Load() == 1 }) {
		t.Fatal("the first stream never reached the upstream")
	}
	// ...so a second stream on the same connection is refused at once,
	if code, _ := get("/conn"); code != http.StatusServiceUnavailable {
		t.Fatalf("a second stream while the first is in flight: %d, want 503", code)
	}
	// and once the first ends its place is free again, the connection still open.
	close(held.release)
	if code := <-first; code != 200 {
		t.Fatalf("the held stream: %d, want 200", code)
	}
	if code, _ := get("/conn"); code != 200 {
		t.Fatalf("a stream after the first ended: %d, want 200 (its place freed)", code)
	}
}
