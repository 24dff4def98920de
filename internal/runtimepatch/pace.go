package runtimepatch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pace is what the runtime's monitor thread (sysmon) does when a system call wakes it
// from its deep sleep: stock Go restarts it at a 20 µs period, which on a busy one-CPU
// worker means a few dozen extra wake-ups after every accept or dial; gwctl's build keeps
// its pace (tools/runtime-overlay.sh).
type Pace int

const (
	// PaceUnclear: between the two, as when the machine is too busy to tell; measure again.
	PaceUnclear Pace = iota
	// PaceKept: the monitor goes on at the period it had.
	PaceKept
	// PaceRestarted: the monitor restarts at 20 µs (stock Go).
	PaceRestarted
)

func (p Pace) String() string {
	switch p {
	case PaceKept:
		return "keeps its pace"
	case PaceRestarted:
		return "restarts fast (stock Go)"
	}
	return "unclear"
}

// PaceWindow is how long MeasurePace keeps the processor busy after the system call: the
// stock monitor woke about 60 times in it on the development machine, the kept one 3 to
// 5 times.
const PaceWindow = 30 * time.Millisecond

// MeasurePace keeps the processor busy until the monitor has slowed down, lets the
// process go idle until the monitor sleeps deeply, wakes it with system calls made the way
// net makes them (reading /proc for the count, then getpid), then keeps the one processor
// busy for PaceWindow and counts how often the other threads (the monitor, in practice)
// woke meanwhile: woke. It runs with GOMAXPROCS at 1, restoring the previous setting,
// takes about 150 ms, and is not meant to run beside other work of the process.
func MeasurePace() (pace Pace, woke int, err error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// Busy first, so that the monitor slows down to its longest period as it does under
	// load (it starts a process at its shortest).
	busy(settleMonitor)
	// Then idle with no Go timer pending, so that the monitor's deep sleep is a long one:
	// woken by a timerfd through the poller.
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return PaceUnclear, 0, fmt.Errorf("runtimepatch: timerfd_create: %w", err)
	}
	timer := os.NewFile(uintptr(tfd), "timerfd")
	defer timer.Close()
	due := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(60 * time.Millisecond))}
	if err := unix.TimerfdSettime(tfd, 0, &due, nil); err != nil {
		return PaceUnclear, 0, fmt.Errorf("runtimepatch: timerfd_settime: %w", err)
	}
	var expirations [8]byte
	if _, err := timer.Read(expirations[:]); err != nil {
		return PaceUnclear, 0, fmt.Errorf("runtimepatch: reading the timerfd: %w", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self := unix.Gettid()
	before, err := otherThreadsWakeups(self)
	if err != nil {
		return PaceUnclear, 0, err
	}
	syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0) // through the runtime's bookkeeping, as net's calls are
	busy(PaceWindow)
	after, err := otherThreadsWakeups(self)
	if err != nil {
		return PaceUnclear, 0, err
	}
	woke = after - before
	switch {
	case woke <= 12:
		return PaceKept, woke, nil
	case woke >= 40:
		return PaceRestarted, woke, nil
	}
	return PaceUnclear, woke, nil
}

// SettledPace measures up to three times, until a measurement is not PaceUnclear.
func SettledPace() (p Pace, woke int, err error) {
	for range 3 {
		if p, woke, err = MeasurePace(); err != nil || p != PaceUnclear {
			break
		}
	}
	return p, woke, err
}

// settleMonitor is long enough for the monitor's period to grow from 20 µs to 10 ms.
const settleMonitor = 60 * time.Millisecond

// busy keeps the processor busy in Go code for d.
func busy(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// otherThreadsWakeups sums the voluntary context switches of the process's threads but
// self: each is a sleep that ended.
func otherThreadsWakeups(self int) (int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("runtimepatch: %w", err)
	}
	total := 0
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(self) {
			continue
		}
		status, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
			}
		}
	}
	return total, nil
}
