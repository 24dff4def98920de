package integration

import (
	"bufio"
	"os/exec"
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

