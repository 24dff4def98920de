package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gw/internal/monotime"
	"gw/internal/rawio"
)

const (
	// resolveInterval is how often every host name is looked up again.
	resolveInterval = 30 * time.Second
	// tickInterval paces idle-connection eviction and the retries of names that have
	// never resolved.
	tickInterval  = time.Second
	lookupTimeout = 5 * time.Second
	connBufSize   = 4096
	// sessionCacheSize is how many TLS sessions a node's pool keeps for resumption, so
	// that a new connection to a node skips most of the full handshake.
	sessionCacheSize = 64
)

var errUnresolved = errors.New("proxy: node's host name has not resolved")

// Pools holds per-node connection pools and resolvers, shared across config snapshots so
// that a config change does not drop warm upstream keep-alive connections. Safe for
// concurrent use.
type Pools struct {
	roots *x509.CertPool // nil: the system's
	logf  func(format string, args ...any)

	mu        sync.Mutex
	pools     map[poolKey]*nodePool
	resolvers map[string]*resolver
	// clientCerts are the parsed client certificates by clientCertDigest, so that a new
	// snapshot does not parse an unchanged key again.
	clientCerts map[[sha256.Size]byte]*tls.Certificate
	closed      bool

	kick   chan struct{} // a new name wants resolving now
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// poolSettings are what, besides the address, makes two nodes' connections interchangeable.
// Over TLS that includes how the node was authenticated and how gw authenticated itself;
// the name sent as SNI varies per request and is matched per connection (nodePool.get).
type poolSettings struct {
	secure bool
	// grpc pools speak HTTP/2 (grpc.go), the others HTTP/1.1.
	grpc        bool
	size        int
	requests    int
	idleTimeout time.Duration
	// skipVerify is tls.verify false; clientCert is the client certificate's digest (zero
	// for none).
	skipVerify bool
	clientCert [sha256.Size]byte
}

type poolKey struct {
	host string
	port uint16
	poolSettings
}

// Options configure Pools. The zero value verifies upstream certificates against the
// system's roots and logs nothing.
type Options struct {
	// RootCAs are the roots https nodes' certificates must chain to; nil means the
	// system's (internal/confio.TrustedCertificates builds the pool for ssl.ssl_trusted_certificate).
	RootCAs *x509.CertPool
	// Logf, when set, is told why a connection failed in a way the 502 cannot explain (a
	// certificate that did not verify, a TLS alert from the node). Called concurrently.
	Logf func(format string, args ...any)
	// BuildOnly makes Pools for compiling upstreams that never forward (the master's
	// check of a snapshot): no name is resolved and nothing runs in the background.
	BuildOnly bool
}

// NewPools is NewPoolsWith the zero Options.
func NewPools() *Pools {
	return NewPoolsWith(Options{})
}

// NewPoolsWith starts the background resolver and idle-connection sweeper; Close stops
// them.
func NewPoolsWith(opts Options) *Pools {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pools{
		roots:       opts.RootCAs,
		logf:        opts.Logf,
		pools:       make(map[poolKey]*nodePool),
		resolvers:   make(map[string]*resolver),
		clientCerts: make(map[[sha256.Size]byte]*tls.Certificate),
		kick:        make(chan struct{}, 1),
		ctx:         ctx,
		cancel:      cancel,
	}
	if p.logf == nil {
		p.logf = func(string, ...any) {}
	}
	if opts.BuildOnly {
		return p
	}
	p.wg.Add(1)
	go p.run()
	return p
}

// Close stops the background work and closes every idle connection. Connections in use
// are closed when their requests finish. Upstreams built from p keep working, without
// keep-alive.
func (p *Pools) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	pools := p.pools
	p.pools = make(map[poolKey]*nodePool)
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	for _, np := range pools {
		np.shut()
	}
}

// Retain drops the pools of nodes that no upstream in live uses, closing their idle
// connections, and stops resolving names no live node has.
func (p *Pools) Retain(live []*Upstream) {
	keep := make(map[*nodePool]bool)
	for _, u := range live {
		if u == nil {
			continue
		}
		for i := range u.nodes {
			keep[u.nodes[i].pool] = true
		}
	}
	var dropped []*nodePool
	names := make(map[string]bool)
	certs := make(map[[sha256.Size]byte]bool)
	p.mu.Lock()
	for k, np := range p.pools {
		if keep[np] {
			if np.resolver != nil {
				names[np.resolver.name] = true
			}
			certs[k.clientCert] = true
			continue
		}
		delete(p.pools, k)
		dropped = append(dropped, np)
	}
	for name := range p.resolvers {
		if !names[name] {
			delete(p.resolvers, name)
		}
	}
	for digest := range p.clientCerts {
		if !certs[digest] {
			delete(p.clientCerts, digest)
		}
	}
	p.mu.Unlock()
	for _, np := range dropped {
		np.shut()
	}
}

// pool returns the shared pool for host:port with settings, creating it when needed.
// clientCert is the certificate settings.clientCert digests, nil for none.
func (p *Pools) pool(host string, port uint16, settings poolSettings, clientCert *tls.Certificate) *nodePool {
	key := poolKey{host: host, port: port, poolSettings: settings}
	p.mu.Lock()
	defer p.mu.Unlock()
	if np := p.pools[key]; np != nil {
		return np
	}
	np := &nodePool{key: key, logf: p.logf}
	if ip, ok := ipLiteral(host); ok {
		np.ip = ip
	} else {
		r := p.resolvers[host]
		if r == nil {
			r = &resolver{name: host}
			p.resolvers[host] = r
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
		np.resolver = r
	}
	if settings.secure {
		np.tlsConfig = p.clientTLSConfig(settings, clientCert)
	}
	if !p.closed {
		p.pools[key] = np
	} else {
		np.closed = true
	}
	return np
}

func (p *Pools) run() {
	defer p.wg.Done()
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
			p.resolve(false)
		case now := <-tick.C: // wall time, for the resolver's pace
			p.evictIdle(monotime.Now())
			full := now.Sub(lastFull) >= resolveInterval
			if full {
				lastFull = now
			}
			p.resolve(full)
		}
	}
}

// resolve looks up every name (all) or only the names with no answer yet. A failed lookup
// keeps the previous answer.
func (p *Pools) resolve(all bool) {
	p.mu.Lock()
	var todo []*resolver
	for _, r := range p.resolvers {
		if all || r.addr.Load() == nil {
			todo = append(todo, r)
		}
	}
	p.mu.Unlock()
	for _, r := range todo {
		ctx, cancel := context.WithTimeout(p.ctx, lookupTimeout)
		r.lookup(ctx)
		cancel()
	}
}

func (p *Pools) evictIdle(now int64) {
	p.mu.Lock()
	pools := make([]*nodePool, 0, len(p.pools))
	for _, np := range p.pools {
		pools = append(pools, np)
	}
	p.mu.Unlock()
	for _, np := range pools {
		np.evictIdle(now)
	}
}

// clientTLSConfig is what every connection of a pool shares; dial adds the server name.
// Unlike nginx's proxy_ssl_verify (off by default, and APISIX leaves it so), the node's
// certificate is verified unless tls.verify is false.
func (p *Pools) clientTLSConfig(settings poolSettings, clientCert *tls.Certificate) *tls.Config {
	c := &tls.Config{
		RootCAs:            p.roots,
		InsecureSkipVerify: settings.skipVerify, //nolint:gosec // the upstream's tls.verify false asks for it
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize),
	}
	if clientCert != nil {
		// Sent whatever CAs the node names in its request, as nginx's
		// proxy_ssl_certificate is: crypto/tls would otherwise send none when the names
		// do not match, and the node's refusal would say less than its own check.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return clientCert, nil
		}
	}
	return c
}

// clientCertificate parses a client certificate and key, or returns the one parsed for
// an earlier snapshot.
func (p *Pools) clientCertificate(certPEM, keyPEM string) (*tls.Certificate, [sha256.Size]byte, error) {
	h := sha256.New()
	h.Write([]byte(certPEM))
	h.Write([]byte{0}) // a PEM holds no NUL: the boundary is unambiguous
	h.Write([]byte(keyPEM))
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	p.mu.Lock()
	cert := p.clientCerts[digest]
	p.mu.Unlock()
	if cert != nil {
		return cert, digest, nil
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		// crypto/tls words its errors without key material.
		return nil, digest, err
	}
	p.mu.Lock()
	if cached := p.clientCerts[digest]; cached != nil {
		cert = cached
	} else {
		cert = &pair
		p.clientCerts[digest] = cert
	}
	p.mu.Unlock()
	return cert, digest, nil
}

// resolver holds the current address of one host name.
type resolver struct {
	name string
	addr atomic.Pointer[netip.Addr] // nil until the first answer
	// first serialises the lookups of a name that has no answer yet, so that the
	// requests arriving before the background resolver answered wait for one lookup.
	first sync.Mutex
}

// lookup resolves the name and stores the answer; a failed lookup keeps the previous one.
func (r *resolver) lookup(ctx context.Context) *netip.Addr {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", r.name)
	if err != nil || len(addrs) == 0 {
		return r.addr.Load()
	}
	// Like fasthttp's default dialer, prefer IPv4, which works on more networks.
	best := addrs[0].Unmap()
	for _, a := range addrs {
		if a.Unmap().Is4() {
			best = a.Unmap()
			break
		}
	}
	r.addr.Store(&best)
	return &best
}

// current returns the name's address, looking it up now, within the connect deadline,
// when the background resolver has not answered yet: a route written a moment ago, whose
// write the Admin API already acknowledged, must not answer 502 for want of a lookup.
func (r *resolver) current(deadline time.Time) *netip.Addr {
	if a := r.addr.Load(); a != nil {
		return a
	}
	r.first.Lock()
	defer r.first.Unlock()
	if a := r.addr.Load(); a != nil {
		return a // looked up while this request waited
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return r.lookup(ctx)
}

// nodePool is the keep-alive pool of one node. It maps keepalive_pool like nginx's
// keepalive directives: size caps the idle connections kept (not the connections open),
// requests closes a connection after that many requests, and idle_timeout closes one idle
// that long.
type nodePool struct {
	key       poolKey
	ip        netip.Addr // for an IP literal; otherwise resolver has the address
	resolver  *resolver
	tlsConfig *tls.Config // nil for plain http
	logf      func(format string, args ...any)

	// grpc holds the HTTP/2 connections of a grpc or grpcs node (grpcconn.go).
	grpc grpcConns

	mu     sync.Mutex
	idle   []*upConn // a stack: the most recently used is reused first, so the rest age out
	closed bool
}

// get returns an idle connection (reused true) or, when there is none or fresh is set,
// dials a new one within timeout. Over TLS, sni is the server name the request needs
// (the Host it carries, without port): an idle connection is reused only when it was
// made for that name, since its certificate was checked for it and the node may serve
// each name differently. Plain connections ignore sni.
func (np *nodePool) get(now int64, timeout time.Duration, fresh bool, sni []byte) (c *upConn, reused bool, err error) {
	if !fresh {
		np.mu.Lock()
		// From the most recently used down; what is taken out leaves the rest in
		// idleSince order, as evictIdle needs.
		for i := len(np.idle) - 1; i >= 0; i-- {
			c = np.idle[i]
			if np.tlsConfig != nil && c.sni != string(sni) {
				continue
			}
			copy(np.idle[i:], np.idle[i+1:])
			np.idle[len(np.idle)-1] = nil
			np.idle = np.idle[:len(np.idle)-1]
			if time.Duration(now-c.idleSince) < np.key.idleTimeout {
				np.mu.Unlock()
				return c, true, nil
			}
			c.close()
		}
		np.mu.Unlock()
	}
	c, err = np.dial(timeout, sni)
	return c, false, err
}

// tlsError is a failed TLS handshake with a node, which dial has already logged.
type tlsError struct {
	err error
	// verify is set when the node's certificate did not verify.
	verify bool
}

func (e *tlsError) Error() string { return e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

func (np *nodePool) dial(timeout time.Duration, sni []byte) (*upConn, error) {
	ip := np.ip
	deadline := time.Now().Add(timeout)
	if np.resolver != nil {
		a := np.resolver.current(deadline)
		if a == nil {
			return nil, errUnresolved
		}
		ip = *a
	}
	addr := netip.AddrPortFrom(ip, np.key.port)
	if np.tlsConfig == nil {
		return np.dialPlain(addr, deadline)
	}
	// No keep-alive probes (Go's default is 15 s), as nginx sets none unless
	// proxy_socket_keepalive is on: an idle pooled connection ends at its idle_timeout, a
	// busy one at the read timeout, long before the probes would tell.
	d := net.Dialer{Deadline: deadline, KeepAlive: -1}
	conn, err := d.Dial("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	serverName := string(sni)
	config := np.tlsConfig.Clone()
	// An IP address is not sent as SNI; the certificate must then hold it as an IP SAN.
	config.ServerName = serverName
	tc := tls.Client(conn, config)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		conn.Close()
		if isTimeout(err) {
			return nil, err
		}
		return nil, np.handshakeFailed(serverName, err)
	}
	c := &upConn{conn: tc, pool: np, sni: serverName}
	c.br = bufio.NewReaderSize(c, connBufSize)
	c.bw = bufio.NewWriterSize(c, connBufSize)
	return c, nil
}

// dialPlain connects to a plain-TCP node with rawio's raw dial (Socket.Dial: socket(2),
// connect(2), the poller's wait for writability and getsockopt(SO_ERROR), as nginx), held
// in the upConn itself: no address string, no netFD, no getsockname(2) or getpeername(2),
// no keep-alive probes (see above), and no option set yet (Write sets TCP_NODELAY and
// TCP_INQ once the connection writes a second time). c then reads and writes its
// descriptor directly, arming its deadlines only when a read or write is about to wait
// (ArmRead, ArmWrite), and closes through its Stream (close).
func (np *nodePool) dialPlain(addr netip.AddrPort, deadline time.Time) (*upConn, error) {
	c := &upConn{pool: np}
	if err := c.plain.Dial(addr, deadline); err != nil {
		return nil, err
	}
	c.plain.io = &c.io
	c.conn = &c.plain
	c.raw, _ = c.plain.SyscallConn() // never fails
	c.io.Init(c.raw, c)
	c.io.Own(nil) // the Stream closes its Socket itself; it joins the poller when a call first waits
	c.br = bufio.NewReaderSize(c, connBufSize)
	c.bw = bufio.NewWriterSize(c, connBufSize)
	return c, nil
}

// handshakeFailed logs why the TLS handshake with the node failed, with what to do about
// it, and returns the error dial reports.
func (np *nodePool) handshakeFailed(serverName string, err error) error {
	addr := net.JoinHostPort(np.key.host, strconv.Itoa(int(np.key.port)))
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		np.logf("upstream %s: the certificate did not verify for name %q: %v; the name is the Host sent upstream (see pass_host). "+
			"Trust its CA with ssl.ssl_trusted_certificate in config.yaml, or set the upstream's tls.verify to false", addr, serverName, verr.Err)
		return &tlsError{err: err, verify: true}
	}
	np.logf("upstream %s: TLS handshake for name %q failed: %v", addr, serverName, err)
	return &tlsError{err: err}
}

// put returns c to the pool after a complete exchange, or closes it when it must not be
// reused or the pool is full; now (monotime) stamps it idle.
func (np *nodePool) put(c *upConn, reusable bool, now int64) {
	if !reusable || c.requests >= np.key.requests || np.key.idleTimeout <= 0 || c.br.Buffered() > 0 {
		c.close()
		return
	}
	np.mu.Lock()
	if np.closed || len(np.idle) >= np.key.size {
		np.mu.Unlock()
		c.close()
		return
	}
	// Keep the stack in idleSince order, as evictIdle needs, though now may be a forward's
	// start and an earlier forward may have ended first.
	if n := len(np.idle); n > 0 {
		now = max(now, np.idle[n-1].idleSince)
	}
	c.idleSince = now
	np.idle = append(np.idle, c)
	np.mu.Unlock()
}

func (np *nodePool) evictIdle(now int64) {
	np.mu.Lock()
	// The stack is ordered by idleSince, oldest first.
	n := 0
	for n < len(np.idle) && time.Duration(now-np.idle[n].idleSince) >= np.key.idleTimeout {
		np.idle[n].close()
		n++
	}
	if n > 0 {
		rest := copy(np.idle, np.idle[n:])
		clear(np.idle[rest:])
		np.idle = np.idle[:rest]
	}
	np.mu.Unlock()
}

// shut closes the idle connections and makes put close the rest as they come back.
func (np *nodePool) shut() {
	np.mu.Lock()
	np.closed = true
	idle := np.idle
	np.idle = nil
	np.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	np.shutGRPC()
}

// idleCount is the number of idle connections, for tests.
func (np *nodePool) idleCount() int {
	np.mu.Lock()
	defer np.mu.Unlock()
	return len(np.idle)
}

// upConn is one connection to a node. Its Read and Write move the deadline before each
// call, which gives nginx's meaning to the send and read timeouts: the longest wait
// between two successive operations, not a bound on the whole body.
type upConn struct {
	conn         net.Conn
	pool         *nodePool
	br           *bufio.Reader
	bw           *bufio.Writer
	readTimeout  time.Duration
	writeTimeout time.Duration
	requests     int
	idleSince    int64 // monotime
	// sni is the server name the TLS connection was made for ("" over plain TCP).
	sni string

	// plain holds a plain-TCP connection (dialPlain; conn is then &plain): one allocation
	// for both.
	plain plainConn

	// raw reaches a plain TCP connection's descriptor (nil over TLS). With awaitReply set,
	// the next Write sends the request's last bytes and parks on the poller until the
	// response arrives (rawio's WriteThenAwait): a read right after the request would find
	// nothing (EAGAIN) nearly every time, one wasted syscall per request.
	raw        syscall.RawConn
	io         rawio.Stream // reads and writes raw when raw is set
	readArm    rawio.LazyDeadline
	writeArm   rawio.LazyDeadline
	awaitReply bool
	// writes counts a plain connection's writes up to 2; kept is set once its second
	// write (a request's body after its header, or the next request once it is reused)
	// turned TCP_NODELAY and TCP_INQ on (Write). A connection dialled for one exchange
	// and closed after it, past the keepalive pool, pays for neither setsockopt(2): its
	// one write meets no unacknowledged data for Nagle's algorithm to wait on, and its
	// reads follow WriteThenAwait's wait, so none would wait first.
	writes uint8
	kept   bool
	// waitFrom is the forward's clock reading (monotime), which the wait for the reply
	// takes for now instead of reading the clock again; 0 reads it.
	waitFrom int64
	// waitErr is the wait's failure (its read timeout), which the next Read returns: the
	// wait is the start of reading the response.
	waitErr error
}

// plainConn is a plain-TCP node's connection (dialPlain) as the net.Conn that upConn's
// users see (a websocket tunnel, error reports): a rawio.Socket whose reads, writes and
// close are the upConn's Stream's, so that nothing closes the descriptor under a call.
type plainConn struct {
	rawio.Socket
	io *rawio.Stream
}

func (p *plainConn) Read(b []byte) (int, error) {
	n, err := p.io.Read(b)
	return n, rawio.OpError("read", p, err)
}

func (p *plainConn) Write(b []byte) (int, error) {
	n, err := p.io.Write(b)
	return n, rawio.OpError("write", p, err)
}

func (p *plainConn) Close() error { return p.io.Close() }

// tunnelled readies c for a websocket tunnel, whose two directions read and write it at
// the same time: a Stream's reads may not wait first then (rawio.Stream.WaitBeforeReads).
// Call it before the tunnel's goroutines start.
func (c *upConn) tunnelled() {
	if c.raw != nil {
		c.kept = true // the tunnel writes through conn, and Write turns nothing on since
		c.plain.NoDelay()
		c.io.WaitBeforeReads(false)
	}
}

// keepAlive turns on what a plain connection written more than once needs, before its
// second write: TCP_NODELAY, so that a write following another before its acknowledgement
// is not held back by Nagle's algorithm (up to the node's delayed ACK, 40 ms), and TCP_INQ
// (rawio.Stream.WaitBeforeReads), so that a read after a write waits first instead of
// reading nothing, as the dial did for every connection before.
func (c *upConn) keepAlive() {
	if c.writes++; c.writes > 1 {
		c.kept = true
		c.plain.NoDelay()
		c.io.WaitBeforeReads(true)
	}
}

// ArmRead arms the read timeout for a wait about to start (rawio.Waiter): nginx's
// proxy_read_timeout, between two reads. With no read timeout (a websocket tunnel sets
// its own deadlines on conn) it leaves the deadline alone.
func (c *upConn) ArmRead(stale bool) bool {
	if c.readTimeout <= 0 {
		return false
	}
	now := c.waitFrom
	c.waitFrom = 0
	if want, due := c.readArm.After(now, c.readTimeout, stale); due {
		_ = c.conn.SetReadDeadline(monotime.Time(want))
	}
	return true
}

// ArmWrite is ArmRead for the send timeout.
func (c *upConn) ArmWrite(stale bool) bool {
	if c.writeTimeout <= 0 {
		return false
	}
	if want, due := c.writeArm.After(0, c.writeTimeout, stale); due {
		_ = c.conn.SetWriteDeadline(monotime.Time(want))
	}
	return true
}

func (c *upConn) Read(p []byte) (int, error) {
	if err := c.waitErr; err != nil {
		c.waitErr = nil
		return 0, err
	}
	if c.raw != nil {
		n, err := c.io.Read(p)
		return n, rawio.OpError("read", c.conn, err)
	}
	if c.readTimeout > 0 {
		if err := c.conn.SetReadDeadline(time.Now().Add(c.readTimeout)); err != nil {
			return 0, err
		}
	}
	return c.conn.Read(p)
}

func (c *upConn) Write(p []byte) (int, error) {
	if c.raw != nil && !c.kept {
		c.keepAlive()
	}
	if c.awaitReply {
		c.awaitReply = false
		if c.raw != nil {
			return c.sendAndAwait(p)
		}
	}
	if c.raw != nil {
		n, err := c.io.Write(p)
		return n, rawio.OpError("write", c.conn, err)
	}
	if c.writeTimeout > 0 {
		if err := c.conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	return c.conn.Write(p)
}

// sendAndAwait writes p and waits, within the read timeout, until the node's answer can be
// read (rawio's WriteThenAwait). When the socket takes only part of p, the rest goes the
// ordinary way (under the send timeout) and the first Read waits as usual.
func (c *upConn) sendAndAwait(p []byte) (int, error) {
	sent, writeErr, waitErr := c.io.WriteThenAwait(p)
	switch {
	case sent == len(p):
		c.waitErr = rawio.OpError("read", c.conn, waitErr)
		return sent, nil
	case writeErr != nil:
		return sent, rawio.OpError("write", c.conn, writeErr)
	case waitErr != nil && sent == 0:
		return 0, rawio.OpError("write", c.conn, waitErr)
	}
	n, err := c.Write(p[sent:])
	return sent + n, err
}

// close closes the connection, through its Stream when it has one (rawio.Stream.Own).
func (c *upConn) close() {
	if c.raw != nil {
		_ = c.io.Close()
		return
	}
	c.conn.Close()
}
