package proxy

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/shm"
)

// Upstream is one compiled upstream: its nodes, balancer and pools. The configuration is
// immutable after Pools.Upstream returns; the balancer state lives behind state, guarded by
// its mutex or held in atomics, so an Upstream is safe for concurrent use.
type Upstream struct {
	nodes       []node
	prioritised bool // some nodes differ in priority, so pick must find the top group

	balancer conf.Balancer
	state    *balancerState // shared with the copies WithWebsocket makes
	ring     *chashRing     // chash only
	hashKey  hashKey        // chash only: where the key comes from
	// websocket is the route's enable_websocket: an Upgrade request becomes a tunnel.
	websocket bool
	// grpc is set for scheme grpc and grpcs: requests go through RoundTripGRPC (grpc.go).
	grpc bool
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
	passHost       conf.PassHost
	upstreamHost   []byte

	// unusable, when set, is the 502 body every request gets: the upstream cannot work
	// as configured (its tls.client_cert_id names no client ssl).
	unusable []byte

	// Error bodies, formatted once here so that a failing request formats nothing.
	msgConnectTimeout []byte
	msgSendTimeout    []byte
	msgReadTimeout    []byte
}

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
	// msgNoNodes answers an upstream with no node that can take requests (no nodes, or
	// only nodes of weight 0) with 503, as APISIX answers "no valid upstream node"
	// (upstream.lua): nothing was tried, so no node failed.
	msgNoNodes     = errorBody("503 Service Unavailable: no valid upstream node")
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
// whose name has no answer yet fails its requests with 502 until it has one. conf's
// Normalize checks u and fills its defaults; the error names the offending field.
func (p *Pools) Upstream(u *conf.Upstream, routeTimeout *conf.Timeout) (*Upstream, error) {
	if u == nil {
		return nil, fmt.Errorf("proxy: upstream is missing")
	}
	n, err := u.Normalize(routeTimeout)
	if err != nil {
		return nil, err
	}
	return p.build(&n)
}

// build makes the Upstream n describes. It checks nothing Normalize has; what it can
// still refuse needs the runtime (a client certificate that does not parse).
func (p *Pools) build(n *conf.NormalUpstream) (*Upstream, error) {
	up := &Upstream{
		balancer:          n.Balancer,
		passHost:          n.PassHost,
		retries:           n.Retries,
		retryTimeout:      n.RetryTimeout,
		connectTimeout:    n.Connect,
		sendTimeout:       n.Send,
		readTimeout:       n.Read,
		msgConnectTimeout: errorBody("504 Gateway Timeout: no upstream node accepted a connection within " + formatSeconds(n.Timeout.Connect)),
		msgSendTimeout:    errorBody("504 Gateway Timeout: upstream did not take the request within " + formatSeconds(n.Timeout.Send)),
		msgReadTimeout:    errorBody("504 Gateway Timeout: upstream did not answer within " + formatSeconds(n.Timeout.Read)),
	}
	up.grpc = n.Scheme.IsGRPC()
	if n.PassHost == conf.PassHostRewrite {
		up.upstreamHost = []byte(n.UpstreamHost)
	}
	settings := poolSettings{
		secure:      n.Scheme.Secure(),
		grpc:        n.Scheme.IsGRPC(),
		size:        n.PoolSize,
		requests:    n.PoolRequests,
		idleTimeout: n.PoolIdleTimeout,
	}
	clientCert, err := p.clientTLS(n.TLS, &settings, up)
	if err != nil {
		return nil, err
	}
	defaultPort := 80
	if settings.secure {
		defaultPort = 443
	}
	up.nodes = make([]node, len(n.Nodes))
	for i := range n.Nodes {
		nn := &n.Nodes[i]
		hostHeader := nn.Host
		switch {
		case nn.Port != defaultPort:
			hostHeader = nn.Addr
		case strings.IndexByte(nn.Host, ':') >= 0:
			hostHeader = "[" + nn.Host + "]"
		}
		up.nodes[i] = node{
			pool:       p.pool(nn.Host, uint16(nn.Port), settings, clientCert),
			weight:     nn.Weight,
			priority:   nn.Priority,
			hostHeader: []byte(hostHeader),
			addr:       []byte(nn.Addr),
		}
		up.prioritised = up.prioritised || nn.Priority != n.Nodes[0].Priority
	}
	up.state = &balancerState{}
	switch n.Balancer {
	case conf.BalanceRoundRobin:
		up.state.current = make([]int, len(up.nodes))
	case conf.BalanceChash:
		if up.hashKey, err = compileHashKey(n.HashOn, n.Key); err != nil {
			return nil, err
		}
		up.ring = buildRing(up.nodes)
	case conf.BalanceLeastConn:
		up.state.inflight = make([]atomic.Int64, len(up.nodes))
	case conf.BalanceEWMA:
		up.state.ewma = make([]ewmaStat, len(up.nodes))
	}
	return up, nil
}

// clientTLS fills settings' verification and client certificate from an https
// upstream's tls (nil for none) and returns the certificate to present, nil for none.
// A tls.client_cert_id that names no client ssl makes up unusable rather than failing the
// build, so that the rest of the snapshot still serves.
func (p *Pools) clientTLS(t *conf.UpstreamTLS, settings *poolSettings, up *Upstream) (*tls.Certificate, error) {
	if t == nil {
		return nil, nil
	}
	settings.skipVerify = !t.Verifies()
	switch {
	case t.ClientCert != "":
		cert, digest, err := p.clientCertificate(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("proxy: tls.client_cert, tls.client_key: %v", err)
		}
		settings.clientCert = digest
		return cert, nil
	case t.ClientCertID != "":
		// Snapshot.ResolveClientCerts found no ssl of type client under that id: it was
		// deleted since the upstream was stored.
		msg := fmt.Sprintf("upstream's tls.client_cert_id names ssl %s, which does not exist or is not of type client", t.ClientCertID)
		p.logf("%s; its requests get 502 until the ssl is restored or the upstream changed", msg)
		up.unusable = errorBody("502 Bad Gateway: " + msg)
	}
	return nil, nil
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
	case conf.BalanceChash:
		return u.pickChash(x.hash, skip)
	case conf.BalanceLeastConn:
		return u.pickLeastConn(skip)
	case conf.BalanceEWMA:
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
