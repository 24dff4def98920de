package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gw/conf"
	"gw/master/store"
)

// Prefix is the URI prefix of every Admin API path.
const Prefix = "/apisix/admin"

// maxBodyBytes is APISIX's request body limit for the Admin API (1.5 MiB).
const maxBodyBytes = 1536 << 10

const defaultPublishTimeout = 5 * time.Second

// Publisher hands each accepted write to the workers.
type Publisher interface {
	// Publish makes every live worker serve the store with d applied, the write just
	// stored, and returns once each has acknowledged it, or an error naming the worker
	// that lagged. d.To is the store's revision; the Publisher sets d.From.
	Publish(ctx context.Context, d *conf.Delta) error
}

// Builder builds snapshots exactly as every worker will (the master's worker.Checker).
type Builder interface {
	// Check builds what the workers serve now with d applied, and returns the objects of
	// that snapshot that fail to build, each with why. It changes nothing: the Publisher
	// makes d the new state once it is stored.
	Check(d *conf.Delta) ([]conf.LeftOut, error)
	// LeftOut is what the snapshot the workers serve now leaves out: stored objects that
	// failed to build at start, which a later write need not fix.
	LeftOut() []conf.LeftOut
}

// Options configures a Handler.
type Options struct {
	Store *store.Store
	// Builder, when set, builds the snapshot each write would produce before the write is
	// stored: a write is acknowledged only if every worker can serve it. Nil leaves it to
	// validation alone (unit tests of the API's shapes).
	Builder Builder
	// Keys are the accepted Admin API keys; a key with an empty Key never matches.
	Keys []conf.AdminKey
	// Allow lists the networks whose TCP peers may use the API; empty denies every peer.
	Allow []*net.IPNet
	// Publisher receives a snapshot after every successful write; nil publishes nowhere.
	Publisher Publisher
	// Version is gw's version, sent as "Server: gw/<version>".
	Version string
	// PublishTimeout bounds one publication; 0 means 5s.
	PublishTimeout time.Duration
	// Log receives refused keys (with the peer, never the token); nil logs nowhere.
	Log Logger
	// Audit receives one JSON line per write request (see auditRecord); nil records
	// nothing. Each line is one Write call.
	Audit io.Writer
}

// Logger is the part of the master's error log the Admin API uses.
type Logger interface {
	Warnf(format string, args ...any)
}

// Handler serves the Admin API. It is safe for concurrent use: reads run in parallel,
// writes (with their publication) one at a time.
type Handler struct {
	opts    Options
	keys    []keyDigest
	server  string
	now     func() time.Time // replaced in tests
	writeMu sync.Mutex
}

// keyDigest keeps keys as SHA-256 digests so that comparing a token costs the same time
// whatever its length and whichever key it matches.
type keyDigest struct {
	digest [sha256.Size]byte
	name   string
	role   string
}

// New builds a Handler. It panics without a Store: that is a wiring bug, not a runtime
// condition.
func New(opts Options) *Handler {
	if opts.Store == nil {
		panic("BUG: admin: Options.Store is nil")
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = defaultPublishTimeout
	}
	h := &Handler{opts: opts, server: "gw/" + opts.Version, now: time.Now}
	for _, k := range opts.Keys {
		if k.Key != "" {
			h.keys = append(h.keys, keyDigest{digest: sha256.Sum256([]byte(k.Key)), name: k.Name, role: k.Role})
		}
	}
	return h
}

// ServeHTTP serves a request that arrived on the admin TCP listener.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serveAudited(w, r, r.RemoteAddr, true)
}

// Internal returns the same API without the peer allow-list, for the master's private
// Unix socket: workers forward there the admin requests that reached the data port from
// a loopback peer, having checked that peer themselves. Keys are still checked.
func (h *Handler) Internal() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serveAudited(w, r, forwardedPeer, false) })
}

// forwardedPeer stands for the client of a call a worker forwarded: workers forward only
// calls from loopback peers, and do not pass the address on.
const forwardedPeer = "loopback, via the data port"

// auditFacts is what serve learned that the audit line needs.
type auditFacts struct {
	keyName  string
	resource string // the object's path, the created one for a POST
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, peer string, checkPeer bool) (out auditFacts) {
	header := w.Header()
	header.Set("Content-Type", "application/json")
	header.Set("Server", h.server)
	header.Set("X-API-VERSION", "v3")

	out.resource = r.URL.Path
	if checkPeer && !h.peerAllowed(r.RemoteAddr) {
		reply(w, http.StatusForbidden, errorBody{ErrorMsg: "403 Forbidden"})
		return
	}
	rest, underPrefix := strings.CutPrefix(r.URL.Path, Prefix)
	if !underPrefix || (rest != "" && rest[0] != '/') {
		reply(w, http.StatusNotFound, errorBody{ErrorMsg: "404 Not Found"})
		return
	}
	if r.Method == http.MethodHead && strings.Trim(rest, "/") == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	keyName, description, ok := h.authorize(r)
	out.keyName = keyName
	if !ok {
		if h.opts.Log != nil {
			who := "no matching key"
			if keyName != "" {
				who = "key " + strconv.Quote(keyName)
			}
			h.opts.Log.Warnf("admin: refused %s %s from %s (%s): %s", r.Method, r.URL.Path, peer, who, description)
		}
		reply(w, http.StatusUnauthorized, errorBody{ErrorMsg: "failed to check token", Description: description})
		return
	}
	name, idAndSub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if name == "plugins" || name == "schema" {
		status, body := describe(r.Method, name, idAndSub, r.URL.Query())
		reply(w, status, body)
		return
	}
	id, subPath, _ := strings.Cut(idAndSub, "/")
	res, ok := resources[name]
	if !ok {
		reply(w, http.StatusNotFound, errorBody{ErrorMsg: "Unsupported resource type: " + name})
		return
	}
	if slices.Contains(res.unsupported, r.Method) {
		reply(w, http.StatusMethodNotAllowed, errorBody{ErrorMsg: "not supported `" + r.Method + "` method for " + res.singular})
		return
	}
	req := request{res: res, id: id, subPath: strings.Trim(subPath, "/"), query: r.URL.Query(), ctx: r.Context()}
	var status int
	var body any
	switch r.Method {
	case http.MethodGet:
		status, body = h.get(req)
	case http.MethodPut, http.MethodPost, http.MethodPatch:
		var bad *rejection
		req.body, bad = readBody(r)
		bad = res.shownRejection(bad) // an ssl body holds a private key: never echo it
		if bad != nil {
			status, body = bad.status, bad.body
			break
		}
		switch r.Method {
		case http.MethodPut:
			status, body = h.put(req)
		case http.MethodPost:
			status, body = h.post(req)
		default:
			status, body = h.patch(req)
		}
	case http.MethodDelete:
		status, body = h.delete(req)
	default:
		header.Set("Allow", "GET, PUT, POST, PATCH, DELETE")
		status, body = http.StatusMethodNotAllowed, errorBody{ErrorMsg: "not supported `" + r.Method + "` method for " + res.singular}
	}
	if created, ok := body.(item); ok {
		out.resource = Prefix + strings.TrimPrefix(created.Key, "/apisix")
	}
	reply(w, status, body)
	return out
}

// peerAllowed judges the TCP peer only: X-Forwarded-For and X-Real-IP are the client's
// to forge (CVE-2022-24112 is that mistake).
func (h *Handler) peerAllowed(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, network := range h.opts.Allow {
		if network.Contains(ip) {
			return true
		}
	}
	return false
}

// authorize finds the token where APISIX looks for it (query api_key, header X-API-KEY,
// cookie x_api_key, first non-empty wins) and checks it and its role against the method.
// keyName is the name of the key that matched, "" when none did.
func (h *Handler) authorize(r *http.Request) (keyName, description string, ok bool) {
	token := r.URL.Query().Get("api_key")
	if token == "" {
		token = r.Header.Get("X-API-KEY")
	}
	if token == "" {
		if c, err := r.Cookie("x_api_key"); err == nil {
			token = c.Value
		}
	}
	if token == "" {
		return "", "missing apikey", false
	}
	digest := sha256.Sum256([]byte(token))
	var match *keyDigest
	for i := range h.keys {
		// No early exit: every key is compared whichever one matches.
		if subtle.ConstantTimeCompare(digest[:], h.keys[i].digest[:]) == 1 {
			match = &h.keys[i]
		}
	}
	if match == nil {
		return "", "wrong apikey", false
	}
	if match.role == conf.RoleViewer && r.Method != http.MethodGet {
		return match.name, "invalid method for role viewer", false
	}
	return match.name, "", true
}

// prepare turns changes, which are not stored yet, into the delta the workers will apply,
// and builds what they would then serve exactly as they will build it. It refuses (a
// non-zero status) when the build leaves out an object the changes touch, or one that
// is served now: what is acknowledged must be served exactly as written. Objects left
// out already (stored ones that failed at start) stay left out unless the changes
// replace or delete them. Once the changes are stored, publish hands the delta on.
func (h *Handler) prepare(changes ...store.Change) (*conf.Delta, int, any) {
	d := &conf.Delta{}
	touched := map[string]bool{}
	for _, c := range changes {
		var decoded any
		if c.Value != nil {
			var err error
			if decoded, err = store.Decode(c.Kind, c.ID, c.Value); err != nil {
				return nil, http.StatusBadRequest, errorBody{ErrorMsg: err.Error()}
			}
		}
		d.Changes = append(d.Changes, conf.ChangeOf(string(c.Kind), conf.ID(c.ID), decoded))
		touched[string(c.Kind)+"/"+c.ID] = true
	}
	if h.opts.Builder == nil {
		return d, 0, nil
	}
	for _, l := range h.opts.Builder.LeftOut() {
		if !touched[l.Key()] {
			d.LeftOut = append(d.LeftOut, l)
		}
	}
	failed, err := h.opts.Builder.Check(d)
	if err != nil {
		return nil, http.StatusServiceUnavailable, errorBody{ErrorMsg: "the config could not be built: " + err.Error()}
	}
	for _, l := range failed {
		if touched[l.Key()] {
			return nil, http.StatusBadRequest, errorBody{ErrorMsg: fmt.Sprintf("invalid configuration: %s cannot be served: %s", l.Key(), l.Reason)}
		}
		return nil, http.StatusBadRequest, errorBody{ErrorMsg: fmt.Sprintf("invalid configuration: this change would leave %s unservable: %s", l.Key(), l.Reason)}
	}
	return d, 0, nil
}

// publish hands d, which prepare built and the store now holds, to every worker. It
// outlives the client's request: a client that hangs up must not leave workers
// half-updated.
func (h *Handler) publish(ctx context.Context, d *conf.Delta) error {
	if h.opts.Publisher == nil {
		return nil
	}
	d.To = h.opts.Store.Revision()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.PublishTimeout+buildAllowance(d))
	defer cancel()
	return h.opts.Publisher.Publish(ctx, d)
}

// buildAllowance is the time a publication gets beyond PublishTimeout for the objects it
// carries: a worker builds an import of 100,000 routes in a few seconds on an idle core,
// several times that on a busy one, and such an import is still a success when it takes
// longer than one write may. 100 µs an object gives it 10 s more; a write of a few objects
// gets nothing measurable.
func buildAllowance(d *conf.Delta) time.Duration {
	return time.Duration(len(d.Changes)) * 100 * time.Microsecond
}

type errorBody struct {
	ErrorMsg    string `json:"error_msg"`
	Description string `json:"description,omitempty"`
	ReqBody     string `json:"req_body,omitempty"`
}

// notFound is APISIX's body for a missing key (field "message", not "error_msg").
var notFound = struct {
	Message string `json:"message"`
}{"Key not found"}

func badRequest(msg string) (int, any) {
	return http.StatusBadRequest, errorBody{ErrorMsg: msg}
}

// reply writes status and body as JSON followed by "\n", as APISIX does.
func reply(w http.ResponseWriter, status int, body any) {
	w.WriteHeader(status)
	if body == nil {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(body) // the client hanging up is the only failure; nothing to do about it
}
