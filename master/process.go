package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"gw/ipc"
)

// workerProc is the master's handle on one worker process.
type workerProc struct {
	slot       int
	generation uint64
	pid        int
	proc       process
	conn       *ipc.Conn // nil in the supervisor's tests, which talk to no process
	started    time.Time
	folded     bool // its HTTP/2 abuse counts are the supervisor's now (supervisor.mu)

	setUp     chan struct{} // closed once the setup frame and first snapshot are sent
	ready     chan struct{} // closed once the worker reported ready
	readyOnce sync.Once
	exited    chan struct{} // closed once the process was reaped
	exitErr   error
	exitCode  int
	draining  atomic.Bool

	// closed is closed once the worker, shut down gracefully, said it accepts no more
	// connections.
	closed     chan struct{}
	closedOnce sync.Once

	stats atomic.Pointer[ipc.Stats] // the worker's latest report

	ackMu   sync.Mutex
	acked   uint64
	ackWake chan struct{} // closed and replaced on every ack and every reject
	// rejected is the latest snapshot the worker refused, newer than acked; nil once it
	// serves a later one.
	rejected *ipc.Reject
}

func newWorkerProc(slot int, generation uint64, pid int, proc process, conn *ipc.Conn) *workerProc {
	return &workerProc{
		slot: slot, generation: generation, pid: pid, proc: proc, conn: conn,
		started: time.Now(), setUp: make(chan struct{}), ready: make(chan struct{}), exited: make(chan struct{}), closed: make(chan struct{}),
		ackWake: make(chan struct{}),
	}
}

// process is a started worker process as the supervisor acts on it: execProcess in the
// master, a fake in the supervisor's tests.
type process interface {
	// wait blocks until the process has exited and been reaped, and returns its exit code
	// (-1 when a signal ended it) and exec.Cmd.Wait's error.
	wait() (code int, err error)
	// kill ends the process at once (SIGKILL) and returns; wait reports the end.
	kill()
	// stop asks the process to stop, after draining its connections when graceful.
	stop(graceful bool)
}

// execProcess is a worker started with os/exec, spoken to over conn.
type execProcess struct {
	cmd   *exec.Cmd
	conn  *ipc.Conn
	parts *pluginParts // told of the exit before the reap
}

func (p *execProcess) wait() (int, error) {
	// The plugins hear of the exit before the reap, while the zombie holds the pid.
	if waitExited(p.cmd.Process.Pid) == nil {
		p.parts.workerExited(p.cmd.Process.Pid)
	}
	err := p.cmd.Wait()
	p.conn.Close()
	return p.cmd.ProcessState.ExitCode(), err
}

func (p *execProcess) kill() { _ = p.cmd.Process.Kill() }

// stop sends the shutdown frame, or SIGINT when the socket is broken but not yet closed.
func (p *execProcess) stop(graceful bool) {
	mode := ipc.Fast
	if graceful {
		mode = ipc.Graceful
	}
	if err := p.conn.SendJSON(ipc.KindShutdown, ipc.Shutdown{Mode: mode}); err != nil && !errors.Is(err, os.ErrClosed) {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
}

// spawn starts a worker for slot from /proc/self/exe, so a binary replaced on disk never
// changes the running generation. The worker inherits its IPC socket and its slot's
// listening sockets, and nothing else. It is the supervisor's spawn: it returns once the
// process runs, and the supervisor waits for its end.
func (m *Master) spawn(slot int, gen *generation) (*workerProc, error) {
	conn, remote, err := ipc.Pair()
	if err != nil {
		return nil, err
	}
	defer remote.Close()

	files := []*os.File{remote} // files[i] is descriptor ipc.ConnFD+i in the worker
	var listeners []ipc.ListenerFD
	m.mu.Lock()
	for _, address := range gen.cfg.DataListen() {
		set := m.sockets[address]
		for i, f := range set.files {
			// Socket i belongs to slot i; when there are more sockets than workers (the
			// count shrank in a reload) the surplus ones are shared out, so no socket is
			// left without an acceptor and none has to be closed.
			if i%gen.workers != slot {
				continue
			}
			listeners = append(listeners, ipc.ListenerFD{FD: ipc.ConnFD + len(files), Address: set.address, Slot: i})
			files = append(files, f)
		}
	}
	m.mu.Unlock()

	var segments []ipc.SegmentFD
	for _, name := range m.segmentNames() {
		segments = append(segments, ipc.SegmentFD{FD: ipc.ConnFD + len(files), Plugin: name})
		files = append(files, m.segments[name].File())
	}

	cmd := exec.Command("/proc/self/exe", "worker",
		"--prefix", m.paths.Prefix,
		"--slot", strconv.Itoa(slot),
		"--generation", strconv.FormatUint(gen.id, 10))
	cmd.Args[0] = workerProcessTitle
	cmd.Env = workerEnv(os.Environ())
	cmd.ExtraFiles = files
	logFile := m.logFile.Current()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = m.paths.Prefix
	cmd.SysProcAttr = m.workerSysProcAttr()
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting worker slot %d: %w", slot, m.explainSpawnError(err))
	}
	w := newWorkerProc(slot, gen.id, cmd.Process.Pid, &execProcess{cmd: cmd, conn: conn, parts: m.pluginParts}, conn)
	go m.talk(w, ipc.Setup{Config: gen.cfgJSON, ListenerFDs: listeners, AdminSocket: m.paths.AdminSocket, ErrorLog: m.paths.ErrorLog, Prefix: m.paths.Prefix, SegmentFDs: segments})
	return w, nil
}

// waitExited blocks until the child pid has exited and leaves it unreaped (WNOWAIT), so
// that nothing can take its pid until cmd.Wait reaps it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// workerEnv is the master's environment with GOMAXPROCS pinned to 1 and tableflip's marker
// removed: a worker must never mistake its inherited fds for tableflip's pipes.
func workerEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "TABLEFLIP_HAS_PARENT_7DIU3=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOMAXPROCS=1")
}

// talk runs the master's side of one worker's IPC: handshake, setup, the first snapshot,
// then acks until the connection closes.
func (m *Master) talk(w *workerProc, setup ipc.Setup) {
	frame, err := w.conn.Receive()
	if err != nil {
		return // the process died before saying hello; the exit handler reports it
	}
	var hello ipc.Hello
	if frame.Kind != ipc.KindHello || frame.Decode(&hello) != nil {
		m.log.Errorf("worker slot %d (pid %d): expected hello, got %s", w.slot, w.pid, frame.Kind)
		w.proc.kill()
		return
	}
	if hello.Version != m.opts.Version {
		m.log.Errorf("worker slot %d (pid %d) runs version %q, master runs %q: killing it", w.slot, w.pid, hello.Version, m.opts.Version)
		w.proc.kill()
		return
	}
	// The keys are taken as late as possible; forwardTicketKeys sends any set that
	// replaces these.
	keys := m.tickets.keySet()
	setup.TicketKeys = keys.wire()
	if err := w.conn.SendJSON(ipc.KindSetup, setup); err != nil {
		return
	}
	_ = w.conn.Send(ipc.KindConfig, m.currentSnapshot())
	close(w.setUp)
	go m.forwardTicketKeys(w, keys)
	for {
		frame, err := w.conn.Receive()
		if err != nil {
			return
		}
		switch frame.Kind {
		case ipc.KindReady:
			w.readyOnce.Do(func() { close(w.ready) })
		case ipc.KindClosed:
			w.closedOnce.Do(func() { close(w.closed) })
		case ipc.KindAck:
			var ack ipc.Ack
			if frame.Decode(&ack) == nil {
				w.recordAck(ack.Version)
			}
		case ipc.KindReject:
			var rej ipc.Reject
			if frame.Decode(&rej) == nil {
				m.log.Errorf("worker slot %d (pid %d) refused config version %d and serves its previous one: %s",
					w.slot, w.pid, rej.Version, rej.Reason)
				w.recordReject(rej)
				m.mu.Lock()
				m.configRejections++
				m.mu.Unlock()
			}
		case ipc.KindStats:
			var stats ipc.Stats
			if frame.Decode(&stats) == nil {
				w.stats.Store(&stats)
			}
		default:
			m.log.Warnf("worker slot %d (pid %d): unexpected %s frame", w.slot, w.pid, frame.Kind)
		}
	}
}

// sendConfig sends a snapshot once the worker has its setup: a worker must see its setup
// frame first, and one still starting gets whatever is current when its setup goes out,
// then this one.
func (w *workerProc) sendConfig(snapshot []byte) {
	select {
	case <-w.setUp:
	case <-w.exited:
		return
	}
	// A failed send means the worker is gone; its exit is handled where it is reaped.
	_ = w.conn.Send(ipc.KindConfig, snapshot)
}

// sendDelta sends one write's conf.Delta to a worker that serves the version before it.
func (w *workerProc) sendDelta(delta []byte) {
	select {
	case <-w.setUp:
	case <-w.exited:
		return
	}
	_ = w.conn.Send(ipc.KindDelta, delta)
}

func (w *workerProc) recordAck(version uint64) {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	if version > w.acked {
		w.acked = version
	}
	if w.rejected != nil && w.rejected.Version <= w.acked {
		w.rejected = nil
	}
	close(w.ackWake)
	w.ackWake = make(chan struct{})
}

func (w *workerProc) recordReject(rej ipc.Reject) {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	if rej.Version > w.acked && (w.rejected == nil || rej.Version >= w.rejected.Version) {
		w.rejected = &rej
	}
	close(w.ackWake)
	w.ackWake = make(chan struct{})
}

// refuses is the snapshot the worker refuses now, nil when it serves the latest it was sent.
func (w *workerProc) refuses() *ipc.Reject {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	return w.rejected
}

// waitAck blocks until the worker serves version, exits, or ctx ends.
func (w *workerProc) waitAck(ctx context.Context, version uint64) error {
	for {
		w.ackMu.Lock()
		acked, wake, rejected := w.acked, w.ackWake, w.rejected
		w.ackMu.Unlock()
		if acked >= version {
			return nil
		}
		if rejected != nil && rejected.Version >= version {
			return fmt.Errorf("refused version %d and serves version %d: %s", rejected.Version, acked, rejected.Reason)
		}
		select {
		case <-wake:
		case <-w.exited:
			return nil // gone: its replacement loads the latest snapshot before serving
		case <-ctx.Done():
			return fmt.Errorf("still at version %d: %w", acked, ctx.Err())
		}
	}
}

func (w *workerProc) waitReady(timeout time.Duration) error {
	select {
	case <-w.ready:
		return nil
	case <-w.exited:
		return fmt.Errorf("worker slot %d (pid %d) exited before it was ready: %v (see the error log)", w.slot, w.pid, w.exitErr)
	case <-time.After(timeout):
		w.proc.kill()
		return fmt.Errorf("worker slot %d (pid %d) not ready within %v", w.slot, w.pid, timeout)
	}
}

// waitClosed blocks until the worker, told to drain, has stopped accepting (or exited), or
// timeout passes.
func (w *workerProc) waitClosed(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.closed:
		return nil
	case <-w.exited:
		return nil
	case <-timer.C:
		return fmt.Errorf("worker slot %d (pid %d) did not stop accepting within %v", w.slot, w.pid, timeout)
	}
}

func (w *workerProc) hasExited() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

func (w *workerProc) reopen() {
	_ = w.conn.Send(ipc.KindReopen, nil)
}

// shutdown asks the worker to stop; a graceful stop marks it draining first, so its exit
// is never respawned.
func (w *workerProc) shutdown(graceful bool) {
	if graceful {
		w.draining.Store(true)
	}
	w.proc.stop(graceful)
}
