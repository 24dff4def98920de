package integration

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"gw/master/store"
)

// Issue 17: what the Admin API accepts, every worker serves; nothing stored stops a start.

// storeRaw writes objects straight into the instance's data directory while no master
// runs, as an older binary, a hand edit or another tool might have left them: the
// Admin API's checks never saw them.
func (in *instance) storeRaw(objects ...store.Object) {
	in.t.Helper()
	s, err := store.Open(filepath.Join(in.prefix, "data"))
	if err != nil {
		in.t.Fatal(err)
	}
	defer s.Close()
	for _, obj := range objects {
		if _, _, err := s.Put(obj.Kind, obj.ID, obj.Value); err != nil {
			in.t.Fatalf("storing %s/%s: %v", obj.Kind, obj.ID, err)
		}
	}
}

func (in *instance) leftOutStatus() (ids []string, text string) {
	in.t.Helper()
	out, err := in.gwctl("status", "--json")
	if err != nil {
		in.t.Fatalf("gwctl status: %v\n%s", err, out)
	}
	var s struct {
		LeftOut []struct{ Kind, ID, Reason string }
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		in.t.Fatal(err)
	}
	for _, l := range s.LeftOut {
		ids = append(ids, l.Kind+"/"+l.ID)
	}
	text, _ = in.gwctl("status")
	return ids, text
}

func TestStoredObjectsThatCannotBeServedAreLeftOutAndTheRestStarts(t *testing.T) {
	up := startUpstream(t, "fine")
	in := newInstance(t, "worker_processes: 2\n")
	host, port, _ := strings.Cut(up.addr, ":")
	in.storeRaw(
		// Out of range for this binary (an older one stored it): it no longer decodes.
		store.Object{Kind: store.Upstreams, ID: "big", Value: []byte(fmt.Sprintf(
			`{"id":"big","type":"roundrobin","nodes":[{"host":%q,"port":%s,"weight":2000000}]}`, host, port))},
		store.Object{Kind: store.Routes, ID: "uses-big", Value: []byte(`{"id":"uses-big","uri":"/uses-big","upstream_id":"big"}`)},
		// A field this binary does not know.
		store.Object{Kind: store.Routes, ID: "odd", Value: []byte(`{"id":"odd","uri":"/odd","no_such_field":1,"plugins":{}}`)},
		store.Object{Kind: store.Routes, ID: "ok", Value: []byte(fmt.Sprintf(
			`{"id":"ok","uri":"/ok","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr))},
	)
	out := in.start()
	if !strings.Contains(out, "2 stored objects are left out") {
		t.Errorf("gwctl start said %q, want it to count the 2 objects left out", out)
	}
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/ok", 200, "fine"},
		{"/uses-big", 503, "upstream big not found"},
		{"/odd", 404, "Route Not Found"}, // fail closed: a route left out is not served at all
	} {
		if resp, body := in.get(c.path); resp.StatusCode != c.status || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %q, want %d with %q", c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
	ids, text := in.leftOutStatus()
	if strings.Join(ids, " ") != "upstreams/big routes/odd" && strings.Join(ids, " ") != "routes/odd upstreams/big" {
		t.Errorf("gwctl status --json left out %v, want upstreams/big and routes/odd", ids)
	}
	if !strings.Contains(text, "upstreams/big: ") || !strings.Contains(text, "weight") {
		t.Errorf("gwctl status does not say why upstreams/big is left out:\n%s", text)
	}
	if log := in.errorLog(); !strings.Contains(log, "stored object routes/odd is left out") {
		t.Errorf("error.log does not name routes/odd:\n%s", lastLines(log, 10))
	}
	if _, body := in.adminCall("GET", "/apisix/admin/upstreams/big", ""); !strings.Contains(body, `"left_out":`) {
		t.Errorf("GET upstreams/big: %s, want the reason it is left out", body)
	}
	if status, body := call(t, "GET", "http://"+in.metrics+"/apisix/prometheus/metrics", ""); status != 200 ||
		!strings.Contains(body, "gw_config_left_out_objects 2") {
		t.Errorf("metrics: %d, want gw_config_left_out_objects 2 in\n%s", status, body)
	}

	// An unrelated write is served at once; fixing the upstream through the Admin API
	// brings its route back.
	in.putRoute("new", "/new", up.addr)
	if resp, _ := in.get("/new"); resp.StatusCode != 200 {
		t.Errorf("GET /new after its PUT: %d", resp.StatusCode)
	}
	in.mustPut("/apisix/admin/upstreams/big", fmt.Sprintf(`{"nodes":{%q:1}}`, up.addr))
	if resp, body := in.get("/uses-big"); resp.StatusCode != 200 || body != "fine" {
		t.Errorf("GET /uses-big after its upstream was fixed: %d %q", resp.StatusCode, body)
	}
	if ids, _ := in.leftOutStatus(); len(ids) != 1 || ids[0] != "routes/odd" {
		t.Errorf("after the fix gwctl status leaves out %v, want only routes/odd", ids)
	}

	// A restart loads the same way.
	in.stop()
	if out := in.start(); !strings.Contains(out, "1 stored objects are left out") {
		t.Errorf("second gwctl start said %q, want 1 object left out", out)
	}
	if resp, _ := in.get("/uses-big"); resp.StatusCode != 200 {
		t.Errorf("GET /uses-big after the restart: %d", resp.StatusCode)
	}
}

func TestForcedDeleteLeavesItsUsersAnswering503AndTheNodeTakingWrites(t *testing.T) {
	up := startUpstream(t, "fine")
	in := newInstance(t, "worker_processes: 2\n")
	in.start()
	in.mustPut("/apisix/admin/upstreams/u1", fmt.Sprintf(`{"nodes":{%q:1}}`, up.addr))
	in.mustPut("/apisix/admin/routes/r1", `{"uri":"/r1","upstream_id":"u1"}`)
	if status, body := in.adminCall("DELETE", "/apisix/admin/upstreams/u1", ""); status != 400 {
		t.Errorf("DELETE of a used upstream without force: %d %s, want 400", status, body)
	}
	if status, body := in.adminCall("DELETE", "/apisix/admin/upstreams/u1?force=true", ""); status != 200 {
		t.Fatalf("DELETE ?force=true: %d %s", status, body)
	}
	if resp, body := in.get("/r1"); resp.StatusCode != 503 || !strings.Contains(body, "upstream u1 not found") {
		t.Errorf("GET /r1 after its upstream was deleted: %d %q, want 503 naming u1", resp.StatusCode, body)
	}
	// Every later write is acknowledged (so every worker serves it) and served.
	in.putRoute("r2", "/r2", up.addr)
	if resp, body := in.get("/r2"); resp.StatusCode != 200 || body != "fine" {
		t.Errorf("GET /r2: %d %q", resp.StatusCode, body)
	}
	// And a restart starts.
	in.stop()
	in.start()
	if resp, _ := in.get("/r1"); resp.StatusCode != 503 {
		t.Errorf("GET /r1 after a restart: %d, want 503", resp.StatusCode)
	}
	if resp, _ := in.get("/r2"); resp.StatusCode != 200 {
		t.Errorf("GET /r2 after a restart: %d, want 200", resp.StatusCode)
	}
}
