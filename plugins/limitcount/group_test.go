package limitcount

import (
	"encoding/json"
	"strings"
	"testing"

	"gw/conf"
)

func disabled() *int { zero := 0; return &zero }

func pluginsWith(raw string) map[string]json.RawMessage {
	return map[string]json.RawMessage{Name: json.RawMessage(raw)}
}

func TestCheckWrite(t *testing.T) {
	const (
		two       = `{"count": 2, "time_window": 60, "rejected_code": 503, "group": "afafafhao"}`
		one       = `{"count": 1, "time_window": 60, "rejected_code": 503, "group": "afafafhao"}`
		reordered = `{"group": "afafafhao", "time_window": 60.0, "count": 2, "key": "remote_addr"}`
	)
	// t/plugin/limit-count2.t TEST 17 "set service and route" stores service 1 with
	// limit-count count 2 in group "afafafhao"; routes 1 and 2 inherit it.
	stored := &conf.Snapshot{
		Services: []conf.Service{{ID: "1", Plugins: pluginsWith(two)}},
		Routes:   []conf.Route{{ID: "1", URI: "/hello", ServiceID: "1"}, {ID: "2", URI: "/hello_chunked", ServiceID: "1"}},
	}
	cases := []struct {
		name, object, raw string
		want              string // "" when accepted, else the error's text
	}{
		// TEST 19 "configuration from the same group should be the same": service 1 PUT
		// again with count 1 is "group conf mismatched".
		{"the same object with another count", "services/1", one,
			`group conf mismatched: services/1 as stored configures group "afafafhao" with count 2, this configuration has count 1; ` +
				`every object of a group must configure limit-count the same (to change a group's limits, give it a new name)`},
		{"another object with another count", "routes/9", one,
			`group conf mismatched: services/1 configures group "afafafhao" with count 2, this configuration has count 1; ` +
				`every object of a group must configure limit-count the same (to change a group's limits, give it a new name)`},
		{"another object with another rejected_code", "plugin_configs/p", `{"count": 2, "time_window": 60, "group": "afafafhao", "rejected_code": 429}`,
			`group conf mismatched: services/1 configures group "afafafhao" with rejected_code 503, this configuration has rejected_code 429; ` +
				`every object of a group must configure limit-count the same (to change a group's limits, give it a new name)`},
		// The same configuration is the same after defaults, whatever its order or form.
		{"the same object with the same configuration", "services/1", two, ""},
		{"another object with the same configuration, written otherwise", "routes/9", reordered, ""},
		// TEST 20 "group with constant key" PUTs service 1 with another group: a new group
		// has no configuration yet.
		{"a new group", "services/1", `{"count": 2, "time_window": 60, "rejected_code": 503, "key_type": "constant", "group": "afafafhao2"}`, ""},
		{"no group", "services/1", `{"count": 7, "time_window": 60}`, ""},
		{"not valid (Validate reports it)", "services/1", `{"count": 0, "time_window": 60, "group": "afafafhao"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := plugin{}.CheckWrite(stored, tc.object, json.RawMessage(tc.raw))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// Every kind of object that configures plugins names a group for itself, a disabled
// configuration included (APISIX's check_schema compares it all the same).
func TestCheckWriteSeesEveryKind(t *testing.T) {
	const (
		mine  = `{"count": 1, "time_window": 60, "group": "g"}`
		other = `{"count": 5, "time_window": 60, "group": "g", "disable": true}`
	)
	for _, tc := range []struct {
		object string
		snap   *conf.Snapshot
	}{
		{"routes/r", &conf.Snapshot{Routes: []conf.Route{{ID: "r", Status: disabled(), Plugins: pluginsWith(other)}}}},
		{"services/s", &conf.Snapshot{Services: []conf.Service{{ID: "s", Plugins: pluginsWith(other)}}}},
		{"plugin_configs/p", &conf.Snapshot{PluginConfigs: []conf.PluginConfig{{ID: "p", Plugins: pluginsWith(other)}}}},
		{"global_rules/g", &conf.Snapshot{GlobalRules: []conf.GlobalRule{{ID: "g", Plugins: pluginsWith(other)}}}},
		{"consumers/jack", &conf.Snapshot{Consumers: []conf.Consumer{{Username: "jack", Plugins: pluginsWith(other)}}}},
	} {
		err := plugin{}.CheckWrite(tc.snap, "routes/new", json.RawMessage(mine))
		if err == nil || !strings.Contains(err.Error(), "group conf mismatched: "+tc.object+" configures group \"g\" with count 5") {
			t.Errorf("against %s: %v", tc.object, err)
		}
	}
	if err := (plugin{}).CheckWrite(nil, "routes/new", json.RawMessage(mine)); err != nil {
		t.Errorf("against no snapshot: %v", err)
	}
}

// The counter key is made of canonical, so its text must not change across binaries.
func TestCanonicalIsStable(t *testing.T) {
	cfg, err := Parse(json.RawMessage(`{"count": 2, "time_window": 60, "group": "g", "rejected_msg": "no"}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `count=2;time_window=60;key_type="var";key="remote_addr";rejected_code=503;rejected_msg="no";policy="local";` +
		`allow_degradation=false;show_limit_quota_header=true;group="g";window_type="fixed"`
	if got := cfg.canonical(); got != want {
		t.Errorf("canonical = %s\nwant %s", got, want)
	}
}
