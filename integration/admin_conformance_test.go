package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// valueIDOf is the "id" of an Admin API answer's value as JSON text: `1` or `"1"`.
func valueIDOf(t *testing.T, body string) string {
	t.Helper()
	var answer struct {
		Value struct {
			ID json.RawMessage `json:"id"`
		} `json:"value"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return string(answer.Value.ID)
}

// t/admin/routes2.t TEST 6 "not unwanted data, PUT": {"id": 1} PUT to the collection is
// answered, stored and served as route 1 with the integer id, across a restart too.
func TestIntegerIDIsEchoedAndServed(t *testing.T) {
	up := startUpstream(t, "one")
	in := newInstance(t, "")
	in.start("--workers", "2")
	status, body := in.adminCall("PUT", "/apisix/admin/routes", fmt.Sprintf(
		`{"id":1,"methods":["GET"],"uri":"/index.html","upstream":{"nodes":{%q:1},"type":"roundrobin"}}`, up.addr))
	if status != 201 || !strings.Contains(body, `"key":"/apisix/routes/1"`) || valueIDOf(t, body) != `1` {
		t.Fatalf("PUT: %d %s, want 201 with key /apisix/routes/1 and value.id 1", status, body)
	}
	check := func(when string) {
		t.Helper()
		status, body := in.adminCall("GET", "/apisix/admin/routes/1", "")
		if status != 200 || valueIDOf(t, body) != `1` {
			t.Fatalf("%s: GET %d %s, want value.id 1", when, status, body)
		}
		if resp, got := in.get("/index.html"); resp.StatusCode != 200 || got != "one" {
			t.Fatalf("%s: /index.html %d %q", when, resp.StatusCode, got)
		}
	}
	check("after the PUT")
	// t/admin/routes.t TEST 14 "integer id less than 1", and 0.
	for _, id := range []string{"-100", "0"} {
		status, body := in.adminCall("PUT", "/apisix/admin/routes", `{"id":`+id+`,"uri":"/index.html"}`)
		if status != 400 || !strings.Contains(body, `property \"id\" validation failed`) {
			t.Fatalf("PUT id %s: %d %s, want 400 property \"id\" validation failed", id, status, body)
		}
	}
	in.stop()
	in.start("--workers", "2")
	check("after a restart")
}

// t/plugin/limit-count2.t TESTs 17-19: service 1 holds group "afafafhao" at count 2 for
// routes 1 and 2, which share its counter; PUTting the service again with count 1 is a 400
// "group conf mismatched", and the workers go on counting to 2.
func TestGroupConfMismatchedOnReplacingTheService(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	service := func(count int) string {
		return fmt.Sprintf(`{"plugins":{"limit-count":{"count":%d,"time_window":60,"rejected_code":503,"group":"afafafhao"}},`+
			`"upstream":{"nodes":{%q:1},"type":"roundrobin"}}`, count, up.addr)
	}
	for _, c := range []struct{ path, body string }{
		{"/apisix/admin/services/1", service(2)},
		{"/apisix/admin/routes/1", `{"service_id":"1","uri":"/hello"}`},
		{"/apisix/admin/routes/2", `{"service_id":"1","uri":"/hello_chunked"}`},
	} {
		if status, body := in.adminCall("PUT", c.path, c.body); status != 201 {
			t.Fatalf("PUT %s: %d %s", c.path, status, body)
		}
	}
	status, body := in.adminCall("PUT", "/apisix/admin/services/1", service(1))
	const want = "failed to check the configuration of plugin limit-count err: group conf mismatched: " +
		`services/1 as stored configures group \"afafafhao\" with count 2, this configuration has count 1`
	if status != 400 || !strings.Contains(body, want) {
		t.Fatalf("PUT service 1 with count 1: %d %s, want 400 with %s", status, body, want)
	}
	// A second service joining the group otherwise is refused the same way.
	if status, body := in.adminCall("PUT", "/apisix/admin/services/2", service(5)); status != 400 ||
		!strings.Contains(body, "group conf mismatched: services/1 configures") {
		t.Fatalf("PUT service 2 with count 5: %d %s", status, body)
	}
	// TEST 18 "hit multiple paths": [200,200,503,503], the group's count still 2.
	var got []int
	for _, path := range []string{"/hello", "/hello_chunked", "/hello", "/hello_chunked"} {
		resp, _ := in.get(path)
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != "[200 200 503 503]" {
		t.Fatalf("statuses %v, want [200 200 503 503]", got)
	}
}

// t/admin/plugins.t TEST 7 "get plugin basic-auth schema by schema_type", through the
// real binary's admin listener, and only with a key.
func TestPluginSchemaEndpoint(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	status, body := in.adminCall("GET", "/apisix/admin/plugins/basic-auth?schema_type=consumer", "")
	if status != 200 || !strings.Contains(body, `"title":"work with consumer object"`) || !strings.Contains(body, `"required":["username","password"]`) {
		t.Fatalf("GET basic-auth consumer schema: %d %s", status, body)
	}
	if status, body := call(t, "GET", "http://"+in.admin+"/apisix/admin/schema/plugins/limit-count", ""); status != 401 {
		t.Fatalf("GET without a key: %d %s, want 401", status, body)
	}
}
