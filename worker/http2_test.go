package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/conf"
	"gw/internal/race"
)

// h2Fixture is an h2Server on a loopback port, each connection served as prior-knowledge
// h2c, with the handler the test gives.
type h2Fixture struct {
	srv  *h2Server
	addr string
	// draining stands for the worker's flag.
	draining atomic.Bool
}

type testLogger struct{ t testing.TB }

func (l testLogger) Printf(format string, args ...any) { l.t.Logf(format, args...) }

func newH2Fixture(t testing.TB, edit func(*conf.Config), handler fasthttp.RequestHandler) *h2Fixture {
	t.Helper()
	cfg := conf.Default()
	if edit != nil {
		edit(cfg)
	}
	f := &h2Fixture{}
	f.srv = newH2Server(cfg, handler, f.draining.Load, testLogger{t})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = f.srv.serve(c, nil, nil, nil, true)
				c.Close()
			}()
		}
	}()
	return f
}

// client is Go's HTTP/2 client speaking h2c to the fixture, every request on one
// connection.
func (f *h2Fixture) client() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return net.Dial(network, addr)
		},
	}, Timeout: 20 * time.Second}
}

func echoHandler(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/echo":
		var body []byte
		if stream := ctx.RequestBodyStream(); stream != nil {
			body, _ = io.ReadAll(stream)
		} else {
			body = ctx.Request.Body()
		}
		ctx.Response.Header.Set("X-Method", string(ctx.Method()))
		ctx.Response.Header.Set("X-Host", string(ctx.Host()))
		ctx.Response.Header.Set("X-Token", string(ctx.Request.Header.Peek("X-Token")))
		ctx.SetBody(body)
	case "/big":
		ctx.SetBody(bytes.Repeat([]byte("0123456789abcdef"), 1<<16)) // 1 MiB
	case "/stream":
		ctx.SetBodyStream(strings.NewReader(strings.Repeat("s", 100000)), -1)
	case "/head":
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("no route")
	}
}

func TestHTTP2ServesRequests(t *testing.T) {
	f := newH2Fixture(t, nil, echoHandler)
	c := f.client()
	url := "http://" + f.addr

	req, _ := http.NewRequest("POST", url+"/echo", strings.NewReader("hello body"))
	req.Header.Set("X-Token", "t1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "hello body" ||
		resp.Header.Get("X-Method") != "POST" || resp.Header.Get("X-Token") != "t1" || resp.Header.Get("X-Host") != f.addr {
		t.Fatalf("POST /echo: proto %d status %d body %q header %v", resp.ProtoMajor, resp.StatusCode, body, resp.Header)
	}
	if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil || resp.Header.Get("Server") != "gw" || resp.ContentLength != int64(len("hello body")) {
		t.Fatalf("POST /echo: date %q server %q content-length %d", resp.Header.Get("Date"), resp.Header.Get("Server"), resp.ContentLength)
	}

	// A body larger than every window both ways: the client's upload waits for gw's
	// WINDOW_UPDATEs, gw's answer for the client's.
	upload := bytes.Repeat([]byte("u"), 3<<20)
	resp, err = c.Post(url+"/echo", "application/octet-stream", bytes.NewReader(upload))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(body, upload) {
		t.Fatalf("3 MiB echo: got %d bytes back", len(body))
	}

	for path, want := range map[string]int{"/big": 1 << 20, "/stream": 100000} {
		resp, err := c.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != want {
			t.Fatalf("GET %s: %d bytes, want %d", path, len(body), want)
		}
	}
	resp, err = c.Get(url + "/head")
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("GET /head: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Many streams at once on one connection, each answered with its own body.
func TestHTTP2Multiplexes(t *testing.T) {
	f := newH2Fixture(t, nil, echoHandler)
	c := f.client()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("stream body %d", i)
			resp, err := c.Post("http://"+f.addr+"/echo", "text/plain", strings.NewReader(want))
			if err != nil {
				errs <- err
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != want {
				errs <- fmt.Errorf("got %q, want %q", body, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// rawH2 is a client connection that writes frames as the test says, for the abuse tests.
type rawH2 struct {
	t    *testing.T
	conn net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func dialRaw(t *testing.T, addr string) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := &rawH2{t: t, conn: conn, fr: http2.NewFramer(conn, conn)}
	r.enc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return r
}

// block encodes a GET of path.
func (r *rawH2) block(path string, extra ...string) []byte {
	r.hbuf.Reset()
	fields := append([]string{":method", "GET", ":scheme", "http", ":path", path, ":authority", "gw.test"}, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), r.hbuf.Bytes()...)
}

func (r *rawH2) get(id uint32, path string) {
	r.t.Helper()
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(path), EndStream: true, EndHeaders: true}); err != nil {
		r.t.Fatal(err)
	}
}

// goAway reads frames until GOAWAY (returning its code) or the connection ends. Writes the
// client makes after the server closed may fail; that is what the server is for.
func (r *rawH2) goAway() (http2.ErrCode, bool) {
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return 0, false
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return ga.ErrCode, true
		}
	}
}

// Each flood ends the connection with GOAWAY ENHANCE_YOUR_CALM and is counted by kind, and
// the server still serves a new connection.
func TestHTTP2AbuseCutOff(t *testing.T) {
	slow := make(chan struct{})
	handler := func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			<-slow
		}
		echoHandler(ctx)
	}
	tests := []struct {
		name  string
		kind  abuseKind
		flood func(r *rawH2)
	}{
		// CVE-2023-44487: open a stream, reset it, again and again; the handlers keep running.
		{"rapid reset", abuseRapidReset, func(r *rawH2) {
			for id := uint32(1); id < 2000; id += 2 {
				if r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/slow"), EndStream: true, EndHeaders: true}) != nil ||
					r.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					return
				}
			}
		}},
		// CVE-2024-27316 class: a header block that never ends.
		{"continuation flood", abuseContinuation, func(r *rawH2) {
			if r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/echo")[:2]}) != nil {
				return
			}
			for range 10000 {
				if r.fr.WriteContinuation(1, false, nil) != nil {
					return
				}
			}
		}},
		// An HPACK bomb: one 4 KiB field in the dynamic table, then referenced a byte at a
		// time until the decoded list is megabytes.
		{"hpack bomb", abuseHeaderSize, func(r *rawH2) {
			r.hbuf.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/echo"}} {
				_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			big := hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 3000)}
			for range 1000 {
				_ = r.enc.WriteField(big) // the first adds it to the table, the rest index it
			}
			// About 4 KiB encoded, 3 MB decoded.
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.hbuf.Bytes(), EndStream: true, EndHeaders: true})
		}},
		{"settings flood", abuseSettings, func(r *rawH2) {
			for range 100000 {
				if r.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}) != nil {
					return
				}
			}
		}},
		{"ping flood", abusePing, func(r *rawH2) {
			for range 100000 {
				if r.fr.WritePing(false, [8]byte{1}) != nil {
					return
				}
			}
		}},
		{"empty data frames", abuseEmptyFrames, func(r *rawH2) {
			if r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/echo"), EndHeaders: true}) != nil {
				return
			}
			for range 100000 {
				if r.fr.WriteData(1, false, nil) != nil {
					return
				}
			}
		}},
	}
	f := newH2Fixture(t, nil, handler)
	defer close(slow)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.srv.abuse[tt.kind].Load()
			r := dialRaw(t, f.addr)
			go tt.flood(r)
			code, ok := r.goAway()
			if !ok || code != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("got GOAWAY %v (seen %v), want ENHANCE_YOUR_CALM", code, ok)
			}
			if got := f.srv.abuse[tt.kind].Load(); got != before+1 {
				t.Fatalf("gw_http2_abuse_total{kind=%q} = %d, want %d", abuseKindNames[tt.kind], got, before+1)
			}
			resp, err := f.client().Get("http://" + f.addr + "/echo")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("a new connection after the flood: %v %v", resp, err)
			}
			resp.Body.Close()
		})
	}
}

// A client that never opens its window for a response gets GOAWAY once send_timeout
// passes, and the stream's handler is let go.
func TestHTTP2SlowReaderCutOff(t *testing.T) {
	f := newH2Fixture(t, func(c *conf.Config) { c.SendTimeout = 300 * time.Millisecond }, echoHandler)
	r := dialRaw(t, f.addr)
	// A zero initial window: not one byte of a body may be sent.
	if err := r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	r.get(1, "/big")
	code, ok := r.goAway()
	if !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("got GOAWAY %v (seen %v), want ENHANCE_YOUR_CALM", code, ok)
	}
	if got := f.srv.abuse[abuseSlowReader].Load(); got != 1 {
		t.Fatalf("slow_reader count %d, want 1", got)
	}
}

// Requests HTTP/2 forbids, or that an HTTP/1.1 upstream would read otherwise than gw, are
// refused with RST_STREAM PROTOCOL_ERROR before any handler sees them.
func TestHTTP2RefusesMalformedRequests(t *testing.T) {
	var served atomic.Int32
	f := newH2Fixture(t, nil, func(ctx *fasthttp.RequestCtx) { served.Add(1); echoHandler(ctx) })
	cases := map[string][]string{
		"connection header":     {"connection", "keep-alive"},
		"transfer-encoding":     {"transfer-encoding", "chunked"},
		"uppercase name":        {"X-Up", "1"},
		"CRLF in a value":       {"x-a", "1\r\nx-injected: 2"},
		"te other than trailer": {"te", "gzip"},
	}
	id := uint32(1)
	r := dialRaw(t, f.addr)
	for name, extra := range cases {
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block("/echo", extra...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		code := readReset(t, r, id)
		if code != http2.ErrCodeProtocol {
			t.Fatalf("%s: RST_STREAM %v, want PROTOCOL_ERROR", name, code)
		}
		id += 2
	}
	// A space in :path would split the request line the upstream reads.
	r.hbuf.Reset()
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/a b"}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: append([]byte(nil), r.hbuf.Bytes()...), EndStream: true, EndHeaders: true})
	if code := readReset(t, r, id); code != http2.ErrCodeProtocol {
		t.Fatalf("space in :path: RST_STREAM %v", code)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("%d malformed requests reached the handler", n)
	}
}

func readReset(t *testing.T, r *rawH2, id uint32) http2.ErrCode {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for RST_STREAM on %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return f.ErrCode
			}
		case *http2.HeadersFrame:
			if f.StreamID == id {
				t.Fatalf("stream %d was answered", id)
			}
		}
	}
}

// Streams past max_concurrent_streams are refused (REFUSED_STREAM, which clients retry),
// and the connection serves on.
func TestHTTP2RefusesStreamsPastTheLimit(t *testing.T) {
	release := make(chan struct{})
	f := newH2Fixture(t, func(c *conf.Config) { c.HTTP2.MaxConcurrentStreams = 2 }, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			<-release
		}
		echoHandler(ctx)
	})
	r := dialRaw(t, f.addr)
	r.get(1, "/slow")
	r.get(3, "/slow")
	r.get(5, "/slow")
	if code := readReset(t, r, 5); code != http2.ErrCodeRefusedStream {
		t.Fatalf("third stream: RST_STREAM %v, want REFUSED_STREAM", code)
	}
	close(release)
}

// The drain's GOAWAY lets the streams in flight finish and refuses none of them.
func TestHTTP2GoAwayLetsStreamsFinish(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	f := newH2Fixture(t, nil, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			started <- struct{}{}
			<-release
		}
		echoHandler(ctx)
	})
	r := dialRaw(t, f.addr)
	r.get(1, "/slow")
	r.get(3, "/slow")
	<-started
	<-started
	f.srv.goAwayAll()
	code, ok := r.goAway()
	if !ok || code != http2.ErrCodeNo {
		t.Fatalf("GOAWAY %v (seen %v), want NO_ERROR", code, ok)
	}
	close(release)
	ended := map[uint32]bool{}
	for len(ended) < 2 {
		fr, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answers after GOAWAY: %v (ended %v)", err, ended)
		}
		switch fr := fr.(type) {
		case *http2.DataFrame:
			if fr.StreamEnded() {
				ended[fr.StreamID] = true
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset after GOAWAY: %v", fr.StreamID, fr.ErrCode)
		}
	}
}

// h2Loop drives one connection with the same request again and again, as h2load does:
// after the first, the request's header block is all indexes into the client's dynamic
// table, so the client allocates nothing and what is counted is the server's.
type h2Loop struct {
	conn  net.Conn
	block []byte
	frame []byte
	// data, when set, is a DATA frame sent after frame, in the same write (a gRPC call's
	// message, newGRPCLoop); its stream id is patched as frame's is.
	data []byte
	out  []byte
	buf  []byte
	id   uint32
}

func newH2Loop(t testing.TB, addr string) *h2Loop { return newH2LoopFor(t, addr, "/bench") }

func newH2LoopFor(t testing.TB, addr, path string) *h2Loop {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l := &h2Loop{conn: conn, buf: make([]byte, 64<<10), id: 1}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	fields := []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: path}, {Name: ":authority", Value: "gw.test"}, {Name: "user-agent", Value: "h2load"}}
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
	first := append([]byte(nil), hbuf.Bytes()...)
	hbuf.Reset()
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
	l.block = append([]byte(nil), hbuf.Bytes()...)
	fr := http2.NewFramer(conn, conn)
	_, _ = io.WriteString(conn, http2.ClientPreface)
	_ = fr.WriteSettings()
	_ = fr.WriteWindowUpdate(0, 1<<30)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: l.id, BlockFragment: first, EndStream: true, EndHeaders: true})
	l.id += 2
	l.await(t)
	// The repeated request's frame, whose stream id round patches.
	l.frame = make([]byte, 9+len(l.block))
	l.frame[2] = byte(len(l.block))
	l.frame[3] = byte(http2.FrameHeaders)
	l.frame[4] = byte(http2.FlagHeadersEndStream | http2.FlagHeadersEndHeaders)
	copy(l.frame[9:], l.block)
	return l
}

// await reads frames until a DATA or HEADERS frame ends stream l.id-2.
func (l *h2Loop) await(t testing.TB) {
	want := l.id - 2
	for {
		if _, err := io.ReadFull(l.conn, l.buf[:9]); err != nil {
			t.Fatal(err)
		}
		n := int(l.buf[0])<<16 | int(l.buf[1])<<8 | int(l.buf[2])
		typ, flags := http2.FrameType(l.buf[3]), http2.Flags(l.buf[4])
		id := uint32(l.buf[5]&0x7f)<<24 | uint32(l.buf[6])<<16 | uint32(l.buf[7])<<8 | uint32(l.buf[8])
		if _, err := io.ReadFull(l.conn, l.buf[:n]); err != nil {
			t.Fatal(err)
		}
		if typ == http2.FrameSettings && flags&http2.FlagSettingsAck == 0 {
			_, _ = l.conn.Write([]byte{0, 0, 0, byte(http2.FrameSettings), byte(http2.FlagSettingsAck), 0, 0, 0, 0})
		}
		if id == want && (typ == http2.FrameData || typ == http2.FrameHeaders) && flags&http2.FlagDataEndStream != 0 {
			return
		}
	}
}

func (l *h2Loop) round(t testing.TB) {
	l.frame[5], l.frame[6], l.frame[7], l.frame[8] = byte(l.id>>24), byte(l.id>>16), byte(l.id>>8), byte(l.id)
	out := l.frame
	if l.data != nil {
		l.data[5], l.data[6], l.data[7], l.data[8] = byte(l.id>>24), byte(l.id>>16), byte(l.id>>8), byte(l.id)
		l.out = append(append(l.out[:0], l.frame...), l.data...)
		out = l.out
	}
	l.id += 2
	if _, err := l.conn.Write(out); err != nil {
		t.Fatal(err)
	}
	l.await(t)
}

var benchBody = []byte("hello from the handler")

func benchHandler(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(benchBody)
}

// The request path of a stream, from HEADERS in to DATA out, allocates nothing once the
// connection's pools are warm.
func TestHTTP2RequestAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	f := newH2Fixture(t, nil, benchHandler)
	l := newH2Loop(t, f.addr)
	for range 100 {
		l.round(t)
	}
	if n := testing.AllocsPerRun(2000, func() { l.round(t) }); n > h2AllocsPerRequest {
		t.Fatalf("%.2f allocations per HTTP/2 request, want at most %v", n, h2AllocsPerRequest)
	}
}

// A stream through the whole worker handler, router, plugins, proxy and access log, costs
// what the stream machinery costs (h2AllocsPerRequest) and the handler nothing more: the
// stream's own request state serves the handler as an HTTP/1.1 connection's does.
func TestHTTP2HandleAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	upstream := startStubUpstream(t)
	for _, sc := range handlerScenarios {
		t.Run(sc.name, func(t *testing.T) {
			w := benchWorker(t, upstream, sc.plugins)
			f := newH2Fixture(t, nil, w.handle)
			l := newH2LoopFor(t, f.addr, "/hello")
			for range 100 {
				l.round(t)
			}
			if n := testing.AllocsPerRun(1000, func() { l.round(t) }); n > h2AllocsPerRequest {
				t.Errorf("%.2f allocations per proxied HTTP/2 request, want at most %v", n, h2AllocsPerRequest)
			}
		})
	}
}

func BenchmarkHTTP2Request(b *testing.B) {
	f := newH2Fixture(b, nil, benchHandler)
	l := newH2Loop(b, f.addr)
	b.ReportAllocs()
	for b.Loop() {
		l.round(b)
	}
}

// Expect: 100-continue is answered with 100 before the body is sent, then the answer.
func TestHTTP2ExpectContinue(t *testing.T) {
	f := newH2Fixture(t, nil, echoHandler)
	r := dialRaw(t, f.addr)
	block := r.block("/echo", "expect", "100-continue", "content-length", "4")
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
		if hf.Name == ":status" {
			statuses = append(statuses, hf.Value)
		}
	})
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	sentBody := false
	for {
		fr, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading: %v (statuses %v)", err, statuses)
		}
		switch fr := fr.(type) {
		case *http2.HeadersFrame:
			if _, err := dec.Write(fr.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			if len(statuses) == 1 && !sentBody {
				if statuses[0] != "100" {
					t.Fatalf("first answer %s, want 100 before the body", statuses[0])
				}
				sentBody = true
				_ = r.fr.WriteData(1, true, []byte("body"))
			}
		case *http2.DataFrame:
			if fr.StreamEnded() {
				if !sentBody || len(statuses) != 2 || statuses[1] != "200" || string(fr.Data()) != "body" {
					t.Fatalf("statuses %v, body %q", statuses, fr.Data())
				}
				return
			}
		}
	}
}

// HEADERS frames are read by gw itself (not the Framer): padding and priority are taken
// off as RFC 9113 6.2 lays them out, and padding longer than the frame is a
// PROTOCOL_ERROR for the connection.
func TestHTTP2HeadersPaddingAndPriority(t *testing.T) {
	f := newH2Fixture(t, nil, echoHandler)
	r := dialRaw(t, f.addr)
	err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("/echo"), EndStream: true, EndHeaders: true,
		PadLength: 7, Priority: http2.PriorityParam{StreamDep: 0, Weight: 200}})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for answered := false; !answered; {
		fr, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("padded, prioritised HEADERS: %v", err)
		}
		switch fr := fr.(type) {
		case *http2.HeadersFrame:
			answered = fr.StreamID == 1
		case *http2.RSTStreamFrame, *http2.GoAwayFrame:
			t.Fatalf("padded, prioritised HEADERS refused: %v", fr)
		}
	}
	// Padding length 200 in a frame of 10 bytes.
	raw := []byte{0, 0, 10, byte(http2.FrameHeaders), byte(http2.FlagHeadersPadded | http2.FlagHeadersEndHeaders), 0, 0, 0, 3, 200, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if _, err := r.conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	if code, ok := r.goAway(); !ok || code != http2.ErrCodeProtocol {
		t.Fatalf("padding past the frame: GOAWAY %v (seen %v), want PROTOCOL_ERROR", code, ok)
	}
}
