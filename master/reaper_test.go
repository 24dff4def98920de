package master

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseZombieStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 0 0" // fields 5-21, then starttime (22)
	tests := []struct {
		name  string
		stat  string
		want  zombie
		found bool
	}{
		{"zombie child", "17 (sleep) Z 9" + tail, zombie{pid: 17, startTime: 4242}, true},
		{"name with spaces and parens", "17 (a (b) c) Z 9" + tail, zombie{pid: 17, startTime: 4242}, true},
		{"running child", "17 (sleep) S 9" + tail, zombie{}, false},
		{"zombie of another parent", "17 (sleep) Z 10" + tail, zombie{}, false},
		{"parent's pid as a prefix", "17 (sleep) Z 99" + tail, zombie{}, false},
		{"truncated", "17 (sleep) Z 9 0 0", zombie{}, false},
		{"no name", "17 sleep Z 9" + tail, zombie{}, false},
		{"bad start time", "17 (sleep) Z 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 x 0 0", zombie{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := parseZombieStat(17, []byte(tt.stat), 9)
			if got != tt.want || found != tt.found {
				t.Fatalf("parseZombieStat(%q) = %+v %t, want %+v %t", tt.stat, got, found, tt.want, tt.found)
			}
		})
	}
}

// zombieChild starts a child nobody waits for and returns once it has exited.
func zombieChild(t *testing.T) int {
	t.Helper()
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = syscall.Wait4(pid, nil, syscall.WNOHANG, nil) })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if z, ok := readZombie(pid); ok && z.pid == pid {
			return pid
		}
	}
	t.Fatalf("child %d never became a zombie", pid)
	return 0
}

func readZombie(pid int) (zombie, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return zombie{}, false
	}
	return parseZombieStat(pid, stat, os.Getpid())
}

// The reaper takes a zombie nobody claims once it has waited orphanGrace, and never one
// it is told is a worker.
func TestReaperSweep(t *testing.T) {
	orphan, worker := zombieChild(t), zombieChild(t)
	r := &reaper{self: os.Getpid(), isOwn: func(pid int) bool { return pid == worker }, logf: t.Logf, pending: map[zombie]time.Time{}}
	now := time.Now()
	if wait := r.sweep(now); wait != orphanGrace {
		t.Fatalf("first sweep: next in %v, want %v", wait, orphanGrace)
	}
	if _, ok := readZombie(orphan); !ok {
		t.Fatal("orphan reaped before its grace")
	}
	if wait := r.sweep(now.Add(orphanGrace / 4)); wait != orphanGrace*3/4 {
		t.Fatalf("second sweep: next in %v, want %v", wait, orphanGrace*3/4)
	}
	if wait := r.sweep(now.Add(orphanGrace)); wait != 0 {
		t.Fatalf("sweep after the grace: next in %v, want 0 (none pending)", wait)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(orphan)); err == nil {
		t.Fatalf("orphan %d still there after its grace", orphan)
	}
	if _, ok := readZombie(worker); !ok {
		t.Fatal("the reaper took a worker's exit status")
	}
	if len(r.pending) != 0 {
		t.Fatalf("pending %v after the reap", r.pending)
	}
}

// BenchmarkZombieChildren is the cost of one sweep's /proc scan, paid on each SIGCHLD.
func BenchmarkZombieChildren(b *testing.B) {
	self := os.Getpid()
	for b.Loop() {
		zombieChildren(self)
	}
}

// The reaper runs only where orphans come: PID 1, or a child subreaper.
func TestAdoptsOrphans(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("the test runs as PID 1")
	}
	if adoptsOrphans() {
		t.Skip("the test process is already a child subreaper")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	if !adoptsOrphans() {
		t.Fatal("a child subreaper does not count as adopting orphans")
	}
}
