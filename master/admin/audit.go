package admin

import (
	"encoding/json"
	"net/http"
	"time"
)

// auditRecord is one line of the audit log: who asked for which write, and what it got.
type auditRecord struct {
	Time string `json:"time"` // RFC 3339, UTC, with fractional seconds
	// Key is the name of the key that matched, "" when none did.
	Key      string `json:"key"`
	Peer     string `json:"peer"`
	Method   string `json:"method"`
	Resource string `json:"resource"`
	Status   int    `json:"status"`
}

// isWrite tells which methods the audit log records: every one that may change the store.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// serveAudited serves one request and, for a write, records its outcome in the audit log,
// refused ones included: an audit trail that skips failed attempts hides probing.
func (h *Handler) serveAudited(w http.ResponseWriter, r *http.Request, peer string, checkPeer bool) {
	if h.opts.Audit == nil || !isWrite(r.Method) {
		h.serve(w, r, peer, checkPeer)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	out := h.serve(sw, r, peer, checkPeer)
	h.audit(auditRecord{Key: out.keyName, Peer: peer, Method: r.Method, Resource: out.resource, Status: sw.status})
}

// audit writes rec as one line, stamped now. A failed write is not the caller's problem:
// the change already happened, and the writer (the master's audit file) reports its own
// failures.
func (h *Handler) audit(rec auditRecord) {
	if h.opts.Audit == nil {
		return
	}
	rec.Time = h.now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(rec)
	if err != nil {
		panic("BUG: admin: encoding an audit record: " + err.Error())
	}
	_, _ = h.opts.Audit.Write(append(line, '\n'))
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
