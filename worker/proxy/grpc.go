package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/bytesconv"
	"gw/internal/monotime"
)

// gRPC upstreams (scheme grpc and grpcs) are spoken to in HTTP/2: in the clear by prior
// knowledge (h2c) for grpc, over TLS with ALPN h2 for grpcs, verified as https nodes are.
// The client is net/http's Transport restricted to HTTP/2 (Protocols): the standard
// library's, kept with Go, it multiplexes calls over one connection per node (more when
// the node's SETTINGS_MAX_CONCURRENT_STREAMS is reached), streams request and response
// bodies both ways while the call lasts, and delivers trailers. golang.org/x/net/http2's
// Transport is the same code, now deprecated in favour of it. Each node pool holds one
// Transport per server name (SNI) it is asked for, so a connection is only reused for the
// name its certificate was checked for, as nodePool.get does for https.

// grpcStreamBuffer bounds what the Transport buffers of one call's response that the
// client has not taken yet: it is the call's HTTP/2 receive window towards the node, so a
// slow client holds at most this much per call in the gateway (plus one window of request
// body on the client side, worker/http2.go).
const grpcStreamBuffer = 256 << 10

// grpcMaxNames bounds the Transports a pool keeps, one per server name asked for; past it
// the oldest are closed (a grpcs upstream with pass_host pass and many :authority values).
const grpcMaxNames = 16

// grpcTransports is a node pool's HTTP/2 clients, by server name ("" in the clear).
type grpcTransports struct {
	mu    sync.Mutex
	bySNI map[string]*http.Transport
	order []string
}

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

// dialFailed marks an error from dialling a node (connect or TLS handshake): the call
// never reached it, so the next node may be tried.
type dialFailed struct{ err error }

func (e *dialFailed) Error() string { return e.err.Error() }
func (e *dialFailed) Unwrap() error { return e.err }

// connectTimeoutKey carries the upstream's connect timeout to the Transport's dial, which
// the pool's Transport shares between upstreams that may set it differently.
type connectTimeoutKey struct{}

// RoundTripGRPC sends ctx's request to a node of u over HTTP/2, with body as the request
// body (it is read while the call lasts, concurrently with the response), and returns
// the node's response; the caller reads its body to EOF and its Trailer after, then
// closes the body. call carries the deadline (grpc-timeout) and cancellation (the client
// reset the stream). The request is rewritten as Forward rewrites it (hop-by-hop headers
// out, X-Forwarded-* in, pass_host), and gets TE: trailers. A node that cannot be
// reached is left for the next, up to retries; once the request may have reached a node,
// no other is tried. The error is a *GRPCError, or call's own error when it ended.
func (u *Upstream) RoundTripGRPC(call context.Context, ctx *fasthttp.RequestCtx, body io.ReadCloser, info *Info) (*http.Response, error) {
	info.Node, info.UpstreamNanos, info.Ended = nil, -1, 0
	if len(u.nodes) == 0 {
		return nil, &GRPCError{Message: "no valid upstream node", Err: errors.New("the upstream has no node of weight above 0")}
	}
	if u.unusable != nil {
		return nil, &GRPCError{Message: "the upstream cannot be used as configured; the error log says why", Err: errors.New("unusable upstream")}
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
	call = context.WithValue(call, connectTimeoutKey{}, u.connectTimeout)
	var lastErr error
	for range u.retries + 1 {
		i := u.choose(x)
		if i < 0 {
			break
		}
		set(x.tried, i)
		n := &u.nodes[i]
		info.Node = n.addr
		host := u.hostFor(ctx, x, n)
		try := &attemptBody{body: body}
		req := u.grpcRequest(call, ctx, host, n, try)
		sni := ""
		if n.pool.tlsConfig != nil {
			sni = string(hostWithoutPort(host))
		}
		resp, err := n.pool.grpcTransport(sni).RoundTrip(req)
		u.tryEnded(i, outcomeOf(err), x, start)
		if err == nil {
			info.UpstreamNanos = monotime.Now() - start
			return resp, nil
		}
		if call.Err() != nil {
			return nil, call.Err()
		}
		lastErr = err
		var df *dialFailed
		if !errors.As(err, &df) {
			break // the request may have reached the node
		}
	}
	info.UpstreamNanos = monotime.Now() - start
	if lastErr == nil {
		return nil, &GRPCError{Message: "no valid upstream node", Err: errors.New("every node was tried or has weight 0")}
	}
	var df *dialFailed
	var te *tlsError
	switch {
	case errors.As(lastErr, &te) && te.verify:
		return nil, &GRPCError{Message: "the upstream's TLS certificate did not verify; the error log says why", Err: lastErr}
	case errors.As(lastErr, &te):
		return nil, &GRPCError{Message: "the TLS handshake with the upstream failed; the error log says why", Err: lastErr}
	case errors.As(lastErr, &df) && isTimeout(df.err):
		return nil, &GRPCError{Message: "no upstream node accepted a connection within " + formatSeconds(u.connectTimeout.Seconds()), Err: lastErr}
	case errors.As(lastErr, &df):
		return nil, &GRPCError{Message: "no upstream node answered", Err: lastErr}
	}
	return nil, &GRPCError{Message: "the upstream broke the call off", Err: lastErr}
}

func outcomeOf(err error) outcome {
	if err != nil {
		return connectFailed
	}
	return done
}

// attemptBody is the request body as one try sees it. net/http closes a request's body
// when the try fails, even before dialling succeeded; the body must stay open for the
// next node, so the try's close only stops the try reading it. The caller closes body.
type attemptBody struct {
	body   io.ReadCloser
	closed atomic.Bool
}

func (b *attemptBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errAttemptOver
	}
	return b.body.Read(p)
}

func (b *attemptBody) Close() error {
	b.closed.Store(true)
	return nil
}

var errAttemptOver = errors.New("proxy: gRPC request body read after its try ended")

// grpcRequest is the request node n gets: ctx's method, path and headers (as prepared),
// host as :authority, and body.
func (u *Upstream) grpcRequest(call context.Context, ctx *fasthttp.RequestCtx, host []byte, n *node, body *attemptBody) *http.Request {
	scheme := "http"
	if n.pool.tlsConfig != nil {
		scheme = "https"
	}
	h := &ctx.Request.Header
	header := make(http.Header, h.Len()+1)
	for k, v := range h.All() {
		switch string(k) {
		case fasthttp.HeaderHost, fasthttp.HeaderContentLength, fasthttp.HeaderConnection, fasthttp.HeaderTransferEncoding:
			continue
		}
		name := http.CanonicalHeaderKey(string(k))
		header[name] = append(header[name], string(v))
	}
	header["Te"] = []string{"trailers"}
	if _, ok := header["User-Agent"]; !ok {
		header["User-Agent"] = []string{""} // not Go's own
	}
	req := &http.Request{
		Method:        bytesconv.String(h.Method()),
		URL:           &url.URL{Scheme: scheme, Host: string(n.addr), Opaque: string(ctx.Request.Header.RequestURI())},
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		Host:          string(host),
		Body:          body,
		ContentLength: -1,
	}
	if body.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	return req.WithContext(call)
}

// grpcTransport is the pool's HTTP/2 client for server name sni ("" in the clear).
func (np *nodePool) grpcTransport(sni string) *http.Transport {
	g := &np.grpc
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.bySNI[sni]; t != nil {
		return t
	}
	if g.bySNI == nil {
		g.bySNI = map[string]*http.Transport{}
	}
	if len(g.order) >= grpcMaxNames {
		oldest := g.order[0]
		g.order = g.order[1:]
		g.bySNI[oldest].CloseIdleConnections()
		delete(g.bySNI, oldest)
	}
	t := np.newGRPCTransport(sni)
	g.bySNI[sni] = t
	g.order = append(g.order, sni)
	return t
}

func (np *nodePool) newGRPCTransport(sni string) *http.Transport {
	var protocols http.Protocols
	t := &http.Transport{
		DisableCompression:  true, // the node's grpc-encoding is the client's business
		IdleConnTimeout:     np.key.idleTimeout,
		MaxIdleConnsPerHost: max(np.key.size, 1),
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream: grpcStreamBuffer,
		},
	}
	if np.key.idleTimeout <= 0 {
		t.IdleConnTimeout = time.Second // keepalive_pool.idle_timeout 0: no idle connection kept
	}
	if np.tlsConfig == nil {
		protocols.SetUnencryptedHTTP2(true)
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return np.dialTCP(ctx)
		}
	} else {
		protocols.SetHTTP2(true)
		config := np.tlsConfig.Clone()
		config.ServerName = sni
		config.NextProtos = []string{"h2"}
		t.TLSClientConfig = config
		t.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := np.dialTCP(ctx)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(conn, config)
			hctx, cancel := context.WithTimeout(ctx, connectTimeoutOf(ctx))
			err = tc.HandshakeContext(hctx)
			cancel()
			if err != nil {
				conn.Close()
				if isTimeout(err) {
					return nil, &dialFailed{err}
				}
				return nil, &dialFailed{np.handshakeFailed(sni, err)}
			}
			return tc, nil
		}
	}
	t.Protocols = &protocols
	return t
}

func connectTimeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return 60 * time.Second // APISIX's default timeout.connect
}

// dialTCP connects to the node within the connect timeout ctx carries.
func (np *nodePool) dialTCP(ctx context.Context) (net.Conn, error) {
	deadline := time.Now().Add(connectTimeoutOf(ctx))
	ip := np.ip
	if np.resolver != nil {
		a := np.resolver.current(deadline)
		if a == nil {
			return nil, &dialFailed{errUnresolved}
		}
		ip = *a
	}
	d := net.Dialer{Deadline: deadline, KeepAlive: -1}
	conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, np.key.port).String())
	if err != nil {
		return nil, &dialFailed{err}
	}
	return conn, nil
}

// shutGRPC closes the pool's idle HTTP/2 connections; those carrying calls close when
// their calls end.
func (np *nodePool) shutGRPC() {
	g := &np.grpc
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.bySNI {
		t.CloseIdleConnections()
	}
	g.bySNI, g.order = nil, nil
}
