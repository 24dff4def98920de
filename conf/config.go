package conf

import "time"

// Config is gw's own conf/config.yaml (not APISIX's schema), after defaults are applied.
// It holds the static settings: changing them needs a reload, while routes, upstreams and
// services change at run time through the Admin API.
type Config struct {
	// WorkerProcesses is the number of workers; 0 means auto (one per CPU).
	WorkerProcesses int `json:"worker_processes"`
	// NodeListen are the data-plane addresses, host:port.
	NodeListen []string `json:"node_listen"`
	Admin      Admin    `json:"admin"`
	// DataDir holds the persisted Admin API objects; relative paths are under the prefix.
	DataDir string `json:"data_dir"`
	// WorkerShutdownTimeout bounds a draining worker's life.
	WorkerShutdownTimeout time.Duration `json:"worker_shutdown_timeout"`
	// ErrorLogLevel is one of debug, info, warn, error.
	ErrorLogLevel string `json:"error_log_level"`
	// WorkerRlimitNofile is the open-file limit the master sets for itself and its workers.
	WorkerRlimitNofile int `json:"worker_rlimit_nofile"`
	// User is the account the workers run as, nginx's user directive: "name" or
	// "name group" (names or numeric ids); empty keeps the master's own. It takes effect
	// only when the master runs as root, and is fixed for the master's life.
	User      string    `json:"user"`
	AccessLog AccessLog `json:"access_log"`
	// Shm sizes the shared-memory segments. Like nginx's shared zones they are fixed for
	// the life of the master: a reload that changes them fails.
	Shm        Shm        `json:"shm"`
	Prometheus Prometheus `json:"prometheus"`
	// Status is the master's status API.
	Status Status `json:"status"`
	// Edge is the client limits and real-IP keys, top-level keys in config.yaml.
	Edge
	// SSL is the TLS listener (APISIX's apisix.ssl); see conf/config_ssl.go.
	SSL TLSListener `json:"ssl"`
	// HTTP2 is HTTP/2 to clients; see conf/config_http2.go.
	HTTP2  HTTP2  `json:"http2"`
	Router Router `json:"router"`
	// UpstreamTrust is ssl.ssl_trusted_certificate; see conf/config_upstream_tls.go.
	UpstreamTrust
	// Deployment is the node's role and config provider; see conf/config_deployment.go.
	Deployment Deployment `json:"deployment"`
	// PluginAttr is the plugins' node-wide settings; see conf/config_plugin_attr.go.
	PluginAttr PluginAttr `json:"plugin_attr"`
}

// Status configures the master's status API (/status, /status/ready), as APISIX's
// apisix.status; fixed for the master's life like the metrics server.
type Status struct {
	Enabled bool   `json:"enabled"`
	Listen  string `json:"listen"`
}

// Router chooses how routes are matched, as APISIX's apisix.router.http.
type Router struct {
	// HTTP is one of RouterHostURI, RouterURI, RouterURIWithParameter.
	HTTP string `json:"http"`
}

// The routers of APISIX that gw has.
const (
	// RouterHostURI tries the routes with hosts first, then those without (APISIX's
	// default since 3.3).
	RouterHostURI = "radixtree_host_uri"
	// RouterURI matches by path first and checks hosts like the other conditions.
	RouterURI = "radixtree_uri"
	// RouterURIWithParameter is RouterURI where a ":name" path segment matches any one
	// segment ("/user/:id").
	RouterURIWithParameter = "radixtree_uri_with_parameter"
)

// AccessLog configures the per-request log written by the workers.
type AccessLog struct {
	Enabled bool `json:"enabled"`
	// Path is relative to the prefix unless absolute.
	Path string `json:"path"`
	// Format is "combined" (nginx's) or "json".
	Format string `json:"format"`
	// Buffer is how many bytes a worker gathers before writing; FlushInterval bounds how
	// long a line may wait in the buffer.
	Buffer        int           `json:"buffer"`
	FlushInterval time.Duration `json:"flush_interval"`
}

// Shm sizes the shared-memory segments, in bytes.
type Shm struct {
	LimitCount int64 `json:"limit_count"`
	// LimitCountOnFull is what happens when the limit-count table has no free entry after
	// expired windows were reclaimed: "evict" replaces the live window closest to its end
	// (fail open), "reject" refuses the request with the plugin's rejected_code (fail closed).
	LimitCountOnFull string `json:"limit_count_on_full"`
	Metrics          int64  `json:"metrics"`
	// HealthCheck holds the upstream nodes' health, written by the master's checker and
	// the workers' passive counting.
	HealthCheck int64 `json:"health_check"`

	// LimitReq holds limit-req's buckets, a keyed table (shm/keyed.go) shared by every
	// worker.
	LimitReq int64 `json:"limit_req"`
	// LimitConn holds limit-conn's counts of requests in flight and each worker's ledger
	// of them, a keyed table shared by every worker; at most 64m (what a ledger can name).
	LimitConn int64 `json:"limit_conn"`
	// APIBreaker holds api-breaker's breakers, one per route, host and path, a keyed
	// table shared by every worker.
	APIBreaker int64 `json:"api_breaker"`
}

// Prometheus configures the master's metrics export server.
type Prometheus struct {
	Enabled    bool   `json:"enabled"`
	ExportAddr string `json:"export_addr"`
	ExportURI  string `json:"export_uri"`
	// MaxSeries caps the per-request series; new label sets past it fold into one overflow
	// series.
	MaxSeries int `json:"max_series"`
}

// Admin configures the Admin API listener and who may use it.
type Admin struct {
	// Listen is the Admin API address, host:port.
	Listen string `json:"listen"`
	// Keys are the configured keys, nil when none is; AdminKeys applies the built-in one.
	Keys []AdminKey `json:"keys"`
	// Allow lists the CIDRs (canonical, e.g. "10.0.0.0/8") whose TCP peers may use the
	// Admin API; AllowNets parses them.
	Allow []string `json:"allow"`
}

// AdminKey is one Admin API key. Role is "admin" (every method) or "viewer" (GET only).
type AdminKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	Role string `json:"role"`
}

// DefaultAdminKey is APISIX 2.x's well-known key, kept so the seed scripts work verbatim;
// it is honoured only while the admin listener is on loopback.
const DefaultAdminKey = "edd1c9f034335f136f87ad84b625c8f1"
