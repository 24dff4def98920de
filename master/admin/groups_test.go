package admin

import (
	"strconv"
	"strings"
	"testing"

	"gw/master/store"
)

// groupService is t/plugin/limit-count2.t's service 1 of TEST 17 with count.
func groupService(count string) string {
	return `{"plugins":{"limit-count":{"count":` + count + `,"time_window":60,"rejected_code":503,"group":"afafafhao"}},` +
		`"upstream":{"nodes":{"127.0.0.1:1980":1},"type":"roundrobin"}}`
}

// mismatched is how a refused write's message starts: APISIX's whole message, then
// which object configures the group otherwise and how.
const mismatched = `failed to check the configuration of plugin limit-count err: group conf mismatched: `

func TestGroupConfMismatched(t *testing.T) {
	f := newFixture(t)
	// t/plugin/limit-count2.t TEST 17 "set service and route": service 1 in group
	// "afafafhao", routes 1 and 2 using it.
	expect(t, f.call("PUT", "/apisix/admin/services/1", groupService("2")), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/1", `{"service_id":"1","uri":"/hello"}`), 201, "")
	expect(t, f.call("PUT", "/apisix/admin/routes/2", `{"service_id":"1","uri":"/hello_chunked"}`), 201, "")
	before := f.store.Revision()

	// TEST 19 "configuration from the same group should be the same": the same service
	// PUT again with count 1 is a 400 {"error_msg":"failed to check the configuration of
	// plugin limit-count err: group conf mismatched"}.
	w := f.call("PUT", "/apisix/admin/services/1", groupService("1"))
	expect(t, w, 400, `{"error_msg":"`+mismatched+`services/1 as stored configures group \"afafafhao\" with count 2, `+
		`this configuration has count 1; every object of a group must configure limit-count the same `+
		`(to change a group's limits, give it a new name)"}`)

	// So is a second object with the group and another configuration, of any kind, and
	// a PATCH that changes the group's configuration.
	for _, c := range []struct{ method, target, body, names string }{
		{"PUT", "/apisix/admin/routes/3", `{"uri":"/3","upstream":{"nodes":{"127.0.0.1:1980":1}},` +
			`"plugins":{"limit-count":{"count":3,"time_window":60,"group":"afafafhao"}}}`, "services/1 configures"},
		{"PUT", "/apisix/admin/plugin_configs/p", `{"plugins":{"limit-count":{"count":2,"time_window":30,"group":"afafafhao"}}}`, "with time_window 60"},
		{"PUT", "/apisix/admin/global_rules/g", `{"plugins":{"limit-count":{"count":2,"time_window":60,"rejected_code":429,"group":"afafafhao"}}}`, "with rejected_code 503"},
		{"PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"limit-count":{"count":9,"time_window":60,"group":"afafafhao"}}}`, "with count 2"},
		{"PATCH", "/apisix/admin/services/1/plugins/limit-count/count", `5`, "services/1 as stored"},
		{"PATCH", "/apisix/admin/services/1", `{"plugins":{"limit-count":{"rejected_msg":"slow down"}}}`, `with rejected_msg \"\"`},
	} {
		w := f.call(c.method, c.target, c.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), mismatched) || !strings.Contains(w.Body.String(), c.names) {
			t.Errorf("%s %s: %d %s, want 400 %q naming %q", c.method, c.target, w.Code, w.Body, mismatched, c.names)
		}
	}
	if f.store.Revision() != before {
		t.Errorf("refused writes changed the store (revision %d, was %d)", f.store.Revision(), before)
	}

	// The group's own configuration is accepted anywhere, written in any order; other
	// changes to the service keep it; another group, or none, is free.
	for _, c := range []struct{ method, target, body string }{
		{"PUT", "/apisix/admin/services/1", groupService("2")},
		{"PATCH", "/apisix/admin/services/1", `{"desc":"the api"}`},
		{"PUT", "/apisix/admin/routes/3", `{"uri":"/3","upstream":{"nodes":{"127.0.0.1:1980":1}},` +
			`"plugins":{"limit-count":{"group":"afafafhao","rejected_code":503,"time_window":60,"count":2}}}`},
		// TEST 20 "group with constant key": service 1 moves to group "afafafhao2".
		{"PUT", "/apisix/admin/services/1", `{"plugins":{"limit-count":{"count":2,"time_window":60,"rejected_code":503,` +
			`"key_type":"constant","group":"afafafhao2"}},"upstream":{"nodes":{"127.0.0.1:1980":1},"type":"roundrobin"}}`},
	} {
		if w := f.call(c.method, c.target, c.body); w.Code >= 300 {
			t.Errorf("%s %s: %d %s", c.method, c.target, w.Code, w.Body)
		}
	}
	// Route 3 still holds "afafafhao" at count 2; once it is gone the group is free.
	if w := f.call("PUT", "/apisix/admin/services/2", groupService("1")); w.Code != 400 {
		t.Errorf("while routes/3 holds the group: %d %s", w.Code, w.Body)
	}
	expect(t, f.call("DELETE", "/apisix/admin/routes/3", ""), 200, "")
	expect(t, f.call("PUT", "/apisix/admin/services/2", groupService("1")), 201, "")
}

// An import is checked as the writes it stands for: against the store it would leave.
func TestImportGroupConfMismatched(t *testing.T) {
	f := newFixture(t)
	expect(t, f.call("PUT", "/apisix/admin/services/1", groupService("2")), 201, "")
	backup := `{"gw_backup":1,"services":[{"id":"2","plugins":{"limit-count":{"count":1,"time_window":60,"rejected_code":503,"group":"afafafhao"}}}]}`
	_, err := f.h.Import(t.Context(), []byte(backup), "gwctl", "test")
	if err == nil || !strings.Contains(err.Error(), mismatched+"services/1 configures group") {
		t.Fatalf("import: %v, want %q naming services/1", err, mismatched)
	}
}

// BenchmarkGroupCheck is what a write naming a group adds (checkAcrossObjects) with
// 10,000 other routes stored: one snapshot of the store, then a walk of its objects.
func BenchmarkGroupCheck(b *testing.B) {
	s, err := store.OpenBackend(memBackend{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	objects := []store.Object{{Kind: store.Services, ID: "1", Value: []byte(groupService("2"))}}
	for i := range 10000 {
		id := strconv.Itoa(i)
		objects = append(objects, store.Object{Kind: store.Routes, ID: id,
			Value: []byte(`{"id":"` + id + `","uri":"/r` + id + `","upstream":{"nodes":{"127.0.0.1:1980":1}}}`)})
	}
	if _, err := s.PutAll(objects); err != nil {
		b.Fatal(err)
	}
	value := []byte(groupService("2"))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkAcrossObjects(s, store.Services, "2", value); err != nil {
			b.Fatal(err)
		}
	}
}
