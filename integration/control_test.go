package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// status runs `gwctl status --json`.
func (in *instance) status() statusReport {
	in.t.Helper()
	out, err := in.gwctl("status", "--json")
	if err != nil {
		in.t.Fatalf("gwctl status: %v\n%s", err, out)
	}
	var s statusReport
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		in.t.Fatalf("status output is not JSON: %v\n%s", err, out)
	}
	return s
}

type statusReport struct {
	PID        int
	Generation uint64
	Reloads    uint64
	Workers    []struct {
		Slot, PID   int
		Generation  uint64
		State       string
		Requests    uint64
		Connections int64
	}
}

func (s statusReport) pids(state string) []int {
	var pids []int
	for _, w := range s.Workers {
		if w.State == state {
			pids = append(pids, w.PID)
		}
	}
	sort.Ints(pids)
	return pids
}

func (in *instance) reload() {
	in.t.Helper()
	if out, err := in.gwctl("reload"); err != nil {
		in.t.Fatalf("gwctl reload: %v\n%s\n%s", err, out, lastLines(in.errorLog(), 20))
	}
}

// Ten reloads under load, shrinking and growing the worker count, with clients that never
// retry, on keep-alive and on fresh connections: not one request may fail.
func TestReloadsUnderLoadFailNothing(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	base := fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: %q\nworker_shutdown_timeout: 20s\nerror_log_level: info\n", in.data, in.admin)
	in.writeConfig(base + "worker_processes: 2\n")
	in.start()
	in.putRoute("1", "/load", up.addr)

	keepAlive := startLoad(in.data, "/load", 8, true)
	fresh := startLoad(in.data, "/load", 8, false)
	counts := []int{1, 2, 1, 2, 3, 2, 1, 2, 2, 2}
	for i, n := range counts {
		time.Sleep(150 * time.Millisecond)
		in.writeConfig(base + fmt.Sprintf("worker_processes: %d\n", n))
		in.reload()
		if got := len(in.status().pids("ready")); got != n {
			t.Fatalf("reload %d: %d ready workers, want %d", i+1, got, n)
		}
	}
	time.Sleep(300 * time.Millisecond)
	ka, fr := keepAlive.finish(), fresh.finish()
	if keepAlive.failed.Load() != 0 || keepAlive.ok.Load() == 0 {
		t.Errorf("keep-alive clients: %s", ka)
	}
	if fresh.failed.Load() != 0 || fresh.ok.Load() == 0 {
		t.Errorf("new-connection clients: %s", fr)
	}
	t.Logf("keep-alive: %s; new connections: %s", ka, fr)
	if s := in.status(); s.Reloads != uint64(len(counts)) {
		t.Errorf("status counts %d reloads, want %d", s.Reloads, len(counts))
	}
}

// TestReloadReturnsOnceOldWorkersStopAccepting: the old and new workers share the
// listening sockets, and a reload once returned as soon as it had told the old workers to
// drain: a fresh connection right after `gwctl reload` could still be accepted by one and
// get the old configuration (TestRouterSetting failed so on a busy machine). A reload now
// returns once every old worker has closed its listeners, or after a bound, with a warning.
func TestReloadReturnsOnceOldWorkersStopAccepting(t *testing.T) {
	user := startUpstream(t, "user")
	in := newInstance(t, "")
	configWith := func(router string) string {
		return fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\nrouter:\n  http: %s\n", in.data, in.admin, router)
	}
	in.writeConfig(configWith("radixtree_uri_with_parameter"))
	in.start("--workers", "1")
	in.putRoute("1", "/user/:id", user.addr)

	// radixtree_host_uri reads ":id" literally, so /user/42 tells which router answered.
	for i := range 20 {
		router, want := "radixtree_host_uri", 404
		if i%2 == 1 {
			router, want = "radixtree_uri_with_parameter", 200
		}
		in.writeConfig(configWith(router))
		in.reload()
		for j := range 3 {
			if resp, body := in.get("/user/42"); resp.StatusCode != want {
				t.Fatalf("reload %d to %s, fresh connection %d: %d %q, want %d", i+1, router, j+1, resp.StatusCode, body, want)
			}
		}
	}

	// An old worker that cannot answer (stopped here) holds the reload up to the bound only.
	old := in.status().pids("ready") // the generations before may still be draining
	if len(old) != 1 {
		t.Fatalf("ready workers: %v, want one", old)
	}
	if err := syscall.Kill(old[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(old[0], syscall.SIGCONT) })
	in.writeConfig(configWith("radixtree_host_uri"))
	in.reload()
	warning := fmt.Sprintf("(pid %d) did not stop accepting within", old[0])
	if log := in.errorLog(); !strings.Contains(log, warning) {
		t.Errorf("reload returned while old worker %d, stopped, could still accept; error.log lacks %q:\n%s", old[0], warning, lastLines(log, 5))
	}
	if resp, body := in.get("/user/42"); resp.StatusCode != 404 {
		t.Errorf("after the reload: %d %q, want the new router's 404", resp.StatusCode, body)
	}
	if err := syscall.Kill(old[0], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return !alive(old[0]) }) {
		t.Fatalf("old worker %d did not finish draining once continued", old[0])
	}
}

func TestBrokenReloadKeepsTheOldGenerationServing(t *testing.T) {
	up := startUpstream(t, "still here")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/x", up.addr)
	before := in.status()

	good, _ := os.ReadFile(filepath.Join(in.prefix, "conf", "config.yaml"))
	in.writeConfig(string(good) + "worker_processes: many\nbogus_key: 1\n")
	out, err := in.gwctl("reload")
	if err == nil || !strings.Contains(out, "worker_processes") || !strings.Contains(out, "bogus_key") {
		t.Fatalf("reload of a broken config: err=%v out=%q", err, out)
	}
	// A change a reload cannot make is refused the same way.
	in.writeConfig(string(good) + "shm:\n  limit_count: 20m\n")
	if out, err := in.gwctl("reload"); err == nil || !strings.Contains(out, "shm") {
		t.Fatalf("reload changing shm sizes: err=%v out=%q", err, out)
	}
	after := in.status()
	if after.Generation != before.Generation || fmt.Sprint(after.pids("ready")) != fmt.Sprint(before.pids("ready")) {
		t.Fatalf("workers changed: before %+v after %+v", before, after)
	}
	r, body := in.get("/x")
	if r.StatusCode != 200 || body != "still here" {
		t.Fatalf("after failed reloads: %d %q", r.StatusCode, body)
	}
}

// A reload whose workers fail to start changes nothing, the Admin API included: its new
// address and keys take effect with the new generation, never before it (they once did,
// so a failed reload left the old workers behind a new Admin API).
func TestFailedReloadLeavesTheAdminAPIAsItWas(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "1")
	before := in.status()

	newAdmin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The master accepts the file; the worker cannot open its access log, a directory
	// that does not exist, so the new generation never becomes ready.
	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\n  keys:\n    - {name: new, key: a-new-key-0123456789, role: admin}\n"+
		"access_log:\n  enabled: true\n  path: %s\n", in.data, newAdmin, filepath.Join(in.prefix, "missing", "access.log")))
	if out, err := in.gwctl("reload"); err == nil {
		t.Fatalf("reload with workers that cannot start succeeded: %s", out)
	}
	if after := in.status(); after.Generation != before.Generation {
		t.Fatalf("generation %d after a failed reload, want %d", after.Generation, before.Generation)
	}
	if code, body := in.adminCall("GET", "/apisix/admin/routes", ""); code != 200 {
		t.Fatalf("old Admin API with the old key after a failed reload: %d %s", code, body)
	}
	if conn, err := net.DialTimeout("tcp", newAdmin, time.Second); err == nil {
		conn.Close()
		t.Fatalf("the failed reload's admin.listen %s accepts connections", newAdmin)
	}
}

// Connections queued on a dead worker's socket are served by its replacement: the master
// holds the socket, so the accept queue survives the worker.
func TestKilledWorkerIsReplacedAndItsQueueServed(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/q", up.addr)
	master := in.masterPID()
	victim := in.status().Workers[0].PID

	// Stopped, the worker accepts nothing: new connections hashed to its socket wait in
	// the kernel's accept queue.
	if err := syscall.Kill(victim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const requests = 40
	results := make(chan string, requests)
	for i := 0; i < requests; i++ {
		go func() {
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}).Get("http://" + in.data + "/q")
			if err != nil {
				results <- err.Error()
				return
			}
			resp.Body.Close()
			results <- fmt.Sprint(resp.StatusCode)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	replaced := waitFor(5*time.Second, func() bool {
		kids := children(master)
		return len(kids) == 2 && kids[0] != victim && kids[1] != victim
	})
	if !replaced {
		t.Fatalf("worker %d not replaced: children %v", victim, children(master))
	}
	if d := time.Since(killed); d > time.Second {
		t.Errorf("replacement took %v, want under a second", d)
	}
	for i := 0; i < requests; i++ {
		if got := <-results; got != "200" {
			t.Errorf("request %d: %s", i, got)
		}
	}
	if t.Failed() {
		t.Logf("error.log:\n%s", in.errorLog())
	}
}

// kill -9 of a worker under load: only requests that worker had in flight may fail, and
// no new connection is refused.
func TestKillWorkerUnderLoad(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/k", up.addr)
	const clients = 8
	load := startLoad(in.data, "/k", clients, false)
	time.Sleep(300 * time.Millisecond)
	victim := in.status().Workers[1].PID
	_ = syscall.Kill(victim, syscall.SIGKILL)
	time.Sleep(700 * time.Millisecond)
	summary := load.finish()
	if load.dialFailed.Load() != 0 || load.failed.Load() > clients {
		t.Fatalf("at most %d in-flight requests may fail and no dial: %s", clients, summary)
	}
	if ready := in.status().pids("ready"); len(ready) != 2 {
		t.Fatalf("ready workers after kill: %v", ready)
	}
	t.Log(summary)
}

func TestQuitFinishesASlowRequest(t *testing.T) {
	slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		w.Write([]byte("slow but sure"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go slow.Serve(ln)
	defer slow.Close()
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putRoute("1", "/slow", ln.Addr().String())
	master := in.masterPID()

	done := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + in.data + "/slow")
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		done <- fmt.Sprintf("%d %s", resp.StatusCode, b[:n])
	}()
	time.Sleep(300 * time.Millisecond)
	out, err := in.gwctl("quit")
	if err != nil {
		t.Fatalf("gwctl quit: %v %s", err, out)
	}
	if got := <-done; got != "200 slow but sure" {
		t.Fatalf("in-flight request across quit: %q", got)
	}
	if alive(master) {
		t.Fatalf("master %d alive after gwctl quit returned", master)
	}
}

func TestStatusMatchesTheProcesses(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "3")
	s := in.status()
	kids := children(in.masterPID())
	sort.Ints(kids)
	if s.PID != in.masterPID() || fmt.Sprint(s.pids("ready")) != fmt.Sprint(kids) {
		t.Fatalf("status says master %d workers %v; processes say %d %v", s.PID, s.pids("ready"), in.masterPID(), kids)
	}
	slots := map[int]bool{}
	for _, w := range s.Workers {
		slots[w.Slot] = true
	}
	if len(slots) != 3 {
		t.Fatalf("slots %v", slots)
	}
	out, err := in.gwctl("status")
	if err != nil || !strings.Contains(out, "SLOT") || !strings.Contains(out, fmt.Sprint(kids[0])) {
		t.Fatalf("plain status: %v %q", err, out)
	}
}

func TestReopenFollowsLogrotate(t *testing.T) {
	in := newInstance(t, "error_log_level: info\n")
	in.start("--workers", "1")
	logPath := filepath.Join(in.prefix, "logs", "error.log")
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if out, err := in.gwctl("reopen"); err != nil {
		t.Fatalf("gwctl reopen: %v %s", err, out)
	}
	in.reload()
	if !waitFor(5*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "reloaded")
	}) {
		t.Fatalf("new error.log lacks the reload line; old has: %s", lastLines(readFile(logPath+".1"), 5))
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func TestStaleOrMissingPidFileIsReportedNotSignalled(t *testing.T) {
	in := newInstance(t, "")
	os.MkdirAll(filepath.Join(in.prefix, "logs"), 0o700)
	// pid 1 exists but is not our master: it must never be signalled.
	os.WriteFile(filepath.Join(in.prefix, "logs", "gwctl.pid"), []byte("1\n"), 0o644)
	for _, verb := range []string{"stop", "quit", "reload", "status"} {
		out, err := in.gwctl(verb)
		if err == nil || !strings.Contains(out, "stale pid file") {
			t.Errorf("gwctl %s with a stale pid file: err=%v out=%q", verb, err, out)
		}
	}
}

// TestConfigTestSaysWhatItTested: `gwctl test` once called a mistyped --prefix and an
// empty file "successful" like a real configuration. A prefix that does not exist fails,
// as nginx -t -p does; a missing or empty file passes (gwctl start runs on the defaults
// then) but says that only the built-in defaults were tested.
func TestConfigTestSaysWhatItTested(t *testing.T) {
	parent := t.TempDir()
	noFile := filepath.Join(parent, "no-file")
	if err := os.Mkdir(noFile, 0o755); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(parent, "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	withConfig := func(name, text string) string {
		prefix := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(prefix, "conf"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(prefix, "conf", "config.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return prefix
	}
	cases := []struct {
		name   string
		prefix string
		fails  bool
		want   []string // each must appear in the output
		refuse string   // must not appear; "" checks nothing
	}{
		{"prefix does not exist", filepath.Join(parent, "no", "such", "dir"), true,
			[]string{"configuration test failed", "prefix " + filepath.Join(parent, "no", "such", "dir") + " does not exist"}, "successful"},
		{"prefix is a file", aFile, true, []string{"prefix " + aFile + " is not a directory"}, "successful"},
		{"no config file", noFile, false,
			[]string{"no configuration file " + filepath.Join(noFile, "conf", "config.yaml"), "built-in defaults were tested"}, ""},
		{"empty config file", withConfig("empty", ""), false,
			[]string{"config.yaml is empty", "built-in defaults were tested", "test is successful"}, ""},
		{"comments only", withConfig("comments", "# worker_processes: 2\n"), false,
			[]string{"config.yaml is empty", "built-in defaults were tested"}, ""},
		{"a config that sets a key", withConfig("set", "worker_processes: 2\n"), false,
			[]string{"config.yaml test is successful"}, "defaults"},
		{"a bad config", withConfig("bad", "worker_processes: lots\n"), true,
			[]string{"configuration test failed", `config.yaml:1: worker_processes: must be a positive integer or "auto", got "lots"`}, "successful"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(gwctl, "test", "--prefix", tc.prefix).CombinedOutput()
			if failed := err != nil; failed != tc.fails {
				t.Errorf("exit: %v, want failure %v", err, tc.fails)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if tc.refuse != "" && strings.Contains(string(out), tc.refuse) {
				t.Errorf("output says %q:\n%s", tc.refuse, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(parent, "no")); err == nil {
		t.Error("gwctl test created the missing prefix")
	}
}
