package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// builds holds extra gwctl builds for the upgrade tests, made once.
var builds struct {
	once          sync.Once
	v2, newLayout string
	err           error
}

func upgradeBuilds(t *testing.T) (v2, newLayout string) {
	t.Helper()
	builds.once.Do(func() {
		dir := filepath.Dir(gwctl)
		builds.v2 = filepath.Join(dir, "gwctl-v2")
		builds.newLayout = filepath.Join(dir, "gwctl-newlayout")
		for _, b := range []struct{ out, ldflags string }{
			{builds.v2, "-X main.version=itest-v2"},
			{builds.newLayout, "-X main.version=itest-v3 -X gw/shm.layoutEpoch=1"},
		} {
			args := append(append([]string{"build"}, buildFlags...), "-o", b.out, "-ldflags", b.ldflags, "../cmd/gwctl")
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				builds.err = fmt.Errorf("go build %s: %v\n%s", b.ldflags, err, out)
				return
			}
		}
	})
	if builds.err != nil {
		t.Fatal(builds.err)
	}
	return builds.v2, builds.newLayout
}

// installBinary puts src at the instance's binary path the way a package manager does:
// a new file renamed over the old, so the running binary is never written to.
func (in *instance) installBinary(src string) {
	in.t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		in.t.Fatal(err)
	}
	tmp := in.bin + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		in.t.Fatal(err)
	}
	if err := os.Rename(tmp, in.bin); err != nil {
		in.t.Fatal(err)
	}
}

// newUpgradableInstance runs from its own copy of gwctl under the prefix, so tests can
// replace it.
func newUpgradableInstance(t *testing.T) *instance {
	in := newInstance(t, "error_log_level: info\n")
	in.bin = filepath.Join(in.prefix, "bin", "gwctl")
	os.MkdirAll(filepath.Dir(in.bin), 0o755)
	in.installBinary(gwctl)
	return in
}

type statusVersion struct {
	PID     int
	Version string
}

func (in *instance) version() statusVersion {
	in.t.Helper()
	s := in.status()
	out, _ := in.gwctl("status", "--json")
	var v statusVersion
	v.PID = s.PID
	if i := strings.Index(out, `"Version": "`); i >= 0 {
		rest := out[i+len(`"Version": "`):]
		v.Version = rest[:strings.IndexByte(rest, '"')]
	}
	return v
}

// Upgrades under load, there and back and again, with clients that never retry: not one
// request fails, and the counters in shared memory carry on.
func TestUpgradesUnderLoadFailNothingAndKeepCounters(t *testing.T) {
	v2, _ := upgradeBuilds(t)
	up := startUpstream(t, "ok")
	in := newUpgradableInstance(t)
	in.start("--workers", "2")
	status, body := in.adminCall("PUT", "/apisix/admin/routes/1", fmt.Sprintf(
		`{"uri":"/up","plugins":{"prometheus":{}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	if status != 201 {
		t.Fatalf("PUT: %d %s", status, body)
	}
	for i := 0; i < 50; i++ {
		in.get("/up")
	}
	before := in.statusSum("/up")

	keepAlive := startLoad(in.data, "/up", 6, true)
	fresh := startLoad(in.data, "/up", 6, false)
	first := in.version()
	binaries := []string{v2, gwctl, v2}
	versions := []string{"itest-v2", "itest", "itest-v2"}
	for i, bin := range binaries {
		time.Sleep(300 * time.Millisecond)
		in.installBinary(bin)
		out, err := in.gwctl("upgrade")
		if err != nil {
			t.Fatalf("upgrade %d: %v\n%s\n%s", i+1, err, out, lastLines(in.errorLog(), 15))
		}
		got := in.version()
		if got.Version != versions[i] || got.PID == first.PID {
			t.Fatalf("after upgrade %d: master %+v, want version %s and a new pid", i+1, got, versions[i])
		}
		first = got
	}
	time.Sleep(300 * time.Millisecond)
	ka, fr := keepAlive.finish(), fresh.finish()
	if keepAlive.failed.Load() != 0 || fresh.failed.Load() != 0 {
		t.Fatalf("failures across upgrades: keep-alive %s; new connections %s", ka, fr)
	}
	t.Logf("keep-alive %s; new connections %s", ka, fr)

	// Every request counted before and during the upgrades is still counted after them.
	want := before + keepAlive.ok.Load() + fresh.ok.Load()
	if got := in.statusSum("/up"); got != want {
		t.Fatalf("apisix_http_status sum after upgrades = %d, want %d (before %d)", got, want, before)
	}
	// A limit-count window carries on across an upgrade: no reset.
	status, body = in.adminCall("PUT", "/apisix/admin/routes/limited", fmt.Sprintf(
		`{"uri":"/limited","plugins":{"limit-count":{"count":1000000,"time_window":3600}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	if status != 201 {
		t.Fatalf("PUT limited: %d %s", status, body)
	}
	for i := 0; i < 10; i++ {
		in.get("/limited")
	}
	in.installBinary(v2)
	if out, err := in.gwctl("upgrade"); err != nil {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	if r, _ := in.get("/limited"); r.Header.Get("X-RateLimit-Remaining") != "999989" {
		t.Fatalf("X-RateLimit-Remaining after the upgrade = %q, want 999989 (the window must carry on)", r.Header.Get("X-RateLimit-Remaining"))
	}

	// A route written right before an upgrade is served right after it.
	in.putRoute("2", "/fresh", up.addr)
	in.installBinary(gwctl)
	if out, err := in.gwctl("upgrade"); err != nil {
		t.Fatalf("upgrade: %v %s", err, out)
	}
	if r, b := in.get("/fresh"); r.StatusCode != 200 || b != "ok" {
		t.Fatalf("route written before the upgrade: %d %q", r.StatusCode, b)
	}
}

// statusSum scrapes the master and adds up apisix_http_status for one route's uri.
func (in *instance) statusSum(uri string) int64 {
	in.t.Helper()
	_, text := getOn(in.t, in.metrics, "/apisix/prometheus/metrics")
	var sum int64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "apisix_http_status{") && strings.Contains(line, `matched_uri="`+uri+`"`) {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += int64(v)
		}
	}
	return sum
}

// A new binary that exits at once, one that never becomes ready, and one whose
// shared-memory layout differs all leave the old master serving, and say why.
func TestFailedUpgradesLeaveTheOldMasterServing(t *testing.T) {
	_, newLayout := upgradeBuilds(t)
	up := startUpstream(t, "still v1")
	in := newUpgradableInstance(t)
	in.start("--workers", "2", "--upgrade-timeout", "3s")
	in.putRoute("1", "/v", up.addr)
	original := in.version()

	broken := filepath.Join(t.TempDir(), "broken")
	os.WriteFile(broken, []byte("#!/bin/sh\necho 'broken build: cannot start' >&2\nexit 1\n"), 0o755)
	slow := filepath.Join(t.TempDir(), "slow")
	os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755)

	cases := []struct {
		name, bin, reason string
	}{
		{"exits at start", broken, "broken build"},
		{"never ready", slow, "timed out"},
		{"another shm layout", newLayout, "layout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in.installBinary(tc.bin)
			load := startLoad(in.data, "/v", 4, false)
			out, err := in.gwctl("upgrade")
			summary := load.finish()
			if err == nil || !strings.Contains(out, tc.reason) {
				t.Fatalf("upgrade to a binary that %s: err=%v, output %q lacks %q", tc.name, err, out, tc.reason)
			}
			if load.failed.Load() != 0 {
				t.Fatalf("requests failed during the failed upgrade: %s", summary)
			}
			in.installBinary(gwctl)
			if now := in.version(); now != original {
				t.Fatalf("master changed: %+v, was %+v", now, original)
			}
			if r, b := in.get("/v"); r.StatusCode != 200 || b != "still v1" {
				t.Fatalf("serving after the failed upgrade: %d %q", r.StatusCode, b)
			}
			status, body := in.adminCall("PUT", "/apisix/admin/routes/w", fmt.Sprintf(`{"uri":"/w","upstream":{"nodes":{%q:1}}}`, up.addr))
			if status != 200 && status != 201 {
				t.Fatalf("Admin API writes after the failed upgrade: %d %s", status, body)
			}
		})
	}
}

// processArgs is what ps -o args shows for pid: its argv, from /proc/pid/cmdline.
func processArgs(t *testing.T, pid int) []string {
	t.Helper()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
}

// checkTitles wants the master titled "gw: master process", followed by the arguments it
// runs with, and each of its workers "gw: worker process", as nginx titles its processes.
func (in *instance) checkTitles(when string) {
	in.t.Helper()
	master := in.masterPID()
	args := processArgs(in.t, master)
	rest := strings.Join(args[1:], " ")
	if args[0] != "gw: master process" || !strings.HasPrefix(rest, "start --foreground ") || !strings.Contains(rest, " --prefix "+in.prefix) {
		in.t.Errorf("%s: master %d shows %q, want \"gw: master process start --foreground ... --prefix %s ...\"", when, master, args, in.prefix)
	}
	workers := children(master)
	if len(workers) == 0 {
		in.t.Errorf("%s: master %d has no workers", when, master)
	}
	for _, pid := range workers {
		if args := processArgs(in.t, pid); args[0] != "gw: worker process" {
			in.t.Errorf("%s: worker %d shows %q, want \"gw: worker process ...\"", when, pid, args)
		}
	}
}

// A master started by an upgrade shows the same title as one gwctl start began, and is
// itself upgradable (its retitling kept the hand-over's descriptors); so is a master
// started in the foreground by hand.
func TestUpgradedMasterKeepsTheProcessTitle(t *testing.T) {
	v2, _ := upgradeBuilds(t)
	up := startUpstream(t, "ok")
	in := newUpgradableInstance(t)
	in.start("--workers", "1")
	in.putRoute("1", "/t", up.addr)
	in.checkTitles("after gwctl start")
	for i, bin := range []string{v2, gwctl} {
		before := in.masterPID()
		in.installBinary(bin)
		if out, err := in.gwctl("upgrade"); err != nil {
			t.Fatalf("upgrade %d: %v\n%s\n%s", i+1, err, out, lastLines(in.errorLog(), 15))
		}
		if in.masterPID() == before {
			t.Fatalf("upgrade %d: the master is still %d", i+1, before)
		}
		in.checkTitles(fmt.Sprintf("after upgrade %d", i+1))
		if r, b := in.get("/t"); r.StatusCode != 200 || b != "ok" {
			t.Fatalf("after upgrade %d: %d %q", i+1, r.StatusCode, b)
		}
	}
	in.stop()

	fg := exec.Command(in.bin, "start", "--foreground", "--no-stderr", "--workers", "1", "--prefix", in.prefix)
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fg.Process.Kill(); _ = fg.Wait() })
	pidFile := filepath.Join(in.prefix, "logs", "gwctl.pid")
	if !waitFor(15*time.Second, func() bool { return strings.TrimSpace(readFile(pidFile)) == fmt.Sprint(fg.Process.Pid) }) {
		t.Fatalf("the foreground master %d never wrote its pid file; error.log:\n%s", fg.Process.Pid, lastLines(in.errorLog(), 10))
	}
	in.checkTitles("in the foreground")
}
