package admin

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

func TestListFilters(t *testing.T) {
	f := newFixture(t)
	for _, put := range []struct{ path, body string }{
		{"/apisix/admin/routes/1", `{"name":"users-api","labels":{"team":"a","env":"prod"},"uri":"/api/users","plugins":{}}`},
		{"/apisix/admin/routes/2", `{"name":"orders-api","labels":{"team":"b"},"uris":["/api/orders","/v2/orders/*"],"plugins":{}}`},
		{"/apisix/admin/routes/3", `{"uri":"/health","labels":{"env":"prod"},"plugins":{}}`},
		{"/apisix/admin/routes/4", `{"name":"Users-Admin","uri":"/admin/users","plugins":{}}`},
		{"/apisix/admin/upstreams/u1", `{"name":"users-backend","labels":{"team":"a"},"nodes":{"127.0.0.1:80":1}}`},
	} {
		if w := f.call("PUT", put.path, put.body); w.Code >= 300 {
			t.Fatalf("PUT %s: %d %s", put.path, w.Code, w.Body)
		}
	}
	for i := 0; i < 11; i++ {
		f.call("PUT", "/apisix/admin/routes/p"+itoa(i), `{"name":"paged","uri":"/paged","plugins":{}}`)
	}
	tests := []struct {
		target    string
		wantIDs   string
		wantTotal int
	}{
		{"/apisix/admin/routes?name=users", "1", 1},
		{"/apisix/admin/routes?name=" + url.QueryEscape("^(orders|Users)-"), "2 4", 2},
		{"/apisix/admin/routes?name=" + url.QueryEscape("(?i)users"), "1 4", 2},
		{"/apisix/admin/routes?name=", "1 2 4 p0 p1 p2 p3 p4 p5 p6 p7 p8 p9 p10", 14},
		{"/apisix/admin/routes?label=env", "1 3", 2},
		{"/apisix/admin/routes?label=team", "1 2", 2},
		{"/apisix/admin/routes?label=prod", "", 0},
		{"/apisix/admin/routes?label=", "", 0},
		{"/apisix/admin/routes?uri=users", "1 4", 2},
		{"/apisix/admin/routes?uri=" + url.QueryEscape("^/v2/"), "2", 1},
		{"/apisix/admin/routes?uri=" + url.QueryEscape("^/health$"), "3", 1},
		{"/apisix/admin/routes?uri=api&label=team&name=orders", "2", 1},
		{"/apisix/admin/routes?uri=api&label=env&name=orders", "", 0},
		{"/apisix/admin/upstreams?name=users", "u1", 1},
		{"/apisix/admin/upstreams?label=team", "u1", 1},
		{"/apisix/admin/upstreams?uri=.", "", 0},
		// total counts after filtering; paging applies to what is left.
		{"/apisix/admin/routes?name=paged&page=2&page_size=10", "p10", 11},
		{"/apisix/admin/routes?name=paged&page=1&page_size=10", "p0 p1 p2 p3 p4 p5 p6 p7 p8 p9", 11},
	}
	for _, tt := range tests {
		w := f.call("GET", tt.target, "")
		if w.Code != 200 {
			t.Errorf("GET %s: status %d (%s)", tt.target, w.Code, w.Body)
			continue
		}
		var body struct {
			List []struct {
				Value struct{ ID string }
			}
			Total int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("GET %s: %v in %s", tt.target, err, w.Body)
		}
		var ids []string
		for _, it := range body.List {
			ids = append(ids, it.Value.ID)
		}
		if got := strings.Join(ids, " "); got != tt.wantIDs || body.Total != tt.wantTotal {
			t.Errorf("GET %s: ids [%s] total %d, want [%s] total %d", tt.target, got, body.Total, tt.wantIDs, tt.wantTotal)
		}
	}
	expect(t, f.call("GET", "/apisix/admin/routes?name=(", ""), 400,
		`{"error_msg":"invalid name filter \"(\": not a regular expression (RE2 syntax): error parsing regexp: missing closing ): `+"`(`"+`"}`)
	if w := f.call("GET", "/apisix/admin/routes?uri=%5B", ""); w.Code != 400 || !strings.Contains(w.Body.String(), "invalid uri filter") {
		t.Errorf("uri=[: %d %s, want 400 naming the uri filter", w.Code, w.Body)
	}
}
