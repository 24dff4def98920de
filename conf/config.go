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
