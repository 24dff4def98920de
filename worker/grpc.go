package worker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/bytesconv"
	"gw/worker/proxy"
)

// gRPC proxying. A route whose upstream has scheme grpc or grpcs takes HTTP/2 streams: the
// handler (routing, the plugins' access phase) runs on the request's header as for any
// request, then proxyGRPC takes the stream over instead of the HTTP/1.1 forward. The
// stream's request body goes to the node as the client's DATA frames arrive (h2Body,
// which gives the client window back only as the node's side reads it), and the node's
// response is written back frame by frame as it comes (writeData, within the client's
// windows), so both directions of a streaming call flow at once and neither side can make
// the gateway hold more than a window of it per stream. The node's trailers (grpc-status,
// grpc-message) end the stream.
//
// What the gateway itself answers on a gRPC request (no route, a plugin's refusal, a node
// that cannot be reached, a deadline) is given as a gRPC status in a trailers-only
// response (:status 200, grpc-status, grpc-message), which every gRPC client reads as
// the call's status; an HTTP status is mapped as gRPC's own clients map one they get
// (grpcCodeOfHTTP).

// gRPC status codes the gateway gives (google.golang.org/grpc/codes).
const (
	grpcOK               = 0
	grpcCanceled         = 1
	grpcUnknown          = 2
	grpcDeadlineExceeded = 4
	grpcPermissionDenied = 7
	grpcUnimplemented    = 12
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcUnauthenticated  = 16
)

var (
	errBodyClosed = errors.New("worker: gRPC request body closed: the call is over")

	grpcContentType = []byte("application/grpc")
	// msgGRPCOverHTTP1 answers an HTTP/1.x request to a gRPC route.
	msgGRPCOverHTTP1 = []byte(`{"error_msg":"400 Bad Request: this route proxies gRPC (upstream scheme grpc or grpcs), which needs HTTP/2: use TLS with ALPN h2, or h2c with prior knowledge"}` + "\n")
)

// isGRPCRequest reports whether h is a gRPC call's header: content-type application/grpc,
// alone or with a subtype (+proto, +json) or parameters.
func isGRPCRequest(h *fasthttp.RequestHeader) bool {
	ct := h.ContentType()
	if len(ct) < len(grpcContentType) || !strings.EqualFold(bytesconv.String(ct[:len(grpcContentType)]), "application/grpc") {
		return false
	}
	return len(ct) == len(grpcContentType) || ct[len(grpcContentType)] == '+' || ct[len(grpcContentType)] == ';'
}

// forwardTo proxies ctx's request to up: gRPC over the client's HTTP/2 stream for a grpc
// or grpcs upstream, the HTTP/1.1 forward otherwise.
func forwardTo(ctx *fasthttp.RequestCtx, up *proxy.Upstream, info *proxy.Info) {
	if up.GRPC() {
		proxyGRPC(ctx, up, info)
		return
	}
	up.ForwardInfo(ctx, info)
}

// grpcBody is a gRPC stream's request body as the node's side reads it, from the call's
// own goroutine (proxy.GRPCCall's pump): h2Body, plus a close that lets the stream's
// state be reused only once no read is under way.
type grpcBody struct {
	s       *h2Stream
	c       *h2Conn
	closed  bool // under c.mu; once set, s is no longer touched
	readers int  // under c.mu
}

func (b *grpcBody) Read(p []byte) (int, error) {
	c := b.c
	c.mu.Lock()
	if b.closed {
		c.mu.Unlock()
		return 0, errBodyClosed
	}
	b.readers++
	c.mu.Unlock()
	n, err := b.s.body.Read(p)
	c.mu.Lock()
	b.readers--
	if b.readers == 0 && b.closed {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	return n, err
}

// Complete reports whether the client has sent the whole body (END_STREAM came): reading
// it to the end does not wait. A unary call's body usually has, and is then sent with the
// call's HEADERS, without a goroutine to pump it.
func (b *grpcBody) Complete() bool {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return !b.closed && b.s.body.eof && b.s.body.err == nil
}

// Close ends the body for its reader: a read waiting for DATA returns.
func (b *grpcBody) Close() error {
	c := b.c
	c.mu.Lock()
	b.closeLocked()
	c.mu.Unlock()
	return nil
}

func (b *grpcBody) closeLocked() {
	if b.closed {
		return
	}
	b.closed = true
	if body := &b.s.body; !body.eof && body.err == nil {
		body.err = errBodyClosed
	}
	b.c.cond.Broadcast()
}

// release closes the body and waits until no read is under way: the stream (and its body
// buffer) goes back to its pool after.
func (b *grpcBody) release() {
	c := b.c
	c.mu.Lock()
	b.closeLocked()
	for b.readers > 0 {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

// proxyGRPC is one gRPC call to a node of up, on the client's HTTP/2 stream.
func proxyGRPC(ctx *fasthttp.RequestCtx, up *proxy.Upstream, info *proxy.Info) {
	ec := edgeConnOf(ctx.Conn())
	if ec == nil || ec.stream == nil {
		ctx.Response.Reset()
		writeJSON(ctx, fasthttp.StatusBadRequest, msgGRPCOverHTTP1)
		return
	}
	s := ec.stream
	c := s.c
	timeout, hasDeadline := grpcTimeout(ctx.Request.Header.Peek("grpc-timeout"))
	if hasDeadline && timeout <= 0 {
		timeout = time.Nanosecond // "0S": past already, not "none"
	}
	call := proxy.AcquireGRPCCall(timeout)
	s.grpcAnswered = true // respond writes nothing: this does
	ctx.Response.SetStatusCode(fasthttp.StatusOK)
	c.mu.Lock()
	s.cancel = call.CancelFunc()
	gone := s.reset || c.dead
	var body *grpcBody
	if !s.remoteClosed || s.body.start < s.body.end {
		body = &s.grpcBody
		*body = grpcBody{s: s, c: c}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		s.cancel = nil // the call goes back to its pool: the read loop must not reach it
		c.mu.Unlock()
		if body != nil {
			_ = body.Close() // the call's pump stops reading
		}
		proxy.ReleaseGRPCCall(call)
		if body != nil {
			body.release()
		}
	}()
	if gone {
		ctx.Response.SetStatusCode(499) // nginx's status for a client that left
		return
	}
	var reqBody io.Reader
	switch {
	case !ctx.Request.IsBodyStream():
		// Something before the proxy (the router's post_arg, a plugin) read the body
		// whole: the stream is spent, the bytes are here.
		if len(ctx.Request.Body()) > 0 {
			s.bodyReader.Reset(ctx.Request.Body())
			reqBody = &s.bodyReader
		}
	case body != nil:
		reqBody = body
	}
	if err := up.RoundTripGRPC(call, ctx, reqBody, info); err != nil {
		s.grpcFailed(call, err, false)
		return
	}
	// A trailers-only response (the node's answer is its status alone) ends with its
	// HEADERS, as the node sent it.
	trailersOnly := call.TrailersOnly()
	if s.writeGRPCHeaders(call, trailersOnly) != nil || trailersOnly {
		return
	}
	buf := h2CopyBufPool.Get().(*[maxFrameSize]byte)
	defer h2CopyBufPool.Put(buf)
	for {
		n, rerr := call.Read(buf[:])
		if n > 0 && s.writeData(buf[:n], false) != nil {
			return
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			s.grpcFailed(call, rerr, true)
			return
		}
	}
	if call.Trailers() == 0 {
		// A node that ended the stream without a status: gRPC says the call failed.
		_ = s.writeGRPCTrailers(http.Header{"Grpc-Status": {strconv.Itoa(grpcInternal)}, "Grpc-Message": {"upstream ended the stream without grpc-status"}})
		return
	}
	_ = s.writeGRPCCallTrailers(call)
}

// grpcFailed ends a call the node did not complete: nothing (the client reset the
// stream), DEADLINE_EXCEEDED (grpc-timeout passed) or UNAVAILABLE (the node failed, or
// timed out: timeout.read, timeout.send), in trailers when the response's HEADERS went
// out already (headersSent), trailers-only otherwise.
//
// The status the access log and the metrics see is nginx's for the same end: 502, 504,
// or 499 for a client that left.
func (s *h2Stream) grpcFailed(call *proxy.GRPCCall, err error, headersSent bool) {
	code, msg := grpcUnavailable, "upstream unavailable"
	var ge *proxy.GRPCError
	logged := fasthttp.StatusBadGateway
	switch {
	case call.Expired():
		code, msg = grpcDeadlineExceeded, "deadline exceeded (grpc-timeout) waiting for the upstream"
		logged = fasthttp.StatusGatewayTimeout
	case call.TimedOut() != "":
		// nginx answers its grpc_read_timeout and grpc_send_timeout with 504, which gRPC
		// clients read as UNAVAILABLE; the message says which timeout.
		msg = call.TimedOut()
		logged = fasthttp.StatusGatewayTimeout
	case call.Stopped():
		s.ctx.Response.SetStatusCode(499)
		return // the client reset the stream: the node's call is cancelled, nobody listens
	case errors.As(err, &ge):
		msg = ge.Message
	case headersSent:
		msg = "the upstream broke the stream off"
	}
	if !headersSent {
		s.ctx.Response.SetStatusCode(logged)
	}
	if headersSent {
		_ = s.writeGRPCTrailers(http.Header{"Grpc-Status": {strconv.Itoa(code)}, "Grpc-Message": {grpcEncodeMessage(msg)}})
		return
	}
	s.writeGRPCStatus(code, msg)
}

// writeGRPCStatus answers the stream with a trailers-only response: the call's status.
func (s *h2Stream) writeGRPCStatus(code int, msg string) {
	h := http.Header{
		"Content-Type": {"application/grpc"},
		"Grpc-Status":  {strconv.Itoa(code)},
	}
	if msg != "" {
		h["Grpc-Message"] = []string{grpcEncodeMessage(msg)}
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.reset || c.dead {
		return
	}
	c.hdr.Reset()
	c.writeStatus(fasthttp.StatusOK)
	c.writeGRPCFieldsLocked(h)
	_ = s.endHeadersLocked(true)
}

// writeGRPCHeaders writes the node's response HEADERS (its status and fields, less what
// HTTP/2 forbids), ending the stream when end.
func (s *h2Stream) writeGRPCHeaders(call *proxy.GRPCCall, end bool) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.reset || c.dead {
		return errStreamGone
	}
	c.hdr.Reset()
	c.writeStatus(call.Status())
	for i := range call.Headers() {
		if k, v := call.Header(i); !skipResponseHeader(k) {
			c.hdr.Field(k, v)
		}
	}
	return s.endHeadersLocked(end)
}

// writeGRPCCallTrailers writes the node's trailers, which end the stream.
func (s *h2Stream) writeGRPCCallTrailers(call *proxy.GRPCCall) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.reset || c.dead {
		return errStreamGone
	}
	c.hdr.Reset()
	for i := range call.Trailers() {
		if k, v := call.Trailer(i); !skipResponseHeader(k) {
			c.hdr.Field(k, v)
		}
	}
	return s.endHeadersLocked(true)
}

// writeGRPCTrailers writes h as the trailers that end the stream.
func (s *h2Stream) writeGRPCTrailers(h http.Header) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.reset || c.dead {
		return errStreamGone
	}
	c.hdr.Reset()
	c.writeGRPCFieldsLocked(h)
	return s.endHeadersLocked(true)
}

func (s *h2Stream) endHeadersLocked(end bool) error {
	c := s.c
	err := c.writeHeadersLocked(s.id, end)
	if err == nil && end {
		c.endStreamLocked(s)
	}
	if err == nil {
		c.flusher.FlushLaterLocked()
	}
	return err
}

func (c *h2Conn) writeGRPCFieldsLocked(h http.Header) {
	for k, vs := range h {
		if skipResponseHeader(bytesconv.Bytes(k)) || strings.HasPrefix(k, ":") {
			continue
		}
		for _, v := range vs {
			c.hdr.Field(bytesconv.Bytes(k), bytesconv.Bytes(v))
		}
	}
}

// respondGRPCError turns the handler's own answer to a gRPC request (a plugin's refusal,
// no route, no upstream) into the call's status, which a gRPC client reads, where an
// HTTP error body it would not.
func (s *h2Stream) respondGRPCError() {
	resp := &s.ctx.Response
	msg := string(resp.Body())
	var envelope struct {
		ErrorMsg string `json:"error_msg"`
		Message  string `json:"message"`
	}
	if json.Unmarshal(resp.Body(), &envelope) == nil {
		switch {
		case envelope.ErrorMsg != "":
			msg = envelope.ErrorMsg
		case envelope.Message != "":
			msg = envelope.Message
		}
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = strconv.Itoa(resp.StatusCode()) + " " + fasthttp.StatusMessage(resp.StatusCode())
	}
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	s.writeGRPCStatus(grpcCodeOfHTTP(resp.StatusCode()), msg)
}

// grpcCodeOfHTTP is gRPC's mapping of an HTTP status to a call status, which gRPC's
// clients apply to a response that is not gRPC (doc/http-grpc-status-mapping.md in
// grpc/grpc): APISIX answers such refusals with the HTTP status, so its clients see the
// same codes.
func grpcCodeOfHTTP(status int) int {
	switch status {
	case fasthttp.StatusBadRequest:
		return grpcInternal
	case fasthttp.StatusUnauthorized:
		return grpcUnauthenticated
	case fasthttp.StatusForbidden:
		return grpcPermissionDenied
	case fasthttp.StatusNotFound:
		return grpcUnimplemented
	case fasthttp.StatusTooManyRequests, fasthttp.StatusBadGateway, fasthttp.StatusServiceUnavailable, fasthttp.StatusGatewayTimeout:
		return grpcUnavailable
	}
	return grpcUnknown
}

// grpcEncodeMessage percent-encodes msg as grpc-message requires: printable ASCII but
// '%' as it is, every other byte as %XX.
func grpcEncodeMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		ch := msg[i]
		if ch >= 0x20 && ch <= 0x7e && ch != '%' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[ch>>4])
		b.WriteByte("0123456789ABCDEF"[ch&15])
	}
	return b.String()
}

// grpcTimeout parses a grpc-timeout value: at most 8 digits and a unit (H, M, S, m, u,
// n). One that does not parse sets no deadline here; it goes on to the node, whose gRPC
// server refuses it.
func grpcTimeout(v []byte) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(bytesconv.String(v[:len(v)-1]), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}
