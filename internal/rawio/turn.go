package rawio

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Waiting for the poller's turn.
//
// Go's scheduler asks the poller for ready sockets only when it has nothing else to run,
// and otherwise from its monitor thread every 10 ms, 128 sockets at a time. A goroutine
// that yields (runtime.Gosched) is runnable again at once, so while one keeps yielding,
// as an accept loop with a queue of connections does, the sockets that became ready wait
// for the monitor: under seed 001's ab -c 1000 a worker picked up its upstream's answers
// 128 every 10 ms, 12,800 a second, and the answers of its first second waited 20 to 56 ms
// for it (benchmark/tail.sh; README, "A new connection per request").
//
// A PollerTurn is an eventfd(2) registered with the poller. Wait makes it readable and
// parks on it: the goroutine is not runnable until the poller has run once since, so the
// others run, the scheduler runs out of work and polls, and every socket that became ready
// before the Wait comes out of that poll with it (epoll reports in readiness order) or one
// before it. It never waits for time: as soon as nothing else is runnable, the poll that
// wakes it follows, as an event loop's turn does.

// PollerTurn lets one goroutine at a time wait for the runtime's next network poll. Safe
// for concurrent use: a Wait while another is in progress, or after Close, returns at once.
type PollerTurn struct {
	mu     sync.Mutex
	fd     int
	pd     uintptr
	closed bool
	one    [8]byte // the eventfd's increment, 1 in host byte order
}

// NewPollerTurn makes a PollerTurn; Close releases its descriptor.
func NewPollerTurn() (*PollerTurn, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	pd, errno := runtimePollOpen(uintptr(fd))
	if errno != 0 {
		_ = rawClose(fd)
		return nil, os.NewSyscallError("epoll_ctl", syscall.Errno(errno))
	}
	t := &PollerTurn{fd: fd, pd: pd}
	binary.NativeEndian.PutUint64(t.one[:], 1)
	return t, nil
}

// Wait returns once the runtime has polled the network after Wait began, and reports
// whether it waited: false when another Wait was in progress, or after Close.
func (t *PollerTurn) Wait() bool {
	if !t.mu.TryLock() {
		return false
	}
	defer t.mu.Unlock()
	if t.closed || runtimePollReset(t.pd, 'r') != pollNoError {
		return false
	}
	// Each write is an edge for the poller's edge-triggered registration, whatever the
	// counter holds, so the counter is never read: it would take 2^64 turns to fill.
	if _, errno := Write(uintptr(t.fd), t.one[:]); errno != 0 {
		return false
	}
	// A poll on the monitor thread between the write and this wait leaves the descriptor
	// ready, and this returns at once: the poll it waits for has run.
	return runtimePollWait(t.pd, 'r') == pollNoError
}

// Close releases the eventfd, after a Wait in progress returns (at the next poll).
func (t *PollerTurn) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("rawio: PollerTurn closed twice")
	}
	t.closed = true
	runtimePollUnblock(t.pd)
	runtimePollClose(t.pd)
	return os.NewSyscallError("close", rawClose(t.fd))
}
