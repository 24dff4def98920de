package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForegroundSaysWhereItListens: `gwctl start --foreground` (make run, a container)
// writes the daemon form's "gw started: ... listen=..." line to stderr once it serves.
func TestForegroundSaysWhereItListens(t *testing.T) {
	in := newInstance(t, "")
	fg := exec.Command(gwctl, "start", "--foreground", "--workers", "1", "--prefix", in.prefix)
	stderr, err := fg.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fg.Process.Signal(syscall.SIGTERM)
		fg.Wait()
	}()
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	want := "listen=" + in.data + " admin=" + in.admin
	deadline := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("stderr ended without the start line; it said:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			if strings.HasPrefix(line, "gw started: pid=") && strings.Contains(line, "workers=1 "+want) {
				return
			}
		case <-deadline:
			t.Fatalf("no \"gw started: ... %s\" on stderr within 60s; it said:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// TestReloadSaysTheWorkersFlagWins: `gwctl start --workers 1` holds for the master's life,
// so a reload of a file with worker_processes: 2 keeps one worker and says why.
func TestReloadSaysTheWorkersFlagWins(t *testing.T) {
	in := newInstance(t, "worker_processes: 2\n")
	in.start("--workers", "1")
	out, err := in.gwctl("reload")
	if err != nil {
		t.Fatalf("gwctl reload: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1 workers (the --workers 1 this master was started with wins over worker_processes 2 in ") {
		t.Errorf("gwctl reload said %q; want it to say that --workers 1 wins over worker_processes 2", out)
	}
}

// TestMakeInstall: `make install` with DESTDIR, PREFIX and GW_HOME puts the binary, the
// shipped config and the systemd unit (naming those paths) in place, and a second install
// keeps a config the user changed.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make: apt-get install make")
	}
	dest := t.TempDir()
	install := func() {
		t.Helper()
		cmd := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/opt/gw", "GW_HOME=/srv/gw", "SYSTEMD_UNIT_DIR=/lib/systemd/system")
		out, err := runWithin(cmd, 10*time.Minute)
		if err != nil {
			t.Fatalf("make install: %v\n%s", err, lastLines(out, 20))
		}
	}
	install()
	version, err := exec.Command(filepath.Join(dest, "opt/gw/bin/gwctl"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(version), "gwctl version ") {
		t.Errorf("the installed gwctl --version: %v %q", err, version)
	}
	shipped, _ := os.ReadFile("../conf/config.yaml")
	config := filepath.Join(dest, "srv/gw/conf/config.yaml")
	if got, err := os.ReadFile(config); err != nil || !bytes.Equal(got, shipped) {
		t.Errorf("installed config.yaml is not the shipped one: %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(dest, "lib/systemd/system/gw.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart=/opt/gw/bin/gwctl start --prefix /srv/gw\n") ||
		!strings.Contains(string(unit), "PIDFile=/srv/gw/logs/gwctl.pid\n") || strings.Contains(string(unit), "/var/lib/gw") {
		t.Errorf("installed unit does not name /opt/gw/bin/gwctl and /srv/gw: %v\n%s", err, unit)
	}
	if err := os.WriteFile(config, []byte("worker_processes: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	install()
	if got, _ := os.ReadFile(config); string(got) != "worker_processes: 2\n" {
		t.Errorf("a second make install replaced the user's config.yaml with:\n%s", lastLines(string(got), 3))
	}
}
