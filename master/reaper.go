package master

import (
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// orphanGrace is how long a zombie child must stay unreaped before the reaper takes it.
// A child somebody waits for (a worker's exec.Cmd.Wait, tableflip's wait on a new master)
// is collected within microseconds of its exit by a goroutine already blocked in wait;
// a second is a margin of several orders of magnitude on a loaded machine.
const orphanGrace = time.Second

// reaper collects the master's zombie children that nobody waits for. As PID 1 in a
// container (`gwctl start --foreground` as the entrypoint), or as a child subreaper, the
// master adopts every orphaned process of its namespace, and a child it inherited at exec
// (`sh -c 'job & exec gwctl start --foreground'`) is its own too; none of them has a
// waiter, so without this they stay zombies for the container's life.
//
// It must never take an exit status its owner waits for: the workers' statuses drive
// respawn, and tableflip learns from its own wait that a new master died. So it skips the
// workers it knows, and takes any other zombie only once it has stayed a zombie for
// orphanGrace. It runs on SIGCHLD, reading /proc, which must be the master's own pid
// namespace's (as every container runtime mounts it).
type reaper struct {
	self    int
	isOwn   func(pid int) bool // the workers, waited for by their own goroutines
	logf    func(format string, args ...any)
	pending map[zombie]time.Time // unclaimed zombies, by when first seen
}

// zombie names a process across pid reuse.
type zombie struct {
	pid       int
	startTime uint64 // clock ticks after boot, /proc/<pid>/stat field 22
}

// startReaper runs the reaper until the returned stop is called, when the master adopts
// orphans: as PID 1 or a child subreaper. Otherwise orphans go to init and no sweep is
// worth its /proc scan (BenchmarkZombieChildren).
func (m *Master) startReaper() (stop func()) {
	if !adoptsOrphans() {
		return func() {}
	}
	r := &reaper{self: os.Getpid(), isOwn: m.sup.tracks, logf: m.log.Debugf, pending: map[zombie]time.Time{}}
	done := make(chan struct{})
	go r.run(done)
	return func() { close(done) }
}

func adoptsOrphans() bool {
	if os.Getpid() == 1 {
		return true
	}
	var subreaper int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&subreaper)), 0, 0, 0)
	return err == nil && subreaper != 0
}

func (r *reaper) run(done <-chan struct{}) {
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)
	retry := time.NewTimer(0) // a first sweep for zombies that came before the handler
	defer retry.Stop()
	for {
		select {
		case <-done:
			return
		case <-sigchld:
		case <-retry.C:
		}
		if wait := r.sweep(time.Now()); wait > 0 {
			retry.Reset(wait)
		}
	}
}

// sweep reaps the zombies that have waited orphanGrace and returns how long until the
// next pending one has; 0 when none is pending.
func (r *reaper) sweep(now time.Time) time.Duration {
	seen := map[zombie]bool{}
	var next time.Duration
	for _, z := range zombieChildren(r.self) {
		if r.isOwn(z.pid) {
			continue
		}
		seen[z] = true
		first, ok := r.pending[z]
		if !ok {
			r.pending[z] = now
			first = now
		}
		if left := orphanGrace - now.Sub(first); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		var status unix.WaitStatus
		if pid, err := unix.Wait4(z.pid, &status, unix.WNOHANG, nil); err == nil && pid == z.pid {
			r.logf("reaped process %d, an orphaned child nobody waited for: exit status %d", z.pid, status.ExitStatus())
		}
		delete(r.pending, z)
	}
	for z := range r.pending {
		if !seen[z] {
			delete(r.pending, z) // reaped by its owner, or by us
		}
	}
	return next
}

// zombieChildren lists parent's children that have exited and are not yet reaped.
func zombieChildren(parent int) []zombie {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var zombies []zombie
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if z, ok := parseZombieStat(pid, stat, parent); ok {
			zombies = append(zombies, z)
		}
	}
	return zombies
}

// parseZombieStat reads /proc/<pid>/stat: it is a zombie child of parent when its state
// is Z and its ppid is parent. The command name in parentheses may hold spaces and
// parentheses, so the fields are counted after the last ')'.
func parseZombieStat(pid int, stat []byte, parent int) (zombie, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return zombie{}, false
	}
	// After the name: state (field 3), ppid (4), ..., starttime (22).
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 || fields[0] != "Z" || fields[1] != strconv.Itoa(parent) {
		return zombie{}, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return zombie{}, false
	}
	return zombie{pid: pid, startTime: start}, true
}
