package master

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Paths are the files of one gateway instance, all under its prefix, as nginx keeps its
// files under -p.
type Paths struct {
	Prefix      string
	Config      string // conf/config.yaml
	Logs        string // logs/
	PIDFile     string // logs/gwctl.pid: the master's pid, how every gwctl verb finds it
	ErrorLog    string // logs/error.log
	AdminSocket string // logs/admin.sock: workers forward data-port admin calls here
	LockFile    string // logs/gwctl.lock: held (flock) by the live master for its whole life
	// ControlSocket is where gwctl asks the master to reload, quit or report status and
	// waits for the outcome.
	ControlSocket string // logs/gwctl.sock
}

// PathsFor lays out the files under prefix.
func PathsFor(prefix string) (Paths, error) {
	abs, err := filepath.Abs(prefix)
	if err != nil {
		return Paths{}, fmt.Errorf("prefix %q: %w", prefix, err)
	}
	logs := filepath.Join(abs, "logs")
	return Paths{
		Prefix:        abs,
		Config:        filepath.Join(abs, "conf", "config.yaml"),
		Logs:          logs,
		PIDFile:       filepath.Join(logs, "gwctl.pid"),
		ErrorLog:      filepath.Join(logs, "error.log"),
		AdminSocket:   filepath.Join(logs, "admin.sock"),
		LockFile:      filepath.Join(logs, "gwctl.lock"),
		ControlSocket: filepath.Join(logs, "gwctl.sock"),
	}, nil
}

// DataDir resolves the configured data directory against the prefix.
func (p Paths) DataDir(configured string) string {
	if filepath.IsAbs(configured) {
		return configured
	}
	return filepath.Join(p.Prefix, configured)
}

// ErrNotRunning says the pid file names no master.
var ErrNotRunning = errors.New("gw is not running")

// RunningMaster reads the pid file and returns the master's pid when that process is alive
// and is a gw master of this prefix. A stale pid file (no such process, or somebody else's)
// is reported as such and never signalled.
func (p Paths) RunningMaster() (int, error) {
	data, err := os.ReadFile(p.PIDFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w (no pid file %s)", ErrNotRunning, p.PIDFile)
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%w: pid file %s holds %q, not a pid", ErrNotRunning, p.PIDFile, strings.TrimSpace(string(data)))
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return 0, fmt.Errorf("%w: stale pid file %s: no process %d", ErrNotRunning, p.PIDFile, pid)
	}
	if !p.lockHeld() {
		return 0, fmt.Errorf("%w: stale pid file %s: process %d does not hold %s", ErrNotRunning, p.PIDFile, pid, p.LockFile)
	}
	return pid, nil
}

// lockHeld tells whether some process holds the instance lock. A pid alone proves nothing
// (pids are reused); the lock dies with the master however it died.
func (p Paths) lockHeld() bool {
	f, err := os.Open(p.LockFile)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// lockInstance takes the instance lock or says which master holds it.
func (p Paths) lockInstance() (*os.File, error) {
	f, err := os.OpenFile(p.LockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		pid, _ := os.ReadFile(p.PIDFile)
		return nil, fmt.Errorf("gw is already running in %s (pid %s)", p.Prefix, strings.TrimSpace(string(pid)))
	}
	return f, nil
}

// WaitGone blocks until master pid has exited and no master holds the instance lock, or
// timeout passes. Both are watched: the master drops the lock a moment before it exits, and
// a new master may hold it under another pid. An exited master that nobody has reaped yet
// still has a pid, as a zombie, and counts as gone.
func (p Paths) WaitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.lockHeld() || processRuns(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// processRuns reports whether pid is a process that has not exited: it exists and is not a
// zombie.
func processRuns(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // gone between the two looks
	}
	// The state follows the command name, which is in parentheses and may hold anything.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}
