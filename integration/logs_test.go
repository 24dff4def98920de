package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func (in *instance) accessLog() string {
	return readFile(filepath.Join(in.prefix, "logs", "access.log"))
}

// The access log through real workers: nginx's combined format by default, one line per
// request, flushed within flush_interval, reopened with the error log.
func TestAccessLogCombinedAndReopen(t *testing.T) {
	up := startUpstream(t, "logged")
	in := newInstance(t, "access_log:\n  flush_interval: 200ms\n")
	in.start("--workers", "2")
	in.putRoute("1", "/logged", up.addr)
	for i := 0; i < 5; i++ {
		in.get("/logged?i="+fmt.Sprint(i), "User-Agent", "it/1.0", "Referer", "http://ref.test/")
	}
	in.get("/missing")
	combined := regexp.MustCompile(`^127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /logged\?i=\d HTTP/1\.1" 200 6 "http://ref\.test/" "it/1\.0"$`)
	if !waitFor(5*time.Second, func() bool { return strings.Count(in.accessLog(), "\n") >= 6 }) {
		t.Fatalf("access log after 6 requests:\n%s", in.accessLog())
	}
	lines := strings.Split(strings.TrimSpace(in.accessLog()), "\n")
	matched, missing := 0, 0
	for _, l := range lines {
		switch {
		case combined.MatchString(l):
			matched++
		case strings.Contains(l, `"GET /missing HTTP/1.1" 404 `):
			missing++
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	if matched != 5 || missing != 1 {
		t.Fatalf("%d proxied and %d 404 lines, want 5 and 1:\n%s", matched, missing, in.accessLog())
	}

	path := filepath.Join(in.prefix, "logs", "access.log")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if out, err := in.gwctl("reopen"); err != nil {
		t.Fatalf("reopen: %v %s", err, out)
	}
	in.get("/logged?after=reopen")
	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.accessLog(), "after=reopen") }) {
		t.Fatalf("no line in the new access.log after reopen; old file ends:\n%s", lastLines(readFile(path+".1"), 3))
	}
	if strings.Contains(readFile(path+".1"), "after=reopen") {
		t.Fatal("the line after reopen went to the rotated file")
	}
}

func TestAccessLogJSONAndOff(t *testing.T) {
	up := startUpstream(t, "j")
	in := newInstance(t, "access_log:\n  format: json\n  buffer: 0\n")
	in.start("--workers", "1")
	in.putRoute("r1", "/j", up.addr)
	in.get("/j")
	if !waitFor(5*time.Second, func() bool { return strings.Contains(in.accessLog(), `"/j"`) }) {
		t.Fatalf("json access log: %q", in.accessLog())
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(in.accessLog())), &entry); err != nil {
		t.Fatalf("not one JSON object per line: %v\n%s", err, in.accessLog())
	}
	if entry["status"] != float64(200) || entry["route_id"] != "r1" || entry["upstream_addr"] != up.addr {
		t.Fatalf("json entry %v", entry)
	}

	off := newInstance(t, "access_log:\n  enabled: false\n")
	off.start("--workers", "1")
	off.get("/nothing")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(off.prefix, "logs", "access.log")); !os.IsNotExist(err) {
		t.Fatalf("access log written while disabled: %v", err)
	}
}

// Every worker killed at once: each slot is refilled, at once and in the same slot.
func TestAllWorkersKilledAtOnceAreReplaced(t *testing.T) {
	up := startUpstream(t, "back")
	in := newInstance(t, "")
	in.start("--workers", "3")
	in.putRoute("1", "/b", up.addr)
	before := in.status()
	for _, w := range before.Workers {
		syscall.Kill(w.PID, syscall.SIGKILL)
	}
	killed := time.Now()
	if !waitFor(5*time.Second, func() bool {
		kids := children(in.masterPID())
		if len(kids) != 3 {
			return false
		}
		for _, k := range kids {
			for _, w := range before.Workers {
				if k == w.PID {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("workers not replaced: %v", children(in.masterPID()))
	}
	if d := time.Since(killed); d > time.Second {
		t.Errorf("replacing 3 workers took %v", d)
	}
	// The processes exist; each slot is filled once its worker reports ready.
	var after statusReport
	if !waitFor(5*time.Second, func() bool {
		after = in.status()
		slots := map[int]bool{}
		for _, w := range after.Workers {
			if w.State == "ready" {
				slots[w.Slot] = true
			}
		}
		return len(slots) == 3
	}) {
		t.Fatalf("slots after respawn: %+v", after.Workers)
	}
	if r, body := in.get("/b"); r.StatusCode != 200 || body != "back" {
		t.Fatalf("after respawn: %d %q", r.StatusCode, body)
	}
}

// A reload can move the data plane to another address: the new one serves, the old one
// stops accepting.
func TestReloadChangesListenAddresses(t *testing.T) {
	up := startUpstream(t, "moved")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("1", "/m", up.addr)
	second := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in.writeConfig(fmt.Sprintf("node_listen: [%q, %q]\nadmin:\n  listen: %q\n", in.data, second, in.admin))
	in.reload()
	for _, addr := range []string{in.data, second} {
		if r, body := getOn(t, addr, "/m"); r.StatusCode != 200 || body != "moved" {
			t.Fatalf("%s after adding it: %d %q", addr, r.StatusCode, body)
		}
	}
	in.writeConfig(fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: %q\n", second, in.admin))
	in.reload()
	if r, body := getOn(t, second, "/m"); r.StatusCode != 200 || body != "moved" {
		t.Fatalf("%s after removing the first: %d %q", second, r.StatusCode, body)
	}
	old := in.data
	if !waitFor(5*time.Second, func() bool {
		c, err := freshConnections.Get("http://" + old + "/m")
		if err == nil {
			c.Body.Close()
		}
		return err != nil
	}) {
		t.Fatalf("%s still accepts after it was removed from node_listen", old)
	}
}
