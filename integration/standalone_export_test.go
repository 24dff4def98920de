package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStandaloneExportRoundTrip freezes a traditional node's objects (routes, upstreams,
// services, consumers, plugin_configs, global_rules, ssls) with `gwctl export --format
// apisix-yaml`, starts a data_plane node on that file, and asks both the same requests:
// the answers must be the same.
func TestStandaloneExportRoundTrip(t *testing.T) {
	up := startUpstream(t, "up")
	tlsA := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n", tlsA))
	a.start()
	cert := newTLSTestCert(t, "a.test")
	for _, w := range []struct{ path, body string }{
		{"/apisix/admin/upstreams/u1", fmt.Sprintf(`{"nodes":{%q:1},"type":"roundrobin"}`, up.addr)},
		{"/apisix/admin/services/s1", `{"upstream_id":"u1"}`},
		{"/apisix/admin/plugin_configs/pc1", `{"plugins":{"proxy-rewrite":{"uri":"/rewritten"}}}`},
		{"/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`},
		{"/apisix/admin/global_rules/g1", `{"plugins":{"response-rewrite":{"headers":{"set":{"X-Global":"yes"}}}}}`},
		{"/apisix/admin/routes/1", `{"uri":"/svc","service_id":"s1"}`},
		{"/apisix/admin/routes/2", `{"uri":"/pc","upstream_id":"u1","plugin_config_id":"pc1"}`},
		{"/apisix/admin/routes/3", `{"uri":"/auth","upstream_id":"u1","plugins":{"key-auth":{}}}`},
		{"/apisix/admin/routes/4", `{"uri":"/tls","hosts":["a.test"],"upstream_id":"u1"}`},
		{"/apisix/admin/ssls/1", cert.sslBody("a.test")},
	} {
		if status, body := a.adminCall("PUT", w.path, w.body); status != 200 && status != 201 {
			t.Fatalf("PUT %s: %d %s", w.path, status, body)
		}
	}
	out, err := a.gwctl("export", "--format", "apisix-yaml")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if !strings.HasSuffix(out, "#END\n") || !strings.Contains(out, "routes:") || !strings.Contains(out, "ssls:") {
		t.Fatalf("export wrote:\n%s", out)
	}

	tlsB := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\ndeployment:\n  role: data_plane\n  config_provider: yaml\n", tlsB))
	if err := os.WriteFile(filepath.Join(b.prefix, "conf", "apisix.yaml"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start()

	answer := func(in *instance, path string, headers ...string) string {
		resp, body := in.get(path, headers...)
		return fmt.Sprintf("%d %q path=%s global=%s", resp.StatusCode, body,
			resp.Header.Get("X-Seen-Path"), resp.Header.Get("X-Global"))
	}
	for _, tc := range []struct {
		path    string
		headers []string
		want    string
	}{
		{"/svc", nil, `200 "up" path=/svc global=yes`},
		{"/pc", nil, `200 "up" path=/rewritten global=yes`},
		{"/auth", nil, "401"},
		{"/auth", []string{"apikey", "jack-key"}, `200 "up" path=/auth`},
		{"/nothing", nil, "404"},
	} {
		got, frozen := answer(a, tc.path, tc.headers...), answer(b, tc.path, tc.headers...)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s on the traditional node: %s, want %s", tc.path, got, tc.want)
		}
		if got != frozen {
			t.Errorf("%s: traditional node %s, standalone node %s", tc.path, got, frozen)
		}
	}
	// The ssl, by SNI on each node's TLS port:
	for _, addr := range []string{tlsA, tlsB} {
		serial, resp, body, err := tlsGet(t, addr, "a.test", "/tls", nil)
		if err != nil || serial.Cmp(cert.serial) != 0 || resp.StatusCode != 200 || body != "up" {
			t.Errorf("TLS on %s: serial %v (want %v), %v %v %q", addr, serial, cert.serial, err, resp, body)
		}
	}
}
