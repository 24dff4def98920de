package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAdminTakesDashboardUpstream sends the upstream APISIX Dashboard (apache/apisix-dashboard
// 0fc388a) writes from its form, byte for byte but for the node: it carries
// "tls": {"verify": false} on scheme http and "discovery_args": {}. APISIX accepts it and so
// must gw, giving both back on a GET, and a route naming the upstream must reach the node.
// tools/dashboard-check drives the dashboard itself; this is the part that can run in CI.
func TestAdminTakesDashboardUpstream(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "backend saw "+r.URL.Path)
	}))
	defer backend.Close()
	host, port, _ := strings.Cut(strings.TrimPrefix(backend.URL, "http://"), ":")

	in := newInstance(t, "")
	in.start()
	body := fmt.Sprintf(`{"name":"dash-upstream","nodes":[{"host":%q,"port":%s,"weight":1,"priority":0}],"scheme":"http","type":"roundrobin","hash_on":"vars","pass_host":"pass","tls":{"verify":false},"discovery_args":{}}`, host, port)
	status, resp := in.adminCall("POST", "/apisix/admin/upstreams", body)
	if status != 201 {
		t.Fatalf("POST the dashboard's upstream: %d %s", status, resp)
	}
	var created struct {
		Value struct {
			ID string `json:"id"`
		} `json:"value"`
	}
	if err := json.Unmarshal([]byte(resp), &created); err != nil || created.Value.ID == "" {
		t.Fatalf("POST answer %s: %v", resp, err)
	}
	_, resp = in.adminCall("GET", "/apisix/admin/upstreams/"+created.Value.ID, "")
	for _, want := range []string{`"tls":{"verify":false}`, `"discovery_args":{}`} {
		if !strings.Contains(resp, want) {
			t.Errorf("GET %s, want it to hold %s", resp, want)
		}
	}

	in.mustPut("/apisix/admin/routes/dash", fmt.Sprintf(`{"uri":"/dash","methods":["GET"],"upstream_id":%q}`, created.Value.ID))
	if r, got := in.get("/dash"); r.StatusCode != 200 || got != "backend saw /dash" {
		t.Fatalf("GET /dash through the dashboard's upstream: %d %q", r.StatusCode, got)
	}

	// What would configure service discovery or TLS on plain http is still refused.
	status, resp = in.adminCall("PUT", "/apisix/admin/upstreams/"+created.Value.ID, strings.Replace(body, `"discovery_args":{}`, `"discovery_args":{"group_name":"g"}`, 1))
	if status != 400 || !strings.Contains(resp, `property \"discovery_args\"`) || !strings.Contains(resp, "not supported yet") {
		t.Errorf("discovery_args with a member: %d %s", status, resp)
	}
	status, resp = in.adminCall("PUT", "/apisix/admin/upstreams/"+created.Value.ID, strings.Replace(body, `"verify":false`, `"verify":true`, 1))
	if status != 400 || !strings.Contains(resp, `property \"tls\"`) {
		t.Errorf("tls verify true on http: %d %s", status, resp)
	}
}
