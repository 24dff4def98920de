package gzip

import (
	"encoding/json"
	"net/http"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"

	"gw/plugins"
	"gw/plugins/encoding"
)

// compressor is one route's gzip. It is immutable and safe for concurrent use.
type compressor struct{ z *encoding.Compressor }

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
	z := encoding.NewCompressor("gzip", &cfg.Common, &writersByLevel[cfg.CompLevel])
	z.FlushAfter(cfg.FlushAfter())
	return &compressor{z}, nil
}

// Response compresses the body when APISIX's header_filter and nginx's gzip filter behind
// it would: the type is one of types, the length at least min_length and the request's
// version at least http_version (vary then adds Vary: Accept-Encoding, whether or not
// this client gets it compressed); the status 200, 403 or 404, a client that takes gzip
// (encoding.Compressor.ClientTakes). A body streaming from the node is compressed as it
// streams.
func (g *compressor) Response(c *plugins.Ctx) {
	body, ok := g.z.Fits(c)
	if !ok {
		return
	}
	g.z.AddVary(c)
	if status := c.Status(); status != http.StatusOK && status != http.StatusForbidden && status != http.StatusNotFound ||
		!g.z.ClientTakes(c) {
		return
	}
	g.z.Compress(c, body)
}
