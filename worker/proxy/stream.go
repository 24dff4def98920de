package proxy

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
)

// bodyStream is a response body read from an upstream connection while the server writes
// it to the client. The server closes it when done (or when the client goes away), which
// returns the connection to its pool if the body was read to the end, or closes it.
//
// A node may break the body off: close or reset the connection early, or send a chunk
// that does not parse. The server then drops what its writer still buffers and closes
// the client connection, so the client must already have what the stream handed out
// before, or it gets an empty reply instead of a response it can see is cut short. So:
//   - the body's first bytes are read before the response is committed (prefetch), and a
//     node that breaks before sending any gets gw's 502;
//   - a chunked body goes out a chunk per Read, each flushed before the next Read (the
//     server's writeBodyChunked);
//   - a body of known length is handed out only in whole buffers (fill): the server
//     writes out a buffer it was handed full before it reads more, and its header goes
//     out first (ImmediateHeaderFlush), so a Read that fails leaves nothing behind in the
//     writer. The bytes of a buffer the node broke off in the middle never reach the
//     client, and a slow node's body reaches it a buffer (4 to 32 KiB) at a time.
//
// An error is handed out on its own, by the Read after the one that returned the bytes
// read with it: the server's chunked copy ignores an error that comes with bytes and reads
// on, and a broken chunk followed by what parses as the last one would pass for a whole
// body.
//
// Since what a Read hands out is flushed before the next, the bytes handed out are the
// bytes sent, which the stream reports when it is closed (OnStreamEnd), as nginx's
// $body_bytes_sent: the body's, not the chunked framing's.
type bodyStream struct {
	// framing decodes the node's framing (Content-Length, chunked, or until close); only
	// its header's length and its body stream are used.
	framing  fasthttp.Response
	src      io.Reader
	conn     *upConn
	reusable bool
	// fill: a Read returns a full buffer, or stops short only at the body's end (a body
	// of known length; see above).
	fill bool
	// err is the source's first error (io.EOF at the body's end), handed out once what
	// was read before it has been.
	err      error
	complete bool
	// ahead is what prefetch read and no Read has handed out yet; it points into head.
	ahead []byte
	head  [prefetchSize]byte
	// inflight is the node's least_conn count, released on close; nil for other balancers.
	inflight *atomic.Int64
	// sent counts the body bytes handed out, last those of the latest Read.
	sent, last int64
	// end is told what was sent once the stream is closed (OnStreamEnd); nil for nobody.
	end StreamEnd
	// detached: a plugin took the stream over (plugins.Ctx.WrapResponseStream), so the
	// close that comes from replacing the response's body is not the end; the plugin's
	// stream closes s itself.
	detached bool
}

// Detach readies s to be taken out of the response without being closed: the next
// CloseWithError only clears the mark. The one who took it must close it.
func (s *bodyStream) Detach() { s.detached = true }

// prefetchSize bounds the body bytes read before the response is committed: one read's
// worth, as much as the upstream connection's buffer holds.
const prefetchSize = connBufSize

var bodyStreamPool = sync.Pool{New: func() any { return new(bodyStream) }}

// start streams the body following the header already read from c, of contentLength
// (-1 chunked, -2 until the node closes).
func (s *bodyStream) start(c *upConn, contentLength int, reusable bool) {
	s.conn = c
	s.reusable = reusable && contentLength != -2
	s.fill = contentLength >= 0
	s.framing.Header.SetContentLength(contentLength)
	s.framing.StreamBody = true
	// With StreamBody set, ReadBody only wires up the stream; it reads nothing and
	// cannot fail.
	_ = s.framing.ReadBody(c.br, 0)
	s.src = s.framing.BodyStream()
}

// prefetch reads the body's first bytes, at least one unless the body is empty, and
// returns the node's error when it broke the body off before any (or within the first
// read: nothing has gone to the client yet, so the whole response can still be an error).
func (s *bodyStream) prefetch() error {
	var n int
	var err error
	for n == 0 && err == nil {
		n, err = s.src.Read(s.head[:])
	}
	if err != nil && err != io.EOF {
		return err
	}
	s.ahead, s.err = s.head[:n], err
	s.complete = err == io.EOF
	return nil
}

func (s *bodyStream) Read(p []byte) (int, error) {
	n := copy(p, s.ahead)
	s.ahead = s.ahead[n:]
	for s.err == nil && n < len(p) && (n == 0 || s.fill) {
		var m int
		m, s.err = s.src.Read(p[n:])
		n += m
	}
	switch {
	case s.err == io.EOF:
		s.complete = true
	case s.err != nil && s.fill && n < len(p):
		n = 0 // a buffer broken off in the middle: see bodyStream
	}
	if n == 0 && s.err != nil {
		return 0, s.err
	}
	s.last = int64(n)
	s.sent += s.last
	return n, nil
}

// CloseWithError is how the server closes the stream (fasthttp.ReadCloserWithError), with
// why it stopped writing the body: nil when it wrote all of it, or never began. It tells
// end what went out, releases the connection and puts s back in its pool; s must not be
// used after. s is no io.Closer: the server would call Close first.
func (s *bodyStream) CloseWithError(writeErr error) error {
	if s.detached {
		s.detached = false
		return nil
	}
	sent := s.sent
	if writeErr != nil && (s.err == nil || !errors.Is(writeErr, s.err)) {
		// Not the stream's own error, so writing to the client failed, maybe with the
		// last bytes handed out: count only what surely went.
		sent -= s.last
	}
	end := s.end
	s.close()
	if end != nil {
		end.StreamEnded(sent)
	}
	return nil
}

// close releases the connection, to its pool when the body was read to its end, and puts
// s back in its pool.
func (s *bodyStream) close() {
	c := s.conn
	if c == nil {
		return
	}
	_ = s.framing.CloseBodyStream()
	c.pool.put(c, s.reusable && s.complete, monotime.Now())
	if s.inflight != nil {
		s.inflight.Add(-1)
	}
	s.conn, s.src, s.err, s.complete, s.ahead, s.inflight = nil, nil, nil, false, nil, nil
	s.sent, s.last, s.end = 0, 0, nil
	s.framing.Reset()
	bodyStreamPool.Put(s)
}

// StreamEnd learns how a response body that Forward left streaming from a node ended.
type StreamEnd interface {
	// StreamEnded is called once, from the goroutine that closed the stream (the server's,
	// once it has written the body or given up on it), with how many of the body's bytes
	// went to the client: all of them, or fewer when the node broke the body off or the
	// client went away. The response still holds what was sent (status, header) until it
	// returns.
	StreamEnded(sent int64)
}

// OnStreamEnd has end told (StreamEnd) when resp's body, which Forward left streaming
// from a node, is over, and reports whether it will be: false when resp holds no such
// stream (its body is whole, or was replaced since). resp keeps end until then.
func OnStreamEnd(resp *fasthttp.Response, end StreamEnd) bool {
	s, ok := resp.BodyStream().(*bodyStream)
	if ok {
		s.end = end
	}
	return ok
}
