package worker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/bytesconv"
	"gw/internal/monotime"
	"gw/internal/rawio"
	"gw/plugins"
	"gw/worker/proxy"
)

// The edge is what stands between the network and the handler: the client limits of
// config.yaml (nginx's client_*, keepalive, send and worker_connections directives), the
// checks that keep a request the upstream could frame differently from ever reaching it
// (request smuggling), and real_ip_from. fasthttp enforces what it can (header buffer,
// header and keep-alive timeouts); the rest is here, per connection (edgeListener,
// edgeConn) and per request (edge.admit), without allocating per request.

var (
	badRequestBody      = []byte(`{"error_msg":"400 Bad Request"}` + "\n")
	badFramingBody      = []byte(`{"error_msg":"400 Bad Request: the request's framing is ambiguous (Content-Length with Transfer-Encoding, or a Transfer-Encoding other than chunked)"}` + "\n")
	badHeaderLineBody   = []byte(`{"error_msg":"400 Bad Request: malformed header line (bare CR or LF, obs-fold, or a name that is not a token)"}` + "\n")
	badTargetBody       = []byte(`{"error_msg":"400 Bad Request: an absolute-form request target must name the Host header's host"}` + "\n")
	badChunkBody        = []byte(`{"error_msg":"400 Bad Request: malformed chunked body"}` + "\n")
	bodyTooLargeBody    = []byte(`{"error_msg":"413 Request Entity Too Large"}` + "\n")
	headerTooLargeBody  = []byte(`{"error_msg":"431 Request Header Fields Too Large"}` + "\n")
	uriTooLargeBody     = []byte(`{"error_msg":"414 Request-URI Too Large"}` + "\n")
	requestTimeoutBody  = []byte(`{"error_msg":"408 Request Time-out"}` + "\n")
	headerContentLength = []byte(fasthttp.HeaderContentLength)
	headerTransferEnc   = []byte(fasthttp.HeaderTransferEncoding)
	chunked             = []byte("chunked")
	schemeSeparator     = []byte("://")
	schemeHTTP          = []byte("http")
	schemeHTTPS         = []byte("https")
)

// edge is one worker's edge configuration, fixed for the worker's life (a reload starts
// new workers).
type edge struct {
	maxBody          int64 // 0: no limit
	headerTimeout    time.Duration
	keepaliveTimeout time.Duration
	bodyTimeout      time.Duration
	sendTimeout      time.Duration
	trusted          []netip.Prefix
	realIPName       string
	recursive        bool
}

func newEdge(c *conf.Config) *edge {
	return &edge{
		maxBody:          c.ClientMaxBodySize,
		headerTimeout:    c.ClientHeaderTimeout,
		keepaliveTimeout: c.KeepaliveTimeout,
		bodyTimeout:      c.ClientBodyTimeout,
		sendTimeout:      c.SendTimeout,
		trusted:          c.RealIPNets(),
		realIPName:       c.RealIPHeader,
		recursive:        c.RealIPRecursive,
	}
}

func (e *edge) trusts(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range e.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// edgeListener holds at most worker_connections client connections open: past that,
// Accept waits, so new connections queue in the kernel instead of costing this worker
// files and memory. A token is returned when the connection closes, whoever closes it
// (fasthttp, the drain, a websocket tunnel).
type edgeListener struct {
	net.Listener
	// acceptor, when the listener is a TCP one a connTracker counts (countingListener),
	// accepts in its place with raw system calls, counting into opened; nil otherwise.
	acceptor  *rawio.Acceptor
	opened    *connTracker
	e         *edge
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	h2c       *h2Server // nil: HTTP/1.1 only (http2.h2c_disable, and TLS, which has ALPN)
	// tls is set on an ssl.listen address's listener, whose connections start with a
	// TLS handshake (edgeConn.Read's quick acknowledgement).
	tls bool
	// turn, when it could be made, lets Accept wait for the runtime's next network poll
	// (yield); turnAt is when the last such wait ended (monotime), used by Accept's
	// goroutine only.
	turn   *rawio.PollerTurn
	turnAt int64
}

func newEdgeListener(ln net.Listener, e *edge, connections int) *edgeListener {
	l := &edgeListener{Listener: ln, e: e, slots: make(chan struct{}, connections), closed: make(chan struct{})}
	if turn, err := rawio.NewPollerTurn(); err == nil {
		l.turn = turn
	}
	if counted, ok := ln.(countingListener); ok {
		if tcp, ok := counted.Listener.(*net.TCPListener); ok {
			if a, err := rawio.NewAcceptor(tcp); err == nil {
				l.acceptor, l.opened = a, counted.t
			}
		}
	}
	return l
}

func (l *edgeListener) Accept() (net.Conn, error) {
	// Every goroutine already runnable goes first (yield): the connections accepted before
	// this one read their requests and send them on before another is taken from the
	// queue, as nginx (multi_accept off) accepts one connection per turn of its event
	// loop. Taking the whole queue first, as fasthttp's loop otherwise does, sends its
	// requests upstream in one burst that overflows the keepalive pool: under seed 001's
	// ab -c 1000 that was 0.21-0.25 dials per request, against 0.05-0.07 with the yield
	// (nginx: 0.07). With no connection waiting, the accept then parks on the poller as
	// before.
	l.yield()
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	if l.acceptor != nil {
		return l.acceptRaw()
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		tcp, ok := c.(*net.TCPConn)
		if !ok {
			<-l.slots // not a TCP socket (tests only): no per-connection state, no timeouts
			return c, nil
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			c.Close() // closed under us already: nothing to serve
			continue
		}
		// net set TCP_NODELAY already.
		ec := &edgeConn{socket: tcp, noDelay: true}
		ec.init(l, raw, tcp.Close)
		return ec, nil
	}
}

// acceptRaw accepts with the listener's Acceptor (rawio.Socket): a connection costs
// accept4(2), the poller's epoll_ctl(2) and one allocation, the edgeConn that holds it.
func (l *edgeListener) acceptRaw() (net.Conn, error) {
	ec := &edgeConn{}
	if err := l.acceptor.Accept(&ec.own); err != nil {
		<-l.slots
		return nil, err
	}
	if l.acceptor.Waited() {
		// Woken by a poll: that was the poller's turn (yield), and under a light load
		// the next accept need not pay for another.
		l.turnAt = monotime.Now()
	}
	l.opened.open.Add(1)
	ec.socket = &ec.own
	raw, _ := ec.own.SyscallConn() // never fails
	ec.init(l, raw, nil)           // the Stream closes its Socket itself
	return ec, nil
}

// init readies a connection just accepted: its Stream, and whether its peer is trusted.
// close is what closes the connection; nil for a rawio.Socket, which its Stream closes.
func (ec *edgeConn) init(l *edgeListener, raw syscall.RawConn, close func() error) {
	// The first request's line and header must come within client_header_timeout of
	// the first wait, which is as good as the accept (fasthttp's ReadTimeout did the
	// same).
	ec.l, ec.readPolicy, ec.readTimeout, ec.h2c = l, readAbsolute, l.e.headerTimeout, l.h2c
	ec.io.Init(raw, ec)
	// From here on every close is the Stream's, which never frees the descriptor
	// under a read or write in progress (rawio.Stream.Own). Its reads start to wait
	// first when the connection first goes idle (stateChanged).
	ec.io.Own(close)
	if peer, ok := ec.socket.RemoteAddr().(*net.TCPAddr); ok {
		ec.realAddr.Port = peer.Port
		if ip, ok := netip.AddrFromSlice(peer.IP); ok {
			ec.trusted = l.e.trusts(ip)
		}
	}
}

func (l *edgeListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		if l.turn != nil {
			_ = l.turn.Close()
		}
	})
	return l.Listener.Close()
}

// acceptTurnEvery is how long Accept may go on yielding (runtime.Gosched) before it waits
// for the poller's turn instead (edgeListener.yield).
const acceptTurnEvery = 500 * time.Microsecond

// yield lets every goroutine already runnable go before the next accept, and at least
// every acceptTurnEvery the runtime's network poll too. A Gosched alone leaves the accepting
// goroutine runnable, and Go polls the network only when nothing is runnable: with a
// queue of connections to accept, that was never, and the upstream's answers waited for
// the runtime's monitor, which polls every 10 ms and takes 128 sockets a time. Under seed
// 001's ab -c 1000 the worker then picked up at most 12,800 answers a second, and in the
// run's first half second, while ab's thousand connections were queued, answers waited
// 20 to 56 ms for it where they waited 2 to 4 later (benchmark/tail.sh's trace). Waiting
// for the poller's turn costs a write(2) to an eventfd and a poll, so it is taken once per
// acceptTurnEvery rather than before every accept, as nginx polls once per accept.
func (l *edgeListener) yield() {
	if l.turn != nil {
		if now := monotime.Now(); now-l.turnAt >= int64(acceptTurnEvery) && l.turn.Wait() {
			l.turnAt = monotime.Now()
			return
		}
	}
	runtime.Gosched()
}

// socket is what an edgeConn needs of its connection's socket besides reads and writes,
// which go through its Stream: a *rawio.Socket, or a *net.TCPConn from a listener that is
// not a worker's (tests).
type socket interface {
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	SetDeadline(time.Time) error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	CloseWrite() error
	SyscallConn() (syscall.RawConn, error)
}

// edgeConn is one client connection. Its fields are used by the one goroutine serving the
// connection (fasthttp's, then the tunnel's after a hijack), except closed.
type edgeConn struct {
	socket
	// own is the socket when an edgeListener's Acceptor took it (socket is then &own): one
	// allocation holds both.
	own rawio.Socket
	// stream is the HTTP/2 stream this is the connection of (h2Stream.ec), nil on HTTP/1.x.
	stream  *h2Stream
	l       *edgeListener
	closed  atomic.Bool
	trusted bool // the TCP peer is in real_ip_from

	// realAddr is the client named by real_ip_header, given to fasthttp's RequestCtx so
	// that every reader of RemoteAddr sees it; realIP backs its IP.
	realAddr net.TCPAddr
	realIP   [16]byte

	// inBody is set while the handler runs a request with a body.
	inBody bool

	// The deadlines. fasthttp runs without timeouts of its own: the connection arms its
	// socket's deadline only when a read or write is about to wait (ArmRead, ArmWrite),
	// from the policy of the moment, which the request's progress sets (ConnState events,
	// admit). Only the goroutine serving the connection touches these, until a hijack
	// makes both directions manual, before the tunnel's goroutines start.
	readPolicy  readPolicy
	readTimeout time.Duration
	readAt      int64 // readAbsolute's deadline (monotime); 0 until the first wait fixes it
	// waitFrom is a clock reading (monotime) taken as the connection went idle or opened,
	// which the wait that follows takes for now instead of reading the clock again.
	waitFrom int64
	// answeredAt is when the handler's answer was whole (monotime, the proxy's last
	// reading), which going idle takes for now; 0 when unknown, or when a write of the
	// answer had to wait, which may have taken any time.
	answeredAt  int64
	readArm     rawio.LazyDeadline
	writeManual bool
	writeArm    rawio.LazyDeadline
	// lineEnded is set once an LF is read after the last response write. fasthttp reports
	// a request line and a header block too large for its buffer with one error and keeps
	// no copy of the buffer: an LF read since the request began means the request line fit
	// (431), none means the request line itself is past the buffer (414, as nginx). A
	// pipelined request whose line arrived before the previous response was written, and
	// whose headers then overflow in a single line, is misnamed 414: both close the
	// connection, so only the status differs. Atomic because a websocket tunnel reads and
	// writes from two goroutines; a store happens only on a change.
	lineEnded atomic.Bool

	body limitedBody

	mark connMark // the connection tracker's and the gauges' state (conns.go)

	// peer is the TCP peer's address as the access log writes it, formatted on first use;
	// peerLen is 0 until then.
	peer    [len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")]byte
	peerLen uint8

	// kept is the request state the connection keeps for its requests from its second on
	// (servedOne; the first takes pooled state, see Worker.handle), and for a streamed
	// body; nil until then (keptState). Apart, so that a connection that serves one
	// request allocates and zeroes 896 bytes, not 2.3 KB.
	kept      *keptState
	servedOne bool

	// io reads and writes the socket with raw system calls (see package rawio).
	io rawio.Stream
	// writes counts the connection's writes up to 2, and noDelay is set once TCP_NODELAY
	// is: a write that may follow another before the peer acknowledged it turns Nagle's
	// algorithm off first, as nginx's tcp_nodelay does for a connection kept alive. A
	// connection that writes once (a request, a close) never pays the setsockopt(2).
	writes  uint8
	noDelay bool
	// quickAcked is set once a TLS connection acknowledged its client's Finished at once
	// (Read).
	quickAcked bool

	// h2c, until the first read, serves the connection as HTTP/2 if it starts with the
	// connection preface (prior-knowledge h2c); nil where h2c is off.
	h2c *h2Server
	// h2Stream marks an HTTP/2 stream's request state (http2.go), which has no socket of
	// its own.
	h2Stream bool
}

// keptState is the request state an edgeConn keeps for its requests: the proxy's working
// state and the plugins' Ctx for the request being served, and the streamEnd that holds
// it while its streamed body is sent.
type keptState struct {
	scratch   proxy.Scratch
	plugins   plugins.Ctx
	streamEnd streamEnd
}

// keptState returns c's kept state, made on first use.
func (c *edgeConn) keptState() *keptState {
	if c.kept == nil {
		c.kept = new(keptState)
	}
	return c.kept
}

// Close returns the connection's worker_connections slot, once.
func (c *edgeConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		<-c.l.slots
	}
	return c.io.Close()
}

// Read reads under the read policy's deadline (ArmRead). Outside a body it looks for a
// line's end (lineEnded) until it finds one: a request usually costs one scan of its first
// read.
func (c *edgeConn) Read(p []byte) (int, error) {
	if c.h2c != nil {
		return c.sniffH2C(p) // the connection's first read (http2.go)
	}
	n, err := c.read(p)
	if n > 0 && c.writes == 1 && !c.quickAcked && c.l != nil && c.l.tls && c.socket == &c.own {
		// A TLS 1.3 client's Finished, read after the server's one flight. Go's server
		// sent its session ticket in that flight (OpenSSL sends it now, and its ACK with
		// it), so it has nothing to send back, the kernel delays the ACK up to 40 ms, and
		// the client's request, written after its Finished, waits behind Nagle's
		// algorithm for that ACK: ab -c 1 took 44 ms a request against nginx's 1.8.
		c.quickAcked = true
		c.own.QuickAck()
	}
	if n > 0 && !c.inBody && !c.lineEnded.Load() && bytes.IndexByte(p[:n], '\n') >= 0 {
		c.lineEnded.Store(true)
	}
	return n, err
}

// Write keeps send_timeout between writes (ArmWrite). A write answers the request being
// read, so the next request starts with no line ended.
func (c *edgeConn) Write(p []byte) (int, error) {
	if c.lineEnded.Load() {
		c.lineEnded.Store(false)
	}
	if !c.noDelay {
		if c.writes++; c.writes > 1 {
			c.noDelay = true
			if c.socket == &c.own { // a *net.TCPConn has it on already
				c.own.NoDelay()
			}
		}
	}
	n, err := c.io.Write(p)
	return n, rawio.OpError("write", c, err)
}

func (c *edgeConn) read(p []byte) (int, error) {
	n, err := c.io.Read(p)
	return n, rawio.OpError("read", c, err)
}

// readPolicy is how long a client connection's reads may wait, by what is being read.
type readPolicy uint8

const (
	// readAbsolute: every wait ends at readAt, which the first wait fixes to readTimeout
	// ahead when it is zero. A request's line and header (client_header_timeout, counted
	// for the first request from the connection's first wait, as fasthttp's ReadTimeout
	// was), or a deadline fasthttp set (client_body_timeout from the end of the header).
	readAbsolute readPolicy = iota
	// readBetween: each wait may last readTimeout. An idle keep-alive connection
	// (keepalive_timeout), or a body being read (client_body_timeout, nginx's "between two
	// successive read operations").
	readBetween
	// readManual: the deadline is whoever set it last (a websocket tunnel's).
	readManual
)

// ArmRead arms the read deadline for a wait about to start (rawio.Waiter). Under load
// nearly every wait is a keep-alive one wanting a deadline a few microseconds past the
// last, which LazyDeadline leaves alone: a clock read, no timer update.
func (c *edgeConn) ArmRead(stale bool) bool {
	now := c.waitFrom
	c.waitFrom = 0
	var want int64
	var due bool
	switch c.readPolicy {
	case readManual:
		return false
	case readAbsolute:
		if c.readAt == 0 && c.readTimeout > 0 {
			if now == 0 {
				now = monotime.Now()
			}
			c.readAt = now + int64(c.readTimeout)
		}
		want, due = c.readAt, c.readArm.Due(c.readAt, c.readTimeout, stale)
	case readBetween:
		want, due = c.readArm.After(now, c.readTimeout, stale)
	}
	if due {
		_ = c.socket.SetReadDeadline(monotime.Time(want))
	}
	return true
}

// ArmWrite arms send_timeout for a write about to wait: a response that fits the socket's
// buffer never does.
func (c *edgeConn) ArmWrite(stale bool) bool {
	if c.writeManual {
		return false
	}
	c.answeredAt = 0
	if want, due := c.writeArm.After(0, c.l.e.sendTimeout, stale); due {
		_ = c.socket.SetWriteDeadline(monotime.Time(want))
	}
	return true
}

// readFor sets the read policy.
func (c *edgeConn) readFor(policy readPolicy, timeout time.Duration) {
	if c.readPolicy != readManual {
		c.readPolicy, c.readTimeout, c.readAt = policy, timeout, 0
	}
}

// stateChanged moves the read policy along with fasthttp's view of the connection: idle
// between requests, then a request's header from its first byte. now is the clock read
// for the change (monotime), 0 when none was.
func (c *edgeConn) stateChanged(state fasthttp.ConnState, now int64) {
	c.waitFrom = now
	switch state {
	case fasthttp.StateIdle:
		c.readFor(readBetween, c.l.e.keepaliveTimeout)
		// Through the runtime's poller: fasthttp reads the next request right after it
		// wrote a response, when the client cannot have sent it yet, and the Stream then
		// waits first instead of reading nothing. Only a connection kept alive gets here,
		// so one that serves a single request never pays for the setsockopt(2) (TCP_INQ),
		// as nginx sets nothing on it; a kept-alive one pays one read that finds nothing,
		// the next, once. Until a hijack, every read of the socket is the Stream's.
		if c.readPolicy != readManual {
			c.io.WaitBeforeReads(true)
		}
	case fasthttp.StateActive:
		// The first request's header deadline runs from the first wait: keep it.
		if c.readPolicy == readBetween {
			c.readFor(readAbsolute, c.l.e.headerTimeout)
		}
	}
}

// SetReadDeadline is fasthttp's only deadline while it serves the connection, which it
// sets from HeaderReceived for a request with a body: the wait for the body's first bytes
// ends there. Once a hijack made the connection manual, it is the tunnel's, set as it is.
func (c *edgeConn) SetReadDeadline(t time.Time) error {
	if c.readPolicy != readManual {
		c.readPolicy, c.readAt, c.readTimeout = readAbsolute, monotime.Of(t), 0
		if !t.IsZero() {
			c.readTimeout = time.Until(t) // only LazyDeadline's slack depends on it
		}
		return nil
	}
	c.readArm.Forget()
	return c.socket.SetReadDeadline(t)
}

// SetWriteDeadline takes the write deadline out of ArmWrite's hands for good; fasthttp,
// run without a WriteTimeout, never calls it.
func (c *edgeConn) SetWriteDeadline(t time.Time) error {
	c.writeManual = true
	c.writeArm.Forget()
	return c.socket.SetWriteDeadline(t)
}

// SetDeadline makes both directions manual: fasthttp calls it when it hands the
// connection to a hijack handler (a websocket tunnel), which sets its own deadlines.
func (c *edgeConn) SetDeadline(t time.Time) error {
	c.io.WaitBeforeReads(false) // the tunnel's now, which reads through the socket's RawConn
	c.readPolicy = readManual
	c.writeManual = true
	c.readArm.Forget()
	c.writeArm.Forget()
	return c.socket.SetDeadline(t)
}

// limitedBody stands between a chunked request body and whoever reads it: it counts the
// bytes against client_max_body_size and remembers why reading stopped, so the handler
// can answer 413 or 400 once the proxy gave up.
type limitedBody struct {
	r       io.Reader
	left    int64 // < 0: no limit
	err     error // the first error read, returned from then on
	tooBig  bool
	broken  bool
	started bool
}

var errBodyTooLarge = errors.New("worker: request body larger than client_max_body_size")

func (b *limitedBody) reset(r io.Reader, limit int64) {
	*b = limitedBody{r: r, left: -1, started: true}
	if limit > 0 {
		b.left = limit
	}
}

// Read stops for good at the first error. fasthttp's chunked writer ignores an error that
// comes with data, and its chunked reader, once framing broke, would read on from
// wherever it stopped: without this, "3\r\nabcdef" parses "ef" as the next chunk size.
func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if b.left >= 0 {
		if int64(n) > b.left {
			b.tooBig, b.err = true, errBodyTooLarge
			return 0, b.err
		}
		b.left -= int64(n)
	}
	if err != nil {
		b.err = err
		b.broken = err != io.EOF
	}
	return n, err
}

// admit runs the edge's checks on a request before routing. It answers (with
// Connection: close) and returns false for a request that must not go further.
func (e *edge) admit(ctx *fasthttp.RequestCtx, ec *edgeConn) bool {
	h := &ctx.Request.Header
	if body := checkHeaderBlock(h.RawHeaders()); body != nil {
		reject(ctx, fasthttp.StatusBadRequest, body)
		return false
	}
	if !targetMatchesHost(h.RequestURI(), h.Host()) {
		reject(ctx, fasthttp.StatusBadRequest, badTargetBody)
		return false
	}
	length := h.ContentLength()
	if e.maxBody > 0 && int64(length) > e.maxBody {
		reject(ctx, fasthttp.StatusRequestEntityTooLarge, bodyTooLargeBody)
		return false
	}
	if ec == nil {
		return true
	}
	if ec.trusted {
		e.setRealIP(ctx, ec)
	} else {
		ctx.SetRemoteAddr(nil) // the real-ip plugin may have set one for the previous request
	}
	if length == -1 || length > 0 {
		ec.inBody = true
		ec.readFor(readBetween, e.bodyTimeout)
	}
	if length == -1 {
		if stream := ctx.RequestBodyStream(); stream != nil {
			ec.body.reset(stream, e.maxBody)
			ctx.Request.SetBodyStream(&ec.body, -1)
		}
	}
	return true
}

// finish ends a request admit let through: a chunked body that broke or grew past
// client_max_body_size replaces whatever the proxy answered (its own 502: the upstream
// saw an unfinished message and lost its connection).
func (e *edge) finish(ctx *fasthttp.RequestCtx, ec *edgeConn) {
	if ec == nil {
		return
	}
	ec.inBody = false
	if !ec.body.started {
		return
	}
	tooBig, broken := ec.body.tooBig, ec.body.broken
	ec.body = limitedBody{}
	switch {
	case tooBig:
		ctx.Response.Reset()
		reject(ctx, fasthttp.StatusRequestEntityTooLarge, bodyTooLargeBody)
	case broken:
		ctx.Response.Reset()
		reject(ctx, fasthttp.StatusBadRequest, badChunkBody)
	}
}

func reject(ctx *fasthttp.RequestCtx, status int, body []byte) {
	writeJSON(ctx, status, body)
	ctx.SetConnectionClose()
}

// checkHeaderBlock checks the header lines as they came off the wire, for what fasthttp's
// parser tolerates and a server behind gw might read differently: a line not ended by
// CRLF (bare LF), a CR elsewhere, obs-fold (a line starting with white space), a name with
// anything but token characters (a space before the colon, say), Content-Length together
// with Transfer-Encoding, and a Transfer-Encoding other than chunked. It returns the body
// of the 400 to send, or nil. raw is empty for a request not read from a connection.
func checkHeaderBlock(raw []byte) []byte {
	sawLength, sawEncoding := false, false
	for len(raw) > 0 {
		end := bytes.IndexByte(raw, '\n')
		if end < 1 || raw[end-1] != '\r' {
			return badHeaderLineBody
		}
		line := raw[:end-1]
		raw = raw[end+1:]
		if len(line) == 0 {
			break // the blank line ending the block
		}
		if bytes.IndexByte(line, '\r') >= 0 {
			return badHeaderLineBody
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 1 {
			return badHeaderLineBody
		}
		name := line[:colon]
		for _, c := range name {
			if !conf.IsTokenByte(c) {
				return badHeaderLineBody
			}
		}
		switch {
		case bytes.EqualFold(name, headerContentLength):
			sawLength = true
		case bytes.EqualFold(name, headerTransferEnc):
			if sawEncoding || !bytes.EqualFold(bytes.Trim(line[colon+1:], " \t"), chunked) {
				return badFramingBody
			}
			sawEncoding = true
		}
	}
	if sawLength && sawEncoding {
		return badFramingBody
	}
	return nil
}

// targetMatchesHost accepts an origin-form or asterisk-form target, and an absolute-form
// one (http://host/path) only when its host is the Host header's: the upstream may route by
// either, so they must not differ (RFC 9112 section 3.2.2).
func targetMatchesHost(target, host []byte) bool {
	if len(target) == 0 || target[0] == '/' || (len(target) == 1 && target[0] == '*') {
		return true
	}
	i := bytes.Index(target, schemeSeparator)
	if i < 0 {
		return false
	}
	scheme := target[:i]
	if !bytes.EqualFold(scheme, schemeHTTP) && !bytes.EqualFold(scheme, schemeHTTPS) {
		return false
	}
	authority := target[i+len(schemeSeparator):]
	if end := bytes.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	return len(authority) > 0 && bytes.IndexByte(authority, '@') < 0 && bytes.EqualFold(authority, host)
}

// setRealIP takes the client's address from real_ip_header for a request from a trusted
// peer: the last address, or with real_ip_recursive the last one not itself trusted. An
// absent or unparsable value leaves the TCP peer. The address lives in the connection, so
// this allocates nothing.
func (e *edge) setRealIP(ctx *fasthttp.RequestCtx, ec *edgeConn) {
	ctx.SetRemoteAddr(nil) // a previous request on this connection may have set one
	values := ctx.Request.Header.PeekAll(e.realIPName)
	for i := len(values) - 1; i >= 0; i-- {
		list := values[i]
		for len(list) > 0 {
			item := list
			if comma := bytes.LastIndexByte(list, ','); comma >= 0 {
				item, list = list[comma+1:], list[:comma]
			} else {
				list = nil
			}
			item = bytes.Trim(item, " \t")
			if len(item) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(bytesconv.String(item)) // neither ip nor err is kept
			if err != nil || ip.Zone() != "" {
				return // not an address: trust nothing further left in the list
			}
			ip = ip.Unmap()
			if e.recursive && e.trusts(ip) {
				ec.useRealIP(ctx, ip) // all trusted so far: the leftmost wins
				continue
			}
			ec.useRealIP(ctx, ip)
			return
		}
	}
}

// peerText is the TCP peer's IP as text (an IPv4-mapped address as IPv4), formatted
// once per connection; "-" when it has none.
func (c *edgeConn) peerText() []byte {
	if c.peerLen == 0 {
		b := append(c.peer[:0], '-')
		if tcp, ok := c.socket.RemoteAddr().(*net.TCPAddr); ok {
			if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
				b = ip.Unmap().AppendTo(c.peer[:0])
			}
		}
		c.peerLen = uint8(len(b))
	}
	return c.peer[:c.peerLen]
}

func (c *edgeConn) useRealIP(ctx *fasthttp.RequestCtx, ip netip.Addr) {
	if ip.Is4() {
		b := ip.As4()
		c.realAddr.IP = append(c.realIP[:0], b[:]...)
	} else {
		b := ip.As16()
		c.realAddr.IP = append(c.realIP[:0], b[:]...)
	}
	ctx.SetRemoteAddr(&c.realAddr)
}

// errorHandler answers a request fasthttp could not read, in gw's JSON; fasthttp adds
// Connection: close. A request past the read buffer is 414 when its request line alone
// is (see edgeConn.lineEnded), else 431. Over TLS the edgeConn reads ciphertext, so the
// distinction is not made and both are 431.
func errorHandler(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		if ec, plain := ctx.Conn().(*edgeConn); plain && !ec.lineEnded.Load() {
			writeJSON(ctx, fasthttp.StatusRequestURITooLong, uriTooLargeBody)
			return
		}
		writeJSON(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, headerTooLargeBody)
	case errors.As(err, &netErr) && netErr.Timeout():
		writeJSON(ctx, fasthttp.StatusRequestTimeout, requestTimeoutBody)
	default:
		writeJSON(ctx, fasthttp.StatusBadRequest, badRequestBody)
	}
}

// headerReceived picks the body's read settings once the headers are in: the wait for a
// body's first piece is bounded by client_body_timeout from the end of the header (the
// edgeConn takes the deadline fasthttp sets from this; a request without a body sets
// none). A body declared larger than client_max_body_size is refused by admit, which
// fasthttp calls only once it has a first piece of the body: a limit of 1 makes that piece
// one byte instead of up to 8k.
func (e *edge) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	var cfg fasthttp.RequestConfig
	if length := h.ContentLength(); length > 0 || length == -1 {
		cfg.ReadTimeout = e.bodyTimeout
	}
	if e.maxBody > 0 && int64(h.ContentLength()) > e.maxBody {
		cfg.MaxRequestBodySize = 1
	}
	return cfg
}

// expectHandler refuses an Expect: 100-continue request whose declared body is too large
// before the client sends it, as nginx does.
func (e *edge) expectHandler(ctx *fasthttp.RequestCtx) int {
	if e.maxBody > 0 && int64(ctx.Request.Header.ContentLength()) > e.maxBody {
		writeJSON(ctx, fasthttp.StatusRequestEntityTooLarge, bodyTooLargeBody)
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}
