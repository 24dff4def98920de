package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Running gw as nginx runs: workers dropped to config.yaml's user, the master as PID 1 of
// a container, and IPv6 listeners.

// procIDs returns the Uid:, Gid: and Groups: lines of /proc/<pid>/status, without their
// names.
func procIDs(t *testing.T, pid int) (uid, gid, groups string) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, _ := strings.Cut(line, ":")
		value = strings.Join(strings.Fields(value), " ")
		switch name {
		case "Uid":
			uid = value
		case "Gid":
			gid = value
		case "Groups":
			groups = value
		}
	}
	return uid, gid, groups
}

// fileOwner returns path's permission bits and owner, without following a last symlink.
func fileOwner(t *testing.T, path string) (os.FileMode, int, int) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return st.Mode().Perm(), int(sys.Uid), int(sys.Gid)
}

// Started as root with `user: nobody`, the master stays root and starts every worker as
// nobody, and everything a worker does still works: proxying, the access log, admin calls
// forwarded from the data port, reopen on USR1, reload. What only the master may read is
// owner-only.
func TestWorkersRunAsConfiguredUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a master started as root can run its workers as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody on this machine: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	up := startUpstream(t, "dropped")
	in := newInstance(t, "user: nobody\naccess_log:\n  flush_interval: 100ms\n")
	// As for any nginx prefix, the worker user must be able to enter it; t.TempDir's parent
	// is 0700.
	for _, dir := range []string{filepath.Dir(in.prefix), in.prefix} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in.start("--workers", "2")
	master := in.masterPID()

	if u, _, _ := procIDs(t, master); u != "0 0 0 0" {
		t.Fatalf("master Uid: %s, want root", u)
	}
	workers := children(master)
	if len(workers) != 2 {
		t.Fatalf("master %d has children %v, want 2 workers", master, workers)
	}
	wantUID, wantGID := strings.Repeat(nobody.Uid+" ", 3)+nobody.Uid, strings.Repeat(nobody.Gid+" ", 3)+nobody.Gid
	assertNobody := func(pids []int) {
		t.Helper()
		for _, pid := range pids {
			u, g, groups := procIDs(t, pid)
			if u != wantUID || g != wantGID || groups != nobody.Gid {
				t.Fatalf("worker %d runs as Uid %q Gid %q Groups %q, want nobody (%s, %s, %s)", pid, u, g, groups, wantUID, wantGID, nobody.Gid)
			}
		}
	}
	assertNobody(workers)

	in.putRoute("1", "/who", up.addr)
	if resp, body := in.get("/who"); resp.StatusCode != 200 || body != "dropped" {
		t.Fatalf("GET /who: %d %q", resp.StatusCode, body)
	}
	// A data-port admin call goes from the worker to the master through logs/admin.sock.
	if resp, body := in.get("/apisix/admin/routes/1", "X-API-KEY", adminKey); resp.StatusCode != 200 || !strings.Contains(body, "/who") {
		t.Fatalf("admin call on the data port: %d %s", resp.StatusCode, body)
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.accessLog(), "GET /who ") }) {
		t.Fatalf("no access log line; error.log:\n%s", lastLines(in.errorLog(), 10))
	}

	logs := filepath.Join(in.prefix, "logs")
	for _, f := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int // -1: any
	}{
		{filepath.Join(logs, "gwctl.sock"), 0o600, 0, 0},
		{filepath.Join(logs, "gwctl.pid"), 0o600, 0, 0},
		{filepath.Join(logs, "gwctl.lock"), 0o600, 0, 0},
		{filepath.Join(logs, "admin.sock"), 0o600, uid, gid},
		{filepath.Join(logs, "error.log"), 0o600, uid, -1},
		{filepath.Join(logs, "access.log"), 0o644, uid, -1},
		{filepath.Join(in.prefix, "data"), 0o700, 0, 0},
		{logs, 0o710, 0, gid},
	} {
		mode, owner, group := fileOwner(t, f.path)
		if mode != f.mode || owner != f.uid || (f.gid >= 0 && group != f.gid) {
			t.Errorf("%s: mode %#o owner %d:%d, want %#o %d:%d", f.path, mode, owner, group, f.mode, f.uid, f.gid)
		}
	}
	// Shared memory is memfd, on no file system: its mode is seen through the master's fds.
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", master))
	segments := 0
	for _, fd := range fds {
		path := fmt.Sprintf("/proc/%d/fd/%s", master, fd.Name())
		if target, _ := os.Readlink(path); !strings.HasPrefix(target, "/memfd:gw-") {
			continue
		}
		segments++
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("shared memory %s: mode %v (%v), want 0600", path, st.Mode().Perm(), err)
		}
	}
	if segments == 0 {
		t.Error("found no memfd segment among the master's fds")
	}

	// USR1 after logrotate's rename: the master hands the new files to nobody first, and
	// every worker's stderr and access log move to them.
	for _, name := range []string{"access.log", "error.log"} {
		if err := os.Rename(filepath.Join(logs, name), filepath.Join(logs, name+".1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(master, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	errorLog := filepath.Join(logs, "error.log")
	if !waitFor(5*time.Second, func() bool {
		for _, w := range workers {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", w)); target != errorLog {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("workers' stderr not on the new %s after USR1; error.log.1:\n%s", errorLog, lastLines(readFile(errorLog+".1"), 10))
	}
	in.get("/who?after=reopen")
	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.accessLog(), "after=reopen") }) {
		t.Fatalf("no line in the new access.log after USR1; error.log.1:\n%s", lastLines(readFile(errorLog+".1"), 10))
	}

	if out, err := in.gwctl("reload"); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	var fresh []int
	for _, pid := range children(master) {
		if pid != workers[0] && pid != workers[1] {
			fresh = append(fresh, pid)
		}
	}
	if len(fresh) != 2 {
		t.Fatalf("after reload the master's children are %v, want 2 new workers beside %v", children(master), workers)
	}
	assertNobody(fresh)
	if resp, body := in.get("/who"); resp.StatusCode != 200 || body != "dropped" {
		t.Fatalf("GET /who after reload: %d %q", resp.StatusCode, body)
	}

	// The user is fixed at start: the files handed to it stay its own.
	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\nuser: root\n", in.data, in.admin))
	if out, err := in.gwctl("reload"); err == nil || !strings.Contains(out, `user is fixed at start ("nobody" → "root")`) {
		t.Fatalf("reload changing user: %v %s", err, out)
	}
	assertNobody(children(master))
}

// `gwctl start --foreground` as PID 1 of a new pid namespace, as in a container: it reaps
// the orphans the kernel gives it without stealing its workers' exits (a killed worker is
// still respawned), and SIGTERM stops it with exit status 0.
func TestForegroundMasterAsPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a pid namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux) to create a pid namespace")
	}
	in := newInstance(t, "")
	release := filepath.Join(in.prefix, "release")
	// The subshell starts the orphan-to-be and exits at once, so the kernel re-parents the
	// orphan to PID 1, which then becomes the master. The orphan exits when told.
	script := fmt.Sprintf(`(sh -c 'while [ ! -e %s ]; do sleep 0.05; done' &); exec %s start --foreground --no-stderr --workers 1 --prefix %s`,
		release, gwctl, in.prefix)
	// Never use the gwctl verbs here: the pid file says 1, this namespace's pid of the master.
	ns := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", script)
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- ns.Wait() }()
	t.Cleanup(func() {
		_ = ns.Process.Kill() // --kill-child: the master goes with it
		<-exited
	})
	if !waitFor(15*time.Second, func() bool {
		resp, err := freshConnections.Get("http://" + in.data + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatalf("the master never served; error.log:\n%s", lastLines(in.errorLog(), 10))
	}
	kids := children(ns.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("unshare's children: %v, want the master alone", kids)
	}
	master := kids[0]
	status := readFile(fmt.Sprintf("/proc/%d/status", master))
	if !strings.Contains(status, fmt.Sprintf("NSpid:\t%d\t1\n", master)) {
		t.Fatalf("master %d is not PID 1 of its namespace:\n%s", master, status)
	}

	var orphan, worker int
	for _, pid := range children(master) {
		if strings.Contains(readFile(fmt.Sprintf("/proc/%d/cmdline", pid)), "while") {
			orphan = pid
		} else {
			worker = pid
		}
	}
	if orphan == 0 || worker == 0 {
		t.Fatalf("master's children %v: want the adopted orphan and a worker", children(master))
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", orphan)); return err != nil }) {
		t.Fatalf("orphan %d never reaped: %s", orphan, readFile(fmt.Sprintf("/proc/%d/stat", orphan)))
	}

	// The worker's exit must still reach the master's respawn, not the orphan reaper.
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool {
		kids := children(master)
		return len(kids) == 1 && kids[0] != worker
	}) {
		t.Fatalf("killed worker %d not respawned: children %v; error.log:\n%s", worker, children(master), lastLines(in.errorLog(), 10))
	}
	if !waitFor(10*time.Second, func() bool {
		resp, err := freshConnections.Get("http://" + in.data + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatal("the respawned worker does not serve")
	}

	if err := syscall.Kill(master, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("master as PID 1 after SIGTERM: %v (want exit status 0); error.log:\n%s", err, lastLines(in.errorLog(), 10))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("master as PID 1 ignored SIGTERM")
	}
}

// ipv6Loopback skips a test on a machine without ::1.
func ipv6Loopback(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
}

// freePort6 returns a port free on ::1 that no free-port helper returned in this run.
func freePort6(t *testing.T) int {
	t.Helper()
	return handedOut.claim(t, func() (int, error) { return kernelPort("tcp6", "::1") })
}

// freePortBothFamilies returns a port free on 127.0.0.1 and on ::1 at once, that no
// free-port helper returned in this run.
func freePortBothFamilies(t *testing.T) int {
	t.Helper()
	return handedOut.claim(t, func() (int, error) {
		v6, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			return 0, err
		}
		defer v6.Close()
		port := v6.Addr().(*net.TCPAddr).Port
		v4, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return 0, nil // taken on 127.0.0.1: try another
		}
		v4.Close()
		return port, nil
	})
}

// startEcho serves on address and answers with body and the client headers the gateway
// sets, as X-Seen-*.
func startEcho(t *testing.T, address, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-X-Real-IP", r.Header.Get("X-Real-IP"))
		w.Header().Set("X-Seen-X-Forwarded-For", r.Header.Get("X-Forwarded-For"))
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// The data plane, the Admin API and the metrics server on ::1; a v6 client proxied to v4
// and v6 upstreams is named ::1 everywhere the client's address appears: X-Real-IP,
// X-Forwarded-For, remote_addrs, limit-count's remote_addr key and the access log.
func TestIPv6Listeners(t *testing.T) {
	ipv6Loopback(t)
	port := freePortBothFamilies(t)
	prefix := t.TempDir()
	in := &instance{
		t: t, prefix: prefix,
		data:    fmt.Sprintf("[::1]:%d", port),
		admin:   fmt.Sprintf("[::1]:%d", freePort6(t)),
		metrics: fmt.Sprintf("[::1]:%d", freePort6(t)),
	}
	v4data := fmt.Sprintf("127.0.0.1:%d", port)
	config := func(allow string) string {
		return fmt.Sprintf("node_listen:\n  - %q\n  - %q\nadmin:\n  listen: %q\n  allow: %s\nprometheus:\n  export_addr: %q\naccess_log:\n  flush_interval: 100ms\n",
			v4data, in.data, in.admin, allow, in.metrics)
	}
	in.writeConfig(config(`["127.0.0.0/8", "::1"]`))
	in.start("--workers", "1")

	up4 := startEcho(t, "127.0.0.1:0", "four")
	up6 := startEcho(t, "[::1]:0", "six")
	put := func(id, body string) {
		t.Helper()
		if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
			t.Fatalf("PUT route %s from ::1: %d %s", id, status, resp)
		}
	}
	put("v4", fmt.Sprintf(`{"uri":"/v4","upstream":{"nodes":{%q:1}}}`, up4))
	put("v6", fmt.Sprintf(`{"uri":"/v6","upstream":{"nodes":{%q:1}}}`, up6))
	put("mine", fmt.Sprintf(`{"uri":"/mine","remote_addrs":["::1/128"],"upstream":{"nodes":{%q:1}}}`, up4))
	put("ula", fmt.Sprintf(`{"uri":"/ula","remote_addrs":["fd00::/8"],"upstream":{"nodes":{%q:1}}}`, up4))
	put("lim", fmt.Sprintf(`{"uri":"/lim","plugins":{"limit-count":{"count":2,"time_window":60,"key":"remote_addr","rejected_code":503}},"upstream":{"nodes":{%q:1}}}`, up6))

	for _, c := range []struct {
		address, path, body, client string
	}{
		{in.data, "/v4", "four", "::1"},
		{in.data, "/v6", "six", "::1"},
		{v4data, "/v4", "four", "127.0.0.1"},
		{v4data, "/v6", "six", "127.0.0.1"},
	} {
		resp, body := getOn(t, c.address, c.path)
		if resp.StatusCode != 200 || body != c.body {
			t.Fatalf("GET %s%s: %d %q, want 200 %q", c.address, c.path, resp.StatusCode, body, c.body)
		}
		if got := resp.Header.Get("X-Seen-X-Real-IP"); got != c.client {
			t.Errorf("GET %s%s: upstream saw X-Real-IP %q, want %q", c.address, c.path, got, c.client)
		}
		if got := resp.Header.Get("X-Seen-X-Forwarded-For"); got != c.client {
			t.Errorf("GET %s%s: upstream saw X-Forwarded-For %q, want %q", c.address, c.path, got, c.client)
		}
	}
	for _, c := range []struct {
		address, path string
		want          int
	}{
		{in.data, "/mine", 200},
		{v4data, "/mine", 404},
		{in.data, "/ula", 404},
		{in.data, "/lim", 200},
		{in.data, "/lim", 200},
		{in.data, "/lim", 503},
		{v4data, "/lim", 200}, // another remote_addr, another window
	} {
		if resp, body := getOn(t, c.address, c.path); resp.StatusCode != c.want {
			t.Fatalf("GET %s%s: %d %s, want %d", c.address, c.path, resp.StatusCode, body, c.want)
		}
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.accessLog(), "::1 - - [") }) {
		t.Fatalf("no access log line naming ::1:\n%s", in.accessLog())
	}
	for _, l := range strings.Split(strings.TrimSpace(in.accessLog()), "\n") {
		if strings.Contains(l, "GET /v6 ") && !strings.HasPrefix(l, "::1 ") && !strings.HasPrefix(l, "127.0.0.1 ") {
			t.Errorf("access log line names no client: %q", l)
		}
	}

	// The data port's admin calls are for loopback peers, ::1 included.
	if resp, body := getOn(t, in.data, "/apisix/admin/routes/v6", "X-API-KEY", adminKey); resp.StatusCode != 200 {
		t.Fatalf("admin call on the v6 data port: %d %s", resp.StatusCode, body)
	}
	if resp, body := getOn(t, in.metrics, "/apisix/prometheus/metrics"); resp.StatusCode != 200 || !strings.Contains(body, "apisix_") {
		t.Fatalf("metrics on %s: %d %.200s", in.metrics, resp.StatusCode, body)
	}
	// admin.allow is what lets ::1 in: without it, 403.
	in.writeConfig(config(`["127.0.0.0/8"]`))
	if out, err := in.gwctl("reload"); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	if status, body := in.adminCall("GET", "/apisix/admin/routes", ""); status != 403 {
		t.Fatalf("admin call from ::1 with ::1 not in admin.allow: %d %s, want 403", status, body)
	}
}

// "[::]:p" is IPv6 only, as nginx's listen [::]:p (ipv6only=on): it starts while another
// process holds 127.0.0.1:p, and 0.0.0.0:q and [::]:q may both be listed.
func TestIPv6WildcardIsIPv6Only(t *testing.T) {
	ipv6Loopback(t)
	both, only6 := freePortBothFamilies(t), freePortBothFamilies(t)
	holder, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", only6))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	in := newInstance(t, "")
	in.writeConfig(fmt.Sprintf("node_listen:\n  - '0.0.0.0:%d'\n  - '[::]:%d'\n  - '[::]:%d'\nadmin:\n  listen: %q\n", both, both, only6, in.admin))
	in.start("--workers", "1")
	for _, address := range []string{
		fmt.Sprintf("127.0.0.1:%d", both), fmt.Sprintf("[::1]:%d", both), fmt.Sprintf("[::1]:%d", only6),
	} {
		if resp, _ := getOn(t, address, "/nothing-here"); resp.StatusCode != 404 || resp.Header.Get("Server") != "gw" {
			t.Errorf("GET %s: %d from %q, want gw's 404", address, resp.StatusCode, resp.Header.Get("Server"))
		}
	}
}

// A worker user who cannot enter the prefix fails the start with the reason, not a bare
// "permission denied".
func TestUserWhoCannotEnterThePrefix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a master started as root can run its workers as another user")
	}
	in := newInstance(t, "user: nobody\n")
	if err := os.Chmod(in.prefix, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := in.gwctl("start", "--workers", "1")
	if err == nil {
		in.stop()
		t.Fatalf("started with a prefix nobody cannot enter: %s", out)
	}
	if want := `workers run as user "nobody", who must be able to enter the prefix ` + in.prefix; !strings.Contains(out, want) {
		t.Fatalf("start failed with %q, want it to say %q", out, want)
	}
}

// The gwctl that `make build` makes has both changes of tools/runtime-overlay.sh, and says
// so: it serves a batch of ready connections in the order they became ready, and its
// monitor thread keeps its pace after a system call. A build without them fails here.
func TestVersionReportsTheRuntimeChanges(t *testing.T) {
	out, err := exec.Command(gwctl, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("gwctl --version: %v\n%s", err, out)
	}
	for _, want := range []string{"gwctl version itest\n", "poller order: readiness order\n", "monitor after a system call: keeps its pace ("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gwctl --version does not say %q:\n%s", want, out)
		}
	}
}
