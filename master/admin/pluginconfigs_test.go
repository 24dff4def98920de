package admin

import (
	"encoding/json"
	"strings"
	"testing"

	_ "gw/plugins/all"
)

func TestPluginConfigAndGlobalRulePut(t *testing.T) {
	for _, kind := range []string{"plugin_configs", "global_rules"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			body := `{"plugins":{"limit-count":{"count":2,"time_window":60}}}`
			value := `{"plugins":{"limit-count":{"count":2,"time_window":60}},"id":"1","create_time":1700000000,"update_time":1700000000}`
			expect(t, f.call("PUT", "/apisix/admin/"+kind+"/1", body), 201,
				`{"key":"/apisix/`+kind+`/1","value":`+value+`}`)
			expect(t, f.call("PUT", "/apisix/admin/"+kind, `{"id":"2","plugins":{}}`), 201, "")
			expect(t, f.call("PUT", "/apisix/admin/"+kind+"/1", body), 200, "")
			expect(t, f.call("GET", "/apisix/admin/"+kind+"/1", ""), 200,
				`{"key":"/apisix/`+kind+`/1","value":`+value+`,"createdIndex":1,"modifiedIndex":3}`)
			snap := f.pub.last()
			got := len(snap.PluginConfigs)
			if kind == "global_rules" {
				got = len(snap.GlobalRules)
			}
			if got != 2 {
				t.Fatalf("published snapshot holds %d %s, want 2: %+v", got, kind, snap)
			}
			expect(t, f.call("DELETE", "/apisix/admin/"+kind+"/1", ""), 200, `{"deleted":"1","key":"/apisix/`+kind+`/1"}`)
			expect(t, f.call("GET", "/apisix/admin/"+kind+"/1", ""), 404, `{"message":"Key not found"}`)
			expect(t, f.call("DELETE", "/apisix/admin/"+kind+"/1", ""), 404, `{"message":"Key not found"}`)
		})
	}
}

func TestPluginConfigAndGlobalRuleRejects(t *testing.T) {
	cases := []rejectedPut{
		{"plugin config without plugins", "/apisix/admin/plugin_configs/1", `{"desc":"d"}`, `property "plugins" validation failed: is required`},
		{"global rule without plugins", "/apisix/admin/global_rules/1", `{}`, `property "plugins" validation failed: is required`},
		{"plugin config without id", "/apisix/admin/plugin_configs", `{"plugins":{}}`, "missing plugin config id"},
		{"global rule without id", "/apisix/admin/global_rules", `{"plugins":{}}`, "missing global rule id"},
		{"ids disagree", "/apisix/admin/global_rules/1", `{"id":"2","plugins":{}}`, "wrong global rule id"},
		{"unknown plugin", "/apisix/admin/plugin_configs/1", `{"plugins":{"nope":{}}}`, "unknown plugin [nope]"},
		{"bad plugin config", "/apisix/admin/global_rules/1", `{"plugins":{"limit-count":{"count":0,"time_window":60}}}`, "limit-count"},
		{"global rule with a name", "/apisix/admin/global_rules/1", `{"name":"n","plugins":{}}`, `property "name" validation failed: unknown field`},
		{"plugin config with a bad label", "/apisix/admin/plugin_configs/1", `{"labels":{"k":"a b"},"plugins":{}}`, `"labels.k" validation failed`},
		{"create_time given", "/apisix/admin/plugin_configs/1", `{"plugins":{},"create_time":1}`, "the property is forbidden: create_time"},
		{"route names a missing plugin config", "/apisix/admin/routes/1", `{"uri":"/a","plugin_config_id":"9"}`,
			"failed to fetch plugin config info by plugin config id [9], response code: 404"},
	}
	testRejectedPuts(t, cases)
}

func TestPluginConfigAndGlobalRulePostNotSupported(t *testing.T) {
	f := newFixture(t)
	for kind, word := range map[string]string{"plugin_configs": "plugin config", "global_rules": "global rule"} {
		expect(t, f.call("POST", "/apisix/admin/"+kind, `{"plugins":{}}`), 405,
			`{"error_msg":"not supported `+"`POST`"+` method for `+word+`"}`)
	}
	if f.store.Revision() != 0 {
		t.Error("a refused POST changed the store")
	}
}

func TestPluginConfigReferences(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/plugin_configs/pc", `{"plugins":{"limit-count":{"count":1,"time_window":60}}}`), 201, "")
	// plugin_config_id alone is enough for a route, as in APISIX's schema.
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugin_config_id":"pc"}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/2", `{"uri":"/b","plugin_config_id":"pc","plugins":{}}`), 201, "")
	if snap := f.pub.last(); snap.Routes[0].PluginConfigID != "pc" {
		t.Fatalf("published route = %+v", snap.Routes[0])
	}

	expect(t, f.call("DELETE", "/apisix/admin/plugin_configs/pc", ""), 400,
		`{"error_msg":"can not delete this plugin config, route [1] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/routes/1", ""), 200, "")
	expect(t, f.call("DELETE", "/apisix/admin/plugin_configs/pc", ""), 400,
		`{"error_msg":"can not delete this plugin config, route [2] is still using it now"}`)
	expect(t, f.call("DELETE", "/apisix/admin/plugin_configs/pc?force=true", ""), 200,
		`{"deleted":"1","key":"/apisix/plugin_configs/pc"}`)
}

// rejectedPut is a PUT the Admin API must refuse with a 400.
type rejectedPut struct {
	name, target, body string
	want               string // a part of error_msg
}

// testRejectedPuts sends each PUT to a fresh fixture and checks the 400, its message, and
// that nothing was stored or published.
func testRejectedPuts(t *testing.T, cases []rejectedPut) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.call("PUT", tc.target, tc.body)
			var body errorBody
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != 400 || !strings.Contains(body.ErrorMsg, tc.want) {
				t.Fatalf("PUT %s %s: %d %s; want 400 with %q", tc.target, tc.body, w.Code, w.Body, tc.want)
			}
			if f.store.Revision() != 0 || f.pub.count() != 0 {
				t.Error("a rejected write changed the store or published")
			}
		})
	}
}
