package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Route conditions beyond path, method and host: vars and remote_addrs, through real
// workers and real upstreams, and the Admin API's list filters.

func TestVarsAndRemoteAddrsRouting(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	names := []string{"arg-a", "header", "fallback", "outside", "loopback", "cookie-or-not"}
	nodes := map[string]string{}
	for _, name := range names {
		nodes[name] = startUpstream(t, name).addr
	}
	put := func(id, route string) {
		t.Helper()
		var r map[string]any
		if err := json.Unmarshal([]byte(route), &r); err != nil {
			t.Fatalf("route %s: %v", id, err)
		}
		body := strings.TrimSuffix(route, "}") + fmt.Sprintf(`,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, nodes[r["name"].(string)])
		in.mustPut("/apisix/admin/routes/"+id, body)
	}
	// Under one path, the highest priority whose vars hold wins; the others fall through.
	put("1", `{"name":"arg-a","uri":"/r","priority":10,"vars":[["arg_a","==","1"]]}`)
	put("2", `{"name":"header","uri":"/r","priority":5,"vars":[["http_x_team","~~","^blue-"]]}`)
	put("3", `{"name":"fallback","uri":"/r"}`)
	put("4", `{"name":"cookie-or-not","uri":"/logic/*","vars":["OR",["cookie_beta","==","on"],["arg_n","!",">=",10]]}`)
	// A CIDR that leaves 127.0.0.1 out, above one that takes it in.
	put("5", `{"name":"outside","uri":"/ip","priority":1,"remote_addrs":["10.0.0.0/8","::1"]}`)
	put("6", `{"name":"loopback","uri":"/ip","remote_addr":"127.0.0.0/24"}`)
	put("7", `{"name":"outside","uri":"/only-others","remote_addrs":["192.168.0.0/16"]}`)

	tests := []struct {
		path    string
		headers []string
		want    string // the upstream's name, or "404"
	}{
		{"/r?a=1", nil, "arg-a"},
		{"/r?a=1", []string{"X-Team", "blue-7"}, "arg-a"},
		{"/r?a=2", []string{"X-Team", "blue-7"}, "header"},
		{"/r", []string{"X-Team", "red-7"}, "fallback"},
		{"/r?a=1.0", nil, "fallback"},
		{"/r", nil, "fallback"},
		{"/logic/x", []string{"Cookie", "beta=on"}, "cookie-or-not"},
		{"/logic/x?n=3", nil, "cookie-or-not"},
		{"/logic/x?n=30", nil, "404"},
		{"/logic/x?n=30", []string{"Cookie", "a=b; beta=on"}, "cookie-or-not"},
		{"/ip", nil, "loopback"},
		{"/only-others", nil, "404"},
	}
	for _, tt := range tests {
		resp, body := in.get(tt.path, tt.headers...)
		got := body
		if resp.StatusCode == 404 {
			got = "404"
			if body != `{"error_msg":"404 Route Not Found"}`+"\n" {
				t.Errorf("GET %s: 404 body %q", tt.path, body)
			}
		}
		if got != tt.want {
			t.Errorf("GET %s %v: %d %q, want %s", tt.path, tt.headers, resp.StatusCode, body, tt.want)
		}
	}

	// A bad expression is refused at write time, in APISIX's words, and changes nothing.
	status, body := in.adminCall("PUT", "/apisix/admin/routes/1",
		`{"uri":"/r","vars":[["arg_a","=","1"]],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, `failed to validate the 'vars' expression: invalid operator '='`) {
		t.Errorf("bad vars: %d %s, want 400 with APISIX's message", status, body)
	}
	if resp, body := in.get("/r?a=1"); resp.StatusCode != 200 || body != "arg-a" {
		t.Errorf("after a refused write: %d %q, want arg-a", resp.StatusCode, body)
	}
	status, body = in.adminCall("PUT", "/apisix/admin/routes/9",
		`{"uri":"/x","remote_addrs":["10.0.0.0/33"],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "remote_addrs") {
		t.Errorf("bad CIDR: %d %s, want 400 naming remote_addrs", status, body)
	}
}

func TestAdminListFilters(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	for i, route := range []string{
		`{"name":"users-api","labels":{"team":"a"},"uri":"/api/users","plugins":{}}`,
		`{"name":"orders-api","labels":{"env":"prod"},"uris":["/api/orders","/v2/orders"],"plugins":{}}`,
		`{"name":"health","uri":"/health","plugins":{}}`,
	} {
		in.mustPut(fmt.Sprintf("/apisix/admin/routes/%d", i+1), route)
	}
	ids := func(query string) (string, int) {
		t.Helper()
		status, body := in.adminCall("GET", "/apisix/admin/routes?"+query, "")
		if status != 200 {
			t.Fatalf("GET ?%s: %d %s", query, status, body)
		}
		var list struct {
			List []struct {
				Value struct{ ID string }
			}
			Total int
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("GET ?%s: %v in %s", query, err, body)
		}
		var got []string
		for _, it := range list.List {
			got = append(got, it.Value.ID)
		}
		return strings.Join(got, " "), list.Total
	}
	for _, tt := range []struct {
		query string
		want  string
	}{
		{"name=" + url.QueryEscape("-api$"), "1 2"},
		{"label=env", "2"},
		{"uri=" + url.QueryEscape("^/v2/"), "2"},
		{"uri=api&name=users", "1"},
		{"uri=nothing", ""},
	} {
		got, total := ids(tt.query)
		if got != tt.want || total != len(strings.Fields(tt.want)) {
			t.Errorf("?%s: [%s] total %d, want [%s]", tt.query, got, total, tt.want)
		}
	}
}

// TestRouterSetting: config.yaml's router.http picks APISIX's router, and a reload switches
// it. radixtree_uri_with_parameter reads "/user/:id" as a parameter and checks hosts after
// the path; the default radixtree_host_uri reads ":id" literally and tries hosts first.
func TestRouterSetting(t *testing.T) {
	in := newInstance(t, "router:\n  http: radixtree_uri_with_parameter\n")
	in.start("--workers", "1")
	user, host, path := startUpstream(t, "user"), startUpstream(t, "host"), startUpstream(t, "path")
	in.putRoute("1", "/user/:id", user.addr)
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/api/*","host":"api.example.com","upstream":{"nodes":{%q:1}}}`, host.addr))
	in.putRoute("3", "/api/v2/*", path.addr)

	check := func(router string, tests []struct{ path, host, want string }) {
		t.Helper()
		for _, tt := range tests {
			resp, body := in.get(tt.path, "Host", tt.host)
			got := body
			if resp.StatusCode == 404 {
				got = "404"
			}
			if got != tt.want {
				t.Errorf("%s: GET %s (Host %s): %d %q, want %s", router, tt.path, tt.host, resp.StatusCode, body, tt.want)
			}
		}
	}
	check("radixtree_uri_with_parameter", []struct{ path, host, want string }{
		{"/user/42", "x", "user"},
		{"/user/:id", "x", "user"},
		{"/user/42/more", "x", "404"},
		{"/api/v2/x", "api.example.com", "path"}, // the longer path wins over the host
		{"/api/v1", "api.example.com", "host"},
		{"/api/v1", "other", "404"},
	})

	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\nworker_processes: 1\n", in.data, in.admin))
	in.reload()
	check("radixtree_host_uri", []struct{ path, host, want string }{
		{"/user/42", "x", "404"},
		{"/user/:id", "x", "user"},
		{"/api/v2/x", "api.example.com", "host"}, // routes with hosts first
		{"/api/v2/x", "other", "path"},
	})

	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\nrouter:\n  http: radix\n", in.data, in.admin))
	if out, err := in.gwctl("reload"); err == nil || !strings.Contains(out, `router.http: must be one of radixtree_host_uri, radixtree_uri, radixtree_uri_with_parameter, got "radix"`) {
		t.Errorf("reload with a bad router.http: %v %s", err, out)
	}
}
