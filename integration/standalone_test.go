package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeStandalone replaces the instance's conf/<name> in one rename, as a careful writer
// (or a Kubernetes ConfigMap) does.
func (in *instance) writeStandalone(name, text string) {
	in.t.Helper()
	path := filepath.Join(in.prefix, "conf", name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		in.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		in.t.Fatal(err)
	}
}

// bodyOf is the body of GET path on the data plane, with its status when not 200.
func (in *instance) bodyOf(path string) string {
	in.t.Helper()
	resp, body := in.get(path)
	if resp.StatusCode != 200 {
		return fmt.Sprintf("%d", resp.StatusCode)
	}
	return body
}

// TestStandaloneFile drives a data_plane node from conf/apisix.yaml alone: served at the
// start, a change without #END not read, a finished change applied without a reload
// (same master, same workers), a broken file keeping the last good config and saying why,
// a bad object left out and reported while the rest serves.
func TestStandaloneFile(t *testing.T) {
	a, b := startUpstream(t, "A"), startUpstream(t, "B")
	in := newInstance(t, "deployment:\n  role: data_plane\n  config_provider: yaml\n")
	in.writeStandalone("apisix.yaml", fmt.Sprintf(`routes:
  - id: 1
    uri: /a
    upstream_id: up-a
  - uri: /b
    upstream:
      nodes:
        %q: 1
      type: roundrobin
upstreams:
  - id: up-a
    nodes:
      %q: 1
#END
`, b.addr, a.addr))
	in.start()
	if got := in.bodyOf("/a"); got != "A" {
		t.Fatalf("/a: %q, want A\n%s", got, in.errorLog())
	}
	if got := in.bodyOf("/b"); got != "B" {
		t.Fatalf("/b: %q, want B", got)
	}
	// data_plane: no Admin API, and the data port says why.
	resp, body := in.get("/apisix/admin/routes", "X-API-KEY", adminKey)
	if resp.StatusCode != 404 || !strings.Contains(body, "apisix.yaml") {
		t.Errorf("admin on the data port: %d %s", resp.StatusCode, body)
	}
	master := in.masterPID()
	workers := children(master)
	slices.Sort(workers)

	// Unfinished: no #END, so not read.
	changed := fmt.Sprintf(`routes:
  - id: 1
    uri: /a
    upstream_id: up-b
  - id: c
    uri: /c
    upstream_id: up-a
upstreams:
  - id: up-a
    nodes: {%q: 1}
  - id: up-b
    nodes: {%q: 1}
`, a.addr, b.addr)
	in.writeStandalone("apisix.yaml", changed)
	time.Sleep(2500 * time.Millisecond) // more than two polls
	if got := in.bodyOf("/c"); got != "404" {
		t.Fatalf("/c from a file without #END: %q, want 404 (not read yet)", got)
	}
	if out, _ := in.gwctl("status"); !strings.Contains(out, "#END") {
		t.Errorf("status does not say the file lacks #END:\n%s", out)
	}
	in.writeStandalone("apisix.yaml", changed+"#END\n")
	if !waitFor(10*time.Second, func() bool { return in.bodyOf("/c") == "A" }) {
		t.Fatalf("/c not served after #END: %q\n%s", in.bodyOf("/c"), lastLines(in.errorLog(), 10))
	}
	if got := in.bodyOf("/a"); got != "B" {
		t.Errorf("/a after the change: %q, want B", got)
	}
	if got := in.bodyOf("/b"); got != "404" {
		t.Errorf("/b, gone from the file: %q, want 404", got)
	}
	now := children(master)
	slices.Sort(now)
	if !slices.Equal(now, workers) {
		t.Errorf("workers changed (a reload?): %v, then %v", workers, now)
	}

	// Broken YAML: the last good config keeps serving, the log and status say why.
	in.writeStandalone("apisix.yaml", "routes:\n  - id: 1\n    uri: [\n#END\n")
	if !waitFor(10*time.Second, func() bool { return strings.Contains(in.errorLog(), "not valid YAML") }) {
		t.Fatalf("the error log does not report the broken file:\n%s", lastLines(in.errorLog(), 10))
	}
	if got := in.bodyOf("/c"); got != "A" {
		t.Errorf("/c with a broken file: %q, want the last good config's A", got)
	}
	if out, _ := in.gwctl("status"); !strings.Contains(out, "NOT served") || !strings.Contains(out, "not valid YAML") {
		t.Errorf("status does not report the broken file:\n%s", out)
	}

	// A bad object is left out and reported; the rest serves.
	in.writeStandalone("apisix.yaml", fmt.Sprintf(`routes:
  - id: good
    uri: /good
    upstream: {nodes: {%q: 1}}
  - id: bad
    uri: /bad
    plugins: {limit-count: {count: 0, time_window: 60}}
    upstream: {nodes: {%q: 1}}
#END
`, a.addr, a.addr))
	if !waitFor(10*time.Second, func() bool { return in.bodyOf("/good") == "A" }) {
		t.Fatalf("/good not served beside a bad object\n%s", lastLines(in.errorLog(), 10))
	}
	if got := in.bodyOf("/bad"); got != "404" {
		t.Errorf("/bad: %q, want 404 (left out)", got)
	}
	if got := in.bodyOf("/c"); got != "404" {
		t.Errorf("/c, gone from the file: %q, want 404", got)
	}
	out, _ := in.gwctl("status")
	if !strings.Contains(out, "routes/bad") || strings.Contains(out, "NOT served") {
		t.Errorf("status should list routes/bad as left out, and the file as served:\n%s", out)
	}
	if log := in.errorLog(); !strings.Contains(log, "routes/bad") {
		t.Errorf("the error log does not name routes/bad:\n%s", lastLines(log, 10))
	}
	if in.masterPID() != master {
		t.Errorf("the master changed")
	}
}

// TestStandaloneTraditionalReadOnly serves conf/apisix.json on a traditional node: the
// Admin API shows the file's objects and refuses writes with a 405 naming the file.
func TestStandaloneTraditionalReadOnly(t *testing.T) {
	a := startUpstream(t, "A")
	in := newInstance(t, "deployment:\n  config_provider: json\n")
	in.writeStandalone("apisix.json", fmt.Sprintf(`{"routes":[{"id":"r1","uri":"/a","upstream":{"nodes":{%q:1}}}],
"consumers":[{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}]}`, a.addr))
	in.start()
	if got := in.bodyOf("/a"); got != "A" {
		t.Fatalf("/a: %q\n%s", got, in.errorLog())
	}
	status, body := in.adminCall("GET", "/apisix/admin/routes/r1", "")
	if status != 200 || !strings.Contains(body, `"/a"`) {
		t.Errorf("GET route r1: %d %s", status, body)
	}
	status, body = in.adminCall("GET", "/apisix/admin/consumers", "")
	if status != 200 || !strings.Contains(body, "jack") {
		t.Errorf("GET consumers: %d %s", status, body)
	}
	for _, method := range []string{"PUT", "POST", "PATCH", "DELETE"} {
		status, body := in.adminCall(method, "/apisix/admin/routes/r1", `{"uri":"/x","upstream":{"nodes":{"127.0.0.1:1":1}}}`)
		if status != 405 || !strings.Contains(body, "apisix.json") {
			t.Errorf("%s route r1: %d %s, want 405 naming apisix.json", method, status, body)
		}
	}
	if got := in.bodyOf("/a"); got != "A" {
		t.Errorf("/a after refused writes: %q", got)
	}
}
