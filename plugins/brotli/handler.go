package brotli

import (
	"encoding/json"
	"sync"

	"github.com/andybalholm/brotli"

	"gw/plugins"
	"gw/plugins/encoding"
)

// compressor is one route's brotli. It is immutable and safe for concurrent use.
type compressor struct{ z *encoding.Compressor }

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
	writers := writersFor(brotli.WriterOptions{Quality: cfg.CompLevel, LGWin: cfg.LGWin})
	return &compressor{encoding.NewCompressor("br", &cfg.Common, writers)}, nil
}

// Response compresses the body when APISIX's brotli would, in its order: a client that
// takes br (encoding.Compressor.ClientTakes), a type among types, at least min_length
// bytes, a request of at least http_version (vary then adds Vary: Accept-Encoding).
// APISIX compresses whatever the status; so does gw. A body streaming from the node is
// compressed as it streams.
func (b *compressor) Response(c *plugins.Ctx) {
	if !b.z.ClientTakes(c) {
		return
	}
	body, ok := b.z.Fits(c)
	if !ok {
		return
	}
	b.z.AddVary(c)
	b.z.Compress(c, body)
}
