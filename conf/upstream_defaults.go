package conf

// APISIX's upstream defaults (schema_def.lua and its nginx template). They are applied
// here and nowhere else: the worker builds what Normalize gives it and invents no value.
const (
	DefaultBalancer = "roundrobin"
	DefaultScheme   = "http"
	DefaultPassHost = "pass"
	// DefaultTimeoutSeconds is nginx's proxy_{connect,send,read}_timeout, which APISIX
	// leaves alone.
	DefaultTimeoutSeconds = 60
	// DefaultMaxRetries bounds the retries of an upstream that sets neither retries nor
	// retry_timeout. APISIX's default, one try per remaining node, lets one request of an
	// upstream with thousands of dead nodes try them all: 75-110 ms for 2000 nodes that
	// refuse at once (worker/proxy's BenchmarkForwardManyDeadNodes, 2 busy cores), and
	// the connect timeout per node for nodes that drop the SYN. 32 retries cost under
	// 2 ms there, and leave upstreams of up to 33 nodes with APISIX's default.
	DefaultMaxRetries = 32
	// defaultHTTPPort and defaultHTTPSPort are the port of a node that names none.
	defaultHTTPPort  = 80
	defaultHTTPSPort = 443
)

// defaultKeepalivePool is APISIX's keepalive_pool default, which is also its global
// nginx_config.http.upstream setting: 320 idle connections per node, closed after 60 s
// idle or 1000 requests.
var defaultKeepalivePool = KeepalivePool{Size: 320, IdleTimeout: 60, Requests: 1000}

// ApplyDefaults fills what the client left unset: type roundrobin, scheme http, pass_host
// pass, keepalive_pool {320, 60, 1000} and timeout {60, 60, 60}. Normalize calls it on its
// own copy; the Admin API stores objects without defaults, as APISIX does since 3.14.
// What u points to (its keepalive_pool, its timeout) may be changed: call it on a copy
// that owns them.
//
// Retries stays nil when unset: nil means "one try per remaining node" (the number of
// nodes − 1, at most DefaultMaxRetries when retry_timeout is unset too), which Normalize
// counts. A nil u is left alone.
func (u *Upstream) ApplyDefaults() {
	if u == nil {
		return
	}
	if u.Type == "" {
		u.Type = DefaultBalancer
	}
	if u.Scheme == "" {
		u.Scheme = DefaultScheme
	}
	if u.PassHost == "" {
		u.PassHost = DefaultPassHost
	}
	if u.Timeout == nil {
		u.Timeout = &Timeout{Connect: DefaultTimeoutSeconds, Send: DefaultTimeoutSeconds, Read: DefaultTimeoutSeconds}
	}
	if u.KeepalivePool == nil {
		pool := defaultKeepalivePool
		u.KeepalivePool = &pool
	}
	// A decoded pool always has size and requests (decoding fills them); these cover one
	// built in code. IdleTimeout 0 is a valid setting, so it is not touched.
	if u.KeepalivePool.Size == 0 {
		u.KeepalivePool.Size = defaultKeepalivePool.Size
	}
	if u.KeepalivePool.Requests == 0 {
		u.KeepalivePool.Requests = defaultKeepalivePool.Requests
	}
}

// defaultPort is the port of a node of scheme that names none.
func defaultPort(scheme string) int {
	if scheme == "https" || scheme == "grpcs" {
		return defaultHTTPSPort
	}
	return defaultHTTPPort
}
