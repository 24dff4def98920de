package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// putLimitReqRoute writes route id on uri to the upstream with the given limit-req
// configuration (a JSON object).
func (in *instance) putLimitReqRoute(id, uri, upstream, limitReq string) {
	in.t.Helper()
	body := fmt.Sprintf(`{"uri":%q,"plugins":{"limit-req":%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, limitReq, upstream)
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
		in.t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

// One bucket shared by every worker: 1 + burst requests pass of a burst over many
// connections, whichever workers they land on. The rate (one per 100 s) leaks nothing
// while the test runs.
func TestLimitReqExactAcrossWorkers(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putLimitReqRoute("1", "/exact", up.addr, `{"rate": 0.01, "burst": 9, "nodelay": true, "key": "remote_addr"}`)
	got := sendBurst(t, in.data, "/exact", 300, 30)
	if got.statuses[200] != 10 || got.statuses[503] != 290 || got.errors != 0 {
		t.Fatalf("%v and %d errors, want exactly 10 passed and 290 rejected", got.statuses, got.errors)
	}
}

// t/plugin/limit-req.t TEST 5 and 6 (rate 0.1, burst 0.1: 200 then 503s) and TEST 11
// (rejected_code), with rejected_msg's body, through the real binary; the buckets
// survive a reload.
func TestLimitReqRejectionAndReload(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putLimitReqRoute("1", "/hello", up.addr, `{"rate": 0.1, "burst": 0.1, "rejected_code": 503, "key": "remote_addr"}`)
	in.putLimitReqRoute("2", "/custom", up.addr, `{"rate": 0.01, "burst": 0, "key": "remote_addr", "rejected_code": 429, "rejected_msg": "slow down"}`)
	for i, want := range []int{200, 503, 503, 503} {
		if resp, _ := in.get("/hello"); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if resp, body := in.get("/custom"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("/custom first: %d %q", resp.StatusCode, body)
	}
	resp, body := in.get("/custom")
	if resp.StatusCode != 429 || strings.TrimSpace(body) != `{"error_msg":"slow down"}` ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("/custom second: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if out, err := in.gwctl("reload"); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	if resp, _ := in.get("/custom"); resp.StatusCode != 429 {
		t.Fatalf("after reload: %d, want 429 (the bucket is in shared memory)", resp.StatusCode)
	}
}

// A request within burst waits its turn on its own: with one worker, another client's
// request is answered while the delayed one waits.
func TestLimitReqDelayBlocksNoOneElse(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putLimitReqRoute("1", "/slow", up.addr, `{"rate": 0.25, "burst": 1, "key": "http_x_user"}`)
	get := func(user string) int {
		req, _ := http.NewRequest("GET", "http://"+in.data+"/slow", nil)
		req.Header.Set("X-User", user)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", user, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("ann"); got != 200 {
		t.Fatalf("ann's first: %d", got)
	}
	start := time.Now()
	var delayed sync.WaitGroup
	var delayedAt time.Duration
	var delayedStatus int
	delayed.Add(1)
	go func() {
		defer delayed.Done()
		delayedStatus = get("ann") // queued behind the first: 4 s
		delayedAt = time.Since(start)
	}()
	time.Sleep(200 * time.Millisecond) // let ann's second reach the worker first
	if got := get("bob"); got != 200 {
		t.Fatalf("bob: %d", got)
	}
	bobAt := time.Since(start)
	delayed.Wait()
	if delayedStatus != 200 || delayedAt < 3*time.Second {
		t.Fatalf("ann's second: %d after %v, want 200 after about 4s", delayedStatus, delayedAt)
	}
	if bobAt >= delayedAt {
		t.Fatalf("bob answered after %v, ann's delayed request after %v: the delay blocked the worker", bobAt, delayedAt)
	}
}

// A global rule's bucket is the rule's, shared by every route; bad configuration is a
// 400 naming the field, and changes nothing.
func TestLimitReqGlobalRuleAndBadConfig(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/a", up.addr)
	in.putRoute("2", "/b", up.addr)
	if status, body := in.adminCall("PUT", "/apisix/admin/global_rules/1",
		`{"plugins":{"limit-req":{"rate":0.01,"burst":1,"nodelay":true,"key":"remote_addr"}}}`); status != 200 && status != 201 {
		t.Fatalf("PUT global rule: %d %s", status, body)
	}
	// Writes are served once answered (read-your-writes): 1 + burst pass across the routes.
	for i, path := range []string{"/a", "/b", "/a", "/b"} {
		want := 200
		if i >= 2 {
			want = 503
		}
		if resp, _ := in.get(path); resp.StatusCode != want {
			t.Fatalf("request %d on %s: %d, want %d (one bucket for the rule)", i, path, resp.StatusCode, want)
		}
	}
	for _, tt := range []struct{ conf, want string }{
		{`{"rate": -1, "burst": 0, "key": "remote_addr"}`, "rate: must be at least one request a year"},
		{`{"rate": 1, "burst": 0}`, "key: is required"},
		{`{"rate": 1, "burst": 0, "key": "remote_addr", "policy": "redis"}`, `redis_host: is required with policy \"redis\"`},
	} {
		body := fmt.Sprintf(`{"uri":"/a","plugins":{"limit-req":%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, tt.conf, up.addr)
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", body)
		if status != 400 || !strings.Contains(resp, "limit-req") || !strings.Contains(resp, tt.want) {
			t.Fatalf("%s: %d %s, want 400 naming %q", tt.conf, status, resp, tt.want)
		}
	}
}

// t/plugin/limit-req.t TEST 12 to 16: a consumer binds limit-req with key consumer_name;
// its plugins join the route's once key-auth names it. And limit-conn on a consumer, as
// t/plugin/limit-conn.t TEST 26 to 30: a rejected request gives back nothing, so the
// consumer's next request passes.
func TestLimitReqAndLimitConnOnConsumers(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"},
		"limit-req":{"rate":0.01,"burst":0,"key":"consumer_name","rejected_code":403}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"jill","plugins":{"key-auth":{"key":"auth-two"},
		"limit-conn":{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"consumer_name","rejected_code":429}}}`)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"key-auth":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr))
	for i, want := range []int{200, 403, 403} {
		if resp, _ := in.get("/hello", "apikey", "auth-one"); resp.StatusCode != want {
			t.Fatalf("jack's request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	// jill's limit is in flight only: one at a time passes, every time.
	for i := 0; i < 3; i++ {
		if resp, _ := in.get("/hello", "apikey", "auth-two"); resp.StatusCode != 200 {
			t.Fatalf("jill's request %d: %d, want 200", i, resp.StatusCode)
		}
	}
	if resp, _ := in.get("/hello"); resp.StatusCode != 401 {
		t.Fatalf("no key: %d, want 401", resp.StatusCode)
	}
}
