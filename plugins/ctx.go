package plugins

import (
	"bytes"
	"io"
	"iter"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/bytesconv"
	"gw/internal/monotime"
	"gw/plugins/vars"
	"gw/shm"
)

// Ctx is one request as plugins see it: the request and response through its methods,
// which name what a request has whatever carries it (a method, a path, header fields),
// and the worker's facts about the request in its fields. The worker pools them: a plugin
// must not keep a Ctx, or anything in it or returned by its methods, past the call it was
// given it in. The methods allocate nothing; those returning []byte return the request's
// own storage: read it, never keep or change it.
type Ctx struct {
	// Request is the HTTP/1.1 exchange under the methods.
	//
	// Deprecated: use the Ctx's methods, which an HTTP/2 stream will serve as well
	// (plugins/doc.go). Two readers of variables remain (limit-count's key and
	// proxy-rewrite's templates), which the variable language moves onto the methods.
	Request *fasthttp.RequestCtx
	Route   *RouteInfo
	// MatchedURI and MatchedHost are the route's path and host that this request matched,
	// as the route gives them (APISIX's matched_uri and matched_host): a route with uris
	// ["/foo*", "/bar*"] and hosts ["foo.com", "bar.com"] matches GET /bar1 with Host:
	// bar.com under "/bar*" and "bar.com". MatchedHost is empty for a route without
	// hosts, both are empty when no route matched. The router owns the strings; they
	// outlive the request.
	MatchedURI, MatchedHost string
	// StartNanos is when the worker began handling the request, in Unix nanoseconds
	// (fasthttp's coarse clock is not fine enough for latency): monotime.Unix, the
	// monotonic clock since the process started, so latencies never run backwards.
	StartNanos int64
	// UpstreamNanos is how long the upstream took, from connect to response header; -1
	// when no upstream was contacted.
	UpstreamNanos int64
	// AnsweredNanos is when the response was whole, in StartNanos's clock: the proxy's
	// last clock reading, which the log phase takes for now as nginx takes its cached
	// time. 0 when the worker has none (a plugin answered, a streamed body): AnsweredAt
	// then reads the clock.
	AnsweredNanos int64
	// BodySent is how many bytes of a streamed response body went to the client: the
	// worker runs the log phase of such a request once the server has sent the body. -1
	// when the response holds its body whole.
	BodySent int64
	// Node is the upstream node that answered, "host:port", empty when none did.
	Node []byte
	// Consumer is the authenticated consumer's name, empty without one.
	Consumer string
	// UpstreamHost, when set, is the Host header sent upstream in place of the one
	// pass_host would choose (proxy-rewrite's host, APISIX's upstream_host variable). The
	// request's own Host, $host to later plugins and X-Forwarded-Host, stays the client's.
	// It must stay valid until the request ends (plugins point it at their configuration).
	UpstreamHost []byte

	// forwarded are the X-Forwarded-* headers a plugin took over (TakeForwarded); port is
	// scratch for X-Forwarded-Port's value.
	forwarded Forwarded
	port      []byte
	// argsChanged is set by DelQueryArg.
	argsChanged bool
	// answered is set by Respond: a plugin has answered the request.
	answered bool
	// args holds QueryArg's private parse of the query string.
	args fasthttp.Args
	// headers queued by AddResponseHeader: name and value pairs, flattened.
	headers [][]byte
	// appended are AppendResponseHeader's pairs, flattened; body is ReadResponseBody's
	// scratch (plugins-c).
	appended [][]byte
	body     []byte
	// merged is the consumer's merged chain that took over from mergedBase once an auth
	// plugin named the consumer; both nil until then.
	// chooser and choice are the upstream a plugin chose (UseUpstream); chooser is nil
	// until one does (plugins-d).
	chooser            UpstreamChooser
	choice             int
	merged, mergedBase *Chain
	// holds are what plugins took for the request (Hold).
	holds holds

	// plugins-a: headersIfAbsent are queued by AddResponseHeaderIfAbsent, flattened as
	// headers are. realAddr is the client SetRemoteIP named, which the request's
	// RemoteAddr points at from then on; realIP backs its IP.
	headersIfAbsent [][]byte
	realAddr        net.TCPAddr
	realIP          [16]byte

	// Trace is the request's place in a distributed trace, which the opentelemetry
	// plugin's access phase sets and its log phase reads; zero when no plugin traces it.
	Trace TraceContext

	// edits records the request header fields set, added and removed (HeaderEdits).
	edits HeaderEdits

	// serverPort is ServerPort's answer for the connection fasthttp numbered
	// serverPortConn (RequestCtx.ConnID, unique in the process; 0 for none cached): a
	// connection's Ctx keeps it from request to request, so End leaves it.
	serverPortConn uint64
	serverPort     []byte
}

// TraceContext is a request's W3C Trace Context (traceparent): the trace it belongs to,
// its own span, and the client's span it continues, if any.
type TraceContext struct {
	TraceID [16]byte
	SpanID  [8]byte
	// ParentSpanID is the client's span (its traceparent's parent-id), zero for a root.
	ParentSpanID [8]byte
	// Sampled is the sampled flag sent upstream; Recording is set while the request's span
	// is still to be recorded (the log phase clears it as it records the span).
	Sampled, Recording bool
}

var ctxPool = sync.Pool{New: func() any { return &Ctx{} }}

// AcquireCtx returns a Ctx for one request; give it back with ReleaseCtx.
func AcquireCtx(req *fasthttp.RequestCtx, route *RouteInfo, startNanos int64) *Ctx {
	c := ctxPool.Get().(*Ctx)
	c.Begin(req, route, startNanos)
	return c
}

// ReleaseCtx returns c to the pool.
func ReleaseCtx(c *Ctx) {
	c.forgetRemoteIP() // the pooled c may serve another connection next
	c.End()
	ctxPool.Put(c)
}

// Begin readies c for one request, as AcquireCtx does a pooled Ctx: for a caller that
// keeps its own (one per client connection, whose requests come one at a time). End it
// after the log phase.
func (c *Ctx) Begin(req *fasthttp.RequestCtx, route *RouteInfo, startNanos int64) {
	c.Request, c.Route, c.StartNanos, c.UpstreamNanos, c.AnsweredNanos = req, route, startNanos, -1, 0
	c.BodySent = -1
	c.Trace = TraceContext{}
}

// AnsweredAt returns when the response was whole (AnsweredNanos), reading the clock when
// the worker did not say.
func (c *Ctx) AnsweredAt() int64 {
	if c.AnsweredNanos != 0 {
		return c.AnsweredNanos
	}
	return monotime.Unix(monotime.Now())
}

// End clears c after its request, keeping its buffers for the next.
func (c *Ctx) End() {
	c.Request, c.Route, c.Consumer, c.UpstreamHost = nil, nil, "", nil
	c.forwarded, c.argsChanged = 0, false
	c.MatchedURI, c.MatchedHost = "", ""
	c.AnsweredNanos = 0
	c.answered = false
	c.merged, c.mergedBase = nil, nil
	c.chooser, c.choice = nil, 0
	c.holds = holds{}
	c.Node = c.Node[:0]
	for i := range c.headers {
		c.headers[i] = c.headers[i][:0]
	}
	c.headers = c.headers[:0]
	c.headersIfAbsent = c.headersIfAbsent[:0]
	c.appended = clearQueue(c.appended)
	c.Trace = TraceContext{}
	c.edits.reset()
}

// The request.

// Method is the request's method, as it will be sent upstream.
func (c *Ctx) Method() []byte { return c.Request.Request.Header.Method() }

// SetMethod changes the method sent upstream.
func (c *Ctx) SetMethod(method []byte) { c.Request.Request.Header.SetMethodBytes(method) }

// Host is the Host the client sent (HTTP/2's :authority), port included.
func (c *Ctx) Host() []byte { return c.Request.Request.Header.Host() }

// Path is the request's path, percent-decoded and normalised (nginx's $uri).
func (c *Ctx) Path() []byte { return c.Request.Path() }

// SetPath changes the path sent upstream; escaped is as it goes on the wire, percent-
// encoded, without the query.
func (c *Ctx) SetPath(escaped []byte) { c.Request.Request.URI().SetPathBytes(escaped) }

// UserAgent is the request's User-Agent, nil without one; read without a lookup (the
// header parser keeps it apart, as it does Host).
func (c *Ctx) UserAgent() []byte { return c.Request.Request.Header.UserAgent() }

// RequestURI is the request target as the client sent it, query included (nginx's
// $request_uri).
func (c *Ctx) RequestURI() []byte { return c.Request.Request.Header.RequestURI() }

// QueryString is the query as the client sent it, without the '?'.
func (c *Ctx) QueryString() []byte { return c.Request.Request.URI().QueryString() }

// SetQueryString changes the query sent upstream; query is encoded, without the '?'.
func (c *Ctx) SetQueryString(query []byte) { c.Request.Request.URI().SetQueryStringBytes(query) }

// QueryArg returns the decoded value of the query argument name, nil without one. It
// parses a private copy of the query, so the query sent upstream stays byte for byte the
// client's; the value is valid until the next QueryArg or the request's end.
func (c *Ctx) QueryArg(name []byte) []byte {
	c.args.ParseBytes(c.Request.Request.URI().QueryString())
	return c.args.PeekBytes(name)
}

// DelQueryArg removes the query argument name from the request sent upstream, which then
// carries its remaining arguments re-encoded.
func (c *Ctx) DelQueryArg(name []byte) {
	c.Request.Request.URI().QueryArgs().DelBytes(name)
	c.argsChanged = true
}

// ArgsChanged reports whether a plugin has removed a query argument (DelQueryArg): the
// query sent upstream is then AppendQueryArgs's, no longer QueryString.
func (c *Ctx) ArgsChanged() bool { return c.argsChanged }

// AppendQueryArgs appends the query arguments as they stand (after DelQueryArg), encoded,
// to dst.
func (c *Ctx) AppendQueryArgs(dst []byte) []byte {
	return c.Request.Request.URI().QueryArgs().AppendBytes(dst)
}

// RequestHeader returns the value of the request header name (case-insensitive), nil
// without one.
func (c *Ctx) RequestHeader(name []byte) []byte { return c.Request.Request.Header.PeekBytes(name) }

// Cookie returns the value of the request's cookie name, nil without one.
func (c *Ctx) Cookie(name []byte) []byte { return c.Request.Request.Header.CookieBytes(name) }

// SetRequestHeader sets the request header name sent upstream, replacing any.
func (c *Ctx) SetRequestHeader(name, value []byte) {
	// fasthttp's Set replaces only the first of duplicate fields: a client's second
	// traceparent would go upstream beside the new one.
	c.Request.Request.Header.DelBytes(name)
	c.Request.Request.Header.SetBytesKV(name, value)
	c.edits.set(name, value)
}

// AddRequestHeader adds a request header field sent upstream, after any of that name.
func (c *Ctx) AddRequestHeader(name, value []byte) {
	c.Request.Request.Header.AddBytesKV(name, value)
	c.edits.add(name, value)
}

// DelRequestHeader removes every request header field name from what is sent upstream.
func (c *Ctx) DelRequestHeader(name []byte) {
	c.Request.Request.Header.DelBytes(name)
	c.edits.del(name)
}

// HeaderEdits returns what SetRequestHeader, AddRequestHeader and DelRequestHeader did
// to the request so far, for the proxy to send a pristine request's header block with
// them (HeaderEditor). The Ctx owns it; it is valid until the request ends.
func (c *Ctx) HeaderEdits() *HeaderEdits { return &c.edits }

// Forwarded is a set of the X-Forwarded-* headers the proxy sets from the connection
// (X-Forwarded-For, which it appends to, is not one of them).
type Forwarded uint8

// The headers of a Forwarded set.
const (
	ForwardedProto Forwarded = 1 << iota // X-Forwarded-Proto: $scheme
	ForwardedHost                        // X-Forwarded-Host: the client's Host
	ForwardedPort                        // X-Forwarded-Port: $server_port
)

// The header names of a Forwarded set.
const (
	HeaderForwardedProto = "X-Forwarded-Proto"
	HeaderForwardedHost  = "X-Forwarded-Host"
	HeaderForwardedPort  = "X-Forwarded-Port"
)

// TakeForwarded sets the headers in which to the values the proxy would send, in place of
// the client's, and leaves them to the chain from then on: the proxy sends them as the
// chain leaves them. A plugin that sets, adds to or removes one of them calls it first,
// so that its change applies on top of the proxy's value, as in APISIX (where
// X-Forwarded-* are set before any plugin runs). It allocates nothing.
func (c *Ctx) TakeForwarded(which Forwarded) {
	which &^= c.forwarded
	h := &c.Request.Request.Header
	if which&ForwardedProto != 0 {
		h.SetBytesV(HeaderForwardedProto, ForwardedProtoOf(c.Request))
	}
	if which&ForwardedHost != 0 {
		h.SetBytesV(HeaderForwardedHost, h.Host())
	}
	if which&ForwardedPort != 0 {
		if c.port = AppendServerPort(c.port[:0], c.Request); len(c.port) > 0 {
			h.SetBytesV(HeaderForwardedPort, c.port)
		} else {
			h.Del(HeaderForwardedPort) // not TCP: the proxy sends none either
		}
	}
	c.forwarded |= which
}

// TakenForwarded is the set of headers the chain took over (TakeForwarded), which the
// proxy must leave as they are.
func (c *Ctx) TakenForwarded() Forwarded { return c.forwarded }

var protoHTTP, protoHTTPS = []byte("http"), []byte("https")

// ForwardedProtoOf is X-Forwarded-Proto's value for ctx: the scheme the client spoke to
// gw. Read it, never change it.
func ForwardedProtoOf(ctx *fasthttp.RequestCtx) []byte {
	if ctx.IsTLS() {
		return protoHTTPS
	}
	return protoHTTP
}

// AppendServerPort appends X-Forwarded-Port's value for ctx, the port the client
// connected to ($server_port); nothing when the connection is not TCP.
func AppendServerPort(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	if a, ok := ctx.LocalAddr().(*net.TCPAddr); ok {
		return strconv.AppendInt(dst, int64(a.Port), 10)
	}
	return dst
}

// ServerPort is $server_port, the port the client connected to, in decimal; empty when
// the connection is not TCP. It is read from the socket once per connection (a chain of
// interface calls and a number to format: 6% of http-logger's entry) and kept in c, which
// the connection's requests share; the bytes are c's, valid until its next request.
func (c *Ctx) ServerPort() []byte {
	id := c.Request.ConnID()
	if id == 0 || id != c.serverPortConn {
		c.serverPort = AppendServerPort(c.serverPort[:0], c.Request)
		c.serverPortConn = id
	}
	return c.serverPort
}

// RemoteAddr is the client's address: the TCP peer, or the address real_ip_header names
// when the peer is trusted.
func (c *Ctx) RemoteAddr() net.Addr { return c.Request.RemoteAddr() }

// LocalAddr is the gateway's address the client connected to.
func (c *Ctx) LocalAddr() net.Addr { return c.Request.LocalAddr() }

// IsTLS reports whether the client connection is TLS.
func (c *Ctx) IsTLS() bool { return c.Request.IsTLS() }

// RequestSize is nginx's $request_length as near as the worker knows it: the request line,
// the header as received, and the body's declared length.
func (c *Ctx) RequestSize() int {
	h := &c.Request.Request.Header
	n := len(h.Method()) + 1 + len(h.RequestURI()) + 1 + len(h.Protocol()) + 2
	n += len(h.RawHeaders())
	if cl := h.ContentLength(); cl > 0 {
		n += cl
	}
	return n
}

// The response.

// Respond answers the request: status, contentType (none when nil) and body, which is
// kept, not copied, so it must not change until the request ends (plugins pass bytes of
// their configuration). The rest of the access phase is skipped and nothing is proxied;
// headers queued with AddResponseHeader are added.
func (c *Ctx) Respond(status int, contentType, body []byte) {
	resp := &c.Request.Response
	resp.SetStatusCode(status)
	if contentType != nil {
		resp.Header.SetContentTypeBytes(contentType)
	}
	resp.SetBodyRaw(body)
	c.answered = true
}

// Answered reports whether a plugin has answered the request (Respond).
func (c *Ctx) Answered() bool { return c.answered }

// Status is the response's status code: the upstream's, a plugin's or the worker's.
func (c *Ctx) Status() int { return c.Request.Response.StatusCode() }

// AddResponseHeader queues a header for the final response, whoever writes it: proxying
// replaces the response whole, so the worker sets the queue once the response is final,
// before the log phase, replacing any field of that name. Name and value are copied.
func (c *Ctx) AddResponseHeader(name, value []byte) {
	c.headers = appendCopy(c.headers, name)
	c.headers = appendCopy(c.headers, value)
}

func appendCopy(list [][]byte, b []byte) [][]byte {
	if len(list) < cap(list) {
		list = list[:len(list)+1]
		list[len(list)-1] = append(list[len(list)-1][:0], b...)
		return list
	}
	return append(list, append([]byte(nil), b...))
}

// ApplyResponseHeaders sets the queued headers on the response. The worker calls it once
// the response is final, before the log phase.
func (c *Ctx) ApplyResponseHeaders() {
	for i := 0; i+1 < len(c.headers); i += 2 {
		c.Request.Response.Header.SetBytesKV(c.headers[i], c.headers[i+1])
	}
	for i := 0; i+1 < len(c.headersIfAbsent); i += 2 {
		if len(c.Request.Response.Header.PeekBytes(c.headersIfAbsent[i])) == 0 {
			c.Request.Response.Header.SetBytesKV(c.headersIfAbsent[i], c.headersIfAbsent[i+1])
		}
	}
	c.applyAppended()
}

// ResponseSize is nginx's $bytes_sent as near as the log phase can know it: the status
// line, the header fields as they stand (Date added, as the server will), and the body's
// length: BodySent, what went out of a streamed body, unless it is -1 (the response holds
// its body). Fields are summed rather than serialised, which costs a third as much; the
// server's default Server line is not counted. A stream nobody counted counts its
// Content-Length, or 0 when that is unknown.
func (c *Ctx) ResponseSize() int {
	resp := &c.Request.Response
	h := &resp.Header
	code := h.StatusCode()
	n := len("HTTP/1.1 200 ") + len(fasthttp.StatusMessage(code)) + 2 + len(dateLine) + 2
	for k, v := range h.All() {
		n += len(k) + 2 + len(v) + 2
	}
	switch {
	case c.BodySent >= 0:
		n += int(c.BodySent)
	case resp.IsBodyStream():
		if cl := h.ContentLength(); cl > 0 {
			n += cl
		}
	default:
		n += len(resp.Body())
	}
	return n
}

// dateLine is the shape of the Date field fasthttp's server adds to every response.
const dateLine = "Date: Wed, 21 Oct 2015 07:28:00 GMT\r\n"

// plugins-a: the client's address as an IP, for ip-restriction and real-ip.

// RemoteIP is RemoteAddr's IP, an IPv4-mapped IPv6 address unmapped so that IPv4
// prefixes cover it; the zero Addr when the connection is not TCP. It allocates nothing.
func (c *Ctx) RemoteIP() netip.Addr {
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(tcp.IP)
	return ip.Unmap()
}

// VarsRequest is the request as the variable language reads it (plugins/vars): its
// $route_id, $service_id, $consumer_name and the rest, as this Ctx knows them now. Build
// it per call on the stack (r := c.VarsRequest(); vars.Expand(dst, &r, t)): it
// allocates nothing, and it is the one reader of Ctx.Request the plugins of this group
// need.
func (c *Ctx) VarsRequest() vars.Request {
	r := vars.Request{HTTP: c.Request, Consumer: c.Consumer}
	if route := c.Route; route != nil {
		r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
	}
	return r
}

// RespondCopy is Respond with body copied into the response's own buffer, for a body made
// per request (fault-injection's body with variables), which the caller may then reuse.
// It allocates nothing once the response's buffer has grown to the body's size.
func (c *Ctx) RespondCopy(status int, contentType, body []byte) {
	resp := &c.Request.Response
	resp.SetStatusCode(status)
	if contentType != nil {
		resp.Header.SetContentTypeBytes(contentType)
	}
	resp.SetBody(body)
	c.answered = true
}

// AddResponseHeaderIfAbsent queues a header for the final response, as AddResponseHeader
// does, set only when the response has no such field, or an empty one, by then
// (request-id's, which keeps the upstream's own). Name and value are copied.
func (c *Ctx) AddResponseHeaderIfAbsent(name, value []byte) {
	c.headersIfAbsent = appendCopy(c.headersIfAbsent, name)
	c.headersIfAbsent = appendCopy(c.headersIfAbsent, value)
}

// SetRemoteIP makes ip (and port, when not 0) the client's address for the rest of the
// request: RemoteAddr, $remote_addr and $remote_port to later plugins, the X-Real-IP and
// X-Forwarded-For the proxy sends, and the access log (real-ip's). The address lives in
// c, so this allocates nothing; it holds until the connection's next request (the
// worker's edge clears it as each request's header arrives) or ReleaseCtx.
func (c *Ctx) SetRemoteIP(ip netip.Addr, port int) {
	if port == 0 {
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			port = tcp.Port
		}
	}
	if ip.Is4() {
		b := ip.As4()
		c.realAddr.IP = append(c.realIP[:0], b[:]...)
	} else {
		b := ip.As16()
		c.realAddr.IP = append(c.realIP[:0], b[:]...)
	}
	c.realAddr.Port, c.realAddr.Zone = port, ""
	c.Request.SetRemoteAddr(&c.realAddr)
}

// forgetRemoteIP undoes SetRemoteIP, so that the request no longer points into c.
func (c *Ctx) forgetRemoteIP() {
	if c.Request != nil {
		if a, ok := c.Request.RemoteAddr().(*net.TCPAddr); ok && a == &c.realAddr {
			c.Request.SetRemoteAddr(nil)
		}
	}
}

// LastRequestHeader returns the value of the last request header field name
// (case-insensitive), nil without one: X-Forwarded-For's last hop, where RequestHeader
// gives the first field.
func (c *Ctx) LastRequestHeader(name []byte) []byte {
	all := c.Request.Request.Header.PeekAll(bytesconv.String(name))
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

// Response headers that add to a field rather than replace it (plugins-c: cors, gzip).

// AppendResponseHeader queues a header field for the final response as AddResponseHeader
// does, but added after any field of that name the response has (Vary: Origin beside the
// upstream's Vary: Accept-Encoding), as nginx's add_header and APISIX's
// core.response.add_header. Name and value are copied; it allocates nothing once the Ctx
// has served a request with as many.
func (c *Ctx) AppendResponseHeader(name, value []byte) {
	c.appended = appendCopy(c.appended, name)
	c.appended = appendCopy(c.appended, value)
}

func (c *Ctx) applyAppended() {
	for i := 0; i+1 < len(c.appended); i += 2 {
		c.Request.Response.Header.AddBytesKV(c.appended[i], c.appended[i+1])
	}
}

// clearQueue empties a queue of header names and values, keeping its buffers.
func clearQueue(q [][]byte) [][]byte {
	for i := range q {
		q[i] = q[i][:0]
	}
	return q[:0]
}

// The response as the response phase changes it, in place (plugins-c: response-rewrite,
// gzip). A ResponsePhase calls them; the access phase queues instead (AddResponseHeader),
// since proxying replaces the response whole.

// SetStatus changes the response's status code.
func (c *Ctx) SetStatus(code int) { c.Request.Response.SetStatusCode(code) }

// ResponseHeader returns the value of the response header name (case-insensitive), nil
// without one.
func (c *Ctx) ResponseHeader(name []byte) []byte {
	return c.Request.Response.Header.PeekBytes(name)
}

// SetResponseHeader sets the response header name, replacing any.
func (c *Ctx) SetResponseHeader(name, value []byte) {
	c.Request.Response.Header.SetBytesKV(name, value)
}

// AddResponseField adds a response header field, after any of that name.
func (c *Ctx) AddResponseField(name, value []byte) {
	c.Request.Response.Header.AddBytesKV(name, value)
}

// DelResponseHeader removes every response header field name. A response without
// Content-Type then goes without one, not with the server's default.
func (c *Ctx) DelResponseHeader(name []byte) {
	h := &c.Request.Response.Header
	h.DelBytes(name)
	if bytes.EqualFold(name, headerContentType) {
		h.SetNoDefaultContentType(true)
	}
}

var headerContentType = []byte("Content-Type")

// ResponseStreamed reports whether the response's body is still streaming from the node:
// its length is then ResponseHeader("Content-Length"), or unknown (chunked).
func (c *Ctx) ResponseStreamed() bool { return c.Request.Response.IsBodyStream() }

// StreamDetacher is a streamed response body that can be taken out of the response
// without being closed (the proxy's): Detach makes the next close a no-op.
type StreamDetacher interface {
	io.Reader
	Detach()
	CloseWithError(err error) error
}

// WrapResponseStream replaces a streamed response body (ResponseStreamed) with what wrap
// makes of it, sent chunked (its length unknown): a filter over the node's stream, as
// gzip's compressor. The wrapper owns the node's stream from then on: it must close it
// (CloseWithError, with the error the server closes the wrapper with) when it is closed
// itself, which the server does once the body is sent or the client goes away. It
// reports false, changing nothing, when the body is not a stream that can be taken over.
func (c *Ctx) WrapResponseStream(wrap func(src StreamDetacher) io.Reader) bool {
	resp := &c.Request.Response
	src, ok := resp.BodyStream().(StreamDetacher)
	if !ok {
		return false
	}
	src.Detach()
	resp.SetBodyStream(wrap(src), -1)
	return true
}

// ReadResponseBody returns the response's body whole, reading a streamed one from the
// node first: at most max bytes of it, the rest dropped with the node's connection, as
// APISIX's max_resp_body_size truncates. ok is false when the node broke the body off;
// the body then holds what came before. The bytes are the response's own: read them, or
// replace them with SetResponseBody, never change them.
func (c *Ctx) ReadResponseBody(max int) (body []byte, ok bool) {
	resp := &c.Request.Response
	if !resp.IsBodyStream() {
		return resp.Body(), true
	}
	stream := resp.BodyStream()
	buf := c.body[:0]
	ok = true
	for len(buf) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := stream.Read(buf[len(buf):min(cap(buf), max)])
		buf = buf[:len(buf)+n]
		if err != nil {
			ok = err == io.EOF
			break
		}
	}
	resp.SetBody(buf) // closes the stream: the node's connection goes back if it was read out
	c.body = buf
	if cap(buf) > keptBodyScratch {
		c.body = nil // a pooled Ctx must not hold a large body's memory for ever
	}
	return resp.Body(), ok
}

// keptBodyScratch is the largest ReadResponseBody scratch a Ctx keeps for its next
// request.
const keptBodyScratch = 1 << 20

// SetResponseBody replaces the response's body with a copy of body, closing a streamed
// one. The server sends the new length.
func (c *Ctx) SetResponseBody(body []byte) {
	resp := &c.Request.Response
	resp.SetBody(body)
	resp.Header.SetContentLength(len(body))
}

// ExpandTemplate appends t's value for the request to dst (vars.Expand), with the route's
// names and the consumer as they stand.
func (c *Ctx) ExpandTemplate(dst []byte, t *conf.Template) []byte {
	r := vars.Request{HTTP: c.Request, Consumer: c.Consumer}
	if route := c.Route; route != nil {
		r.RouteID, r.RouteName, r.ServiceID, r.ServiceName = route.ID, route.Name, route.ServiceID, route.ServiceName
	}
	out, _ := vars.Expand(dst, &r, t)
	return out
}

// RequestProtocol is the request's protocol as its request line names it: "HTTP/1.1",
// "HTTP/1.0" (and "HTTP/2.0" for a stream, once the worker serves them).
func (c *Ctx) RequestProtocol() []byte { return c.Request.Request.Header.Protocol() }

// plugins-b (limit-req, limit-conn, api-breaker): what a request holds.

// Hold is what a plugin's access phase took for one request in shared memory and its log
// phase gives back (limit-conn's place in a key's count of requests in flight). The log
// phase runs for every instance of the chain, even one whose access phase never ran (an
// earlier plugin answered), so the instance asks the Ctx what it holds rather than
// assuming. Owner is the instance that took it; Entries and Nanos are the owner's.
type Hold struct {
	Owner   any
	Entries [2]shm.Entry
	Nanos   int64
}

// maxHolds is how many holds a request keeps: one per limit-conn instance, of which a
// request meets one per global rule and one for its route.
const maxHolds = 4

type holds struct {
	list [maxHolds]Hold
	n    uint8
}

// AddHold records h for the request, false when the request holds maxHolds already (the
// plugin then gives back what it took at once). It allocates nothing.
func (c *Ctx) AddHold(h Hold) bool {
	if int(c.holds.n) == maxHolds {
		return false
	}
	c.holds.list[c.holds.n] = h
	c.holds.n++
	return true
}

// TakeHold removes and returns the hold owner recorded, false when it recorded none.
func (c *Ctx) TakeHold(owner any) (Hold, bool) {
	for i := 0; i < int(c.holds.n); i++ {
		if c.holds.list[i].Owner == owner {
			h := c.holds.list[i]
			c.holds.n--
			c.holds.list[i] = c.holds.list[c.holds.n]
			c.holds.list[c.holds.n] = Hold{}
			return h, true
		}
	}
	return Hold{}, false
}

// Group plugins-d (forward-auth, traffic-split, proxy-mirror): the variable language and
// the body through the Ctx, so that those plugins read neither the exchange nor fasthttp.

// RequestBody is the request's body read whole (vars.Body): the proxy then sends it as
// read. ok is false when it could not be read whole (larger than 64 MiB, or a broken
// stream). The bytes are the request's own: read them, never keep or change them.
func (c *Ctx) RequestBody() (body []byte, ok bool) {
	r := vars.Request{HTTP: c.Request}
	return vars.Body(&r)
}

// UseUpstream has the request proxied to upstream i of chooser's Upstreams, in place of
// the route's own; the last call wins. chooser is the calling instance.
func (c *Ctx) UseUpstream(chooser UpstreamChooser, i int) { c.chooser, c.choice = chooser, i }

// ChosenUpstream is what UseUpstream named: the instance and the index into its
// Upstreams; chooser is nil when no plugin chose.
func (c *Ctx) ChosenUpstream() (chooser UpstreamChooser, i int) { return c.chooser, c.choice }

// Holds reports whether the vars expression e (conf.ParseVars) holds for the request
// (vars.Eval), with the route's names and the consumer as they stand. It allocates only
// as vars.Eval does.
func (c *Ctx) Holds(e *conf.Expr) bool {
	r := c.VarsRequest()
	return vars.Eval(e, &r)
}

// RequestContentLength is the request body's declared length: 0 without a body, -1 for a
// body of unknown length (chunked).
func (c *Ctx) RequestContentLength() int {
	if n := c.Request.Request.Header.ContentLength(); n >= -1 {
		return n
	}
	return 0 // fasthttp's -2: neither Content-Length nor chunked, so no body
}

// RequestHeaders yields the request's header fields as they stand (as they would be sent
// upstream now), name and value; they are the request's own bytes, valid during the
// call. It allocates nothing.
func (c *Ctx) RequestHeaders() iter.Seq2[[]byte, []byte] {
	return c.Request.Request.Header.All()
}

// ResponseHeaders yields the response's header fields as they stand, name and value
// (the loggers' response.headers); they are the response's own bytes, valid during the
// call. It allocates nothing.
func (c *Ctx) ResponseHeaders() iter.Seq2[[]byte, []byte] {
	return c.Request.Response.Header.All()
}
