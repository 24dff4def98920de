package conf

// APISIX's upstream defaults (schema_def.lua and its nginx template).
const (
	DefaultBalancer = "roundrobin"
	DefaultScheme   = "http"
	DefaultPassHost = "pass"
)

// defaultKeepalivePool is APISIX's keepalive_pool default, which is also its global
// nginx_config.http.upstream setting: 320 idle connections per node, closed after 60 s
// idle or 1000 requests.
var defaultKeepalivePool = KeepalivePool{Size: 320, IdleTimeout: 60, Requests: 1000}

// ApplyDefaults fills what the client left unset: type roundrobin, scheme http, pass_host
// pass and keepalive_pool {320, 60, 1000}. The worker calls it on its own copy; the Admin
// API stores objects without defaults, as APISIX does since 3.14.
//
// Retries stays nil when unset: nil means "one try per remaining node" (the number of
// nodes − 1), which only the balancer can count, and which the worker caps when
// retry_timeout is unset too (worker/proxy's defaultMaxRetries). A nil u is left alone.
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
