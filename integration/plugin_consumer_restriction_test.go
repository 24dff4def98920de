package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// consumer-restriction through the binary, after key-auth has named the consumer: on a
// route (whitelist, allowed_by_methods) and on a consumer (type route_id), which joins
// the chain once that consumer is named.
func TestPluginConsumerRestriction(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "2")
	// t/plugin/consumer-restriction.t TEST 3, 4 "add consumer jack1/jack2" (key-auth here).
	in.mustPut("/apisix/admin/consumers", `{"username":"jack1","plugins":{"key-auth":{"key":"k1"}}}`)
	in.mustPut("/apisix/admin/consumers", `{"username":"jack2","plugins":{"key-auth":{"key":"k2"}}}`)
	// TEST 47 "update consumer with plugin hmac-auth and consumer-restriction, and set
	// whitelist" (route_id), on a third consumer.
	in.mustPut("/apisix/admin/consumers", `{"username":"jack3","plugins":{"key-auth":{"key":"k3"},`+
		`"consumer-restriction":{"type":"route_id","whitelist":["2"],"rejected_code":401}}}`)
	// TEST 5 "set whitelist".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"key-auth":{},`+
		`"consumer-restriction":{"whitelist":["jack1","jack3"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	// TEST 21 "set allowed_by_methods".
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/methods","plugins":{"key-auth":{},`+
		`"consumer-restriction":{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}},"upstream":{"nodes":{%q:1}}}`, up.addr))

	const forbidden = `{"message":"The consumer_name is forbidden."}`
	for _, tc := range []struct {
		name, method, path, key string
		wantStatus              int
		wantBody                string
	}{
		{"no key", "GET", "/hello", "", 401, `{"message":"Missing API key in request"}`}, // TEST 6
		{"jack1", "GET", "/hello", "k1", 200, "hello world"},                             // TEST 7
		{"jack2", "GET", "/hello", "k2", 403, forbidden},                                 // TEST 8
		{"jack1 GET", "GET", "/methods", "k1", 403, forbidden},                           // TEST 22
		{"jack1 POST", "POST", "/methods", "k1", 200, "hello world"},
		{"jack2 GET", "GET", "/methods", "k2", 200, "hello world"},
		// jack3's own restriction: route 2 only (TEST 48), whatever route 1 whitelists.
		{"jack3 on route 2", "GET", "/methods", "k3", 200, "hello world"},
		{"jack3 on route 1", "GET", "/hello", "k3", 401, `{"message":"The route_id is forbidden."}`},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+in.data+tc.path, nil)
		if tc.key != "" {
			req.Header.Set("apikey", tc.key)
		}
		resp, err := freshConnections.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || strings.TrimSpace(string(body)) != tc.wantBody {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.wantStatus, tc.wantBody)
		}
	}

	// A type gw lacks is a 400 that says so.
	status, resp := in.adminCall("PUT", "/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/g","plugins":{"consumer-restriction":`+
		`{"type":"consumer_group_id","whitelist":["1"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	if status != 400 || !strings.Contains(resp, `type: \"consumer_group_id\" is not supported yet`) {
		t.Errorf("consumer_group_id: %d %s", status, resp)
	}
}
