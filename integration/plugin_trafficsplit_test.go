package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// traffic-split through the real binary, after t/plugin/traffic-split.t TEST 8 to 10: the
// rule's vars choose, the weights split 2:1 between an inline upstream and the route's
// own; a stored upstream named by upstream_id follows its writes; deleting it is refused.
func TestTrafficSplit(t *testing.T) {
	own, inline := startUpstream(t, "own"), startUpstream(t, "inline")
	blue, green := startUpstream(t, "blue"), startUpstream(t, "green")
	in := newInstance(t, "")
	in.start("--workers", "1") // one rotation: the split is exact
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/server_port","plugins":{"traffic-split":{"rules":[{
		"match":[{"vars":[["arg_name","==","jack"],["arg_age","!","<","16"]]}],
		"weighted_upstreams":[{"upstream":{"name":"upstream_A","type":"roundrobin","nodes":{%q:1}},"weight":2},{"weight":1}]}]}},
		"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, inline.addr, own.addr))

	// TEST 9: the expression fails: the route's own.
	if _, body := in.get("/server_port?name=jack&age=14"); body != "own" {
		t.Errorf("TEST 9: %q", body)
	}
	// TEST 10: it holds: 2/3 to upstream_A.
	var got []string
	for range 6 {
		_, body := in.get("/server_port?name=jack&age=16")
		got = append(got, body)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "inline,inline,inline,inline,own,own" {
		t.Errorf("TEST 10: %v", got)
	}

	// On a service, naming a stored upstream: a write of the upstream reaches the route.
	in.mustPut("/apisix/admin/upstreams/canary", fmt.Sprintf(`{"nodes":{%q:1}}`, blue.addr))
	in.mustPut("/apisix/admin/services/s1", fmt.Sprintf(`{"plugins":{"traffic-split":{"rules":[{
		"match":[{"vars":[["http_x_canary","==","1"]]}],"weighted_upstreams":[{"upstream_id":"canary"}]}]}},
		"upstream":{"nodes":{%q:1}}}`, own.addr))
	in.mustPut("/apisix/admin/routes/2", `{"uri":"/canary","service_id":"s1"}`)
	if _, body := in.get("/canary", "X-Canary", "1"); body != "blue" {
		t.Errorf("canary: %q", body)
	}
	if _, body := in.get("/canary"); body != "own" {
		t.Errorf("not canary: %q", body)
	}
	in.mustPut("/apisix/admin/upstreams/canary", fmt.Sprintf(`{"nodes":{%q:1}}`, green.addr))
	if _, body := in.get("/canary", "X-Canary", "1"); body != "green" {
		t.Errorf("after the upstream's write: %q", body)
	}

	// Deleting it is refused; with force, the rule answers APISIX's 500.
	status, body := in.adminCall("DELETE", "/apisix/admin/upstreams/canary", "")
	if status != 400 || !strings.Contains(body, "can not delete this upstream, plugin in service [s1] is still using it now") {
		t.Errorf("delete: %d %s", status, body)
	}
	if status, body := in.adminCall("DELETE", "/apisix/admin/upstreams/canary?force=true", ""); status != 200 {
		t.Fatalf("forced delete: %d %s", status, body)
	}
	resp, body := in.get("/canary", "X-Canary", "1")
	if resp.StatusCode != 500 || !strings.Contains(body, "failed to fetch upstream info by upstream id: canary") {
		t.Errorf("missing upstream: %d %q", resp.StatusCode, body)
	}

	// Bad configuration is a 400 naming the field, and changes nothing.
	status, body = in.adminCall("PUT", "/apisix/admin/routes/1", `{"uri":"/server_port","plugins":{"traffic-split":{"rules":[{
		"weighted_upstreams":[{"weight":-1}]}]}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "rules[0].weighted_upstreams[0].weight: must be an integer from 0 to 2147483648, got -1") {
		t.Errorf("bad weight: %d %s", status, body)
	}
	if _, body := in.get("/server_port?name=jack&age=14"); body != "own" {
		t.Errorf("after the refused write: %q", body)
	}
}
