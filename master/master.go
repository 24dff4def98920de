package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"gw/conf"
	"gw/internal/errlog"
	"gw/master/admin"
	"gw/master/store"
	"gw/plugins"
	"gw/shm"
)

// Options are what `gwctl start` hands the master.
type Options struct {
	Prefix string
	// Workers, when > 0, overrides worker_processes for the life of this master.
	Workers int
	// Version is the binary's version string; workers must report the same.
	Version string
	// Notify, when set, is the daemonizing parent's pipe: the master writes one line,
	// "ready ..." once every worker serves or "error: ..." when start-up failed, then closes it.
	Notify io.WriteCloser
	// Stderr, when set, receives a copy of the error log (foreground mode).
	Stderr io.Writer
}

// readyTimeout bounds how long a new worker may take to report ready.
const readyTimeout = 15 * time.Second

// Master supervises the workers of one instance and serves the Admin API.
type Master struct {
	opts    Options
	paths   Paths
	cfg     *conf.Config
	workers int
	log     *errlog.Logger
	logFile *os.File
	lock    *os.File

	sockets  []*slotSockets
	segments map[string]*shm.Segment // plugins' shared memory, by plugin name
	store    *store.Store
	servers  []*http.Server

	// mu guards the fields below. publishMu serialises whole publications so versions
	// reach every worker in order.
	mu         sync.Mutex
	publishMu  sync.Mutex
	snapshot   []byte // the latest published conf.Snapshot, as JSON
	version    uint64
	generation uint64
	slots      []*workerProc // the current generation, by slot
	stopping   bool
	crashes    map[int][]time.Time // recent unexpected exits per slot, for backoff
	draining   []*workerProc       // older generations still finishing their requests

	pid            int
	started        time.Time
	restarts       uint64
	reloads        uint64
	reloadFailures uint64

	exits chan *workerProc
}

// Run starts a master and blocks until it has stopped. Errors before the workers are ready
// are reported through opts.Notify as well as returned.
func Run(opts Options) (err error) {
	m := &Master{opts: opts, exits: make(chan *workerProc, 64), crashes: map[int][]time.Time{},
		pid: os.Getpid(), started: time.Now()}
	defer func() {
		if err != nil && opts.Notify != nil {
			fmt.Fprintf(opts.Notify, "error: %v\n", err)
			opts.Notify.Close()
		}
	}()
	if err := m.start(); err != nil {
		m.teardown()
		return err
	}
	return m.loop()
}

func (m *Master) start() error {
	paths, err := PathsFor(m.opts.Prefix)
	if err != nil {
		return err
	}
	m.paths = paths
	if err := os.MkdirAll(paths.Logs, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", paths.Logs, err)
	}
	m.lock, err = paths.lockInstance()
	if err != nil {
		return err
	}
	m.logFile, err = os.OpenFile(paths.ErrorLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening error log: %w", err)
	}
	var out io.Writer = m.logFile
	if m.opts.Stderr != nil {
		out = io.MultiWriter(m.logFile, m.opts.Stderr)
	}
	m.log = errlog.New(out, "master")

	m.cfg, err = conf.Load(paths.Config)
	if err != nil {
		return err
	}
	m.workers = m.cfg.Workers()
	if m.opts.Workers > 0 {
		m.workers = m.opts.Workers
	}
	for _, address := range m.cfg.NodeListen {
		set, err := openSlotSockets(address, m.workers)
		if err != nil {
			return err
		}
		m.sockets = append(m.sockets, set)
	}
	if err := m.createSegments(); err != nil {
		return err
	}
	m.store, err = store.Open(paths.DataDir(m.cfg.DataDir))
	if err != nil {
		return err
	}
	snap, err := m.store.Snapshot()
	if err != nil {
		return fmt.Errorf("loading stored config: %w", err)
	}
	if err := m.setSnapshot(snap); err != nil {
		return err
	}
	if err := m.listenAdmin(); err != nil {
		return err
	}
	if err := m.serveMetrics(); err != nil {
		return err
	}

	m.generation = 1
	m.slots = make([]*workerProc, m.workers)
	for slot := range m.slots {
		w, err := m.spawn(slot, m.generation)
		if err != nil {
			return err
		}
		m.slots[slot] = w
	}
	for _, w := range m.slots {
		if err := w.waitReady(readyTimeout); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(paths.PIDFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	m.log.Infof("gw %s started: %d workers, listening on %s, admin on %s",
		m.opts.Version, m.workers, strings.Join(m.cfg.NodeListen, ", "), m.cfg.Admin.Listen)
	if m.opts.Notify != nil {
		fmt.Fprintf(m.opts.Notify, "ready pid=%d workers=%d listen=%s admin=%s\n", os.Getpid(), m.workers,
			strings.Join(m.cfg.NodeListen, ","), m.cfg.Admin.Listen)
		m.opts.Notify.Close()
		m.opts.Notify = nil
	}
	return nil
}

// listenAdmin serves the Admin API on admin.listen and on the private Unix socket that
// workers forward data-port admin calls to.
func (m *Master) listenAdmin() error {
	handler := admin.New(admin.Options{
		Store:     m.store,
		Keys:      m.cfg.AdminKeys(),
		Allow:     m.cfg.AllowNets(),
		Publisher: m,
		Version:   m.opts.Version,
	})
	tcp, err := net.Listen("tcp", m.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen %s: %w", m.cfg.Admin.Listen, err)
	}
	_ = os.Remove(m.paths.AdminSocket)
	unixLn, err := net.Listen("unix", m.paths.AdminSocket)
	if err != nil {
		tcp.Close()
		return fmt.Errorf("admin socket %s: %w", m.paths.AdminSocket, err)
	}
	if err := os.Chmod(m.paths.AdminSocket, 0o600); err != nil {
		tcp.Close()
		unixLn.Close()
		return err
	}
	for _, pair := range []struct {
		ln net.Listener
		h  http.Handler
	}{{tcp, handler}, {unixLn, handler.Internal()}} {
		srv := &http.Server{Handler: pair.h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
		m.servers = append(m.servers, srv)
		go func(ln net.Listener) {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.log.Errorf("admin server on %s: %v", ln.Addr(), err)
			}
		}(pair.ln)
	}
	return nil
}

func (m *Master) setSnapshot(snap *conf.Snapshot) error {
	data, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	m.mu.Lock()
	m.snapshot, m.version = data, snap.Version
	m.mu.Unlock()
	return nil
}

// Publish makes every live worker serve snap and returns once each has acknowledged it.
// A worker that exits meanwhile is not waited for: its replacement starts from the latest
// snapshot before it counts as ready.
func (m *Master) Publish(ctx context.Context, snap *conf.Snapshot) error {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	if err := m.setSnapshot(snap); err != nil {
		return err
	}
	m.mu.Lock()
	data := m.snapshot
	live := m.liveWorkersLocked()
	m.mu.Unlock()
	for _, w := range live {
		w.sendConfig(data)
	}
	var lagging []string
	for _, w := range live {
		if err := w.waitAck(ctx, snap.Version); err != nil {
			lagging = append(lagging, fmt.Sprintf("worker slot %d (pid %d): %v", w.slot, w.pid, err))
		}
	}
	if len(lagging) > 0 {
		return fmt.Errorf("config version %d not acknowledged by %s", snap.Version, strings.Join(lagging, "; "))
	}
	return nil
}

// allWorkersLocked lists the current generation and the draining ones still alive.
func (m *Master) allWorkersLocked() []*workerProc {
	all := m.liveWorkersLocked()
	for _, w := range m.draining {
		if !w.hasExited() {
			all = append(all, w)
		}
	}
	return all
}

func (m *Master) liveWorkersLocked() []*workerProc {
	var live []*workerProc
	for _, w := range m.slots {
		if w != nil && !w.hasExited() {
			live = append(live, w)
		}
	}
	return live
}

// currentSnapshot is what a newly started worker must load before it counts as ready.
func (m *Master) currentSnapshot() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot
}

// loop handles signals and worker exits until the master stops.
func (m *Master) loop() error {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(signals)
	for {
		select {
		case sig := <-signals:
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				m.log.Infof("signal %v: fast shutdown", sig)
				m.shutdown(false)
				return nil
			case syscall.SIGQUIT:
				m.log.Infof("signal %v: graceful shutdown", sig)
				m.shutdown(true)
				return nil
			default:
				m.log.Warnf("signal %v ignored: not supported yet", sig)
			}
		case w := <-m.exits:
			m.handleExit(w)
		}
	}
}

// fatalExitCode is the status a worker exits with when respawning it cannot help (bad
// setup); as in nginx, such a worker is not respawned.
const fatalExitCode = 2

func (m *Master) handleExit(w *workerProc) {
	m.mu.Lock()
	current := w.slot < len(m.slots) && m.slots[w.slot] == w
	stopping := m.stopping
	m.mu.Unlock()
	if stopping || !current || w.draining.Load() {
		return
	}
	m.log.Errorf("worker slot %d (pid %d) exited unexpectedly: %v", w.slot, w.pid, w.exitErr)
	if w.exitCode == fatalExitCode {
		m.log.Errorf("worker slot %d exited with fatal code %d and cannot be respawned", w.slot, fatalExitCode)
		return
	}
	m.mu.Lock()
	m.restarts++
	m.mu.Unlock()
	delay := m.respawnDelay(w.slot)
	go func() {
		if delay > 0 {
			m.log.Errorf("worker slot %d crashed more than 3 times within 10s: respawning in %v", w.slot, delay)
			time.Sleep(delay)
		}
		m.respawn(w.slot, w.generation)
	}()
}

func (m *Master) respawnDelay(slot int) time.Duration {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	recent := m.crashes[slot][:0]
	for _, t := range m.crashes[slot] {
		if now.Sub(t) < 10*time.Second {
			recent = append(recent, t)
		}
	}
	recent = append(recent, now)
	m.crashes[slot] = recent
	if len(recent) > 3 {
		return time.Second
	}
	return 0
}

func (m *Master) respawn(slot int, generation uint64) {
	m.mu.Lock()
	if m.stopping || generation != m.generation {
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	w, err := m.spawn(slot, generation)
	if err != nil {
		m.log.Errorf("respawning worker slot %d: %v", slot, err)
		return
	}
	m.mu.Lock()
	m.slots[slot] = w
	m.mu.Unlock()
	if err := w.waitReady(readyTimeout); err != nil {
		m.log.Errorf("respawned worker slot %d: %v", slot, err)
		return
	}
	m.log.Infof("worker slot %d respawned as pid %d", slot, w.pid)
}

// shutdown stops every worker (draining them when graceful), then releases the instance.
func (m *Master) shutdown(graceful bool) {
	m.mu.Lock()
	m.stopping = true
	workers := m.liveWorkersLocked()
	m.mu.Unlock()
	for _, srv := range m.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	deadline := 3 * time.Second
	if graceful {
		deadline = m.cfg.WorkerShutdownTimeout + time.Second
	}
	for _, w := range workers {
		w.shutdown(graceful)
	}
	timeout := time.After(deadline)
	for _, w := range workers {
		select {
		case <-w.exited:
		case <-timeout:
			for _, w := range workers {
				if !w.hasExited() {
					m.log.Warnf("worker slot %d (pid %d) still alive after %v: killing it", w.slot, w.pid, deadline)
					_ = w.cmd.Process.Kill()
				}
			}
			for _, w := range workers {
				<-w.exited
			}
		}
	}
	m.teardown()
	m.log.Infof("gw stopped")
}

// teardown releases what start acquired, in reverse order. Safe on a partial start.
func (m *Master) teardown() {
	m.mu.Lock()
	m.stopping = true
	slots := m.slots
	m.mu.Unlock()
	for _, w := range slots {
		if w != nil && !w.hasExited() {
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	}
	for _, srv := range m.servers {
		_ = srv.Close()
	}
	for _, s := range m.sockets {
		s.close()
	}
	for _, seg := range m.segments {
		_ = seg.Close()
	}
	if m.store != nil {
		_ = m.store.Close()
	}
	if m.lock != nil {
		_ = os.Remove(m.paths.PIDFile)
		_ = os.Remove(m.paths.AdminSocket)
		_ = m.lock.Close()
	}
	if m.logFile != nil {
		_ = m.logFile.Close()
	}
}

// createSegments makes every plugin's shared-memory segment. They live as long as the
// master, so counters survive worker crashes and reloads.
func (m *Master) createSegments() error {
	m.segments = map[string]*shm.Segment{}
	for name, spec := range plugins.Segments() {
		seg, err := shm.Create(spec.Layout, spec.Size(m.cfg))
		if err != nil {
			return fmt.Errorf("shared memory for %s: %w", name, err)
		}
		m.segments[name] = seg
		if spec.Init != nil {
			if err := spec.Init(seg); err != nil {
				return fmt.Errorf("shared memory for %s: %w", name, err)
			}
		}
	}
	return nil
}

// segmentNames lists the segments in a fixed order, so every worker gets the same fds.
func (m *Master) segmentNames() []string {
	names := make([]string, 0, len(m.segments))
	for name := range m.segments {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
