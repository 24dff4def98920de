package proxy

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/shm"
)

// defaultTimeout is nginx's proxy_{connect,send,read}_timeout, in seconds, which APISIX
// leaves alone.
const defaultTimeout = 60

// defaultMaxRetries bounds the retries of an upstream that sets neither retries nor
// retry_timeout. APISIX's default, one try per remaining node, lets one request of an
// upstream with thousands of dead nodes try them all: 75-110 ms for 2000 nodes that
// refuse at once (BenchmarkForwardManyDeadNodes, 2 busy cores), and the connect timeout
// per node for nodes that drop the SYN. 32 retries cost under 2 ms there, and leave
// upstreams of up to 33 nodes with APISIX's default.
const defaultMaxRetries = 32

type passHostMode uint8

const (
	passHostPass passHostMode = iota
	passHostNode
	passHostRewrite
)

// Upstream is one compiled upstream: its nodes, balancer and pools. The configuration is
// immutable after Pools.Upstream returns; the balancer state lives behind state, guarded by
// its mutex or held in atomics, so an Upstream is safe for concurrent use.
type Upstream struct {
	nodes       []node
	prioritised bool // some nodes differ in priority, so pick must find the top group

	balancer balancerKind
	state    *balancerState // shared with the copies WithWebsocket makes
	ring     *chashRing     // chash only
	hashKey  hashKey        // chash only: where the key comes from
	// websocket is the route's enable_websocket: an Upgrade request becomes a tunnel.
	websocket bool
	// health is each node's entry in the shared health table, nil without health checks;
	// passive is set when live traffic is counted into it (health.go).
	health  []shm.HealthNode
	passive *passiveRule

	retries int
	// retryTimeout is retry_timeout: when > 0, no retry starts once this long has passed
	// since the forward began (APISIX's proxy_retry_deadline).
	retryTimeout   time.Duration
	connectTimeout time.Duration
	sendTimeout    time.Duration
	readTimeout    time.Duration
	passHost       passHostMode
	upstreamHost   []byte

	// unusable, when set, is the 502 body every request gets: the upstream cannot work
	// as configured (its tls.client_cert_id names no client ssl).
	unusable []byte

	// Error bodies, formatted once here so that a failing request formats nothing.
	msgConnectTimeout []byte
	msgSendTimeout    []byte
	msgReadTimeout    []byte
}

type balancerKind uint8

const (
	balanceRoundRobin balancerKind = iota
	balanceChash
	balanceLeastConn
	balanceEWMA
)

// balancerState is what the balancers change as requests come and go. It belongs to one
// compiled upstream (so to one config snapshot and one worker process) and is shared by the
// copies WithWebsocket makes, which must count the same requests.
type balancerState struct {
	mu sync.Mutex
	// current is smooth weighted round robin's current weight per node.
	current []int
	// inflight counts least_conn's requests in flight per node; next rotates the node its
	// scan starts from, so that nodes tied on score take turns.
	inflight []atomic.Int64
	next     int
	// ewma is the latency estimate per node.
	ewma []ewmaStat
}

type node struct {
	pool     *nodePool
	weight   int
	priority int
	// hostHeader is the Host sent with pass_host=node: the node's host, with :port
	// unless the port is the scheme's default.
	hostHeader []byte
	// addr is "host:port" (IPv6 hosts in brackets), what Info.Node reports.
	addr []byte
}

var (
	msgNoNodes     = errorBody("502 Bad Gateway: upstream has no node that can take requests")
	msgNoAnswer    = errorBody("502 Bad Gateway: no upstream node answered")
	msgBadResponse = errorBody("502 Bad Gateway: upstream sent an invalid or incomplete response")
	msgTLSVerify   = errorBody("502 Bad Gateway: the upstream's TLS certificate did not verify; the error log says why")
	msgTLSFailed   = errorBody("502 Bad Gateway: the TLS handshake with the upstream failed; the error log says why")
	msgTLSRefused  = errorBody("502 Bad Gateway: the upstream refused the TLS connection (does it require a client certificate?); the error log says why")
)

// errorBody is APISIX's error envelope, {"error_msg":"..."}.
func errorBody(msg string) []byte {
	b, err := json.Marshal(struct {
		ErrorMsg string `json:"error_msg"`
	}{msg})
	if err != nil {
		panic("BUG: marshalling a string: " + err.Error())
	}
	return b
}

// Upstream compiles u, with routeTimeout (when not nil) replacing u's own timeout, as APISIX
// does. Nodes share pools with every other upstream built by p that names the same
// host, port, scheme and keepalive_pool. Host names are resolved in the background: a node
// whose name has no answer yet fails its requests with 502 until it has one. The error
// names the offending field.
func (p *Pools) Upstream(u *conf.Upstream, routeTimeout *conf.Timeout) (*Upstream, error) {
	if u == nil {
		return nil, fmt.Errorf("proxy: upstream is missing")
	}
	d := withDefaults(u)
	var balancer balancerKind
	switch d.Type {
	case "roundrobin":
	case "chash":
		balancer = balanceChash
	case "least_conn":
		balancer = balanceLeastConn
	case "ewma":
		balancer = balanceEWMA
	default:
		return nil, fmt.Errorf("proxy: type: balancer %q is not one of roundrobin, chash, least_conn, ewma", d.Type)
	}
	var secure bool
	switch d.Scheme {
	case "http":
	case "https":
		secure = true
	default:
		return nil, fmt.Errorf("proxy: scheme: %q is not supported, use http or https", d.Scheme)
	}
	kp := *d.KeepalivePool
	if kp.Size < 1 || kp.Requests < 1 || kp.IdleTimeout < 0 {
		return nil, fmt.Errorf("proxy: keepalive_pool: size and requests must be >= 1 and idle_timeout >= 0, got %d, %d, %g",
			kp.Size, kp.Requests, kp.IdleTimeout)
	}
	var idleTimeout time.Duration // 0 keeps no idle connection
	var err error
	if kp.IdleTimeout != 0 {
		if idleTimeout, err = seconds("keepalive_pool.idle_timeout", kp.IdleTimeout); err != nil {
			return nil, err
		}
	}
	timeout := d.Timeout
	if routeTimeout != nil {
		timeout = routeTimeout
	}
	connect, err := seconds("timeout.connect", timeout.Connect)
	if err != nil {
		return nil, err
	}
	send, err := seconds("timeout.send", timeout.Send)
	if err != nil {
		return nil, err
	}
	read, err := seconds("timeout.read", timeout.Read)
	if err != nil {
		return nil, err
	}

	up := &Upstream{
		balancer:          balancer,
		connectTimeout:    connect,
		sendTimeout:       send,
		readTimeout:       read,
		msgConnectTimeout: errorBody("504 Gateway Timeout: no upstream node accepted a connection within " + formatSeconds(timeout.Connect)),
		msgSendTimeout:    errorBody("504 Gateway Timeout: upstream did not take the request within " + formatSeconds(timeout.Send)),
		msgReadTimeout:    errorBody("504 Gateway Timeout: upstream did not answer within " + formatSeconds(timeout.Read)),
	}
	switch d.PassHost {
	case "pass":
	case "node":
		up.passHost = passHostNode
	case "rewrite":
		if d.UpstreamHost == "" {
			return nil, fmt.Errorf("proxy: upstream_host: required when pass_host is rewrite")
		}
		up.passHost = passHostRewrite
		up.upstreamHost = []byte(d.UpstreamHost)
	default:
		return nil, fmt.Errorf("proxy: pass_host: %q is not one of pass, node, rewrite", d.PassHost)
	}

	defaultPort := 80
	if secure {
		defaultPort = 443
	}
	settings := poolSettings{
		secure:      secure,
		size:        kp.Size,
		requests:    kp.Requests,
		idleTimeout: idleTimeout,
	}
	var clientCert *tls.Certificate
	if secure && d.TLS != nil {
		settings.skipVerify = !d.TLS.Verifies()
		switch {
		case d.TLS.ClientCert != "":
			if clientCert, settings.clientCert, err = p.clientCertificate(d.TLS.ClientCert, d.TLS.ClientKey); err != nil {
				return nil, fmt.Errorf("proxy: tls.client_cert, tls.client_key: %v", err)
			}
		case d.TLS.ClientCertID != "":
			// Snapshot.ResolveClientCerts found no ssl of type client under that id: it was
			// deleted since the upstream was stored. The rest of the snapshot still serves.
			msg := fmt.Sprintf("upstream's tls.client_cert_id names ssl %s, which does not exist or is not of type client", d.TLS.ClientCertID)
			p.logf("%s; its requests get 502 until the ssl is restored or the upstream changed", msg)
			up.unusable = errorBody("502 Bad Gateway: " + msg)
		}
	}
	up.nodes = make([]node, 0, len(d.Nodes))
	for i, n := range d.Nodes {
		host := strings.TrimSuffix(strings.TrimPrefix(n.Host, "["), "]")
		if host == "" {
			return nil, fmt.Errorf("proxy: nodes[%d].host: must not be empty", i)
		}
		port := n.Port
		if port == 0 {
			port = defaultPort
		}
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("proxy: nodes[%d].port: must be 1-65535, got %d", i, n.Port)
		}
		if n.Weight < 0 || n.Weight > conf.MaxNodeWeight {
			return nil, fmt.Errorf("proxy: nodes[%d].weight: must be 0-%d, got %d", i, conf.MaxNodeWeight, n.Weight)
		}
		hostHeader := host
		if strings.IndexByte(host, ':') >= 0 {
			hostHeader = "[" + host + "]"
		}
		if port != defaultPort {
			hostHeader = net.JoinHostPort(host, strconv.Itoa(port))
		}
		up.nodes = append(up.nodes, node{
			pool:       p.pool(host, uint16(port), settings, clientCert),
			weight:     n.Weight,
			priority:   n.Priority,
			hostHeader: []byte(hostHeader),
			addr:       []byte(net.JoinHostPort(host, strconv.Itoa(port))),
		})
		if n.Priority != d.Nodes[0].Priority {
			up.prioritised = true
		}
	}
	// APISIX returns the only node whatever its weight; with several, weight 0 is never picked.
	if len(up.nodes) == 1 && up.nodes[0].weight == 0 {
		up.nodes[0].weight = 1
	}
	up.state = &balancerState{}
	switch balancer {
	case balanceRoundRobin:
		up.state.current = make([]int, len(up.nodes))
	case balanceChash:
		if up.hashKey, err = compileHashKey(d.HashOn, d.Key); err != nil {
			return nil, err
		}
		up.ring = buildRing(up.nodes)
	case balanceLeastConn:
		up.state.inflight = make([]atomic.Int64, len(up.nodes))
	case balanceEWMA:
		up.state.ewma = make([]ewmaStat, len(up.nodes))
	}
	if err := up.setRetries(&d); err != nil {
		return nil, err
	}
	return up, nil
}

// setRetries applies retries (at most one try per node) and retry_timeout. With neither
// set, the retries are APISIX's one per remaining node, at most defaultMaxRetries; a
// client that sets either has chosen its own bound.
func (up *Upstream) setRetries(d *conf.Upstream) error {
	up.retries = len(up.nodes) - 1
	switch {
	case d.Retries != nil:
		if *d.Retries < 0 {
			return fmt.Errorf("proxy: retries: must be >= 0, got %d", *d.Retries)
		}
		up.retries = min(*d.Retries, up.retries)
	case d.RetryTimeout == nil:
		up.retries = min(up.retries, defaultMaxRetries)
	}
	if d.RetryTimeout != nil {
		if !(*d.RetryTimeout >= 0) {
			return fmt.Errorf("proxy: retry_timeout: must be >= 0 seconds, got %g", *d.RetryTimeout)
		}
		up.retryTimeout = time.Duration(*d.RetryTimeout * float64(time.Second))
	}
	return nil
}

// withDefaults returns a copy of u with APISIX's defaults filled in (conf's, and nginx's 60 s
// proxy timeouts); u and what it points to are not modified.
func withDefaults(u *conf.Upstream) conf.Upstream {
	d := *u
	if d.KeepalivePool != nil {
		kp := *d.KeepalivePool
		d.KeepalivePool = &kp
	}
	d.ApplyDefaults()
	t := conf.Timeout{Connect: defaultTimeout, Send: defaultTimeout, Read: defaultTimeout}
	if d.Timeout != nil {
		t = *d.Timeout
	}
	d.Timeout = &t
	return d
}

// seconds converts one of u's durations. conf refuses one out of range; this refuses it
// again for an object that did not come through conf's decoders, since a conversion
// that overflowed would give a negative deadline (every request timed out at once) or 0
// (no deadline at all).
func seconds(field string, s float64) (time.Duration, error) {
	d, ok := conf.DurationOf(s)
	if !ok {
		return 0, fmt.Errorf("proxy: %s: must be %g-%d seconds, got %g", field, conf.MinSeconds, conf.MaxSeconds, s)
	}
	return d, nil
}

func formatSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64) + "s"
}

// WithWebsocket returns a copy of u for a route with enable_websocket: an Upgrade request
// is proxied as a tunnel. The copy shares u's nodes, pools and balancer state.
func (u *Upstream) WithWebsocket() *Upstream {
	c := *u
	c.websocket = true
	return &c
}

// choose picks the node for the next try of x's request among the nodes not tried yet, or
// returns -1 when none is left. Every balancer keeps to the highest priority left. With
// health checks, unhealthy nodes are left out unless no node is healthy.
func (u *Upstream) choose(x *exchange) int {
	skip := x.tried
	if u.health != nil {
		skip = u.avoidUnhealthy(x)
	}
	switch u.balancer {
	case balanceChash:
		return u.pickChash(x.hash, skip)
	case balanceLeastConn:
		return u.pickLeastConn(skip)
	case balanceEWMA:
		return u.pickEWMA(skip)
	}
	return u.pick(skip)
}

// topPriority is the highest priority among the nodes that can still be tried (weight
// above 0, not in tried); any value when u is not prioritised.
func (u *Upstream) topPriority(tried []uint64) int {
	top := 0
	if u.prioritised {
		found := false
		for i := range u.nodes {
			n := &u.nodes[i]
			if n.weight > 0 && !isSet(tried, i) && (!found || n.priority > top) {
				top, found = n.priority, true
			}
		}
	}
	return top
}

// eligible reports whether node i can take this try, given topPriority's top.
func (u *Upstream) eligible(i int, tried []uint64, top int) bool {
	n := &u.nodes[i]
	return n.weight > 0 && !isSet(tried, i) && (!u.prioritised || n.priority == top)
}

// pick chooses the next node by nginx's smooth weighted round robin among the nodes not
// yet tried (tried is a bitset over node indexes) and of the highest priority left. It
// returns -1 when no node is left.
func (u *Upstream) pick(tried []uint64) int {
	s := u.state
	s.mu.Lock()
	top := u.topPriority(tried)
	best, total := -1, 0
	for i := range u.nodes {
		if !u.eligible(i, tried, top) {
			continue
		}
		w := u.nodes[i].weight
		s.current[i] += w
		total += w
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	s.mu.Unlock()
	return best
}

func isSet(bits []uint64, i int) bool {
	return bits[i>>6]&(1<<(uint(i)&63)) != 0
}

func set(bits []uint64, i int) {
	bits[i>>6] |= 1 << (uint(i) & 63)
}

// ipLiteral reports the address host names when host is an IP literal.
func ipLiteral(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}
