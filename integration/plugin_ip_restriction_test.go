package integration

import (
	"fmt"
	"strings"
	"testing"
)

// ip-restriction through the binary: the whitelist and the blacklist judge the client
// real_ip_from names, on a route, a service and a global rule; a bad list is a 400 that
// names the item and changes nothing.
func TestPluginIPRestriction(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "real_ip_from: [127.0.0.1]\nreal_ip_header: X-Forwarded-For\n")
	in.start("--workers", "2")
	// t/plugin/ip-restriction.t TEST 7 "set whitelist".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"ip-restriction":`+
		`{"whitelist":["127.0.0.0/24","113.74.26.106"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	in.mustPut("/apisix/admin/services/s", `{"plugins":{"ip-restriction":{"blacklist":["2001:db8::/32"],"message":"Do you want to do something bad?"}}}`)
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/svc","service_id":"s","upstream":{"nodes":{%q:1}}}`, up.addr))

	const refused = `{"message":"Your IP address is not allowed"}`
	in.overBothProtocols(func() {
		for _, tc := range []struct {
			name, path, client string
			wantStatus         int
			wantBody           string
		}{
			// TEST 8 "hit route and ip cidr in the whitelist" (the TCP peer, 127.0.0.1).
			{"cidr in whitelist", "/hello", "", 200, "hello world"},
			// TEST 9 "hit route and ip in the whitelist".
			{"ip in whitelist", "/hello", "113.74.26.106", 200, "hello world"},
			// TEST 10 "hit route and ip not in the whitelist".
			{"ip not in whitelist", "/hello", "114.114.114.114", 403, refused},
			// TEST 11 "hit route and IPv6 not in the whitelist".
			{"v6 not in whitelist", "/hello", "2001:db8::2", 403, refused},
			// TEST 22 and 27: an IPv6 client in a service's blacklist, its message.
			{"v6 in service's blacklist", "/svc", "2001:db8::2", 403, `{"message":"Do you want to do something bad?"}`},
			{"v4 not in service's blacklist", "/svc", "114.114.114.114", 200, "hello world"},
		} {
			var headers []string
			if tc.client != "" {
				headers = []string{"X-Forwarded-For", tc.client}
			}
			resp, body := in.get(tc.path, headers...)
			if resp.StatusCode != tc.wantStatus || strings.TrimSpace(body) != tc.wantBody {
				t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if tc.wantStatus == 403 && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: Content-Type %q", tc.name, resp.Header.Get("Content-Type"))
			}
		}
	})

	// A global rule refuses every route; TEST 33's 404.
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"ip-restriction":{"whitelist":["10.0.0.0/8"],"response_code":404}}}`)
	if resp, body := in.get("/svc"); resp.StatusCode != 404 || strings.TrimSpace(body) != refused {
		t.Errorf("global rule: %d %q, want 404 %s", resp.StatusCode, body, refused)
	}
	if status, _ := in.adminCall("DELETE", "/apisix/admin/global_rules/1", ""); status != 200 {
		t.Fatalf("DELETE global rule: %d", status)
	}

	// TEST 2 "wrong CIDR v4 format" and TEST 6 "whitelist and blacklist mutual exclusive":
	// refused, and route 1 serves on as it was.
	for body, want := range map[string]string{
		`{"uri":"/hello","plugins":{"ip-restriction":{"whitelist":["10.255.256.0/24"]}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`:                 `whitelist: item 1: invalid ip address`,
		`{"uri":"/hello","plugins":{"ip-restriction":{"whitelist":["1.1.1.1"],"blacklist":["2.2.2.2"]}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`: `not both`,
	} {
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", body)
		if status != 400 || !strings.Contains(resp, "ip-restriction") || !strings.Contains(resp, want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %q", body, status, resp, want)
		}
	}
	if resp, body := in.get("/hello"); resp.StatusCode != 200 || body != "hello world" {
		t.Errorf("after refused writes: %d %q", resp.StatusCode, body)
	}
}
