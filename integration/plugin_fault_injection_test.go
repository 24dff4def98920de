package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fault-injection through the binary: abort with a body naming a variable, abort on vars,
// and a delay that holds its own request only: the one worker serves another request
// while it sleeps.
func TestPluginFaultInjection(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "1")
	// t/plugin/fault-injection.t TEST 22 "set route(body with var)".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/abort","plugins":{"fault-injection":`+
		`{"abort":{"http_status":200,"body":"client addr: $remote_addr\n","headers":{"X-Fault":"yes"}}}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	// TEST 28 "set route and configure the vars rule in abort", on a global rule's
	// neighbour: a service.
	in.mustPut("/apisix/admin/services/1", `{"plugins":{"fault-injection":{"abort":{"http_status":403,"body":"Fault Injection!\n",`+
		`"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}}}`)
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/vars","service_id":"1","upstream":{"nodes":{%q:1}}}`, up.addr))
	// TEST 10 "set route(delay 1 seconds)", 3 here.
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/slow","plugins":{"fault-injection":{"delay":{"duration":3}}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	in.putRoute("4", "/fast", up.addr)

	// TEST 23 "hit route(body with var)".
	resp, body := in.get("/abort")
	if resp.StatusCode != 200 || body != "client addr: 127.0.0.1\n" || resp.Header.Get("X-Fault") != "yes" {
		t.Errorf("/abort: %d %q X-Fault %q", resp.StatusCode, body, resp.Header.Get("X-Fault"))
	}
	// TEST 29-33.
	for _, tc := range []struct {
		path, apikey string
		wantStatus   int
		wantBody     string
	}{
		{"/vars?name=jack&age=18", "api-key", 403, "Fault Injection!\n"},
		{"/vars?name=jack&age=20", "", 403, "Fault Injection!\n"},
		{"/vars", "api-key", 403, "Fault Injection!\n"},
		{"/vars?name=allen", "", 200, "hello world"},
		{"/vars", "", 200, "hello world"},
	} {
		var headers []string
		if tc.apikey != "" {
			headers = []string{"apikey", tc.apikey}
		}
		resp, body := in.get(tc.path, headers...)
		if resp.StatusCode != tc.wantStatus || body != tc.wantBody {
			t.Errorf("GET %s (apikey %q): %d %q, want %d %q", tc.path, tc.apikey, resp.StatusCode, body, tc.wantStatus, tc.wantBody)
		}
	}

	// TEST 11 "hit route(delay 1 seconds and return hello world)": the slow request takes
	// its delay at least; a request sent while it sleeps is answered before it ends.
	type result struct {
		body string
		took time.Duration
	}
	slow := make(chan result, 1)
	start := time.Now()
	go func() {
		_, body := getOn(t, in.data, "/slow")
		slow <- result{body, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond) // let it reach its sleep; not needed for correctness
	if resp, body := in.get("/fast"); resp.StatusCode != 200 || body != "hello world" {
		t.Errorf("/fast: %d %q", resp.StatusCode, body)
	}
	select {
	case r := <-slow:
		t.Errorf("the delayed request ended (after %v) before the one sent during its delay", r.took)
	default:
	}
	r := <-slow
	if r.body != "hello world" || r.took < 3*time.Second {
		t.Errorf("/slow: %q after %v, want hello world after at least 3s", r.body, r.took)
	}

	// TEST 27 "vars schema validation failed": 400 naming the field.
	status, msg := in.adminCall("PUT", "/apisix/admin/routes/5", `{"uri":"/x","plugins":{"fault-injection":{"abort":{"http_status":403,"vars":[["arg_name","!=","jack"]]}}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(msg, "abort.vars: item 1: failed to validate the 'vars' expression: rule should be wrapped inside brackets") {
		t.Errorf("unwrapped vars: %d %s", status, msg)
	}
}
