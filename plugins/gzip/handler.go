package gzip

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/valyala/fasthttp"

	"gw/plugins"
	"gw/plugins/encoding"
)

// compressor is one route's gzip. It is immutable and safe for concurrent use.
type compressor struct {
	types     encoding.Types
	minLength int
	http10    bool
	vary      bool
	writers   *sync.Pool // of *kgzip.Writer at the route's level
}

var (
	_ plugins.ResponsePhase = (*compressor)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: gzip changes only the response.
func (plugin) KeepsRequest() bool { return true }

// writersByLevel pools gzip writers per level, shared by every route: a writer holds
// its level's tables (hundreds of KiB at 9), made once and reset per response.
var writersByLevel [10]sync.Pool

func init() {
	for level := 1; level <= 9; level++ {
		writersByLevel[level].New = func() any {
			w, _ := kgzip.NewWriterLevel(nil, level)
			return w
		}
	}
}

// Build compiles a route's gzip.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	g := &compressor{
		minLength: int(min(cfg.MinLength, math.MaxInt32)),
		http10:    cfg.HTTPVersion == 10,
		vary:      cfg.Vary,
		writers:   &writersByLevel[cfg.CompLevel],
		types:     encoding.NewTypes(cfg.Types),
	}
	return g, nil
}

var (
	headerContentType     = []byte("Content-Type")
	headerContentLength   = []byte("Content-Length")
	headerContentEncoding = []byte("Content-Encoding")
	headerAcceptEncoding  = []byte("Accept-Encoding")
	headerVary            = []byte("Vary")
	headerETag            = []byte("ETag")
	encodingGzip          = []byte("gzip")
	protocolHTTP10        = []byte("HTTP/1.0")
	methodHead            = []byte(http.MethodHead)
)

// scratch is one response's compressed body and its weakened ETag.
type scratch struct {
	out  bytes.Buffer
	etag []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Response compresses the body when APISIX's header_filter and nginx's gzip filter behind
// it would: the type is one of types, the length at least min_length and the request's
// version at least http_version (vary then adds Vary: Accept-Encoding, whether or not
// this client gets it compressed); the status 200, 403 or 404, no Content-Encoding yet,
// a client that accepts gzip, a body to send.
func (g *compressor) Response(c *plugins.Ctx) {
	if !g.types.Match(c.ResponseHeader(headerContentType)) {
		return
	}
	streamed := c.ResponseStreamed()
	var body []byte
	if !streamed {
		body, _ = c.ReadResponseBody(math.MaxInt)
		if len(body) < g.minLength {
			return
		}
	} else if n, err := fasthttp.ParseUint(c.ResponseHeader(headerContentLength)); err == nil && n < g.minLength {
		return // a streamed body's length, when the node gave one (nginx: unknown compresses)
	}
	if !g.http10 && bytes.Equal(c.RequestProtocol(), protocolHTTP10) {
		return
	}
	if g.vary {
		c.AddResponseField(headerVary, headerAcceptEncoding)
	}
	switch status := c.Status(); {
	case status != http.StatusOK && status != http.StatusForbidden && status != http.StatusNotFound,
		len(c.ResponseHeader(headerContentEncoding)) > 0,
		!encoding.Accepts(c.RequestHeader(headerAcceptEncoding), encodingGzip),
		bytes.Equal(c.Method(), methodHead):
		return
	}
	if streamed {
		g.compressStream(c)
		return
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.out.Reset()
	w := g.writers.Get().(*kgzip.Writer)
	w.Reset(&s.out)
	_, err := w.Write(body)
	if err == nil {
		err = w.Close()
	}
	g.writers.Put(w)
	if err != nil {
		return // a bytes.Buffer does not fail; the body goes as it was
	}
	c.SetResponseBody(s.out.Bytes())
	g.markCompressed(c, s)
}

// compressStream compresses a body streaming from the node as it goes, sent chunked: see
// stream. A stream gw cannot take over goes as it comes, and so does one to an HTTP/1.0
// client, which cannot take a body of unknown length but by the connection's close.
func (g *compressor) compressStream(c *plugins.Ctx) {
	if bytes.Equal(c.RequestProtocol(), protocolHTTP10) {
		return
	}
	if !c.WrapResponseStream(func(src plugins.StreamDetacher) io.Reader { return newStream(src, g.writers) }) {
		return
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	g.markCompressed(c, s)
}

// markCompressed says so in the headers: Content-Encoding, and, since the compressed body
// is another representation, a strong ETag made weak, as nginx's gzip filter makes it.
func (g *compressor) markCompressed(c *plugins.Ctx, s *scratch) {
	c.SetResponseHeader(headerContentEncoding, encodingGzip)
	var weak bool
	if s.etag, weak = encoding.AppendWeakETag(s.etag[:0], c.ResponseHeader(headerETag)); weak {
		c.SetResponseHeader(headerETag, s.etag)
	}
}
