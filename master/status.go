package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gw/ipc"
)

// handOverStatus names the status API's listener in an upgrade.
const handOverStatus = "status"

// serveStatus starts the status API on status.listen when it is enabled, as APISIX's:
// GET /status says the master runs, GET /status/ready says whether every worker of the
// current generation is ready and has acknowledged the latest configuration. It runs
// before the first workers start, so a probe sees 503 until they serve.
func (m *Master) serveStatus() error {
	cfg := m.currentConfig().Status
	if !cfg.Enabled {
		return nil
	}
	ln, err := m.listenTCP(handOverStatus, cfg.Listen)
	if err != nil {
		return fmt.Errorf("status.listen %s: %w", cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, nil)
	})
	mux.HandleFunc("GET /status/ready", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, m.notReady())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.mu.Lock()
	m.status = srv
	m.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Errorf("status API on %s: %v", ln.Addr(), err)
		}
	}()
	return nil
}

// writeStatus answers {"status":"ok"}, or 503 {"status":"error","error":...} in APISIX's
// shape.
func writeStatus(w http.ResponseWriter, problem error) {
	w.Header().Set("Content-Type", "application/json")
	body := map[string]string{"status": "ok"}
	if problem != nil {
		body = map[string]string{"status": "error", "error": problem.Error()}
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// notReady says why the gateway is not ready, or nil when every slot of the current
// generation has a ready worker that acknowledged the latest config version. Draining
// workers do not count: they serve only the connections they already had.
func (m *Master) notReady() error {
	m.mu.Lock()
	version := m.version
	sup := m.sup.view()
	m.mu.Unlock()
	slots, gen := sup.slots, sup.gen
	if gen == nil {
		return errors.New("the workers have not started yet")
	}
	ready := 0
	for slot, w := range slots {
		var rej *ipc.Reject
		if w != nil {
			rej = w.refuses()
		}
		switch {
		case w == nil || w.hasExited():
			return fmt.Errorf("worker slot %d has no running worker", slot)
		case !w.isReady():
			return fmt.Errorf("worker slot %d (pid %d) is starting", slot, w.pid)
		case rej != nil:
			return fmt.Errorf("worker slot %d (pid %d) refused configuration version %d: %s", slot, w.pid, rej.Version, rej.Reason)
		case w.ackedVersion() < version:
			return fmt.Errorf("worker id: %d has not received configuration version %d", slot, version)
		}
		ready++
	}
	if ready < gen.workers {
		return fmt.Errorf("worker count: %d but status report count: %d", gen.workers, ready)
	}
	return nil
}

func (w *workerProc) ackedVersion() uint64 {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	return w.acked
}
