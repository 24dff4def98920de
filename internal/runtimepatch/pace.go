package runtimepatch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

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

// PaceWindow is how long MeasurePace holds the processor after the system call: the
// stock monitor woke about 60 times in it on the development machine, the kept one 3 to
// 5 times.
const PaceWindow = 30 * time.Millisecond

// MeasurePace holds the processor until the monitor has slowed down, lets the process go
// idle until the monitor sleeps deeply, wakes it with system calls made the way net makes
// them (reading /proc for the count, then getpid), then holds the one processor for
// PaceWindow and counts how often the other threads (the monitor, in practice) woke
// meanwhile: woke. Holding the processor is a sleep in the kernel (holdProcessor), so the
// measurement takes about 110 ms but almost no CPU. It runs with GOMAXPROCS at 1,
// restoring the previous setting, and is not meant to run beside other work of the
// process.
func MeasurePace() (pace Pace, woke int, err error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// The processor in use first, so that the monitor slows down to its longest period as
	// it does under load (it starts a process at its shortest).
	holdProcessor(settleMonitor)
	// Then idle with no Go timer pending, so that the monitor's deep sleep is a long one:
	// woken by a timerfd through the poller.
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return PaceUnclear, 0, fmt.Errorf("runtimepatch: timerfd_create: %w", err)
	}
	timer := os.NewFile(uintptr(tfd), "timerfd")
	defer timer.Close()
	due := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(idleMonitor))}
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
	holdProcessor(PaceWindow)
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

// settleMonitor is long enough for the monitor's period to grow from 20 µs to 10 ms
// (about 12 ms of sleeps), with room for a machine that runs it late.
const settleMonitor = 40 * time.Millisecond

// idleMonitor is how long the process idles: the monitor, at its 10 ms period, notices
// within one that no processor is in use, and sleeps deeply from then on.
const idleMonitor = 40 * time.Millisecond

// holdProcessor keeps the goroutine's processor (P) in use for d without spending the
// CPU: it sleeps in the kernel through raw system calls, outside the runtime's system call
// bookkeeping, so the scheduler and the monitor see what they would see of a goroutine
// running Go code for d: a P in use, which the monitor cannot take back and does not
// sleep deeply beside. Busy-waiting would show them the same, at the cost of the CPU for
// the whole measurement. The sleeps are short so that a preemption request (the monitor
// asks one every 10 ms) is honoured at the next call, as a busy loop's would be.
func holdProcessor(d time.Duration) {
	for start := time.Now(); ; {
		left := d - time.Since(start)
		if left <= 0 {
			return
		}
		nap := syscall.NsecToTimespec(int64(min(left, time.Millisecond)))
		// EINTR (the monitor's preemption signal) only ends the nap early.
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&nap)), 0, 0)
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
