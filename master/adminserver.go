package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/internal/errlog"
	"gw/master/admin"
)

// adminServers serve the Admin API on admin.listen and on the private Unix socket that
// workers forward data-port admin calls to. The handler is swapped whole when a reload
// changes the keys or the allow list; the TCP listener is replaced only when the address
// changes.
type adminServers struct {
	handler atomic.Pointer[admin.Handler]

	mu      sync.Mutex
	address string
	tcp     *http.Server
	unix    *http.Server
	audit   *auditLog
}

func (m *Master) listenAdmin(cfg *conf.Config) error {
	next, err := m.prepareAdmin(cfg)
	if err != nil {
		return err
	}
	m.commitAdmin(next)
	return nil
}

// adminChange is a new Admin API configuration made ready but not yet serving: its
// handler built and, when the address changes, its listener bound. A reload prepares it
// before starting the new workers and puts it in place only once they serve, so a reload
// that fails leaves the Admin API exactly as it was (address, keys and allow list).
type adminChange struct {
	handler *admin.Handler
	address string
	// listener is nil when the address is unchanged; previous is the hand-over entry it
	// displaced, put back if the change is abandoned.
	listener, previous net.Listener
}

func (m *Master) prepareAdmin(cfg *conf.Config) (*adminChange, error) {
	if m.admin == nil {
		m.admin = &adminServers{}
	}
	a := m.admin
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.audit == nil {
		audit, err := openAuditLog(filepath.Join(m.paths.Logs, "audit.log"), m.log)
		if err != nil {
			return nil, err
		}
		a.audit = audit
	}
	next := &adminChange{address: cfg.Admin.Listen, handler: admin.New(admin.Options{
		Store:     m.store,
		Builder:   m,
		Keys:      cfg.AdminKeys(),
		Allow:     cfg.AllowNets(),
		Publisher: m.adminPublisher(),
		Version:   m.opts.Version,
		Log:       m.log,
		Audit:     a.audit,
	})}
	if a.tcp != nil && a.address == cfg.Admin.Listen {
		return next, nil
	}
	if !cfg.Deployment.ServesAdmin() {
		return next, nil // the data port's forwarding finds the API off (serve)
	}
	m.mu.Lock()
	next.previous = m.handOverListeners[handOverAdmin]
	m.mu.Unlock()
	ln, err := m.listenTCP(handOverAdmin, cfg.Admin.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin.listen %s: %w", cfg.Admin.Listen, err)
	}
	next.listener = ln
	return next, nil
}

// commitAdmin puts next in place: requests from now on get its handler, and a new
// address takes over from the old, whose requests in flight finish.
func (m *Master) commitAdmin(next *adminChange) {
	a := m.admin
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handler.Store(next.handler)
	if next.listener == nil {
		return
	}
	old := a.tcp
	a.tcp, a.address = a.serve(next.listener, false, m), next.address
	if old != nil {
		closeGracefully(old)
	}
}

// abandonAdmin undoes prepareAdmin for a reload that failed: the new address is closed
// again and the listener handed over on an upgrade is the one still serving.
func (m *Master) abandonAdmin(next *adminChange) {
	if next.listener == nil {
		return
	}
	next.listener.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if next.previous != nil {
		m.handOverListeners[handOverAdmin] = next.previous
	} else {
		delete(m.handOverListeners, handOverAdmin)
	}
}

// listenAdminSocket serves the Admin API on the private Unix socket workers forward
// data-port admin calls to. It replaces the path, so a master started by an upgrade calls
// it only once it is ready: until then the old master's socket keeps answering.
func (m *Master) listenAdminSocket() error {
	a := m.admin
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.unix != nil {
		return nil
	}
	_ = os.Remove(m.paths.AdminSocket)
	unixLn, err := net.Listen("unix", m.paths.AdminSocket)
	if err != nil {
		return fmt.Errorf("admin socket %s: %w", m.paths.AdminSocket, err)
	}
	if err := os.Chmod(m.paths.AdminSocket, 0o600); err != nil {
		unixLn.Close()
		return err
	}
	unixLn.(*net.UnixListener).SetUnlinkOnClose(false) // see listenControl
	a.unix = a.serve(unixLn, true, m)
	return nil
}

func (a *adminServers) serve(ln net.Listener, internal bool, m *Master) *http.Server {
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if internal {
				w = &bodyFirstWriter{ResponseWriter: w, body: r.Body}
			}
			deployment := m.currentConfig().Deployment
			if !deployment.ServesAdmin() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				msg := "this node's deployment.role is data_plane: it has no Admin API; write through a traditional or control_plane node, or into etcd"
				if deployment.Standalone() {
					msg = "this node's deployment.role is data_plane: it has no Admin API; its config is the standalone file conf/" + deployment.StandaloneFile()
				}
				fmt.Fprintf(w, "{\"error_msg\":%q}\n", msg)
				return
			}
			if deployment.Standalone() && r.Method != http.MethodGet && r.Method != http.MethodHead {
				// APISIX serves no Admin API in standalone mode; gw serves a read-only one
				// with role traditional, so dashboards and scripts can still look.
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Allow", "GET, HEAD")
				w.WriteHeader(http.StatusMethodNotAllowed)
				fmt.Fprintf(w, "{\"error_msg\":%q}\n", "the config comes from the standalone file conf/"+deployment.StandaloneFile()+
					" (deployment.config_provider "+deployment.ConfigProvider+"): change that file; the Admin API only reads")
				return
			}
			if m.readOnly.Load() && r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "{\"error_msg\":%q}\n", errUpgradeInProgress.Error()+": writes resume on the new master in a few seconds")
				return
			}
			h := a.handler.Load()
			if internal {
				h.Internal().ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
		}),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Errorf("admin server on %s: %v", ln.Addr(), err)
		}
	}()
	return srv
}

// bodyFirstWriter reads the rest of the request body before the answer starts, for the
// private socket. The worker that forwarded the call reads no answer until it has written
// the whole request, and net/http, answering without reading a body (a 413 past the size
// limit, a 401), closes the connection if more than 256 KiB of it is left: the worker then
// gets a broken pipe instead of the answer and can only tell its client 502. The body is
// read however large: only a worker writes here, relaying a loopback client, whose
// client_max_body_size and client_body_timeout still hold.
type bodyFirstWriter struct {
	http.ResponseWriter
	body    io.Reader
	drained bool
}

func (w *bodyFirstWriter) drain() {
	if !w.drained {
		w.drained = true
		_, _ = io.Copy(io.Discard, w.body) // an error ends the connection anyway
	}
}

func (w *bodyFirstWriter) WriteHeader(status int) {
	w.drain()
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyFirstWriter) Write(p []byte) (int, error) {
	w.drain()
	return w.ResponseWriter.Write(p)
}

func (a *adminServers) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, srv := range []*http.Server{a.tcp, a.unix} {
		if srv != nil {
			closeGracefully(srv)
		}
	}
	a.tcp, a.unix = nil, nil
	if a.audit != nil {
		a.audit.close()
		a.audit = nil
	}
}

// auditLog appends the Admin API's audit lines to logs/audit.log. Before each line it
// checks that the path still names the open file and reopens it if not, so it follows
// logrotate whether or not a USR1 comes: a stat per Admin API write costs nothing next to
// the write's fsyncs. Safe for concurrent use.
type auditLog struct {
	mu   sync.Mutex
	path string
	file *os.File
	log  *errlog.Logger
}

func openAuditLog(path string, log *errlog.Logger) (*auditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return &auditLog{path: path, file: f, log: log}, nil
}

// Write appends one line. A failure is logged here: the write it records has already
// happened, and the Admin API answers its client regardless.
func (a *auditLog) Write(line []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file == nil {
		return 0, os.ErrClosed
	}
	if onDisk, err := os.Stat(a.path); err != nil || !sameFile(a.file, onDisk) {
		if f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			a.file.Close()
			a.file = f
		} else {
			a.log.Errorf("reopening the audit log: %v", err)
		}
	}
	n, err := a.file.Write(line)
	if err != nil {
		a.log.Errorf("audit log %s: %v; lost line: %s", a.path, err, bytes.TrimSpace(line))
	}
	return n, err
}

func sameFile(f *os.File, onDisk os.FileInfo) bool {
	open, err := f.Stat()
	return err == nil && os.SameFile(open, onDisk)
}

func (a *auditLog) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file != nil {
		a.file.Close()
		a.file = nil
	}
}

func closeGracefully(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
}
