package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// routeState is what the store must hold for one route id after the crash.
type routeState struct {
	present bool
	uri     string
}

// TestKillNineDuringAdminWrites streams Admin API writes (PUT, POST, DELETE) and kills the
// master with SIGKILL midway: after a restart every write answered with a 2xx must be
// there, every acknowledged delete absent, and the store must load.
func TestKillNineDuringAdminWrites(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	master := in.masterPID()

	const total, killAfter, ids = 1000, 300, 40
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(method, path, body string) (int, string, error) {
		req, _ := http.NewRequest(method, "http://"+in.admin+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", adminKey)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	acked := map[string]routeState{} // by id, the last acknowledged state
	var inFlight string              // the id whose write got no answer: either state is right
	var inFlightState routeState
	acks := make(chan int, total)
	done := make(chan error, 1)
	go func() {
		defer close(acks)
		for i := 0; i < total; i++ {
			id := fmt.Sprintf("k%d", (i*7)%ids)
			uri := fmt.Sprintf("/w%d", i)
			body := fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, uri)
			var status int
			var resp string
			var err error
			want := routeState{present: true, uri: uri}
			switch {
			case i%5 == 4:
				want = routeState{}
				inFlight, inFlightState = id, want
				status, resp, err = send("DELETE", "/apisix/admin/routes/"+id, "")
				if status == 404 {
					status = 200 // absent already: as definite an answer as a delete
				}
			case i%5 == 2:
				inFlight, inFlightState = "", routeState{} // a POST's id is unknown until answered
				status, resp, err = send("POST", "/apisix/admin/routes", body)
				if status == 201 {
					var created struct{ Key string }
					json.Unmarshal([]byte(resp), &created)
					id = strings.TrimPrefix(created.Key, "/apisix/routes/")
				}
			default:
				inFlight, inFlightState = id, want
				status, resp, err = send("PUT", "/apisix/admin/routes/"+id, body)
			}
			if err != nil {
				done <- nil // the master is gone: this write was never acknowledged
				return
			}
			if status < 200 || status > 299 {
				done <- fmt.Errorf("write %d: %d %s", i, status, resp)
				return
			}
			acked[id] = want
			inFlight = ""
			acks <- i
		}
		done <- fmt.Errorf("all %d writes finished before the kill", total)
	}()
	for n := 0; n < killAfter; n++ {
		if _, ok := <-acks; !ok {
			t.Fatalf("the writer stopped after %d acknowledged writes: %v", n, <-done)
		}
	}
	if err := syscall.Kill(master, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range acks {
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return !alive(master) && len(children(master)) == 0 }) {
		t.Fatal("the master or its workers outlived SIGKILL")
	}

	in.start("--workers", "1")
	checked := 0
	for id, want := range acked {
		status, body := in.adminCall("GET", "/apisix/admin/routes/"+id, "")
		var got routeState
		if status == 200 {
			var item struct {
				Value struct{ URI string } `json:"value"`
			}
			json.Unmarshal([]byte(body), &item)
			got = routeState{present: true, uri: item.Value.URI}
		} else if status != 404 {
			t.Fatalf("GET route %s: %d %s", id, status, body)
		}
		if got != want && !(id == inFlight && got == inFlightState) {
			t.Errorf("route %s after the crash: %+v, acknowledged %+v", id, got, want)
		}
		checked++
	}
	if checked < killAfter/ids {
		t.Fatalf("checked only %d routes", checked)
	}
	t.Logf("%d acknowledged routes checked after SIGKILL at write >= %d", checked, killAfter)
}

// corruptFile cuts path in half: a torn write, as a crashing disk could leave.
func corruptFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedStoreRefusesToStart(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putRoute("a", "/a", "127.0.0.1:1980")
	in.putRoute("b", "/b", "127.0.0.1:1980")
	in.putRoute("c", "/c", "127.0.0.1:1980")
	in.stop()

	routes := filepath.Join(in.prefix, "data", "routes")
	torn := filepath.Join(routes, "a.json")
	corruptFile(t, torn)
	flipped := filepath.Join(routes, "b.json")
	data, _ := os.ReadFile(flipped)
	os.WriteFile(flipped, []byte(strings.Replace(string(data), `"/b"`, `"/x"`, 1)), 0o600)
	leftover := filepath.Join(routes, "tmp-99")
	os.WriteFile(leftover, []byte(`{"half`), 0o600)

	out, err := in.gwctl("start", "--workers", "1")
	if err == nil {
		t.Fatalf("gw started over a damaged store:\n%s", out)
	}
	for _, want := range []string{torn, flipped, "checksum mismatch", "nothing was loaded", "gwctl import"} {
		if !strings.Contains(out, want) {
			t.Errorf("gwctl start says %q; want it to mention %q", out, want)
		}
		if !strings.Contains(in.errorLog(), want) {
			t.Errorf("error.log does not mention %q:\n%s", want, lastLines(in.errorLog(), 5))
		}
	}
	if _, err := in.gwctl("status"); err == nil {
		t.Error("a master is running")
	}

	// The fix the message gives: move the damaged files away.
	for _, path := range []string{torn, flipped} {
		if err := os.Rename(path, filepath.Join(in.prefix, filepath.Base(path)+".damaged")); err != nil {
			t.Fatal(err)
		}
	}
	in.start("--workers", "1")
	if status, _ := in.adminCall("GET", "/apisix/admin/routes/c", ""); status != 200 {
		t.Errorf("route c: %d after the fix", status)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the temp file of an interrupted write is still there (%v)", err)
	}
}

func TestExportWipeImport(t *testing.T) {
	backend := startUpstream(t, "restored")
	in := newInstance(t, "")
	in.start("--workers", "1")
	for _, c := range []struct{ path, body string }{
		{"/apisix/admin/upstreams/u1", fmt.Sprintf(`{"type":"roundrobin","nodes":{%q:1}}`, backend.addr)},
		{"/apisix/admin/services/s1", `{"upstream_id":"u1"}`},
		{"/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`},
		{"/apisix/admin/routes/r1", `{"uri":"/r1","service_id":"s1"}`},
		{"/apisix/admin/routes/r2", `{"uri":"/r2","upstream_id":"u1","plugins":{"key-auth":{}}}`},
	} {
		if status, body := in.adminCall("PUT", c.path, c.body); status >= 300 {
			t.Fatalf("PUT %s: %d %s", c.path, status, body)
		}
	}
	backup := filepath.Join(t.TempDir(), "backup.json")
	if out, err := in.gwctl("export", "--output", backup); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if info, err := os.Stat(backup); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v, want mode 600", info, err)
	}
	want := readBackup(t, backup)

	in.stop()
	offline, err := in.gwctl("export")
	if err != nil {
		t.Fatalf("offline export: %v\n%s", err, offline)
	}
	if got := parseBackup(t, offline); !reflect.DeepEqual(got, want) {
		t.Errorf("offline export differs:\n got %v\nwant %v", got, want)
	}
	if err := os.RemoveAll(filepath.Join(in.prefix, "data")); err != nil {
		t.Fatal(err)
	}
	in.start("--workers", "1")
	if out, err := in.gwctl("import", backup); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	// Read-your-writes: the import answered, so the worker serves it.
	if resp, body := in.get("/r1"); resp.StatusCode != 200 || body != "restored" {
		t.Errorf("GET /r1 after import: %d %q", resp.StatusCode, body)
	}
	if resp, _ := in.get("/r2", "apikey", "jack-key"); resp.StatusCode != 200 {
		t.Errorf("GET /r2 with jack's key after import: %d", resp.StatusCode)
	}
	again, err := in.gwctl("export")
	if err != nil {
		t.Fatal(err)
	}
	if got := parseBackup(t, again); !reflect.DeepEqual(got, want) {
		t.Errorf("export after import differs:\n got %v\nwant %v", got, want)
	}

	// One bad object among good ones: nothing changes, and the message names it.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"gw_backup":1,
		"routes":[{"id":"new","uri":"/new","upstream_id":"u1"}],
		"upstreams":[{"id":"u1","type":"fastest","nodes":{"127.0.0.1:1":1}}]}`), 0o600)
	out, err := in.gwctl("import", bad)
	if err == nil {
		t.Fatalf("a bad import succeeded: %s", out)
	}
	for _, want := range []string{`upstreams[0] (id "u1")`, "type", "fastest", "nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("import error %q does not mention %q", out, want)
		}
	}
	after, _ := in.gwctl("export")
	if got := parseBackup(t, after); !reflect.DeepEqual(got, want) {
		t.Errorf("a refused import changed the store:\n got %v\nwant %v", got, want)
	}
}

func readBackup(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseBackup(t, string(data))
}

// parseBackup decodes a backup without its revision, which an import does not restore.
func parseBackup(t *testing.T, s string) map[string]any {
	t.Helper()
	v := decodeJSON(t, s)
	delete(v, "revision")
	return v
}

func TestAdminGuardRails(t *testing.T) {
	const opsKey, viewKey = "ops-0123456789abcdef", "view-0123456789abcdef"
	in := newInstance(t, "")
	in.writeConfig(fmt.Sprintf(`node_listen:
  - %q
admin:
  listen: %q
  keys:
    - name: ops
      key: %s
    - name: dashboard
      key: %s
      role: viewer
`, in.data, in.admin, opsKey, viewKey))
	in.start("--workers", "1")
	url := "http://" + in.admin + "/apisix/admin/routes/1"
	body := `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1}}}`

	if status, resp := call(t, "PUT", url, body, "X-API-KEY", opsKey); status != 201 {
		t.Fatalf("admin PUT: %d %s", status, resp)
	}
	if status, _ := call(t, "GET", url, "", "X-API-KEY", viewKey); status != 200 {
		t.Errorf("viewer GET: %d", status)
	}
	if status, _ := call(t, "PUT", url, body, "X-API-KEY", viewKey); status != 401 {
		t.Errorf("viewer PUT: %d, want 401", status)
	}
	if status, _ := call(t, "DELETE", url, "", "X-API-KEY", "guessed-key"); status != 401 {
		t.Errorf("wrong key: %d, want 401", status)
	}
	big := `{"uri":"/a","desc":"` + strings.Repeat("x", 1536<<10) + `"}`
	if status, resp := call(t, "PUT", url, big, "X-API-KEY", opsKey); status != 413 || !strings.Contains(resp, "1572864") {
		t.Errorf("1.5 MiB + a bit: %d %.200s, want 413 naming the limit", status, resp)
	}

	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.errorLog(), "wrong apikey") }) {
		t.Fatalf("the wrong key was not logged:\n%s", lastLines(in.errorLog(), 5))
	}
	log := in.errorLog()
	for _, want := range []string{"refused DELETE /apisix/admin/routes/1 from 127.0.0.1:", `(key "dashboard"): invalid method for role viewer`} {
		if !strings.Contains(log, want) {
			t.Errorf("error.log lacks %q:\n%s", want, lastLines(log, 5))
		}
	}
	if strings.Contains(log, "guessed-key") {
		t.Error("error.log holds a token")
	}

	audit, err := os.ReadFile(filepath.Join(in.prefix, "logs", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	type record struct {
		Time, Key, Peer, Method, Resource string
		Status                            int
	}
	var got []record
	for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil || !strings.HasPrefix(r.Peer, "127.0.0.1:") {
			t.Errorf("audit line %q: bad time or peer", line)
		}
		r.Time, r.Peer = "", ""
		got = append(got, r)
	}
	want := []record{
		{Key: "ops", Method: "PUT", Resource: "/apisix/admin/routes/1", Status: 201},
		{Key: "dashboard", Method: "PUT", Resource: "/apisix/admin/routes/1", Status: 401},
		{Key: "", Method: "DELETE", Resource: "/apisix/admin/routes/1", Status: 401},
		{Key: "ops", Method: "PUT", Resource: "/apisix/admin/routes/1", Status: 413},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit.log:\n got %+v\nwant %+v", got, want)
	}
}

// TestAdminBodyLimitOnDataPort sends the same Admin API calls to the admin port and, as
// APISIX 2.x scripts do, to the data port from loopback: both must answer alike. The
// worker forwards data-port calls to the master, which once refused a large body without
// reading it, so the worker, still writing the body, lost the connection and answered 502.
func TestAdminBodyLimitOnDataPort(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	// A route padded with spaces to exactly n bytes, as the Admin API counts them.
	routeOf := func(n int) string {
		route := `{"uri":"/padded","plugins":{}}`
		return route + strings.Repeat(" ", n-len(route))
	}
	const limit = 1536 << 10
	tooBig := `{"error_msg":"request body too large: the Admin API accepts at most 1572864 bytes (1.5 MiB, as APISIX)"}`
	cases := []struct {
		name    string
		body    string
		chunked bool // no Content-Length: the limit is found only by reading
		key     string
		status  int
		want    string // the whole body, trimmed; "" checks the status only
	}{
		{"2 MB", routeOf(2 << 20), false, adminKey, 413, tooBig},
		{"2 MB chunked", routeOf(2 << 20), true, adminKey, 413, tooBig},
		{"one byte over", routeOf(limit + 1), false, adminKey, 413, tooBig},
		{"2 MB with a wrong key", routeOf(2 << 20), false, "wrong-key", 401, `{"error_msg":"failed to check token","description":"wrong apikey"}`},
		{"exactly the limit", routeOf(limit), false, adminKey, 200, ""},
		{"exactly the limit chunked", routeOf(limit), true, adminKey, 200, ""},
	}
	in.mustPut("/apisix/admin/routes/1", routeOf(100)) // so that every PUT below that passes answers 200
	for _, tc := range cases {
		for _, port := range []struct{ name, address string }{{"admin", in.admin}, {"data", in.data}} {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length from net/http
			}
			req, err := http.NewRequest("PUT", "http://"+port.address+"/apisix/admin/routes/1", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-API-KEY", tc.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s via the %s port: %v", tc.name, port.name, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (tc.want != "" && strings.TrimSpace(string(got)) != tc.want) {
				t.Errorf("%s via the %s port: %d %.200s, want %d %s", tc.name, port.name, resp.StatusCode, got, tc.status, tc.want)
			}
		}
	}
	if log := in.errorLog(); strings.Contains(log, "forwarding admin call") {
		t.Errorf("the worker failed to forward a call:\n%s", lastLines(log, 5))
	}
}
