package master

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestProcessRunsUntilExited(t *testing.T) {
	if !processRuns(syscall.Getpid()) {
		t.Fatal("this test's own process does not run")
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	if !processRuns(pid) {
		t.Fatalf("a sleeping child %d does not run", pid)
	}
	child.Process.Kill()
	// Killed and not yet reaped: a zombie, which has exited.
	deadline := time.Now().Add(10 * time.Second)
	for processRuns(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("killed child %d still runs (not a zombie) after 10s", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("child %d was reaped: the zombie case went untested", pid)
	}
	child.Wait()
	if processRuns(pid) {
		t.Fatalf("reaped child %d still runs", pid)
	}
}
