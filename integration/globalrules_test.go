package integration

import (
	"slices"
	"strings"
	"testing"
)

// A key-auth global rule guards every route and the paths no route matches; removing it
// opens them again.
func TestGlobalRuleKeyAuth(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/open", up.addr)
	in.mustPut("/apisix/admin/routes/2", `{"uri":"/limited","plugins":{"limit-count":{"count":100,"time_window":60}},`+
		`"upstream":{"type":"roundrobin","nodes":{"`+up.addr+`":1}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`)
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"key-auth":{}}}`)

	for _, path := range []string{"/open", "/limited", "/nowhere"} {
		resp, body := in.get(path)
		if resp.StatusCode != 401 || !strings.Contains(body, "Missing API key") {
			t.Errorf("GET %s without a key: %d %q, want 401", path, resp.StatusCode, body)
		}
		resp, body = in.get(path, "apikey", "wrong")
		if resp.StatusCode != 401 {
			t.Errorf("GET %s with a wrong key: %d %q, want 401", path, resp.StatusCode, body)
		}
	}
	for path, want := range map[string]int{"/open": 200, "/limited": 200, "/nowhere": 404} {
		if resp, body := in.get(path, "apikey", "auth-one"); resp.StatusCode != want {
			t.Errorf("GET %s with jack's key: %d %q, want %d", path, resp.StatusCode, body, want)
		}
	}

	if status, body := in.adminCall("DELETE", "/apisix/admin/global_rules/1", ""); status != 200 {
		t.Fatalf("DELETE global rule: %d %s", status, body)
	}
	if resp, body := in.get("/open"); resp.StatusCode != 200 {
		t.Errorf("GET /open after the rule is gone: %d %q", resp.StatusCode, body)
	}
}

// A prometheus global rule counts requests no route matched, with an empty route label,
// and a matched route's requests under that route.
func TestGlobalRulePrometheusCountsNotFound(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("r1", "/seen", up.addr)

	// Without the global rule a 404 is not counted.
	in.get("/nowhere")
	if got := in.totals("").status; got != 0 {
		t.Fatalf("404s counted without a prometheus global rule: %v", got)
	}
	in.mustPut("/apisix/admin/global_rules/g", `{"plugins":{"prometheus":{}}}`)
	for range 3 {
		if resp, _ := in.get("/nowhere"); resp.StatusCode != 404 {
			t.Fatalf("GET /nowhere: %d, want 404", resp.StatusCode)
		}
	}
	if resp, _ := in.get("/seen"); resp.StatusCode != 200 {
		t.Fatalf("GET /seen: %d", resp.StatusCode)
	}
	f := in.scrape()
	status := f["apisix_http_status"]
	if status == nil {
		t.Fatal("no apisix_http_status family")
	}
	if got := status.Sum("apisix_http_status", map[string]string{"route": "", "code": "404"}); got != 3 {
		t.Errorf("404s counted: %v, want 3", got)
	}
	if got := status.Sum("apisix_http_status", map[string]string{"route": "r1", "code": "200"}); got != 1 {
		t.Errorf("route r1's 200s counted: %v, want 1", got)
	}
}

// A plugin_config's limit-count applies to every route that names it, each route
// counting on its own (APISIX keys it by route and plugin_config); a route's own
// configuration of the plugin wins over the plugin_config's.
func TestPluginConfigLimitCount(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/plugin_configs/pc", `{"plugins":{"limit-count":{"count":2,"time_window":60,"rejected_code":429}}}`)
	node := `"upstream":{"type":"roundrobin","nodes":{"` + up.addr + `":1}}`
	in.mustPut("/apisix/admin/routes/a", `{"uri":"/a","plugin_config_id":"pc",`+node+`}`)
	in.mustPut("/apisix/admin/routes/b", `{"uri":"/b","plugin_config_id":"pc",`+node+`}`)
	in.mustPut("/apisix/admin/routes/c", `{"uri":"/c","plugin_config_id":"pc",`+
		`"plugins":{"limit-count":{"count":3,"time_window":60,"rejected_code":503}},`+node+`}`)

	for path, want := range map[string][]int{
		"/a": {200, 200, 429, 429},
		"/b": {200, 200, 429},
		"/c": {200, 200, 200, 503},
	} {
		for i, code := range want {
			if resp, body := in.get(path); resp.StatusCode != code {
				t.Fatalf("GET %s #%d: %d %q, want %d", path, i+1, resp.StatusCode, body, code)
			}
		}
	}

	if status, _ := in.adminCall("DELETE", "/apisix/admin/plugin_configs/pc", ""); status != 400 {
		t.Errorf("DELETE of a plugin_config in use: %d, want 400", status)
	}
}

// A limit-count global rule counts for the rule, across every route and the paths no
// route matches, in every worker, as APISIX keys it by the rule, not by the route.
func TestGlobalRuleLimitCountSpansRoutes(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/a", up.addr)
	in.putRoute("2", "/b", up.addr)
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"limit-count":{"count":5,"time_window":60,"rejected_code":429}}}`)

	// Fresh connections, so that both workers take a share.
	var statuses []int
	for _, path := range []string{"/a", "/b", "/nowhere", "/a", "/b", "/a", "/b", "/nowhere"} {
		resp, _ := in.get(path, "Connection", "close")
		statuses = append(statuses, resp.StatusCode)
	}
	want := []int{200, 200, 404, 200, 200, 429, 429, 429}
	if !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v: five requests in all, whatever the route", statuses, want)
	}
}
