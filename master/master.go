package master

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cloudflare/tableflip"
	"golang.org/x/sys/unix"

	"gw/conf"
	"gw/internal/atomicfile"
	"gw/internal/confio"
	"gw/internal/errlog"
	"gw/master/health"
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
	// Notify, when set, is the daemonizing gwctl's pipe (NotifyPipe): the master writes one
	// line, "ready ..." once every worker serves or "error: ..." when start-up failed, then
	// closes it (daemon.go).
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
	etcd     *etcdState // nil on config_provider local
	file     *fileState // nil unless config_provider is yaml or json
	admin    *adminServers
	control  net.Listener
	metrics  *http.Server
	status   *http.Server // the status API, nil when disabled
	// pluginParts are the plugins' parts in the master, told of each worker's exit
	// (metrics.go).
	pluginParts *pluginParts

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
	secretsMu     sync.Mutex
	// certs is when the ssls' certificates expire, for the metric and the warning
	// (certificates.go).
	certs certExpiries
	// healthChecked names the upstreams the health checker was last given (publishMu).
	healthChecked map[string]bool
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
	// The master's heap is mostly the config, held three times (the store's bytes and
	// decoded objects, and the workers' build it checks writes on), and what it allocates
	// per request is small: collecting at half the heap again rather than twice keeps a
	// master with 100,000 routes near its live size. An explicit GOGC still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	m := &Master{
		opts: opts, commands: make(chan command),
		sockets:           map[string]*slotSockets{},
		handOverListeners: map[string]net.Listener{},
		pid:               os.Getpid(), started: time.Now(),
	}
	m.sup = newSupervisor(m.spawn, nil)
	defer func() {
		if err != nil {
			m.notifyFailed(err)
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

// start brings the master up, in an order that keeps an upgrade safe: all a new master
// makes for itself comes first, and the paths it shares with the old master are taken
// over last, once every worker serves, so a new master that fails at any step leaves the
// old one serving and reachable, its files in place.
func (m *Master) start() error {
	if err := m.openInstance(); err != nil {
		return err
	}
	cfg, err := m.readConfig()
	if err != nil {
		return err
	}
	if err := m.setUpProcess(cfg); err != nil {
		return err
	}
	gen, err := m.newGeneration(cfg, 1)
	if err != nil {
		return err
	}
	if err := m.ensureSockets(gen); err != nil {
		return err
	}
	if err := m.openSharedMemory(cfg); err != nil {
		return err
	}
	if err := m.openStore(cfg); err != nil {
		return err
	}
	if err := m.prepareWorkerFiles(cfg); err != nil {
		return err
	}
	snap, err := m.publishStored(cfg)
	if err != nil {
		return err
	}
	m.sup.begin(gen)
	if err := m.startServers(cfg); err != nil {
		return err
	}
	if err := m.initTicketKeys(); err != nil {
		return err
	}
	if err := m.sup.fill(); err != nil {
		return err
	}
	if err := m.takeOverSharedPaths(); err != nil {
		return err
	}
	m.startEtcdSync()
	m.startFileSync()
	m.announceStart(gen, cfg, snap)
	return nil
}

// openInstance claims the prefix: its logs directory, the upgrader (which finds an old
// master's files), the instance lock, and the error log every later step reports to.
func (m *Master) openInstance() error {
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
	m.sup.log = m.log // before it starts any worker
	return nil
}

// readConfig loads config.yaml and checks the files it names, which the workers would read.
func (m *Master) readConfig() (*conf.Config, error) {
	cfg, err := conf.Load(m.paths.Config)
	if err == nil {
		err = confio.Check(cfg, m.paths.Prefix)
	}
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// setUpProcess applies what config.yaml sets for the master process itself: its log
// level, the file limit its workers inherit, and the user they run as.
func (m *Master) setUpProcess(cfg *conf.Config) error {
	m.log.SetLevel(errlog.ParseLevel(cfg.ErrorLogLevel))
	m.raiseFileLimit(cfg.WorkerRlimitNofile)
	return m.setUpWorkerUser(cfg)
}

// openSharedMemory makes the plugins' segments (or maps the old master's), starts the
// plugins' parts in the master over them, and the health checks that write into them.
func (m *Master) openSharedMemory(cfg *conf.Config) error {
	if err := m.createSegments(cfg); err != nil {
		return err
	}
	var err error
	if m.pluginParts, err = startPluginParts(m.segments, cfg, m.opts.Version, m.log.Errorf); err != nil {
		return err
	}
	healthTable, err := shm.OpenHealthTable(m.segments[plugins.HealthSegment])
	if err != nil {
		return fmt.Errorf("shared memory for %s: %w", plugins.HealthSegment, err)
	}
	m.health = health.New(healthTable, m.log)
	return nil
}

// openStore opens the Admin API's store in the data directory and makes that directory
// and the segments owner-only.
func (m *Master) openStore(cfg *conf.Config) error {
	var err error
	switch {
	case cfg.Deployment.ConfigProvider == conf.ProviderEtcd:
		err = m.openEtcdStore(cfg)
	case cfg.Deployment.Standalone():
		err = m.openFileStore(cfg)
	default:
		m.store, err = store.Open(m.paths.DataDir(cfg.DataDir))
	}
	if err != nil {
		return err
	}
	return m.secureInstanceFiles(m.paths.DataDir(cfg.DataDir))
}

// publishStored makes the stored objects, checked with the workers' own build, the
// snapshot every worker starts from.
func (m *Master) publishStored(cfg *conf.Config) (*conf.Snapshot, error) {
	if m.opts.NewChecker != nil {
		m.checker = m.opts.NewChecker(m.segments, m.log)
	}
	snap, err := m.loadStored(cfg)
	if err != nil {
		return nil, fmt.Errorf("loading stored config: %w", err)
	}
	if err := m.setSnapshot(snap); err != nil {
		return nil, err
	}
	return snap, nil
}

// startServers starts the master's own servers: the Admin API on admin.listen, the
// metrics export and the status API. They answer before the workers serve: the status
// API says not ready until they do.
func (m *Master) startServers(cfg *conf.Config) error {
	if err := m.listenAdmin(cfg); err != nil {
		return err
	}
	if err := m.serveMetrics(); err != nil {
		return err
	}
	return m.serveStatus()
}

// takeOverSharedPaths takes the paths an old master shares during an upgrade, the control
// and admin sockets and the pid file, and tells the old master this one serves.
func (m *Master) takeOverSharedPaths() error {
	if err := m.listenControl(); err != nil {
		return err
	}
	if err := m.listenAdminSocket(); err != nil {
		return err
	}
	if err := m.handAdminSocketToWorkers(); err != nil {
		return err
	}
	if err := atomicfile.Write(m.paths.PIDFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600, ".gwctl.pid.tmp-*"); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	m.owner = true
	if err := m.upg.Ready(); err != nil {
		return fmt.Errorf("telling the old master we are ready: %w", err)
	}
	return nil
}

// announceStart logs that the master serves and tells the daemonizing gwctl, if any.
func (m *Master) announceStart(gen *generation, cfg *conf.Config, snap *conf.Snapshot) {
	how := "started"
	if m.parentPID != 0 {
		how = fmt.Sprintf("took over from master %d", m.parentPID)
	}
	m.log.Infof("gw %s %s: %d workers, listening on %s, admin on %s",
		m.opts.Version, how, gen.workers, strings.Join(cfg.DataListen(), ", "), cfg.Admin.Listen)
	m.notifyReady(gen, cfg, snap)
}

// raiseFileLimit sets RLIMIT_NOFILE to n. When the hard limit is lower and this process
// may not raise it, the hard limit is taken: with a warning when n is a limit the user
// chose, quietly (info) when it is the default, which a hard limit below it (a container's,
// a login shell's 4096) is no mistake against. The shipped config.yaml names every key
// with its default, so "chose" means a value other than the default, not a key present.
func (m *Master) raiseFileLimit(n int) {
	if n <= 0 {
		return
	}
	explicit := n != conf.Default().WorkerRlimitNofile
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
			if explicit {
				m.log.Warnf("worker_rlimit_nofile %d is above the hard limit %d, which this process may not raise: using %d", n, cur.Max, cur.Max)
			} else {
				m.log.Infof("open-file limit: %d, the hard limit (below the default worker_rlimit_nofile %d, which this process may not raise)", cur.Max, n)
			}
		}
	}
	if err != nil {
		m.log.Warnf("worker_rlimit_nofile %d: %v (the limit stays as it was)", n, err)
	}
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
	m.pluginParts.close() // before the unmap: a draining worker may still exit
	for _, seg := range m.segments {
		_ = seg.Close()
	}
	m.stopEtcdSync()
	m.stopFileSync()
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

// currentConfig is the configuration the current generation runs with.
func (m *Master) currentConfig() *conf.Config {
	return m.sup.current().cfg
}
