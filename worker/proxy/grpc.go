package proxy

import (
	"bytes"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
)

// gRPC upstreams (scheme grpc and grpcs) are spoken to in HTTP/2: in the clear by prior
// knowledge (h2c) for grpc, over TLS with ALPN h2 for grpcs, verified as https nodes are.
// The client is gw's own (grpcconn.go): calls are multiplexed over a kept-alive
// connection per node and server name (more when the node's SETTINGS_MAX_CONCURRENT_STREAMS
// is reached), request and response bodies stream both ways while the call lasts, within
// both sides' flow-control windows, and trailers end the response. A call's state
// (GRPCCall) is pooled, so a unary call allocates nothing in steady state.

// grpcStreamBuffer bounds what the client buffers of one call's response that the
// caller has not read yet: it is the call's HTTP/2 receive window towards the node, so a
// slow client holds at most this much per call in the gateway (plus one window of request
// body on the client side, worker/http2.go).
const grpcStreamBuffer = 256 << 10

// grpcWindowUpdateMin is how much of a response the caller reads before the window is
// given back to the node: half the default window, so that a node still sending within
// the default (before it applied gw's SETTINGS) is never left waiting.
const grpcWindowUpdateMin = 32 << 10

// grpcRefusedRetries bounds how many times a call the node refused before processing it
// (REFUSED_STREAM, or above a GOAWAY's last stream) is sent again on a new connection.
const grpcRefusedRetries = 2

// GRPC reports whether u proxies gRPC (scheme grpc or grpcs): its requests go through
// RoundTripGRPC, not Forward.
func (u *Upstream) GRPC() bool { return u.grpc }

// GRPCError is why RoundTripGRPC got no response from a node. Message is for the client
// (the gRPC status's message), without addresses; Err is the cause, for the error log.
type GRPCError struct {
	Message string
	Err     error
}

func (e *GRPCError) Error() string { return e.Message + ": " + e.Err.Error() }
func (e *GRPCError) Unwrap() error { return e.Err }

// dialFailed marks an error from dialling a node (connect, TLS handshake or HTTP/2
// preface): the call never reached it, so the next node may be tried.
type dialFailed struct{ err error }

func (e *dialFailed) Error() string { return e.err.Error() }
func (e *dialFailed) Unwrap() error { return e.err }

var (
	// ErrGRPCStopped is what a call's reads give once it was cancelled or its deadline
	// passed (GRPCCall.Expired tells which).
	ErrGRPCStopped  = errors.New("proxy: gRPC call cancelled or past its deadline")
	errGRPCAnswered = errors.New("proxy: the node ended the call before its request")
)

// GRPCCall is one gRPC call to a node: what RoundTripGRPC sent and what the node
// answers. Get one with AcquireGRPCCall and give it back with ReleaseGRPCCall once the
// response is read; the header and trailer bytes it returns are valid until then.
// Cancel (its CancelFunc) may be called from any goroutine while the call is held; the
// other methods belong to the goroutine that holds it.
type GRPCCall struct {
	cancelFunc func()
	// state is the acquisition's generation << grpcStopBits | why the call stopped
	// (grpcStop*).
	state      atomic.Uint64
	deadlineAt atomic.Int64 // monotime; math.MaxInt64 for none
	// The upstream's timeout.read and timeout.send (grpctimeout.go), in nanoseconds, as
	// RoundTripGRPC set them (an earlier acquisition's before: they are looked at only
	// once the call is on a connection); 0 for none.
	readTimeout atomic.Int64
	sendTimeout atomic.Int64
	// timerMu orders the timer's arming and firing; armedAt is when it fires
	// (monotime), 0 when it is not armed, read without timerMu to skip an arming that
	// would change nothing (grpctimeout.go).
	timerMu sync.Mutex
	armedAt atomic.Int64
	timer   *time.Timer
	// conn is the connection the call holds a place on (counted in its active calls);
	// cond waits under its mu.
	conn atomic.Pointer[grpcConn]
	cond sync.Cond
	id   uint32

	// Under conn.mu.
	sendWindow    int32
	recvWindow    int32 // what the node may still send before the next WINDOW_UPDATE
	consumed      int32 // read and not yet given back to the node
	buf           []byte
	start         int
	status        int
	headers       []grpcField
	trailerFields []grpcField
	arena         []byte // the header fields' bytes
	trailerArena  []byte // the trailer fields' bytes
	gotHeaders    bool
	informational bool
	trailersOnly  bool
	remoteDone    bool // the node ended its side (END_STREAM or RST_STREAM)
	localDone     bool // gw's END_STREAM went out
	err           error
	retry         bool // err came before the node processed the call
	pumping       bool // a goroutine sends the request body
	abandoned     bool // released: the body's goroutine stops sending
	// readSince is when the read timeout last started over: the node's last frame on the
	// call, gw's END_STREAM, or a window given back. sendWaitSince is when a write of the
	// request began waiting for the node's windows, 0 while none waits.
	readSince     int64
	sendWaitSince int64

	body     io.Reader
	bodyCopy []byte // a request body that had all arrived, kept to send again
}

// grpcField is a header or trailer field in its arena: name arena[a:b], value arena[b:c].
type grpcField struct{ a, b, c int32 }

const (
	grpcStopCanceled    = 1
	grpcStopDeadline    = 2 // grpc-timeout passed
	grpcStopReadTimeout = 3 // the node sent nothing for timeout.read
	grpcStopSendTimeout = 4 // the node took none of the request for timeout.send
	grpcStopPooled      = 7 // released: no acquisition holds the call
	grpcStopBits        = 3
	grpcStopMask        = 1<<grpcStopBits - 1
)

var grpcCallPool = sync.Pool{New: func() any {
	c := new(GRPCCall)
	c.cancelFunc = c.Cancel
	return c
}}

// AcquireGRPCCall returns a call that will stop after timeout (none when timeout <= 0).
func AcquireGRPCCall(timeout time.Duration) *GRPCCall {
	c := grpcCallPool.Get().(*GRPCCall)
	gen := c.state.Load()>>grpcStopBits + 1
	c.state.Store(gen << grpcStopBits)
	if timeout > 0 {
		at := monotime.Now() + int64(timeout)
		c.deadlineAt.Store(at)
		c.arm(at)
	} else {
		c.deadlineAt.Store(math.MaxInt64)
	}
	return c
}

// ReleaseGRPCCall ends c (the node's side is reset if it has not ended) and puts it
// back. A request body being sent must have been closed (its reads return) first.
func ReleaseGRPCCall(c *GRPCCall) {
	// The timer is left armed: the call's next acquisition needs it again, most often
	// no earlier (grpctimeout.go), and a firing meanwhile finds the call pooled, and looks
	// no further (its deadline and timeouts are the next acquisition's to set).
	c.state.Store(c.state.Load()&^grpcStopMask | grpcStopPooled)
	c.detach()
	c.body = nil
	if cap(c.buf) > 64<<10 {
		c.buf = nil // a large response's buffer is not kept for the small ones
	}
	if cap(c.bodyCopy) > 64<<10 {
		c.bodyCopy = nil
	}
	grpcCallPool.Put(c)
}

// CancelFunc is Cancel, made once: handing it out does not allocate.
func (c *GRPCCall) CancelFunc() func() { return c.cancelFunc }

// Cancel stops the call: waits for the node end, and the node's side is reset.
func (c *GRPCCall) Cancel() {
	s := c.state.Load()
	if s&grpcStopMask == 0 && c.state.CompareAndSwap(s, s|grpcStopCanceled) {
		c.wake()
	}
}

// Stopped reports whether the call was cancelled, its deadline passed or the node
// timed out (TimedOut).
func (c *GRPCCall) Stopped() bool { return c.state.Load()&grpcStopMask != 0 }

// Expired reports whether the call's deadline passed.
func (c *GRPCCall) Expired() bool { return c.state.Load()&grpcStopMask == grpcStopDeadline }

func (c *GRPCCall) wake() {
	if cn := c.conn.Load(); cn != nil {
		cn.mu.Lock()
		c.cond.Broadcast()
		cn.mu.Unlock()
	}
}

// reset clears what a try left, for the next (under no lock: the call is on no
// connection).
func (c *GRPCCall) reset() {
	c.id = 0
	c.buf, c.start = c.buf[:0], 0
	c.status, c.headers, c.trailerFields, c.arena, c.trailerArena = 0, c.headers[:0], c.trailerFields[:0], c.arena[:0], c.trailerArena[:0]
	c.gotHeaders, c.informational, c.trailersOnly, c.remoteDone, c.localDone = false, false, false, false, false
	c.err, c.retry, c.pumping, c.abandoned = nil, false, false, false
	c.consumed = 0
}

// detach takes the call off its connection, once its body's goroutine has stopped.
func (c *GRPCCall) detach() {
	cn := c.conn.Load()
	if cn == nil {
		c.reset()
		return
	}
	cn.mu.Lock()
	c.abandoned = true
	c.cond.Broadcast()
	for c.pumping {
		c.cond.Wait()
	}
	cn.mu.Unlock()
	cn.release(c) // and off the connection
	c.reset()
}

// failLocked ends the call with err (under its connection's mu); retry says the node
// did not process it.
func (c *GRPCCall) failLocked(err error, retry bool) {
	if c.err == nil {
		c.err, c.retry = err, retry && c.status == 0
	}
	c.remoteDone = true
	c.cond.Broadcast()
}

// sendErrLocked is why the request may not be sent further, nil if it may.
func (c *GRPCCall) sendErrLocked() error {
	switch {
	case c.err != nil:
		return c.err
	case c.abandoned || c.state.Load()&grpcStopMask != 0:
		return ErrGRPCStopped
	case c.remoteDone:
		return errGRPCAnswered
	}
	return nil
}

// Status is the response's HTTP status.
func (c *GRPCCall) Status() int { return c.status }

// TrailersOnly reports whether the response's header block ended it (a gRPC
// trailers-only response: its status is in the headers).
func (c *GRPCCall) TrailersOnly() bool { return c.trailersOnly }

// Headers is the number of the response's header fields (pseudo-headers left out).
func (c *GRPCCall) Headers() int { return len(c.headers) }

// Header is the i-th header field, name lowercase.
func (c *GRPCCall) Header(i int) (name, value []byte) { return field(c.arena, c.headers[i]) }

// Trailers is the number of the response's trailer fields, known once Read gave io.EOF.
func (c *GRPCCall) Trailers() int { return len(c.trailerFields) }

// Trailer is the i-th trailer field, name lowercase.
func (c *GRPCCall) Trailer(i int) (name, value []byte) {
	return field(c.trailerArena, c.trailerFields[i])
}

func field(arena []byte, f grpcField) ([]byte, []byte) {
	return arena[f.a:f.b:f.b], arena[f.b:f.c:f.c]
}

// Read reads the response body (the node's DATA) as it comes: io.EOF once the node
// ended the stream (the trailers are then known), ErrGRPCStopped once the call was
// stopped, the connection's or stream's error when they broke.
func (c *GRPCCall) Read(p []byte) (int, error) {
	cn := c.conn.Load()
	if cn == nil {
		return 0, io.EOF
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for c.start == len(c.buf) && !c.remoteDone && c.state.Load()&grpcStopMask == 0 {
		c.cond.Wait()
	}
	if c.state.Load()&grpcStopMask != 0 {
		return 0, ErrGRPCStopped
	}
	if c.start == len(c.buf) {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.buf[c.start:])
	c.start += n
	if c.start == len(c.buf) {
		c.buf, c.start = c.buf[:0], 0
	}
	c.consumed += int32(n)
	if c.consumed >= grpcWindowUpdateMin && !c.remoteDone && !cn.dead {
		if cn.fr.WriteWindowUpdate(c.id, uint32(c.consumed)) == nil {
			cn.flusher.FlushLaterLocked()
		}
		c.recvWindow += c.consumed
		c.consumed = 0
		c.readSince = monotime.Now() // the node may send again: its silence counts from now
	}
	return n, nil
}

// RoundTripGRPC sends ctx's request to a node of u over HTTP/2 as call, with body as the
// request body (nil for none; read while the call lasts, concurrently with the response,
// unless it says it has all arrived), and returns once the node's response header came.
// The caller then reads call's body to io.EOF and its trailers after. The request is
// rewritten as Forward rewrites it (hop-by-hop headers out, X-Forwarded-* in,
// pass_host), and gets TE: trailers. A node that cannot be reached is left for the next,
// up to retries, and a call the node refused before processing it is sent again on a new
// connection; once the request may have reached a node's application, no other is
// tried. The node's side is bounded by the upstream's timeout.send and timeout.read
// while the call lasts (grpctimeout.go). The error is a *GRPCError, or ErrGRPCStopped
// when the call was stopped (TimedOut says whether by those timeouts).
func (u *Upstream) RoundTripGRPC(call *GRPCCall, ctx *fasthttp.RequestCtx, body io.Reader, info *Info) error {
	info.Node, info.UpstreamNanos, info.Ended = nil, -1, 0
	if len(u.nodes) == 0 {
		return &GRPCError{Message: "no valid upstream node", Err: errors.New("the upstream has no node of weight above 0")}
	}
	if u.unusable != nil {
		return &GRPCError{Message: "the upstream cannot be used as configured; the error log says why", Err: errors.New("unusable upstream")}
	}
	x := exchangeFor(info)
	defer x.done(info)
	words := (len(u.nodes) + 63) >> 6
	if cap(x.tried) < words {
		x.tried = make([]uint64, words)
	}
	x.tried = x.tried[:words]
	clear(x.tried)
	if u.balancer == conf.BalanceChash {
		x.hash = u.hashKey.hash(x.varsFor(ctx, info, u.hashKey.names), x)
	}
	x.pristine = false
	u.prepareRequest(ctx, x, info)
	start := monotime.Now()
	x.now = start
	call.watchIO(u.sendTimeout, u.readTimeout, start)

	// A body that has all arrived is read now and kept: the call may go again.
	complete := body == nil
	if !complete {
		complete = bodyComplete(body)
	}
	call.bodyCopy = call.bodyCopy[:0]
	if complete && body != nil {
		if err := call.copyBody(body); err != nil {
			return &GRPCError{Message: "the request body could not be read", Err: err}
		}
	}
	if !complete {
		call.body = body
	}

	var lastErr error
	refusals := 0
	for try := 0; try <= u.retries; {
		i := u.choose(x)
		if i < 0 {
			break
		}
		set(x.tried, i)
		n := &u.nodes[i]
		info.Node = n.addr
		host := u.hostFor(ctx, x, n)
		sni := ""
		if n.pool.tlsConfig != nil {
			sni = string(hostWithoutPort(host))
		}
		err := call.try(n.pool, sni, u.connectTimeout, ctx, host, complete)
		u.tryEnded(i, outcomeOf(err), x, start)
		if err == nil {
			info.UpstreamNanos = monotime.Now() - start
			return nil
		}
		// A call given up stays on its connection until ReleaseGRPCCall: its body's
		// goroutine (a streamed body) may be waiting for the client, whose stream the
		// caller closes first. A call sent again had no such goroutine (its body was
		// complete), and a failed dial left it on no connection.
		if call.Stopped() {
			return ErrGRPCStopped
		}
		lastErr = err
		// A refusal by the connection itself (retired or broken before the call's
		// HEADERS) left the body unread; one by the node may have followed some of a
		// streamed body out, which only a body kept whole can send again.
		var rf *refusedError
		if call.retry || errors.As(err, &rf) {
			if (complete || rf != nil) && refusals < grpcRefusedRetries {
				call.detach()
				refusals++
				clear(x.tried) // the same node again, on a new connection
				continue
			}
			break
		}
		var df *dialFailed
		if !errors.As(err, &df) {
			break // the request may have reached the node
		}
		call.detach()
		try++
	}
	info.UpstreamNanos = monotime.Now() - start
	if lastErr == nil {
		return &GRPCError{Message: "no valid upstream node", Err: errors.New("every node was tried or has weight 0")}
	}
	var df *dialFailed
	var te *tlsError
	switch {
	case errors.As(lastErr, &te) && te.verify:
		return &GRPCError{Message: "the upstream's TLS certificate did not verify; the error log says why", Err: lastErr}
	case errors.As(lastErr, &te):
		return &GRPCError{Message: "the TLS handshake with the upstream failed; the error log says why", Err: lastErr}
	case errors.As(lastErr, &df) && isTimeout(df.err):
		return &GRPCError{Message: "no upstream node accepted a connection within " + formatSeconds(u.connectTimeout.Seconds()), Err: lastErr}
	case errors.As(lastErr, &df):
		return &GRPCError{Message: "no upstream node answered", Err: lastErr}
	}
	return &GRPCError{Message: "the upstream broke the call off", Err: lastErr}
}

// bodyComplete reports whether body has all arrived, so that reading it to the end
// does not wait for the client.
func bodyComplete(body io.Reader) bool {
	switch b := body.(type) {
	case *bytes.Reader:
		return true
	case interface{ Complete() bool }:
		return b.Complete()
	}
	return false
}

func (c *GRPCCall) copyBody(body io.Reader) error {
	b := c.bodyCopy[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, 512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			c.bodyCopy = b
			return nil
		}
		if err != nil {
			c.bodyCopy = b
			return err
		}
	}
}

func outcomeOf(err error) outcome {
	if err != nil {
		return connectFailed
	}
	return done
}

// try sends the call to np's node and waits for the response header: the request's
// HEADERS, then its body (from the copy, or by a goroutine that reads it as it comes).
func (c *GRPCCall) try(np *nodePool, sni string, connectTimeout time.Duration, ctx *fasthttp.RequestCtx, host []byte, complete bool) error {
	if c.Stopped() {
		return ErrGRPCStopped
	}
	cn, err := np.grpcConnFor(sni, connectTimeout, c)
	if err != nil {
		return err
	}
	c.cond.L = &cn.mu
	c.conn.Store(cn)
	scheme := schemeHTTP
	if np.tlsConfig != nil {
		scheme = schemeHTTPS
	}
	endStream := complete && len(c.bodyCopy) == 0
	// The HEADERS wait for the body's DATA only when that is here: a streamed body's
	// first message may be long in coming, and the node may answer before it.
	if err := cn.open(c, &ctx.Request.Header, scheme, host, endStream, complete && !endStream); err != nil {
		return err
	}
	switch {
	case endStream:
	case complete:
		if err := cn.writeData(c, c.bodyCopy, true); err != nil && err != errGRPCAnswered {
			return err
		}
	default:
		cn.mu.Lock()
		c.pumping = true
		cn.mu.Unlock()
		go c.pump(cn)
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for c.status == 0 && c.err == nil && c.state.Load()&grpcStopMask == 0 {
		c.cond.Wait()
	}
	switch {
	case c.state.Load()&grpcStopMask != 0:
		return ErrGRPCStopped
	case c.status == 0:
		return c.err
	}
	return nil
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
	teTrailers  = []byte("trailers")
	headerTE    = []byte("te")
)

// pump sends the request body as the client sends it, within the node's windows.
func (c *GRPCCall) pump(cn *grpcConn) {
	buf := grpcCopyBufPool.Get().(*[grpcMaxFrame]byte)
	for {
		n, err := c.body.Read(buf[:])
		if n > 0 && cn.writeData(c, buf[:n], false) != nil {
			break
		}
		if err == io.EOF {
			_ = cn.writeData(c, nil, true)
			break
		}
		if err != nil {
			break // the client's side ended: the release resets the node's
		}
	}
	grpcCopyBufPool.Put(buf)
	cn.mu.Lock()
	c.pumping = false
	c.cond.Broadcast()
	cn.mu.Unlock()
}

var grpcCopyBufPool = sync.Pool{New: func() any { return new([grpcMaxFrame]byte) }}

// encodeRequest encodes the request's header block (under mu).
func (cn *grpcConn) encodeRequest(h *fasthttp.RequestHeader, scheme, host []byte) {
	cn.hdr.Reset()
	cn.hdr.Pseudo(":method", h.Method())
	cn.hdr.Pseudo(":scheme", scheme)
	cn.hdr.Pseudo(":authority", host)
	cn.hdr.Pseudo(":path", h.RequestURI())
	for k, v := range h.All() {
		if skipGRPCRequestHeader(k) {
			continue
		}
		cn.hdr.Field(k, v)
	}
	cn.hdr.Field(headerTE, teTrailers)
}

// skipGRPCRequestHeader leaves out what HTTP/2 forbids in a request (connection-specific
// fields, RFC 9113 8.2.2), what the pseudo-headers carry (Host), and what the body's
// framing makes moot (Content-Length); TE goes as "trailers", added after.
func skipGRPCRequestHeader(k []byte) bool {
	for _, name := range grpcSkippedHeaders {
		if len(k) == len(name) && bytes.EqualFold(k, name) {
			return true
		}
	}
	return false
}

var grpcSkippedHeaders = [][]byte{
	[]byte("Host"), []byte("Content-Length"), []byte("Connection"), []byte("Keep-Alive"),
	[]byte("Proxy-Connection"), []byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Te"),
}
