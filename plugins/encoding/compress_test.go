package encoding

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	kgzip "github.com/klauspost/compress/gzip"
	"github.com/valyala/fasthttp"

	"gw/plugins"
)

// NodeStream is a body streaming from a node as the proxy's: detachable, closed once
// with the server's error. It hands out the body a piece at a time, then fails with
// breakWith if set, else io.EOF.
type nodeStream struct {
	rest      string
	piece     int
	breakWith error
	detached  bool
	closes    int
}

func (s *nodeStream) Read(p []byte) (int, error) {
	if s.rest == "" {
		if s.breakWith != nil {
			return 0, s.breakWith
		}
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.piece)], s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

func (s *nodeStream) Detach() { s.detached = true }

func (s *nodeStream) CloseWithError(error) error {
	if s.detached {
		s.detached = false
		return nil
	}
	s.closes++
	return nil
}

// codings are the two the plugins compress in, each with its writers and a reader.
var codings = []struct {
	name    string
	writers *sync.Pool
	reader  func(io.Reader) (io.Reader, error)
}{
	{"gzip", &sync.Pool{New: func() any { w, _ := kgzip.NewWriterLevel(nil, 1); return w }},
		func(r io.Reader) (io.Reader, error) { return stdgzip.NewReader(r) }},
	{"br", &sync.Pool{New: func() any { return brotli.NewWriterLevel(nil, 6) }},
		func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil }},
}

// A body streaming from the node is compressed as it streams, chunked: never read whole
// before the first bytes go, the node's stream closed once, with the server's error.
func TestCompressStream(t *testing.T) {
	page := strings.Repeat("<p>a streamed page, compressed as it goes</p>\n", 4000) // 188 KB
	for _, coding := range codings {
		for _, tc := range []struct {
			name          string
			minLength     int64
			protocol      string
			contentLength string
			breakWith     error
			compressed    bool
		}{
			{name: "chunked", minLength: 20, compressed: true},
			{name: "known length", minLength: 20, contentLength: fmt.Sprint(len(page)), compressed: true},
			{name: "shorter than min_length", minLength: 1000000, contentLength: fmt.Sprint(len(page))},
			{name: "unknown length, min_length", minLength: 1000000, compressed: true},
			{name: "HTTP/1.0", minLength: 20, protocol: "HTTP/1.0"},
			{name: "broken off", minLength: 20, breakWith: errors.New("node reset"), compressed: true},
		} {
			t.Run(coding.name+"/"+tc.name, func(t *testing.T) {
				z := NewCompressor(coding.name, &Common{MinLength: tc.minLength, HTTPVersion: 10}, coding.writers)
				ctx := &fasthttp.RequestCtx{}
				ctx.Request.Header.SetMethod("GET")
				ctx.Request.SetRequestURI("/page")
				if tc.protocol != "" {
					ctx.Request.Header.SetProtocol(tc.protocol)
				}
				ctx.Request.Header.Set("Accept-Encoding", "gzip, br")
				ctx.Response.Header.Set("Content-Type", "text/html")
				ctx.Response.Header.Set("ETag", `"v1"`)
				src := &nodeStream{rest: page, piece: 3000, breakWith: tc.breakWith}
				ctx.Response.SetBodyStream(src, -1)
				if tc.contentLength != "" {
					ctx.Response.Header.Set("Content-Length", tc.contentLength)
				}
				c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
				if body, ok := z.Fits(c); ok && z.ClientTakes(c) {
					z.Compress(c, body)
				}
				plugins.ReleaseCtx(c)
				resp := &ctx.Response
				if !resp.IsBodyStream() {
					t.Fatal("the body no longer streams")
				}
				if src.closes != 0 {
					t.Fatalf("the node's stream was closed %d times before the body was sent", src.closes)
				}
				if got := string(resp.Header.Peek("Content-Encoding")); (got == coding.name) != tc.compressed {
					t.Fatalf("Content-Encoding %q, compressed want %v", got, tc.compressed)
				}
				var sent bytes.Buffer
				_, readErr := io.Copy(&sent, resp.BodyStream())
				if err := resp.CloseBodyStream(); err != nil {
					t.Fatal(err)
				}
				if !tc.compressed {
					if sent.String() != page || readErr != nil {
						t.Fatalf("%d bytes (%v), want the node's body as it came", sent.Len(), readErr)
					}
					return
				}
				if src.closes != 1 {
					t.Fatalf("the node's stream was closed %d times, want once", src.closes)
				}
				if resp.Header.ContentLength() != -1 || string(resp.Header.Peek("ETag")) != `W/"v1"` {
					t.Errorf("Content-Length %d, ETag %q: want chunked and a weak ETag", resp.Header.ContentLength(), resp.Header.Peek("ETag"))
				}
				r, err := coding.reader(bytes.NewReader(sent.Bytes()))
				if err != nil {
					t.Fatalf("not %s: %v", coding.name, err)
				}
				plain, unzipErr := io.ReadAll(r)
				if tc.breakWith != nil {
					if !errors.Is(readErr, tc.breakWith) {
						t.Fatalf("read error %v, want the node's %v", readErr, tc.breakWith)
					}
					if unzipErr == nil {
						t.Fatal("a broken-off body decoded whole: it must not end as a whole stream does")
					}
					return
				}
				if readErr != nil || unzipErr != nil {
					t.Fatal(readErr, unzipErr)
				}
				if sent.Len() >= len(page)/4 {
					t.Errorf("%d compressed bytes for %d: not compressed", sent.Len(), len(page))
				}
				if string(plain) != page {
					t.Fatalf("decodes to %d bytes, want the node's %d", len(plain), len(page))
				}
			})
		}
	}
}

// With FlushAfter (gzip's buffers), the compressor emits what it holds once it has taken
// in that much of the body: what the client has then decodes to all the node sent, where
// without it the compressor keeps the node's first pieces back.
func TestCompressStreamFlushAfter(t *testing.T) {
	page := strings.Repeat("<p>a streamed page, compressed as it goes</p>\n", 4000)
	const piece = 1500
	for _, coding := range codings {
		for _, flushAfter := range []int{0, 1024, 4096} {
			t.Run(fmt.Sprintf("%s/%d", coding.name, flushAfter), func(t *testing.T) {
				z := NewCompressor(coding.name, &Common{MinLength: 20, HTTPVersion: 10}, coding.writers)
				if flushAfter > 0 {
					z.FlushAfter(flushAfter)
				}
				ctx := &fasthttp.RequestCtx{}
				ctx.Request.Header.SetMethod("GET")
				ctx.Request.SetRequestURI("/page")
				ctx.Request.Header.Set("Accept-Encoding", "gzip, br")
				ctx.Response.Header.Set("Content-Type", "text/html")
				src := &nodeStream{rest: page, piece: piece}
				ctx.Response.SetBodyStream(src, -1)
				c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
				if body, ok := z.Fits(c); ok && z.ClientTakes(c) {
					z.Compress(c, body)
				}
				plugins.ReleaseCtx(c)
				resp := &ctx.Response
				defer resp.CloseBodyStream()
				// Read until the client's bytes decode to something, and see how much of
				// the body the node had sent by then (gzip's header comes first, alone).
				var sent []byte
				var plain []byte
				taken := 0
				for len(plain) == 0 {
					buf := make([]byte, 64<<10)
					n, err := resp.BodyStream().Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					sent = append(sent, buf[:n]...)
					taken = len(page) - len(src.rest)
					if r, err := coding.reader(bytes.NewReader(sent)); err == nil {
						plain, _ = io.ReadAll(r) // the stream is unfinished: it ends early
					}
				}
				if flushAfter == 0 {
					if taken <= 4096 {
						t.Fatalf("the first bytes came after %d bytes of the body: the compressor kept nothing back, so this test shows nothing", taken)
					}
					return
				}
				if want := (flushAfter + piece - 1) / piece * piece; taken != want {
					t.Errorf("the first bytes came after %d bytes of the body, want %d (buffers %d)", taken, want, flushAfter)
				}
				if len(plain) != taken || string(plain) != page[:taken] {
					t.Errorf("the first bytes decode to %d bytes, want all %d the node sent", len(plain), taken)
				}
			})
		}
	}
}
