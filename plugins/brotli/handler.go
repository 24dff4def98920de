package brotli

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"sync"

	"github.com/andybalholm/brotli"

	"gw/plugins"
	"gw/plugins/encoding"
)

// compressor is one route's brotli. It is immutable and safe for concurrent use.
type compressor struct {
	types     encoding.Types
	minLength int
	http10    bool
	vary      bool
	writers   *sync.Pool // of *brotli.Writer at the route's quality and window
}

var (
	_ plugins.ResponsePhase = (*compressor)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: brotli changes only the response.
func (plugin) KeepsRequest() bool { return true }

// writerPools pools writers by quality and window, shared by every route: a writer
// holds its encoder's state (a window of up to 16 MiB), made once and reset per body.
var (
	writerPoolsMu sync.Mutex
	writerPools   = map[brotli.WriterOptions]*sync.Pool{}
)

func writersFor(options brotli.WriterOptions) *sync.Pool {
	writerPoolsMu.Lock()
	defer writerPoolsMu.Unlock()
	p, ok := writerPools[options]
	if !ok {
		p = &sync.Pool{New: func() any { return brotli.NewWriterOptions(nil, options) }}
		writerPools[options] = p
	}
	return p
}

// Build compiles a route's brotli.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return &compressor{
		types:     encoding.NewTypes(cfg.Types),
		minLength: int(min(cfg.MinLength, math.MaxInt32)),
		http10:    cfg.HTTPVersion == 10,
		vary:      cfg.Vary,
		writers:   writersFor(brotli.WriterOptions{Quality: cfg.CompLevel, LGWin: cfg.LGWin}),
	}, nil
}

var (
	headerContentType     = []byte("Content-Type")
	headerContentEncoding = []byte("Content-Encoding")
	headerAcceptEncoding  = []byte("Accept-Encoding")
	headerVary            = []byte("Vary")
	headerETag            = []byte("ETag")
	encodingBr            = []byte("br")
	protocolHTTP10        = []byte("HTTP/1.0")
	methodHead            = []byte(http.MethodHead)
)

type scratch struct {
	out  bytes.Buffer
	etag []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Response compresses the body when APISIX's brotli would, in its order: a client that
// accepts br, no Content-Encoding yet, a type among types, at least min_length bytes, a
// request of at least http_version (vary then adds Vary: Accept-Encoding). APISIX
// compresses whatever the status; so does gw.
func (b *compressor) Response(c *plugins.Ctx) {
	if !encoding.Accepts(c.RequestHeader(headerAcceptEncoding), encodingBr) ||
		len(c.ResponseHeader(headerContentEncoding)) > 0 ||
		!b.types.Match(c.ResponseHeader(headerContentType)) ||
		c.ResponseStreamed() || // see README: a streamed body goes as it comes
		bytes.Equal(c.Method(), methodHead) {
		return
	}
	body, _ := c.ReadResponseBody(math.MaxInt)
	if len(body) < b.minLength || !b.http10 && bytes.Equal(c.RequestProtocol(), protocolHTTP10) {
		return
	}
	if b.vary {
		c.AddResponseField(headerVary, headerAcceptEncoding)
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	s.out.Reset()
	w := b.writers.Get().(*brotli.Writer)
	w.Reset(&s.out)
	_, err := w.Write(body)
	if err == nil {
		err = w.Close()
	}
	b.writers.Put(w)
	if err != nil {
		return // a bytes.Buffer does not fail; the body goes as it was
	}
	c.SetResponseBody(s.out.Bytes())
	c.SetResponseHeader(headerContentEncoding, encodingBr)
	var weak bool
	if s.etag, weak = encoding.AppendWeakETag(s.etag[:0], c.ResponseHeader(headerETag)); weak {
		c.SetResponseHeader(headerETag, s.etag)
	}
}
