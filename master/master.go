package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cloudflare/tableflip"
	"golang.org/x/sys/unix"

	"gw/conf"
	"gw/internal/atomicfile"
	"gw/internal/errlog"
	"gw/master/health"
	"gw/master/store"
	"gw/plugins"
	"gw/plugins/prometheus"
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
	// Binary is the path of gwctl on disk, which a binary upgrade starts again; empty means
	// the path this process was started from.
	Binary string
	// UpgradeTimeout bounds how long a new master may take to become ready (default 1m).
	UpgradeTimeout time.Duration
	// NewChecker makes what builds snapshots exactly as the workers do
	// (worker.NewChecker), given the master's shared-memory segments and error log. The
	// master checks
	// the stored objects at start and every Admin API write with it. Nil checks nothing
	// beyond validation.
	NewChecker func(segments map[string]*shm.Segment, log *errlog.Logger) SnapshotChecker
}

// SnapshotChecker builds a snapshot as the workers will under cfg and returns the objects
// that fail to build (worker.Checker).
type SnapshotChecker interface {
	Check(snap *conf.Snapshot, cfg *conf.Config) ([]conf.LeftOut, error)
}

// closeTimeout bounds how long a reload waits for an old worker to stop accepting: a
// worker does it as soon as it reads the shutdown frame.
const closeTimeout = 5 * time.Second

// Master supervises the workers of one instance and serves the Admin API.
type Master struct {
	opts    Options
	paths   Paths
	log     *errlog.Logger
	logFile *errlog.File
	lock    *os.File

	segments map[string]*shm.Segment // plugins' shared memory, by plugin name
	health   *health.Checker         // active health checks; nil until the segments exist
	checker  SnapshotChecker         // nil without Options.NewChecker
	store    *store.Store
	admin    *adminServers
	control  net.Listener
	metrics  *http.Server
	status   *http.Server // the status API, nil when disabled
	// workerAreas retires a worker's metrics area as the worker is reaped (metrics.go).
	workerAreas *workerAreas

	// workerUser is who the workers run as (config.yaml's user); nil: as the master.
	workerUser *workerUser

	// tickets are the TLS session ticket keys every worker shares (tickets.go);
	// stopTickets ends their rotation.
	tickets     *ticketKeyRing
	stopTickets func()

	// sup runs the workers: the current generation, one starting, the draining ones.
	sup *supervisor

	// mu guards the fields below. publishMu serialises whole publications (and reloads),
	// so snapshot versions reach every worker in order and no worker misses one. mu may be
	// held while calling sup, never the other way round.
	mu        sync.Mutex
	publishMu sync.Mutex
	sockets   map[string]*slotSockets // by listen address; kept across reloads
	snapshot  []byte                  // the latest published conf.Snapshot, as JSON
	version   uint64
	leftOut   []conf.LeftOut // what that snapshot leaves out

	pid            int
	started        time.Time
	reloads        uint64
	reloadFailures uint64
	// configRejections counts the snapshots workers refused (ipc.Reject).
	configRejections uint64

	commands chan command

	// Binary upgrades (upgrade.go).
	upg               *tableflip.Upgrader
	binary            string
	parentPID         int                     // the old master, in a master started by an upgrade
	readOnly          atomic.Bool             // Admin API writes refused while handing over
	handedOver        bool                    // the new master owns the files now
	owner             bool                    // this master may remove the pid file and sockets
	handOverListeners map[string]net.Listener // admin and metrics listeners, by hand-over name

	// secretsWarned holds the unresolved secret references already logged (secrets.go),
	// guarded by publishMu.
	secretsWarned map[string]bool
}

// Run starts a master and blocks until it has stopped. Errors before the workers are ready
// are reported through opts.Notify as well as returned.
func Run(opts Options) (err error) {
	// One P, as nginx's master is one thread: the master supervises, serves the Admin API,
	// the metrics and the probes, all waiting on I/O, and more Ps only add cross-thread
	// wake-ups on the CPUs it shares with the workers (a scrape cost 300 us of CPU with two,
	// 210 with one). An explicit GOMAXPROCS in the environment still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	m := &Master{
		opts: opts, commands: make(chan command),
		sockets:           map[string]*slotSockets{},
		handOverListeners: map[string]net.Listener{},
		pid:               os.Getpid(), started: time.Now(),
	}
	m.sup = newSupervisor(m.spawn, nil)
	defer func() {
		if err != nil && opts.Notify != nil {
			fmt.Fprintf(opts.Notify, "error: %v\n", err)
			opts.Notify.Close()
		}
	}()
	// Handlers go in first: as PID 1 in a container a signal without a handler is dropped
	// by the kernel, and one that comes during start is acted on once start is done.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(signals)
	if err := m.start(); err != nil {
		m.teardown()
		return err
	}
	return m.loop(signals)
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
	if err := m.initUpgrader(); err != nil {
		return err
	}
	m.binary = m.opts.Binary
	if m.binary == "" {
		if m.binary, err = os.Executable(); err != nil {
			return fmt.Errorf("finding this binary's path: %w", err)
		}
	}
	if m.isUpgradeChild() {
		m.parentPID = os.Getppid()
	}
	// The lock's open file description passes through an upgrade, so both masters hold it
	// during the hand-over and it is never free while either serves.
	if m.lock, err = m.inherited(handOverLock); err != nil {
		return err
	}
	if m.lock == nil {
		if m.lock, err = paths.lockInstance(); err != nil {
			return err
		}
		m.owner = true
	}
	m.logFile, err = errlog.OpenFile(paths.ErrorLog)
	if err != nil {
		return err
	}
	var out io.Writer = m.logFile
	if m.opts.Stderr != nil {
		out = io.MultiWriter(m.logFile, m.opts.Stderr)
	}
	m.log = errlog.New(out, "master")
	m.sup.log = m.log

	cfg, err := conf.Load(paths.Config)
	if err == nil {
		err = cfg.CheckFiles(paths.Prefix) // files the workers would read, checked first
	}
	if err != nil {
		return err
	}
	m.log.SetLevel(errlog.ParseLevel(cfg.ErrorLogLevel))
	m.raiseFileLimit(cfg.WorkerRlimitNofile)
	if err := m.setUpWorkerUser(cfg); err != nil {
		return err
	}
	gen, err := m.newGeneration(cfg, 1)
	if err != nil {
		return err
	}
	if err := m.ensureSockets(gen); err != nil {
		return err
	}
	if err := m.createSegments(cfg); err != nil {
		return err
	}
	if m.workerAreas, err = openWorkerAreas(m.segments[prometheus.Name]); err != nil {
		return err
	}
	healthTable, err := shm.OpenHealthTable(m.segments[plugins.HealthSegment])
	if err != nil {
		return fmt.Errorf("shared memory for %s: %w", plugins.HealthSegment, err)
	}
	m.health = health.New(healthTable, m.log)
	m.store, err = store.Open(paths.DataDir(cfg.DataDir))
	if err != nil {
		return err
	}
	if err := m.secureInstanceFiles(paths.DataDir(cfg.DataDir)); err != nil {
		return err
	}
	if err := m.prepareWorkerFiles(cfg); err != nil {
		return err
	}
	if m.opts.NewChecker != nil {
		m.checker = m.opts.NewChecker(m.segments, m.log)
	}
	snap, err := m.loadStored(cfg)
	if err != nil {
		return fmt.Errorf("loading stored config: %w", err)
	}
	if err := m.setSnapshot(snap); err != nil {
		return err
	}
	m.sup.begin(gen)
	if err := m.listenAdmin(cfg); err != nil {
		return err
	}
	if err := m.serveMetrics(); err != nil {
		return err
	}
	if err := m.serveStatus(); err != nil {
		return err
	}
	if err := m.initTicketKeys(); err != nil {
		return err
	}
	if err := m.sup.fill(); err != nil {
		return err
	}
	// The paths below are shared with an old master during an upgrade: take them over
	// only now that every worker serves. A new master that fails before this point leaves
	// the old one reachable and its files in place.
	if err := m.listenControl(); err != nil {
		return err
	}
	if err := m.listenAdminSocket(); err != nil {
		return err
	}
	if err := m.handAdminSocketToWorkers(); err != nil {
		return err
	}
	if err := atomicfile.Write(paths.PIDFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600, ".gwctl.pid.tmp-*"); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	m.owner = true
	if err := m.upg.Ready(); err != nil {
		return fmt.Errorf("telling the old master we are ready: %w", err)
	}
	how := "started"
	if m.parentPID != 0 {
		how = fmt.Sprintf("took over from master %d", m.parentPID)
	}
	m.log.Infof("gw %s %s: %d workers, listening on %s, admin on %s",
		m.opts.Version, how, gen.workers, strings.Join(cfg.DataListen(), ", "), cfg.Admin.Listen)
	if m.opts.Notify != nil {
		// The TLS addresses are named apart: a client must know which ports speak TLS.
		tlsListen := ""
		if cfg.SSL.Enabled {
			tlsListen = " tls=" + strings.Join(cfg.SSL.Listen, ",")
		}
		leftOut := ""
		if n := len(snap.LeftOut); n > 0 {
			leftOut = fmt.Sprintf(" left_out=%d", n)
		}
		fmt.Fprintf(m.opts.Notify, "ready pid=%d workers=%d listen=%s%s admin=%s%s\n", os.Getpid(), gen.workers,
			strings.Join(cfg.NodeListen, ","), tlsListen, cfg.Admin.Listen, leftOut)
		m.opts.Notify.Close()
		m.opts.Notify = nil
	}
	return nil
}

// newGeneration resolves the worker count (--workers wins over the file) and encodes the
// static config for the workers.
func (m *Master) newGeneration(cfg *conf.Config, id uint64) (*generation, error) {
	workers := cfg.Workers()
	if m.opts.Workers > 0 {
		workers = m.opts.Workers
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return &generation{id: id, cfg: cfg, workers: workers, cfgJSON: cfgJSON}, nil
}

// ensureSockets opens what gen needs: every listen address with at least one socket per
// worker slot. Existing sockets are kept, so no queued connection is ever reset by a reload.
func (m *Master) ensureSockets(gen *generation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var opened []*slotSockets
	for _, address := range gen.cfg.DataListen() {
		set, ok := m.sockets[address]
		if !ok {
			inherited, err := m.inheritedSockets(address)
			if err != nil {
				return err
			}
			if inherited != nil {
				if err := inherited.grow(gen.workers); err != nil {
					return err
				}
				m.sockets[address] = inherited
				opened = append(opened, inherited)
				continue
			}
			fresh, err := openSlotSockets(address, gen.workers)
			if err != nil {
				for _, s := range opened {
					s.close()
					delete(m.sockets, s.address)
				}
				return err
			}
			m.sockets[address] = fresh
			opened = append(opened, fresh)
			continue
		}
		if err := set.grow(gen.workers); err != nil {
			return err
		}
	}
	return nil
}

// closeUnusedSockets closes the sockets of addresses the current generation no longer
// listens on. Draining workers hold their own copies, so their open connections finish.
func (m *Master) closeUnusedSockets() {
	listen := m.currentConfig().DataListen()
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[string]bool{}
	for _, a := range listen {
		keep[a] = true
	}
	for address, set := range m.sockets {
		if !keep[address] {
			set.close()
			delete(m.sockets, address)
			m.log.Infof("stopped listening on %s", address)
		}
	}
}

func (m *Master) raiseFileLimit(n int) {
	if n <= 0 {
		return
	}
	limit := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err == nil && cur.Max > limit.Max {
		limit.Max = cur.Max // never lower the hard limit
	}
	err := unix.Setrlimit(unix.RLIMIT_NOFILE, &limit)
	if err != nil && cur.Max < uint64(n) {
		// Raising the hard limit needs CAP_SYS_RESOURCE; take what the hard limit allows.
		limit = unix.Rlimit{Cur: cur.Max, Max: cur.Max}
		if err = unix.Setrlimit(unix.RLIMIT_NOFILE, &limit); err == nil {
			m.log.Warnf("worker_rlimit_nofile %d is above the hard limit %d, which this process may not raise: using %d", n, cur.Max, cur.Max)
		}
	}
	if err != nil {
		m.log.Warnf("worker_rlimit_nofile %d: %v (the limit stays as it was)", n, err)
	}
}

func (m *Master) setSnapshot(snap *conf.Snapshot) error {
	data, err := json.Marshal(m.forWorkers(snap))
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	// Before any worker sees snap: workers look up the health entries it needs.
	if m.health != nil {
		m.health.Update(snap)
	}
	m.mu.Lock()
	m.snapshot, m.version, m.leftOut = data, snap.Version, snap.LeftOut
	m.mu.Unlock()
	return nil
}

// loadStored is the stored config as the workers will serve it under cfg. A stored
// object that does not decode or does not build never stops a start: it is left out,
// named in the error log, in `gwctl status` and in the Admin API's answer for it, and
// whatever references it answers as if it were missing. A route left out is a 404, never
// a route without its plugins.
func (m *Master) loadStored(cfg *conf.Config) (*conf.Snapshot, error) {
	snap := m.store.Snapshot()
	if m.checker != nil {
		failed, err := m.checker.Check(snap, cfg)
		if err != nil {
			return nil, err
		}
		snap.LeaveOut(failed)
	}
	for _, l := range snap.LeftOut {
		m.log.Errorf("stored object %s is left out and not served: %s (fix it with a PUT, or DELETE it)", l.Key(), l.Reason)
	}
	return snap, nil
}

// servesUnder refuses a new config.yaml under which a stored object that is served now
// would fail to build (router.http changes how paths parse): the new workers would refuse
// their first snapshot, so the reload is refused first, naming the object.
func (m *Master) servesUnder(cfg *conf.Config) error {
	if m.checker == nil {
		return nil
	}
	failed, err := m.checker.Check(m.store.Snapshot(), cfg)
	if err != nil {
		return err
	}
	before := map[string]bool{}
	for _, l := range m.LeftOut() {
		before[l.Key()] = true
	}
	for _, l := range failed {
		if !before[l.Key()] {
			return fmt.Errorf("%s: under the new configuration %s could not be served: %s", m.paths.Config, l.Key(), l.Reason)
		}
	}
	return nil
}

// Check is the Admin API's Builder: snap built as the workers will build it under the
// config they run.
func (m *Master) Check(snap *conf.Snapshot) ([]conf.LeftOut, error) {
	if m.checker == nil {
		return nil, nil
	}
	return m.checker.Check(snap, m.currentConfig())
}

// LeftOut is the Admin API's Builder: what the snapshot published last leaves out.
func (m *Master) LeftOut() []conf.LeftOut {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leftOut
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
	live := m.sup.serving()
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

// currentSnapshot is what a newly started worker must load before it counts as ready.
func (m *Master) currentSnapshot() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot
}

// loop handles signals, control commands and worker exits until the master stops.
func (m *Master) loop(signals <-chan os.Signal) error {
	defer m.startReaper()()
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
			case syscall.SIGHUP:
				m.log.Infof("signal %v: reloading %s", sig, m.paths.Config)
				_ = m.reload()
			case syscall.SIGUSR1:
				m.log.Infof("signal %v: reopening log files", sig)
				m.reopen()
			case syscall.SIGUSR2:
				m.log.Infof("signal %v: upgrading the binary from %s", sig, m.binary)
				if pid, err := m.upgrade(); err != nil {
					m.log.Errorf("upgrade failed: %v", err)
				} else {
					m.log.Infof("upgraded: new master pid %d", pid)
					m.handOver()
					return nil
				}
			default:
				m.log.Warnf("signal %v ignored: not supported yet", sig)
			}
		case cmd := <-m.commands:
			if m.execute(cmd) {
				return nil
			}
		case w := <-m.sup.exits:
			m.sup.handleExit(w)
		}
	}
}

// reload re-reads the config file and replaces the worker generation, as nginx's HUP. The
// old generation keeps serving unless the new one is fully ready.
func (m *Master) reload() (err error) {
	defer func() {
		m.mu.Lock()
		if err != nil {
			m.reloadFailures++
		} else {
			m.reloads++
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Errorf("reload failed, the previous configuration keeps serving: %v", err)
		}
	}()
	cfg, err := conf.Load(m.paths.Config)
	if err == nil {
		err = cfg.CheckFiles(m.paths.Prefix)
	}
	if err != nil {
		return err
	}
	old := m.sup.current()
	if err := staticChangeAllowed(old.cfg, cfg); err != nil {
		return err
	}
	if err := m.servesUnder(cfg); err != nil {
		return err
	}
	if err := m.prepareWorkerFiles(cfg); err != nil {
		return err
	}
	gen, err := m.newGeneration(cfg, old.id+1)
	if err != nil {
		return err
	}
	if err := m.ensureSockets(gen); err != nil {
		return err
	}
	if cfg.Admin.Listen != old.cfg.Admin.Listen || !sameKeys(cfg, old.cfg) {
		if err := m.listenAdmin(cfg); err != nil {
			return err
		}
	}
	// No publication may slip between the new workers' first snapshot and the swap, nor
	// before the old workers stop accepting: it goes to the new generation only.
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	oldSlots, err := m.sup.replace(gen)
	if err != nil {
		return err
	}
	// The old workers share the listening sockets with the new ones: until each has closed
	// its copies it may still accept a connection and serve it the old configuration and
	// the old snapshot. gwctl reload waits for this function, so once it returns every new
	// connection gets the new configuration, and read-your-writes holds for the Admin API
	// across a reload. A worker too busy to answer in time is not worth failing a reload
	// that has happened.
	for _, w := range oldSlots {
		if w == nil {
			continue
		}
		if err := w.waitClosed(closeTimeout); err != nil {
			m.log.Warnf("reload: %v; until it does, it may serve new connections the old configuration", err)
		}
	}
	m.closeUnusedSockets()
	m.raiseFileLimit(cfg.WorkerRlimitNofile)
	m.log.SetLevel(errlog.ParseLevel(cfg.ErrorLogLevel))
	m.log.Infof("reloaded: generation %d, %d workers, listening on %s", gen.id, gen.workers, strings.Join(cfg.DataListen(), ", "))
	return nil
}

// staticChangeAllowed refuses what a reload cannot change, as nginx refuses to resize its
// shared zones: segments hold live counters that every worker maps.
func staticChangeAllowed(old, cfg *conf.Config) error {
	if old.Shm != cfg.Shm {
		return fmt.Errorf("shm sizes are fixed at start (shm.limit_count %d → %d, shm.metrics %d → %d, shm.health_check %d → %d, limit_count_on_full %q → %q): restart to change them",
			old.Shm.LimitCount, cfg.Shm.LimitCount, old.Shm.Metrics, cfg.Shm.Metrics, old.Shm.HealthCheck, cfg.Shm.HealthCheck, old.Shm.LimitCountOnFull, cfg.Shm.LimitCountOnFull)
	}
	if old.User != cfg.User {
		return fmt.Errorf("user is fixed at start (%q → %q): restart to change it", old.User, cfg.User)
	}
	if old.DataDir != cfg.DataDir {
		return fmt.Errorf("data_dir is fixed at start (%q → %q): restart to change it", old.DataDir, cfg.DataDir)
	}
	if old.Prometheus != cfg.Prometheus {
		return fmt.Errorf("prometheus settings are fixed at start: restart to change them")
	}
	if old.Status != cfg.Status {
		return fmt.Errorf("status settings are fixed at start (status.enabled %t → %t, status.listen %s → %s): restart to change them",
			old.Status.Enabled, cfg.Status.Enabled, old.Status.Listen, cfg.Status.Listen)
	}
	return nil
}

func sameKeys(a, b *conf.Config) bool {
	ka, kb := a.AdminKeys(), b.AdminKeys()
	if len(ka) != len(kb) || strings.Join(a.Admin.Allow, ",") != strings.Join(b.Admin.Allow, ",") {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// reopen reopens the error log (the master's and, through their stdout and stderr, the
// workers') and tells every worker to reopen its files.
func (m *Master) reopen() {
	if err := m.logFile.Reopen(); err != nil {
		m.log.Errorf("%v", err)
		return
	}
	// A daemonized master's own stdout and stderr also point at the old file.
	if fd := int(m.logFile.Current().Fd()); m.opts.Stderr == nil {
		_ = unix.Dup2(fd, 1)
		_ = unix.Dup2(fd, 2)
	}
	// Workers reopen by path, as the worker user: the new files must be theirs first.
	if err := m.prepareWorkerFiles(m.currentConfig()); err != nil {
		m.log.Errorf("reopening: %v", err)
	}
	for _, w := range m.sup.allWorkers() {
		w.reopen()
	}
}

// shutdown stops every worker (draining them when graceful), then releases the instance.
func (m *Master) shutdown(graceful bool) {
	workers := m.sup.halt()
	m.admin.close()
	m.sup.stop(workers, graceful)
	m.teardown()
	m.log.Infof("gw stopped")
}

// teardown releases what start acquired, in reverse order. Safe on a partial start. After
// a hand-over it only closes this process's copies: the new master owns the rest.
func (m *Master) teardown() {
	m.mu.Lock()
	handedOver := m.handedOver
	owner := m.owner && !handedOver
	m.mu.Unlock()
	workers := m.sup.halt()
	if !handedOver {
		m.sup.kill(workers)
	}
	m.admin.close()
	if m.health != nil {
		m.health.Stop()
	}
	if m.stopTickets != nil {
		m.stopTickets()
	}
	if m.metrics != nil {
		_ = m.metrics.Close()
	}
	if m.status != nil {
		_ = m.status.Close()
	}
	for _, s := range m.sockets {
		s.close()
	}
	m.workerAreas.close() // before the unmap: a draining worker may still exit
	for _, seg := range m.segments {
		_ = seg.Close()
	}
	if m.store != nil {
		_ = m.store.Close()
	}
	if m.control != nil {
		_ = m.control.Close()
	}
	if m.lock != nil {
		if owner {
			_ = os.Remove(m.paths.PIDFile)
			_ = os.Remove(m.paths.AdminSocket)
			_ = os.Remove(m.paths.ControlSocket)
		}
		_ = m.lock.Close()
	}
	if m.logFile != nil {
		_ = m.logFile.Close()
	}
}

// createSegments makes every plugin's shared-memory segment, or maps the old master's
// after an upgrade. They live as long as the master, so counters survive worker crashes,
// reloads and upgrades; a segment whose header names another layout is refused.
func (m *Master) createSegments(cfg *conf.Config) error {
	m.segments = map[string]*shm.Segment{}
	for name, spec := range plugins.Segments() {
		f, err := m.inherited(handOverSegment(name))
		if err != nil {
			return err
		}
		if f != nil {
			seg, err := shm.Open(f, spec.Layout)
			f.Close()
			if err != nil {
				return fmt.Errorf("shared memory for %s handed over by the old master: %w; upgrade refused", name, err)
			}
			m.segments[name] = seg
			continue
		}
		seg, err := shm.Create(spec.Layout, spec.Size(cfg))
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

// currentConfig is the configuration the current generation runs with.
func (m *Master) currentConfig() *conf.Config {
	return m.sup.current().cfg
}
