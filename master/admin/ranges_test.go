package admin

import (
	"strings"
	"testing"
)

// Numbers out of their range are refused with 400 naming the field and the range, and
// change nothing: before, the chash upstream below was stored and every worker then
// panicked building its ring, and the timeout below made every request a 504 at once.
func TestOutOfRangeNumbersAreRefused(t *testing.T) {
	cases := []struct {
		name, target, body, want string
	}{
		{"chash weight", "/apisix/admin/upstreams/ch",
			`{"type":"chash","key":"remote_addr","nodes":{"127.0.0.1:1980":100000000000000000,"127.0.0.1:1981":1}}`,
			`{"error_msg":"invalid configuration: property \"nodes\" validation failed: node \"127.0.0.1:1980\": weight must be 0-1000000, got 100000000000000000"}`},
		{"upstream timeout", "/apisix/admin/upstreams/1",
			`{"nodes":{"127.0.0.1:1980":1},"timeout":{"connect":1e300,"send":1,"read":1}}`,
			`{"error_msg":"invalid configuration: property \"timeout.connect\" validation failed: must be 0.001-31536000 seconds, got 1e300"}`},
		{"route timeout", "/apisix/admin/routes/1",
			`{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1}},"timeout":{"connect":1,"send":1,"read":0.0001}}`,
			`{"error_msg":"invalid configuration: property \"timeout.read\" validation failed: must be 0.001-31536000 seconds, got 0.0001"}`},
		{"inline check interval", "/apisix/admin/routes/1",
			`{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1,"127.0.0.1:1981":1},"checks":{"active":{"healthy":{"interval":9223372037}}}}}`,
			`{"error_msg":"invalid configuration: property \"upstream.checks.active.healthy.interval\" validation failed: must be 1-31536000, got 9223372037"}`},
		{"service keepalive size", "/apisix/admin/services/1",
			`{"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":1048577}}}`,
			`{"error_msg":"invalid configuration: property \"upstream.keepalive_pool.size\" validation failed: must be 1-1048576, got 1048577"}`},
		{"limit-count time_window", "/apisix/admin/routes/1",
			`{"uri":"/a","plugins":{"limit-count":{"count":1,"time_window":10737419}}}`,
			`{"error_msg":"failed to check the configuration of plugin limit-count err: time_window: must be an integer from 1 to 10737418, got 10737419"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			expect(t, f.call("PUT", tc.target, tc.body), 400, tc.want)
			if f.store.Revision() != 0 || f.pub.count() != 0 {
				t.Errorf("refused write changed the store (revision %d) or published (%d)", f.store.Revision(), f.pub.count())
			}
		})
	}
}

// The edges themselves are stored and published.
func TestNumbersAtTheirEdgesAreStored(t *testing.T) {
	f := newFixture(t)
	body := `{"type":"chash","key":"remote_addr","nodes":{"127.0.0.1:1980":1000000,"127.0.0.1:1981":0},` +
		`"timeout":{"connect":0.001,"send":31536000,"read":1},"keepalive_pool":{"size":1048576,"idle_timeout":0},` +
		`"checks":{"active":{"timeout":31536000,"healthy":{"interval":31536000}}}}`
	if w := f.call("PUT", "/apisix/admin/upstreams/ch", body); w.Code != 201 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if f.pub.count() != 1 {
		t.Errorf("published %d snapshots, want 1", f.pub.count())
	}
}

// A page past every list is an empty one, however large: page 9223372036854775807 once
// overflowed the offset and the handler panicked.
func TestHugePageIsEmpty(t *testing.T) {
	f := newFixture(t)
	f.call("PUT", "/apisix/admin/routes/1", hello)
	for _, page := range []string{"2", "922337203685477581", "9223372036854775807"} {
		w := f.call("GET", "/apisix/admin/routes?page_size=10&page="+page, "")
		expect(t, w, 200, `{"list":[],"total":1}`)
	}
	w := f.call("GET", "/apisix/admin/routes?page_size=10&page=1", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"total":1`) || !strings.Contains(w.Body.String(), `"/apisix/routes/1"`) {
		t.Errorf("page 1: %d %s", w.Code, w.Body)
	}
}
