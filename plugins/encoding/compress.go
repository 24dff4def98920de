package encoding

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"sync"

	"gw/plugins"
)

// Writer is a compressor as gzip's and brotli's libraries make them: reset onto a
// destination, written to, flushed to emit what it holds, closed to finish the stream.
type Writer interface {
	Reset(dst io.Writer)
	Flush() error
	io.WriteCloser
}

// Compressor is one route's compression in one content coding: the shared decisions and
// the compression itself, whole or streamed. A plugin asks Fits and ClientTakes in the
// order its APISIX counterpart does, and then Compress. It is immutable and safe for
// concurrent use.
type Compressor struct {
	coding    []byte
	types     Types
	minLength int
	http10    bool
	vary      bool
	writers   *sync.Pool // of Writer, at the route's settings
	// flushAfter, when above 0, is how much of a streamed body the compressor takes in
	// before it must emit what it holds (gzip's buffers); 0 leaves that to the compressor.
	flushAfter int
}

// NewCompressor compiles a route's compression in coding ("gzip", "br") with writers
// from the pool given (shared by the routes of the same settings).
func NewCompressor(coding string, c *Common, writers *sync.Pool) *Compressor {
	return &Compressor{
		coding:    []byte(coding),
		types:     NewTypes(c.Types),
		minLength: int(min(c.MinLength, math.MaxInt32)),
		http10:    c.HTTPVersion == 10,
		vary:      c.Vary,
		writers:   writers,
	}
}

// FlushAfter makes a streamed body's compressor emit what it holds (a sync flush) once it
// has taken in n bytes of the body since it last did, n > 0. Call it at build, before z
// serves a request.
func (z *Compressor) FlushAfter(n int) { z.flushAfter = n }

var (
	headerContentType     = []byte("Content-Type")
	headerContentLength   = []byte("Content-Length")
	headerContentEncoding = []byte("Content-Encoding")
	headerAcceptEncoding  = []byte("Accept-Encoding")
	headerVary            = []byte("Vary")
	headerETag            = []byte("ETag")
	protocolHTTP10        = []byte("HTTP/1.0")
	methodHead            = []byte(http.MethodHead)
)

// Fits reports whether the response is one the route compresses: its type is one of
// types, it is at least min_length (a body held whole is read; a streamed one's length
// is checked when the node gave one, and an unknown one compresses, as nginx's), and the
// request is at least http_version. body is the body held whole, nil for a stream.
func (z *Compressor) Fits(c *plugins.Ctx) (body []byte, ok bool) {
	if !z.types.Match(c.ResponseHeader(headerContentType)) {
		return nil, false
	}
	if !c.ResponseStreamed() {
		if body, _ = c.ReadResponseBody(math.MaxInt); len(body) < z.minLength {
			return nil, false
		}
	} else if n, ok := contentLength(c.ResponseHeader(headerContentLength)); ok && n < z.minLength {
		return nil, false
	}
	if !z.http10 && bytes.Equal(c.RequestProtocol(), protocolHTTP10) {
		return nil, false
	}
	return body, true
}

// AddVary adds Vary: Accept-Encoding when the route's vary asks for it.
func (z *Compressor) AddVary(c *plugins.Ctx) {
	if z.vary {
		c.AddResponseField(headerVary, headerAcceptEncoding)
	}
}

// ClientTakes reports whether this exchange can take the coding: the client's
// Accept-Encoding names it (or *) above q=0, the response has no Content-Encoding yet
// (never compressed twice), and it is no HEAD.
func (z *Compressor) ClientTakes(c *plugins.Ctx) bool {
	return Accepts(c.RequestHeader(headerAcceptEncoding), z.coding) &&
		len(c.ResponseHeader(headerContentEncoding)) == 0 &&
		!bytes.Equal(c.Method(), methodHead)
}

// scratch is one response's compressed body and its weakened ETag.
type scratch struct {
	out  bytes.Buffer
	etag []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Compress compresses the response: body, when Fits held it whole, or the stream as it
// streams (see stream), and says so in its headers. A stream gw cannot take over, or one
// to an HTTP/1.0 client (which cannot take a chunked body), goes as it comes.
func (z *Compressor) Compress(c *plugins.Ctx, body []byte) {
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	if c.ResponseStreamed() {
		if bytes.Equal(c.RequestProtocol(), protocolHTTP10) ||
			!c.WrapResponseStream(func(src plugins.StreamDetacher) io.Reader { return newStream(src, z.writers, z.flushAfter) }) {
			return
		}
	} else {
		s.out.Reset()
		w := z.writers.Get().(Writer)
		w.Reset(&s.out)
		_, err := w.Write(body)
		if err == nil {
			err = w.Close()
		}
		z.writers.Put(w)
		if err != nil {
			return // a bytes.Buffer does not fail; the body goes as it was
		}
		c.SetResponseBody(s.out.Bytes())
	}
	c.SetResponseHeader(headerContentEncoding, z.coding)
	// The compressed body is another representation: a strong validator becomes weak,
	// as nginx's filters make it.
	var weak bool
	if s.etag, weak = AppendWeakETag(s.etag[:0], c.ResponseHeader(headerETag)); weak {
		c.SetResponseHeader(headerETag, s.etag)
	}
}

// contentLength reads a Content-Length value; ok is false for none, or one that is not
// a decimal number (a length so long that it overflows is no shorter than min_length).
func contentLength(value []byte) (n int, ok bool) {
	if len(value) == 0 {
		return 0, false
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxInt-9)/10 {
			return math.MaxInt, true
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
