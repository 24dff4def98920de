package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
	"gw/plugins"
	"gw/plugins/vars"
)

// maxBufferedBody is the largest known-length response body read whole before the response
// is handed to the server; it frees the upstream connection before the client has read
// anything. Larger and unknown-length bodies are streamed.
const maxBufferedBody = 32 << 10

// hopByHop are the headers that describe one connection, not the message (RFC 9110 7.6.1,
// plus the proxy ones nginx drops). Transfer-Encoding is re-framed by fasthttp.
var hopByHop = [...]string{
	fasthttp.HeaderConnection, // first: stripResponseHeader reads its value at index 0
	fasthttp.HeaderKeepAlive,
	fasthttp.HeaderProxyConnection,
	fasthttp.HeaderTE,
	fasthttp.HeaderTrailer,
	fasthttp.HeaderTransferEncoding,
	fasthttp.HeaderUpgrade,
	fasthttp.HeaderProxyAuthorization,
	fasthttp.HeaderProxyAuthenticate,
}

var (
	contentTypeJSON = []byte("application/json")
	protoHTTP11     = "HTTP/1.1"
)

type outcome uint8

const (
	// done: ctx holds the response to send, the upstream's or an error.
	done outcome = iota
	// connectFailed: no connection could be made; the request was not sent.
	connectFailed
	// connectTimedOut: as connectFailed, because the connect timeout expired.
	connectTimedOut
	// staleConn: a reused keep-alive connection turned out closed before any response byte,
	// and the request may be sent again on a fresh connection to the same node.
	staleConn
	// tlsFailed: as connectFailed, because the TLS handshake failed; tlsUnverified, because
	// the node's certificate did not verify.
	tlsFailed
	tlsUnverified
)

// exchange is the per-request scratch state, pooled so that Forward does not allocate.
type exchange struct {
	tried []uint64
	// avoid is tried plus the unhealthy nodes, scratch for choose.
	avoid []uint64
	// failure is how the current try failed after connecting, for passive checks.
	failure tryFailure
	buf     []byte
	xff     []byte
	ip      []byte
	port    []byte
	// key is scratch for reading chash variables; hash is the request's ring position.
	key  []byte
	hash uint64
	// vars is what a chash key's variables are read from (varsFor).
	vars vars.Request
	// upgrade is the client's Upgrade header, kept for a websocket tunnel.
	upgrade []byte
	// handedOff is set by try when something that outlives it (a streamed body, a
	// tunnel) took over releasing the node's least_conn count.
	handedOff bool
	// hostSet is set when the caller chose the Host (Info.Host): pass_host does not apply.
	hostSet bool
	// now is when the forward started (monotime): a stamp for the pool, whose idle
	// timeouts are seconds, not worth a clock read of their own.
	now int64
	// pristine is set when the request goes out by writePristine, ctx.Request untouched;
	// host is then Info.Host, which the caller owns (cleared before the exchange is pooled).
	pristine bool
	host     []byte
	// edits is Info.Edits for a pristine request, nil for none (cleared as host is).
	edits *plugins.HeaderEdits
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

// Scratch is a forward's working state, which a caller that forwards one request at a
// time (a client connection) keeps and hands over in Info.Scratch, sparing the pool's
// Get and Put. Its zero value is ready.
type Scratch struct{ x exchange }

// exchangeFor returns the exchange for one forward: info's scratch, or one from the pool.
func exchangeFor(info *Info) *exchange {
	if info != nil && info.Scratch != nil {
		return &info.Scratch.x
	}
	return exchangePool.Get().(*exchange)
}

// varsFor returns x's vars.Request for ctx, with the route's, service's and consumer's
// names from info when names is set. It is x's own, set rather than built: a Request
// built per forward costs a chash pick 3% more in zeroing. The fields not set hold what a
// previous forward put there, which a key that reads only the request never reads.
func (x *exchange) varsFor(ctx *fasthttp.RequestCtx, info *Info, names bool) *vars.Request {
	r := &x.vars
	r.HTTP = ctx
	if names {
		r.Consumer, r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = "", "", "", "", ""
		if info != nil {
			r.Consumer = info.Consumer
			if route := info.Route; route != nil {
				r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
			}
		}
	}
	return r
}

// done gives x back once the forward is over.
func (x *exchange) done(info *Info) {
	x.host, x.edits = nil, nil
	x.vars.HTTP = nil // the RequestCtx is fasthttp's to reuse
	if info == nil || info.Scratch == nil {
		exchangePool.Put(x)
	}
}

// Forward proxies ctx's request to a node and writes the node's response (or a JSON error)
// to ctx. It rewrites ctx.Request in place and replaces ctx.Response whole, so a plugin
// that adds response headers does so after Forward returns. When the response body is
// large or of unknown length, ctx.Response streams it from the upstream connection, which
// returns to its pool when the server has sent the body (or closes it, if the client
// left early). Forward is safe for concurrent use.
func (u *Upstream) Forward(ctx *fasthttp.RequestCtx) {
	u.forward(ctx, nil)
}

// Info is what ForwardInfo reports about one forward, for the log phase.
type Info struct {
	// Node is the "host:port" of the last node the request was sent to, nil when no node
	// was tried. It points into the Upstream, which never changes it: read it, copy it,
	// never write to it.
	Node []byte
	// UpstreamNanos runs from asking the first node's pool for a connection to the last
	// node's response header (and body, when it is read whole); -1 when no node was tried.
	UpstreamNanos int64
	// Ended is the clock reading (monotime) that ended UpstreamNanos when ctx.Response
	// then held the whole answer, 0 otherwise (no node tried, a streamed body, a tunnel):
	// the time the answer was ready, for the caller to reuse instead of reading the clock.
	Ended int64

	// Consumer is an input: the authenticated consumer's name ("" for none), which a chash
	// upstream with hash_on consumer hashes on. ForwardInfo leaves it as it is.
	Consumer string
	// Route is an input: the matched route, whose ids and names a chash key may name
	// ($route_id, $service_name); nil reads as none. ForwardInfo leaves it as it is.
	Route *plugins.RouteInfo
	// Forwarded is an input: the X-Forwarded-* headers the chain took over
	// (plugins.Ctx.TakeForwarded), sent as it left them; the proxy sets the others.
	Forwarded plugins.Forwarded
	// Host is an input: when not empty, the Host header sent upstream, whatever pass_host
	// says (proxy-rewrite's host, as APISIX's upstream_host). X-Forwarded-Host keeps the
	// client's. ForwardInfo leaves it as it is; the caller owns the bytes.
	Host []byte
	// Pristine is an input: set when nothing has changed ctx.Request since it was read
	// from the client (no plugin that rewrites requests ran) but for the header edits in
	// Edits. The header block is then sent as the client wrote it, filtered and edited
	// (pristine.go), for a request without a body.
	Pristine bool
	// Edits is an input: the header fields the chain set, added and removed
	// (plugins.Ctx.HeaderEdits), which a pristine request's header block gets applied;
	// nil for none. ctx.Request has them already. An edit of a field the proxy sets or
	// drops itself (X-Forwarded-For, Connection, ...) sends the request the usual way
	// instead. The caller owns it.
	Edits *plugins.HeaderEdits
	// Scratch is an input: when not nil, the forward's working state, which the caller
	// owns and must not hand to two forwards at once. Nil takes one from a pool.
	Scratch *Scratch
	// Start is an input: when not 0, a clock reading (monotime) the caller took just
	// before, with nothing slow since, which the forward takes for its start.
	Start int64
}

// ForwardInfo is Forward that also fills info, which the caller owns (it may live on the
// caller's stack: ForwardInfo keeps no reference to it). It costs two clock reads more.
func (u *Upstream) ForwardInfo(ctx *fasthttp.RequestCtx, info *Info) {
	info.Node, info.UpstreamNanos, info.Ended = nil, -1, 0
	u.forward(ctx, info)
}

func (u *Upstream) forward(ctx *fasthttp.RequestCtx, info *Info) {
	if len(u.nodes) == 0 {
		writeError(ctx, fasthttp.StatusServiceUnavailable, msgNoNodes)
		return
	}
	if u.unusable != nil {
		writeError(ctx, fasthttp.StatusBadGateway, u.unusable)
		return
	}
	x := exchangeFor(info)
	words := (len(u.nodes) + 63) >> 6
	if cap(x.tried) < words {
		x.tried = make([]uint64, words)
	}
	x.tried = x.tried[:words]
	clear(x.tried)

	if u.balancer == conf.BalanceChash {
		// Before prepareRequest: the key reads the request as the client sent it.
		x.hash = u.hashKey.hash(x.varsFor(ctx, info, u.hashKey.names), x)
	}
	tunnel := u.websocket && wantsUpgrade(&ctx.Request.Header)
	if tunnel {
		x.upgrade = append(x.upgrade[:0], ctx.Request.Header.Peek(fasthttp.HeaderUpgrade)...)
	}
	x.pristine = pristine(ctx, info, tunnel)
	if x.pristine {
		preparePristine(ctx, x, info)
	} else {
		u.prepareRequest(ctx, x, info)
	}
	if tunnel {
		ctx.Request.Header.SetBytesV(fasthttp.HeaderUpgrade, x.upgrade)
		ctx.Request.Header.SetBytesV(fasthttp.HeaderConnection, connectionUpgrade)
	}
	picked, failed := false, done
	// One clock read starts the forward: UpstreamNanos, the pool's idle stamps, ewma's
	// response times and the wait for the reply all count from it. A retry reads again:
	// the try before may have waited out a timeout.
	var start int64
	if info != nil {
		start = info.Start
	}
	if start == 0 {
		start = monotime.Now()
	}
	x.now = start
	for attempt := range u.retries + 1 {
		if attempt > 0 {
			x.now = monotime.Now()
			if u.retryTimeout > 0 && x.now-start >= int64(u.retryTimeout) {
				break // the answer is the last try's failure
			}
		}
		i := u.choose(x)
		if i < 0 {
			break
		}
		set(x.tried, i)
		n := &u.nodes[i]
		if info != nil {
			info.Node = n.addr
		}
		tryStart := x.now
		picked = true
		x.handedOff = false
		x.failure = tryAnswered
		result := u.try(ctx, x, i, tunnel, false)
		if result == staleConn {
			result = u.try(ctx, x, i, tunnel, true)
		}
		u.tryEnded(i, result, x, tryStart)
		if u.passive != nil {
			u.reportPassive(i, result, x.failure, ctx.Response.StatusCode())
		}
		if result == done {
			whole := !x.handedOff
			x.done(info)
			if info != nil {
				end := monotime.Now()
				info.UpstreamNanos = end - start
				if whole {
					info.Ended = end
				}
			}
			return
		}
		failed = result
	}
	x.done(info)
	if info != nil && picked {
		info.Ended = monotime.Now()
		info.UpstreamNanos = info.Ended - start
	}
	switch {
	case !picked:
		writeError(ctx, fasthttp.StatusServiceUnavailable, msgNoNodes)
	case failed == connectTimedOut:
		writeError(ctx, fasthttp.StatusGatewayTimeout, u.msgConnectTimeout)
	case failed == tlsUnverified:
		writeError(ctx, fasthttp.StatusBadGateway, msgTLSVerify)
	case failed == tlsFailed:
		writeError(ctx, fasthttp.StatusBadGateway, msgTLSFailed)
	default:
		writeError(ctx, fasthttp.StatusBadGateway, msgNoAnswer)
	}
}

// tryEnded updates the balancer after one try of node i: least_conn's count is released
// (unless a streamed body or a tunnel took that over), ewma takes the response time.
func (u *Upstream) tryEnded(i int, result outcome, x *exchange, tryStart int64) {
	switch u.balancer {
	case conf.BalanceLeastConn:
		if !x.handedOff {
			u.state.inflight[i].Add(-1)
		}
	case conf.BalanceEWMA:
		rtt := time.Duration(monotime.Now() - tryStart)
		if result != done {
			rtt = u.connectTimeout
		}
		u.observeEWMA(i, rtt)
	}
}

// prepareRequest does the node-independent rewriting of ctx.Request: hop-by-hop headers
// out, X-Real-IP and X-Forwarded-* in, Host for pass_host=rewrite.
func (u *Upstream) prepareRequest(ctx *fasthttp.RequestCtx, x *exchange, info *Info) {
	h := &ctx.Request.Header

	// X-Forwarded-For first: deleting headers below reorders the ones left.
	x.ip = appendPeerIP(x.ip[:0], ctx)
	x.xff = x.xff[:0]
	for _, v := range h.PeekAll(fasthttp.HeaderXForwardedFor) {
		x.xff = append(x.xff, v...)
		x.xff = append(x.xff, ", "...)
	}
	x.xff = append(x.xff, x.ip...)

	// Connection names further hop-by-hop headers. Copy the list out first: deleting
	// headers reshuffles the storage the values point into.
	x.buf = x.buf[:0]
	for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
		x.buf = append(x.buf, v...)
		x.buf = append(x.buf, ',')
	}
	for names := x.buf; len(names) > 0; {
		var name []byte
		name, names, _ = bytes.Cut(names, comma)
		name = bytes.TrimSpace(name)
		// Host and Content-Length frame the message; a client cannot make us drop them.
		if len(name) > 0 && !bytes.EqualFold(name, headerHost) && !bytes.EqualFold(name, headerContentLength) {
			h.DelBytes(name)
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}

	h.SetBytesV("X-Real-IP", x.ip)
	h.Del(fasthttp.HeaderXForwardedFor)
	h.SetBytesV(fasthttp.HeaderXForwardedFor, x.xff)
	// The ones the chain took over hold the proxy's value with the plugin's change on top
	// (plugins.Ctx.TakeForwarded): they go as they are.
	var taken plugins.Forwarded
	if info != nil {
		taken = info.Forwarded
	}
	if taken&plugins.ForwardedProto == 0 {
		h.SetBytesV(plugins.HeaderForwardedProto, plugins.ForwardedProtoOf(ctx))
	}
	if taken&plugins.ForwardedHost == 0 {
		h.SetBytesV(plugins.HeaderForwardedHost, h.Host())
	}
	if x.port = plugins.AppendServerPort(x.port[:0], ctx); len(x.port) > 0 && taken&plugins.ForwardedPort == 0 {
		h.SetBytesV(plugins.HeaderForwardedPort, x.port)
	}

	x.hostSet = info != nil && len(info.Host) > 0
	switch {
	case x.hostSet:
		h.SetHostBytes(info.Host)
	case u.passHost == conf.PassHostRewrite:
		h.SetHostBytes(u.upstreamHost)
	}
	// Keep-alive to the upstream needs HTTP/1.1 whatever the client spoke; the server has
	// already noted the client's version for its own response.
	if !h.IsHTTP11() {
		h.SetProtocol(protoHTTP11)
	}
	// Send the request line as the client wrote it (the router may have parsed and
	// normalised the path), with the Host chosen here.
	ctx.Request.UseHostHeader = true
	ctx.Request.URI().DisablePathNormalizing = true
}

var (
	comma               = []byte(",")
	headerHost          = []byte(fasthttp.HeaderHost)
	headerContentLength = []byte(fasthttp.HeaderContentLength)
)

// appendPeerIP appends the client's IP without allocating for TCP peers.
func appendPeerIP(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap().AppendTo(dst)
		}
	}
	return append(dst, ctx.RemoteIP().String()...)
}

// try sends ctx's request to node i and reads the response header into ctx.Response. With
// tunnel set the request asks for a protocol upgrade: it goes on a connection of its own,
// and a 101 answer turns the client connection into a tunnel to that node.
func (u *Upstream) try(ctx *fasthttp.RequestCtx, x *exchange, i int, tunnel, fresh bool) outcome {
	n := &u.nodes[i]
	req := &ctx.Request
	host := u.hostFor(ctx, x, n)
	// Over TLS the name sent (SNI) and checked against the node's certificate is the Host
	// the node gets, as APISIX's proxy_ssl_name $upstream_host.
	var sni []byte
	if n.pool.tlsConfig != nil {
		sni = hostWithoutPort(host)
	}
	c, reused, err := n.pool.get(x.now, u.connectTimeout, fresh || tunnel, sni)
	if err != nil {
		if isTimeout(err) {
			return connectTimedOut
		}
		if te, ok := err.(*tlsError); ok {
			if te.verify {
				return tlsUnverified
			}
			return tlsFailed
		}
		return connectFailed
	}
	c.readTimeout, c.writeTimeout = u.readTimeout, u.sendTimeout

	// From here on the request may have reached the node, so there is no next node.
	if x.pristine {
		err = writePristine(c.bw, ctx, x, host)
	} else {
		err = req.Write(c.bw)
	}
	if err == nil {
		// The last bytes of the request go out with the wait for the response. Its
		// timeout counts from the forward's clock read when nothing since can have taken
		// long: a kept-alive connection, a request without a body to stream.
		c.awaitReply = true
		if reused && x.pristine {
			c.waitFrom = x.now
		}
		err = c.bw.Flush()
		c.awaitReply, c.waitFrom = false, 0
	}
	if err != nil {
		c.close()
		if reused && replayable(ctx) && isClosedConn(err) {
			return staleConn
		}
		if isTimeout(err) {
			x.failure = tryTimedOut
			writeError(ctx, fasthttp.StatusGatewayTimeout, u.msgSendTimeout)
			return done
		}
		return u.failAfterSend(ctx, x, err)
	}

	resp := &ctx.Response
	if err = readResponseHeader(&resp.Header, c.br); err != nil {
		if reused && replayable(ctx) && err == io.EOF {
			c.close()
			return staleConn
		}
		if alert := c.tlsAlert(err); alert != nil {
			// With TLS 1.3 a node checks the client certificate after the handshake has
			// completed on gw's side, so its refusal comes with the response.
			c.close()
			n.pool.logf("upstream %s: refused the TLS connection for name %q: %v", n.addr, c.sni, alert)
			x.failure = tryBroken
			writeError(ctx, fasthttp.StatusBadGateway, msgTLSRefused)
			return done
		}
		c.close()
		return u.failAfterSend(ctx, x, err)
	}
	status := resp.Header.StatusCode()
	if status == fasthttp.StatusSwitchingProtocols {
		if !tunnel {
			// Upgrade was not forwarded, so the node broke the protocol.
			c.close()
			writeError(ctx, fasthttp.StatusBadGateway, msgBadResponse)
			return done
		}
		u.startTunnel(ctx, c, u.inflightOf(i))
		x.handedOff = true
		return done
	}
	c.requests++
	// A connection that carried an upgrade request is not reused, whatever the answer.
	reusable := !resp.Header.ConnectionClose() && !tunnel
	contentLength := resp.Header.ContentLength()
	x.buf = stripResponseHeader(&resp.Header, x.buf)

	switch {
	case ctx.IsHead() || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified:
		// No body follows; a HEAD response keeps the node's Content-Length.
		c.pool.put(c, reusable, x.now)
	case contentLength >= 0 && contentLength <= maxBufferedBody:
		if err = resp.ReadBody(c.br, 0); err != nil {
			c.close()
			return u.failAfterSend(ctx, x, err)
		}
		c.pool.put(c, reusable, x.now)
	default:
		s := bodyStreamPool.Get().(*bodyStream)
		s.start(c, contentLength, reusable)
		if err = s.prefetch(); err != nil {
			s.close() // closes c: the body is unfinished
			return u.failAfterSend(ctx, x, err)
		}
		// A body of known length goes out in whole buffers behind its header (stream.go).
		resp.ImmediateHeaderFlush = contentLength >= 0
		// The request is in flight until the server has sent the body.
		if s.inflight = u.inflightOf(i); s.inflight != nil {
			x.handedOff = true
		}
		if contentLength < 0 {
			contentLength = -1 // chunked to the client, whatever framing the node used
		}
		resp.SetBodyStream(s, contentLength)
	}
	return done
}

// hostFor is the Host node n gets: the caller's (Info.Host), the node's own for pass_host
// node (or when the client sent none), the upstream's for pass_host rewrite (already set
// by prepareRequest), else the client's. A request prepared the usual way gets it set in
// ctx.Request too; a pristine one is left alone.
func (u *Upstream) hostFor(ctx *fasthttp.RequestCtx, x *exchange, n *node) []byte {
	h := &ctx.Request.Header
	if !x.pristine {
		if !x.hostSet && (u.passHost == conf.PassHostNode || len(h.Host()) == 0) {
			h.SetHostBytes(n.hostHeader)
		}
		return h.Host()
	}
	switch {
	case x.hostSet:
		return x.host
	case u.passHost == conf.PassHostNode || len(h.Host()) == 0:
		return n.hostHeader
	case u.passHost == conf.PassHostRewrite:
		return u.upstreamHost
	}
	return h.Host()
}

// hostWithoutPort is host without its port (and an IPv6 address without brackets): the name
// a TLS connection for that Host is made for. It returns a slice of host.
func hostWithoutPort(host []byte) []byte {
	if len(host) > 0 && host[0] == '[' {
		if end := bytes.IndexByte(host, ']'); end > 0 {
			return host[1:end]
		}
		return host
	}
	if colon := bytes.IndexByte(host, ':'); colon >= 0 && bytes.IndexByte(host[colon+1:], ':') < 0 {
		return host[:colon]
	}
	return host
}

// tlsAlert returns the TLS alert the node sent (crypto/tls's "remote error: tls: ..."),
// when err, from reading c's response, came from one; nil otherwise. fasthttp reports any
// failure of a response's first read as io.EOF, so the alert is read back from the TLS
// connection, which keeps its first error. Only failing requests call it.
func (c *upConn) tlsAlert(err error) error {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		return nil
	}
	if err == io.EOF {
		// Never wait: the kept error comes back at once, and without one there is none.
		_ = tc.SetReadDeadline(time.Now())
		var b [1]byte
		_, err = tc.Read(b[:])
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return op
	}
	return nil
}

// readResponseHeader reads the final response header, skipping interim 1xx responses.
func readResponseHeader(h *fasthttp.ResponseHeader, br *bufio.Reader) error {
	for n := 0; ; n++ {
		if err := h.Read(br); err != nil {
			return err
		}
		status := h.StatusCode()
		if status >= 200 || status == fasthttp.StatusSwitchingProtocols {
			return nil
		}
		if n >= maxInterimResponses {
			return errTooManyInterim
		}
	}
}

// maxInterimResponses bounds the 1xx responses skipped, so a broken node cannot keep a
// request busy forever.
const maxInterimResponses = 100

var errTooManyInterim = errors.New("proxy: node sent too many 1xx responses")

// stripResponseHeader drops hop-by-hop headers from the node's response, and the node's
// Connection: close, which is about the upstream connection, not the client's. Like nginx
// it lets the gateway's own Server header replace the node's, and it adds no Content-Type
// the node did not send. buf is scratch space.
func stripResponseHeader(h *fasthttp.ResponseHeader, buf []byte) []byte {
	// One pass finds which are there: most responses carry none but Connection, and each
	// Del costs a normalised copy of the name and a scan of the header.
	buf = buf[:0]
	var present uint16 // bit i: hopByHop[i]
	for name, value := range h.All() {
		if i := hopByHopIndex(name); i >= 0 {
			present |= 1 << i
			if i == 0 { // Connection, whose value lists more
				buf = append(buf, value...)
				buf = append(buf, ',')
			}
		}
	}
	for names := buf; len(names) > 0; {
		var name []byte
		name, names, _ = bytes.Cut(names, comma)
		name = bytes.TrimSpace(name)
		if len(name) > 0 && !bytes.EqualFold(name, headerContentLength) {
			h.DelBytes(name)
		}
	}
	for i, name := range hopByHop {
		if present&(1<<i) != 0 {
			h.Del(name)
		}
	}
	h.SetServerBytes(nil)
	h.ResetConnectionClose()
	h.SetNoDefaultContentType(true)
	// The client talks to gw, an HTTP/1.1 server, whatever version the node answered in
	// (nginx does the same).
	h.SetProtocol(protoHTTP11Bytes)
	return buf
}

// hopByHopIndex is name's index in hopByHop, or -1.
func hopByHopIndex(name []byte) int {
	for i, h := range hopByHop {
		if len(h) == len(name) && equalFoldString(name, h) {
			return i
		}
	}
	return -1
}

var protoHTTP11Bytes = []byte("HTTP/1.1")

// failAfterSend writes the error for a failure once the request may have been sent.
func (u *Upstream) failAfterSend(ctx *fasthttp.RequestCtx, x *exchange, err error) outcome {
	if isTimeout(err) {
		x.failure = tryTimedOut
		writeError(ctx, fasthttp.StatusGatewayTimeout, u.msgReadTimeout)
	} else {
		x.failure = tryBroken
		writeError(ctx, fasthttp.StatusBadGateway, msgBadResponse)
	}
	return done
}

func writeError(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.Reset()
	ctx.Response.Header.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(body)
}

// replayable reports whether the request can be sent again: it has no body (so nothing
// was consumed from the client) and its method is idempotent.
func replayable(ctx *fasthttp.RequestCtx) bool {
	if cl := ctx.Request.Header.ContentLength(); cl != 0 && cl != -2 {
		return false
	}
	return ctx.IsGet() || ctx.IsHead() || ctx.IsOptions() || ctx.IsPut() || ctx.IsDelete() || ctx.IsTrace()
}

func isTimeout(err error) bool {
	if err == fasthttp.ErrTimeout {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// isClosedConn reports whether a write failed because the peer had closed the connection.
func isClosedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
