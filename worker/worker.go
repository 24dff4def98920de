package worker

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"gw/conf"
	"gw/internal/confio"
	"gw/internal/errlog"
	"gw/internal/monotime"
	"gw/internal/rawio"
	"gw/ipc"
	"gw/plugins"
	"gw/shm"
	"gw/worker/accesslog"
	"gw/worker/proxy"
)

// Options are the worker subcommand's flags.
type Options struct {
	Prefix     string
	Slot       int
	Generation uint64
	Version    string
}

// ExitCode is the status a worker whose Run returned err exits with: ipc.FatalExitCode,
// which the master does not respawn, for a setup it cannot use (it would fail the same
// way); 1 for a first snapshot it could not serve, which the master checked and may
// serve after a respawn.
func ExitCode(err error) int {
	var unservable *unservableError
	if errors.As(err, &unservable) {
		return 1
	}
	return ipc.FatalExitCode
}

// Worker is the state of one worker process.
type Worker struct {
	opts      Options
	log       *errlog.Logger
	conn      *ipc.Conn
	cfg       conf.Config
	pools     *proxy.Pools
	shared    *plugins.Shared
	table     atomic.Pointer[routeTable]
	certs     *certStore // the TLS listeners' certificates, swapped with table
	admin     *fasthttp.HostClient
	servers   []*fasthttp.Server
	listeners []net.Listener
	conns     *connTracker
	edge      *edge     // client limits and real IP, from the static config
	h2        *h2Server // HTTP/2 to clients (http2.go)
	// connObservers hear every client connection's state changes (plugins.ConnWatcher:
	// prometheus's connection gauges).
	connObservers []plugins.ConnObserver
	// faults rate-limits the error log's lines about plugin faults (handler.go).
	faults faultLog
	// draining is set once the worker stops accepting: every response from then on
	// carries Connection: close.
	draining  atomic.Bool
	requests  atomic.Uint64
	errorLog  string
	accessLog *accesslog.Logger // nil when access_log.enabled is false

	compileMu sync.Mutex // one snapshot compiled at a time
	// snap is the snapshot the table was compiled from, whose routes may be older than
	// the table's (snapshotOf), and leftOut what the latest version leaves out: for the
	// next delta (compileMu).
	snap    *conf.Snapshot
	leftOut []conf.LeftOut
	// gc sets the worker's GOGC from its live heap (gcpolicy.go); nil when GOGC is set
	// in the environment.
	gc *gcPolicy
}

// Run serves until the master says stop or goes away.
func Run(opts Options) error {
	w := &Worker{opts: opts, log: errlog.New(os.Stderr, fmt.Sprintf("worker slot %d", opts.Slot)), conns: newConnTracker(),
		gc: startGCPolicy()}
	conn, err := ipc.FromFile(os.NewFile(ipc.ConnFD, "ipc"))
	if err != nil {
		return fmt.Errorf("worker: no IPC socket on fd %d (a worker is started by its master): %w", ipc.ConnFD, err)
	}
	w.conn = conn
	if err := conn.SendJSON(ipc.KindHello, ipc.Hello{PID: os.Getpid(), Slot: opts.Slot, Generation: opts.Generation, Version: opts.Version}); err != nil {
		return err
	}
	setup, err := w.receiveSetup()
	if err != nil {
		return err
	}
	// ssl.ssl_trusted_certificate is read once per worker: a reload starts new workers.
	roots, err := confio.TrustedCertificates(setup.Prefix, w.cfg.SSLTrustedCertificate)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	w.pools = proxy.NewPoolsWith(proxy.Options{RootCAs: roots, Logf: w.log.Errorf})
	frame, err := conn.Receive()
	if err != nil || frame.Kind != ipc.KindConfig {
		return fmt.Errorf("worker: expected the first config snapshot, got %v %v", frame.Kind, err)
	}
	version, err := w.load(frame.Payload)
	if err != nil {
		w.reject(frame.Payload, err)
		return err
	}
	if err := w.serveListeners(setup); err != nil {
		return err
	}
	_ = conn.SendJSON(ipc.KindAck, ipc.Ack{Version: version})
	_ = conn.Send(ipc.KindReady, nil)
	go w.reportStats()
	err = w.listen()
	if w.accessLog != nil {
		if cerr := w.accessLog.Close(); cerr != nil {
			w.log.Errorf("closing the access log: %v", cerr)
		}
	}
	return err
}

func (w *Worker) receiveSetup() (ipc.Setup, error) {
	var setup ipc.Setup
	frame, err := w.conn.Receive()
	if err != nil {
		return setup, fmt.Errorf("worker: waiting for setup: %w", err)
	}
	if frame.Kind != ipc.KindSetup {
		return setup, fmt.Errorf("worker: expected setup, got %s", frame.Kind)
	}
	if err := frame.Decode(&setup); err != nil {
		return setup, err
	}
	if err := json.Unmarshal(setup.Config, &w.cfg); err != nil {
		return setup, fmt.Errorf("worker: decoding static config: %w", err)
	}
	w.edge = newEdge(&w.cfg)
	w.h2 = newH2Server(&w.cfg, w.handle, w.draining.Load, quietLogger{w.log})
	w.log.SetLevel(errlog.ParseLevel(w.cfg.ErrorLogLevel))
	w.certs = newCertStore(w.cfg.SSL.FallbackSNI, w.log)
	if err := w.certs.setTicketKeys(setup.TicketKeys); err != nil {
		return setup, fmt.Errorf("worker: setup: %w", err)
	}
	w.errorLog = setup.ErrorLog
	if w.cfg.AccessLog.Enabled {
		path := w.cfg.AccessLog.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(setup.Prefix, path)
		}
		if w.accessLog, err = accesslog.Open(w.cfg.AccessLog, path); err != nil {
			return setup, fmt.Errorf("worker: %w", err)
		}
	}
	w.admin = newAdminClient(setup.AdminSocket)
	w.shared = &plugins.Shared{Segments: map[string]*shm.Segment{}, Config: &w.cfg, Logf: w.log.Errorf,
		Version: w.opts.Version, Prefix: setup.Prefix}
	specs := plugins.Segments()
	for _, s := range setup.SegmentFDs {
		spec, ok := specs[s.Plugin]
		if !ok {
			return setup, fmt.Errorf("worker: master passed a segment for %q, which this binary does not know", s.Plugin)
		}
		f := os.NewFile(uintptr(s.FD), "shm-"+s.Plugin)
		seg, err := shm.Open(f, spec.Layout)
		f.Close()
		if err != nil {
			return setup, fmt.Errorf("worker: %s: %w", s.Plugin, err)
		}
		w.shared.Segments[s.Plugin] = seg
	}
	if w.connObservers, err = plugins.ObserveConns(w.shared); err != nil {
		w.log.Errorf("connections unobserved: %v", err)
	}
	w.h2.observers = w.connObservers
	return setup, nil
}

// serveListeners starts one fasthttp server per inherited listening socket.
func (w *Worker) serveListeners(setup ipc.Setup) error {
	for _, l := range setup.ListenerFDs {
		inherited, err := inheritListener(os.NewFile(uintptr(l.FD), l.Address))
		if err != nil {
			return fmt.Errorf("worker: inherited listener %s (fd %d): %w", l.Address, l.FD, err)
		}
		if tcp, ok := inherited.(*net.TCPListener); ok {
			// Accept a connection once its request came, as nginx's `listen ... deferred`:
			// its first read then finds it, and it never joins the poller unless it has to
			// wait later (rawio.DeferAccept says what it changes for a silent client).
			rawio.DeferAccept(tcp, w.cfg.ClientHeaderTimeout)
		}
		el := newEdgeListener(countingListener{Listener: inherited, t: w.conns}, w.edge, w.cfg.WorkerConnections)
		var ln net.Listener = el
		srv := w.newServer()
		if w.cfg.IsTLSListen(l.Address) {
			el.tls = true
			// Wrapped outside the counter: a connection counts from accept, handshake or not.
			ln = tls.NewListener(ln, w.certs.listener)
			srv.NextProto("h2", w.h2.serveTLS)
		} else if w.cfg.ServesH2C(l.Address) {
			el.h2c = w.h2
		}
		w.servers = append(w.servers, srv)
		w.listeners = append(w.listeners, ln)
		go func(address string) {
			if err := srv.Serve(ln); err != nil {
				w.log.Errorf("serving %s: %v", address, err)
			}
		}(l.Address)
	}
	return nil
}

// inheritListener makes a listener of f, a listening socket the master passed, and closes
// f. The connections it accepts have TCP keep-alive off, as nginx's have unless asked for
// (rawio.KeepAliveOff says why that is safe).
func inheritListener(f *os.File) (net.Listener, error) {
	ln, err := net.FileListener(f)
	f.Close() // FileListener holds its own dup
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.(*net.TCPListener); ok {
		rawio.KeepAliveOff(tcp)
	}
	return ln, nil
}

func (w *Worker) newServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:           w.handle,
		Name:              "gw",
		StreamRequestBody: true,
		CloseOnShutdown:   true,
		// The edge's limits (worker/edge.go): the request line and headers must fit the
		// read buffer (else 431, or 414 when the request line alone does not fit). The
		// timeouts (client_header_timeout, keepalive_timeout, client_body_timeout,
		// send_timeout) are the edgeConn's, armed only when a read or write waits, so
		// fasthttp gets none: its would read the clock and move a timer three times a
		// request. client_max_body_size is the edge's too: the body streams to the
		// upstream, and fasthttp's MaxRequestBodySize does not apply then.
		ReadBufferSize:               w.cfg.ClientHeaderBufferSize,
		HeaderReceived:               w.edge.headerReceived,
		ErrorHandler:                 errorHandler,
		ExpectHandler:                w.edge.expectHandler,
		DisablePreParseMultipartForm: true,
		NoDefaultContentType:         true,
		Logger:                       quietLogger{w.log},
		ConnState:                    w.connState,
		// The request's start is read by whoever needs it (the access log, plugins).
		LazyRequestTime: true,
	}
}

// connState feeds fasthttp's connection events to the drain logic and to the plugins'
// connection observers.
func (w *Worker) connState(c net.Conn, state fasthttp.ConnState) {
	w.conns.hook(c, state, w.connObservers)
}

// listen handles the master's frames until shutdown or until the master is gone.
func (w *Worker) listen() error {
	for {
		frame, err := w.conn.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				// The master is gone, however it died: a serving worker must not outlive it.
				w.log.Errorf("master gone: exiting")
				return nil
			}
			return fmt.Errorf("worker: reading from master: %w", err)
		}
		switch frame.Kind {
		case ipc.KindConfig, ipc.KindDelta:
			load := w.load
			if frame.Kind == ipc.KindDelta {
				load = w.loadDelta
			}
			version, err := load(frame.Payload)
			if err != nil {
				w.log.Errorf("config %s rejected, still serving the previous one: %v", frame.Kind, err)
				w.reject(frame.Payload, err)
				continue
			}
			_ = w.conn.SendJSON(ipc.KindAck, ipc.Ack{Version: version})
		case ipc.KindShutdown:
			var s ipc.Shutdown
			_ = frame.Decode(&s)
			if s.Mode == ipc.Graceful {
				// A draining worker outlives its master if need be: its clients are
				// still being served. Keep reading only to notice nothing else.
				w.drain()
			}
			return nil
		case ipc.KindReopen:
			w.reopen()
		case ipc.KindTicketKeys:
			var keys ipc.TicketKeys
			err := frame.Decode(&keys)
			if err == nil {
				err = w.certs.setTicketKeys(keys.Keys)
			}
			if err != nil {
				w.log.Errorf("TLS session ticket keys rejected, keeping the previous ones: %v", err)
			}
		default:
			w.log.Warnf("unexpected %s frame from master", frame.Kind)
		}
	}
}

// load compiles a snapshot and swaps it in; requests in flight finish on the old table.
// A snapshot this worker would serve otherwise than the master checked it (an object the
// master did not leave out fails to build here) is rejected whole, and the previous one
// keeps serving: what the Admin API acknowledged must be served exactly as written.
func (w *Worker) load(payload []byte) (uint64, error) {
	var snap conf.Snapshot
	if err := json.Unmarshal(payload, &snap); err != nil {
		return 0, fmt.Errorf("decoding snapshot: %w", err)
	}
	w.compileMu.Lock()
	defer w.compileMu.Unlock()
	if old := w.table.Load(); old != nil && old.version > snap.Version {
		return old.version, nil // a stale resend; the newer table stays
	}
	return w.serve(&snap)
}

// loadDelta applies one write, a conf.Delta from the version this worker serves, as load
// does a whole snapshot. A delta this worker already holds is acknowledged as it is; one
// from another version is refused, and the master sends the whole snapshot instead.
func (w *Worker) loadDelta(payload []byte) (uint64, error) {
	var d conf.Delta
	if err := json.Unmarshal(payload, &d); err != nil {
		return 0, fmt.Errorf("decoding delta: %w", err)
	}
	w.compileMu.Lock()
	defer w.compileMu.Unlock()
	old := w.table.Load()
	switch {
	case old.version >= d.To:
		return old.version, nil
	case old.version != d.From || w.snap == nil:
		return 0, fmt.Errorf("config version %d: a delta from version %d, and this worker serves version %d", d.To, d.From, old.version)
	}
	u, ok := planUpdate(old, &d, w.snap)
	if !ok {
		return w.serve(snapshotOf(old, w.snap, w.leftOut).Apply(&d))
	}
	// w.snap becomes the base the table's objects other than routes are built from; the
	// table's index holds the routes.
	t, leftOut, err := recompile(old, u)
	if err != nil {
		return 0, err
	}
	if len(leftOut) > 0 {
		return 0, &unservableError{version: d.To, leftOut: leftOut}
	}
	w.table.Store(t)
	w.snap, w.leftOut = u.base, d.LeftOut
	if len(d.Changes) >= bigConfig {
		debug.FreeOSMemory() // an import: see serve
		w.gc.update()
	}
	return d.To, nil
}

// serve compiles snap and swaps it in. Callers hold compileMu.
func (w *Worker) serve(snap *conf.Snapshot) (uint64, error) {
	certs, pairs, sslsLeftOut := w.certs.compile(snap.SSLs)
	t, leftOut, err := compile(snap, w.pools, w.shared)
	if err != nil {
		return 0, err
	}
	if leftOut = append(sslsLeftOut, leftOut...); len(leftOut) > 0 {
		return 0, &unservableError{version: snap.Version, leftOut: leftOut}
	}
	w.table.Store(t)
	w.certs.commit(certs, pairs)
	w.snap, w.leftOut = snap, snap.LeftOut
	if len(snap.Routes) >= bigConfig {
		// A whole compile of a big config leaves garbage several times the table's size
		// (the decoded snapshot's, the previous table's). Give it back now rather than
		// when the scavenger gets to it: with 100,000 routes the worker stayed 150 MiB
		// above its live heap. The forced GC is a pause of a few milliseconds, next to a
		// compile that took hundreds; a write of routes alone never comes here.
		debug.FreeOSMemory()
		// The collection found the new table's size: the next goal follows it now, not
		// after the next collection (gcpolicy.go).
		w.gc.update()
	}
	return snap.Version, nil
}

// bigConfig is the route count from which a whole compile returns its garbage to the
// system at once.
const bigConfig = 5000

// reject tells the master that the snapshot in payload is not served, and why.
func (w *Worker) reject(payload []byte, err error) {
	var head struct {
		Version uint64 `json:"version"` // a whole snapshot's
		To      uint64 `json:"to"`      // a delta's
	}
	_ = json.Unmarshal(payload, &head)
	_ = w.conn.SendJSON(ipc.KindReject, ipc.Reject{Version: max(head.Version, head.To), Reason: err.Error()})
}

// unservableError is a snapshot holding objects this worker cannot build.
type unservableError struct {
	version uint64
	leftOut []conf.LeftOut
}

func (e *unservableError) Error() string {
	names := make([]string, len(e.leftOut))
	for i, l := range e.leftOut {
		names[i] = l.String()
	}
	return fmt.Sprintf("config version %d: %s", e.version, strings.Join(names, "; "))
}

// drain stops accepting and finishes what is in flight: responses carry Connection:
// close, connections idle for idleGrace are closed, and worker_shutdown_timeout bounds it.
// The master keeps the listening sockets open, so closing this process's copies resets
// nothing: queued connections go to the slot's next worker.
func (w *Worker) drain() {
	w.draining.Store(true)
	for _, ln := range w.listeners {
		_ = ln.Close()
	}
	// The sockets are shared with the next generation: until this worker's copies are
	// closed it may accept a connection that must get the new configuration. Close waits
	// out an accept in progress, so from here on this worker takes none.
	_ = w.conn.Send(ipc.KindClosed, nil)
	// HTTP/2's Connection: close: no stream after those opened, which finish.
	w.h2.goAwayAll()
	deadline := time.Now().Add(w.cfg.WorkerShutdownTimeout)
	for time.Now().Before(deadline) {
		// Websocket tunnels left fasthttp's accounting when they were hijacked; they end
		// when either side closes, or at the deadline with the process.
		if w.conns.closeIdle(idleGrace) == 0 && proxy.OpenTunnels() == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.log.Warnf("worker_shutdown_timeout %v passed with %d connections open: closing them", w.cfg.WorkerShutdownTimeout, w.conns.open.Load())
}

// reopen points this process's stdout and stderr (the error log) at the path again, after
// logrotate renamed the file.
func (w *Worker) reopen() {
	if w.errorLog == "" {
		return
	}
	f, err := os.OpenFile(w.errorLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		w.log.Errorf("reopening %s: %v", w.errorLog, err)
		return
	}
	_ = unix.Dup2(int(f.Fd()), 1)
	_ = unix.Dup2(int(f.Fd()), 2)
	f.Close()
	if w.accessLog != nil {
		if err := w.accessLog.Reopen(); err != nil {
			w.log.Errorf("%v", err)
		}
	}
}

// reportStats tells the master, once a second, what `gwctl status` shows for this worker.
// It also has monotime read the wall clock again, so that the times the worker shows
// (the access log's) follow a step of the system clock within a second.
func (w *Worker) reportStats() {
	for range time.Tick(time.Second) {
		monotime.Resync()
		stats := ipc.Stats{Requests: w.requests.Load(), Connections: w.conns.open.Load(), HTTP2Abuse: w.h2.abuseCounts()}
		if err := w.conn.SendJSON(ipc.KindStats, stats); err != nil {
			return
		}
	}
}

// quietLogger routes fasthttp's own messages into the error log.
type quietLogger struct{ log *errlog.Logger }

func (q quietLogger) Printf(format string, args ...any) { q.log.Warnf(format, args...) }
