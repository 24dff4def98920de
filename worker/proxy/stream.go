package proxy

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
)

// bodyStream is a response body read from an upstream connection while the server writes
// it to the client. The server closes it when done (or when the client goes away), which
// returns the connection to its pool if the body was read to the end, or closes it.
type bodyStream struct {
	// framing decodes the node's framing (Content-Length, chunked, or until close); only
	// its header's length and its body stream are used.
	framing   fasthttp.Response
	src       io.Reader
	conn      *upConn
	remaining int // bytes left of a known-length body, -1 if unknown
	reusable  bool
	complete  bool
	// inflight is the node's least_conn count, released on Close; nil for other balancers.
	inflight *atomic.Int64
}

var bodyStreamPool = sync.Pool{New: func() any { return new(bodyStream) }}

// start streams the body following the header already read from c, of contentLength
// (-1 chunked, -2 until the node closes).
func (s *bodyStream) start(c *upConn, contentLength int, reusable bool) {
	s.conn = c
	s.reusable = reusable && contentLength != -2
	s.remaining = contentLength
	if contentLength < 0 {
		s.remaining = -1
	}
	s.framing.Header.SetContentLength(contentLength)
	s.framing.StreamBody = true
	// With StreamBody set, ReadBody only wires up the stream; it reads nothing and
	// cannot fail.
	_ = s.framing.ReadBody(c.br, 0)
	s.src = s.framing.BodyStream()
}

func (s *bodyStream) Read(p []byte) (int, error) {
	n, err := s.src.Read(p)
	if s.remaining > 0 {
		s.remaining -= n
		if s.remaining == 0 {
			s.complete = true
		}
	}
	if err == io.EOF {
		s.complete = true
	}
	return n, err
}

// Close releases the connection and puts s back in its pool; s must not be used after.
func (s *bodyStream) Close() error {
	c := s.conn
	if c == nil {
		return nil
	}
	_ = s.framing.CloseBodyStream()
	c.pool.put(c, s.reusable && s.complete, monotime.Now())
	if s.inflight != nil {
		s.inflight.Add(-1)
	}
	s.conn, s.src, s.complete, s.inflight = nil, nil, false, nil
	s.framing.Reset()
	bodyStreamPool.Put(s)
	return nil
}
