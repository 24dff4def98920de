package integration

import (
	"fmt"
	"strings"
	"testing"
)

// uri-blocker through the binary: the rules judge the normalised path and the query,
// with and without rejected_msg and case_insensitive; a rule RE2 cannot compile is a 400
// that changes nothing.
func TestPluginURIBlocker(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "2")
	// t/plugin/uri-blocker.t TEST 7 "multiple block rules" and TEST 21 "add block rule
	// with anchor", on a route and on a plugin config.
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"uri-blocker":`+
		`{"block_rules":["aa","bb","c\\d+"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	in.mustPut("/apisix/admin/plugin_configs/1", `{"plugins":{"uri-blocker":{"block_rules":["^/internal/","AA"],`+
		`"rejected_msg":"access is not allowed","case_insensitive":true,"rejected_code":410}}}`)
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/internal/*","plugin_config_id":"1","upstream":{"nodes":{%q:1}}}`, up.addr))
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/open/*","plugin_config_id":"1","upstream":{"nodes":{%q:1}}}`, up.addr))

	in.overBothProtocols(func() {
		const msg = `{"error_msg":"access is not allowed"}`
		for _, tc := range []struct {
			path       string
			wantStatus int
			wantBody   string
		}{
			{"/hello?x=bb", 403, ""},            // TEST 8
			{"/hello?c1=2", 403, ""},            // TEST 10
			{"/hello?cc=2", 200, "hello world"}, // TEST 11
			{"/./internal/x?aa=1", 410, msg},    // TEST 22 "can't bypass with url without normalization"
			{"/open/x?q=aA", 410, msg},          // TEST 20: case_insensitive
			{"/open/x?q=b", 200, "hello world"},
		} {
			resp, body := in.get(tc.path)
			if resp.StatusCode != tc.wantStatus || strings.TrimSpace(body) != tc.wantBody {
				t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		}
	})

	// TEST 1 "invalid regular expression": 400, and route 1 still blocks as before.
	status, resp := in.adminCall("PUT", "/apisix/admin/routes/1",
		fmt.Sprintf(`{"uri":"/hello","plugins":{"uri-blocker":{"block_rules":[".+("]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	if status != 400 || !strings.Contains(resp, `plugin uri-blocker err: block_rules: item 1: invalid regular expression`) {
		t.Errorf("PUT with .+(: %d %s", status, resp)
	}
	if resp, _ := in.get("/hello?aa=1"); resp.StatusCode != 403 {
		t.Errorf("after a refused write: %d, want 403", resp.StatusCode)
	}
}
