package worker

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/conf"
	"gw/internal/bytesconv"
	"gw/internal/h2write"
	"gw/internal/monotime"
	"gw/plugins"
)

// HTTP/2 to clients. fasthttp's server speaks HTTP/1.x only, so an HTTP/2 connection is
// served here, on golang.org/x/net/http2's Framer and HPACK, and each stream is mapped onto
// a pooled *fasthttp.RequestCtx that the worker's own handler runs: routing, plugins, the
// upstream pools, the access log and metrics are those of HTTP/1.1, unchanged. Upstreams
// are spoken to in HTTP/1.1, but for gRPC ones (grpc.go), which take the stream over.
//
// A connection comes here two ways: by ALPN (h2) on a TLS listener, through fasthttp's
// NextProto, and in the clear when its first bytes are HTTP/2's connection preface
// (prior-knowledge h2c; edgeConn.Read looks for it). Either way the goroutine fasthttp gave
// the connection reads its frames (h2Conn.serve); each stream's handler runs on one of the
// connection's stream goroutines, which are kept for its next streams, and writes its
// response itself, under the connection's lock, within the client's flow-control windows.
//
// Limits are nginx's (conf.HTTP2); what a client can make the worker do without asking for
// responses (resets, SETTINGS, PINGs, empty frames, endless header blocks) is budgeted, and
// a client past a budget gets GOAWAY ENHANCE_YOUR_CALM, counted by kind (h2Server.abuse).

// h2Server is one worker's HTTP/2 settings and open connections. Safe for concurrent use.
type h2Server struct {
	handler  fasthttp.RequestHandler
	draining func() bool
	log      func(format string, args ...any)
	logger   fasthttp.Logger
	// observers hear the connections' states (prometheus's connection gauges and request
	// count): a stream's start is a request going active, the last stream's end idle.
	observers     []plugins.ConnObserver
	maxStreams    uint32
	maxFieldSize  uint32
	maxHeaderSize uint32
	recvTimeout   time.Duration
	idleTimeout   time.Duration
	sendTimeout   time.Duration

	mu    sync.Mutex
	conns map[*h2Conn]struct{}
	// goingAway is set once the worker drains: a connection opened since gets its GOAWAY
	// after its first streams.
	goingAway bool

	abuse [abuseKinds]atomic.Uint64
}

// abuseKind names what a connection was cut off for.
type abuseKind int

const (
	abuseRapidReset abuseKind = iota
	abuseContinuation
	abuseHeaderSize
	abuseSettings
	abusePing
	abuseEmptyFrames
	abuseSlowReader
	abuseKinds
)

// abuseKindNames are the kinds' label values, gw_http2_abuse_total{kind="..."}.
var abuseKindNames = [abuseKinds]string{"rapid_reset", "continuation_flood", "header_size", "settings_flood", "ping_flood", "empty_frames", "slow_reader"}

// floodAllowance is how many of each budgeted frame (a reset, SETTINGS, PING, an empty DATA
// frame) a connection may send beyond one per response it has been given: a browser sends
// a handful in a connection's life, a flood thousands a second.
const floodAllowance = 100

// Window sizes. A stream may buffer at most one initial window (the default 65535) of body
// the handler has not read; the connection's window is larger so that several uploads go
// on at once, and is given back as DATA arrives, since the streams' windows bound what is
// held.
const (
	streamWindow    = 65535
	connWindow      = 1 << 20
	maxFrameSize    = 16384 // the default SETTINGS_MAX_FRAME_SIZE, which gw keeps
	windowUpdateMin = streamWindow / 2
)

var (
	errStreamGone  = errors.New("worker: http2 stream reset or connection gone")
	errBodyTooLong = errors.New("worker: http2 request body longer than its content-length")
	errBodyShort   = errors.New("worker: http2 request body shorter than its content-length")

	h2ServerName  = []byte("gw")
	h2ClientPre   = []byte(http2.ClientPreface)
	h2ProtoHTTP20 = "HTTP/2.0"
	h2Protocol    = []byte(h2ProtoHTTP20) // the access log's
)

func newH2Server(c *conf.Config, handler fasthttp.RequestHandler, draining func() bool, logger fasthttp.Logger) *h2Server {
	return &h2Server{
		handler:       handler,
		draining:      draining,
		log:           logger.Printf,
		logger:        logger,
		maxStreams:    uint32(c.HTTP2.MaxConcurrentStreams),
		maxFieldSize:  uint32(c.HTTP2.MaxFieldSize),
		maxHeaderSize: uint32(c.HTTP2.MaxHeaderSize),
		recvTimeout:   c.HTTP2.RecvTimeout,
		idleTimeout:   c.HTTP2.IdleTimeout,
		sendTimeout:   c.SendTimeout,
		conns:         map[*h2Conn]struct{}{},
	}
}

// abuseCounts returns how many connections were cut off for each kind of abuse that
// happened; nil for none.
func (srv *h2Server) abuseCounts() map[string]uint64 {
	var m map[string]uint64
	for k := range abuseKinds {
		if n := srv.abuse[k].Load(); n > 0 {
			if m == nil {
				m = map[string]uint64{}
			}
			m[abuseKindNames[k]] = n
		}
	}
	return m
}

// serveTLS is fasthttp's NextProto handler for h2: c is the *tls.Conn, handshaken.
func (srv *h2Server) serveTLS(c net.Conn) error {
	tc, _ := c.(*tls.Conn)
	return srv.serve(c, edgeConnOf(c), tc, nil, true)
}

// sniffH2C reads a new cleartext connection's first bytes into p for fasthttp, unless they
// are HTTP/2's connection preface: then it serves the connection as HTTP/2 and returns
// io.EOF, which fasthttp takes for a client that left before its first request.
func (c *edgeConn) sniffH2C(p []byte) (int, error) {
	srv := c.h2c
	c.h2c = nil
	if len(p) < len(h2ClientPre) {
		return c.Read(p) // not fasthttp's buffer: never so small
	}
	n := 0
	for {
		m, err := c.Read(p[n:])
		n += m
		seen := min(n, len(h2ClientPre))
		if !bytes.Equal(p[:seen], h2ClientPre[:seen]) || err != nil {
			return n, err // HTTP/1.x, or gone before saying
		}
		if n >= len(h2ClientPre) {
			break
		}
	}
	_ = srv.serve(c, c, nil, p[len(h2ClientPre):n], false)
	return 0, io.EOF
}

// h2Conn is one HTTP/2 connection. The goroutine in serve reads its frames and owns the
// fields marked "read loop"; mu guards the writer and everything the stream goroutines
// share with it.
type h2Conn struct {
	srv *h2Server
	nc  net.Conn
	ec  *edgeConn // nil when the connection is no edgeConn (tests)
	tls *tls.Conn // nil in the clear
	fr  *http2.Framer
	br  *bufio.Reader
	dec *hpack.Decoder
	// headersBuf holds a HEADERS frame's payload while it is decoded (read loop).
	headersBuf [maxFrameSize]byte

	// read loop
	streams map[uint32]*h2Stream // open streams, by id (also read under mu)
	// maxSeenID is the highest stream id the client opened; the drain's GOAWAY reads it
	// from another goroutine.
	maxSeenID atomic.Uint32
	decoding  *h2Stream // the stream whose header block is being read; nil to drop it
	inBlock   bool
	blockID   uint32
	blockSize int
	blockCont int
	listSize  uint32
	tooLarge  bool
	malformed bool
	// expectContinue: the block asked for 100-continue.
	expectContinue bool
	// pseudo records which pseudo-header fields the block had, regular whether a regular
	// field came yet (a pseudo one after it is malformed).
	pseudo     uint8
	regular    bool
	connCredit int32 // DATA bytes received and not yet given back to the connection window
	used       [abuseKinds]int
	// bodyPending counts open streams whose request body is still coming; stream
	// goroutines lower it as they close their streams.
	bodyPending  atomic.Int32
	peerGoneAway bool

	// completed counts responses given, which earn the flood budgets back.
	completed atomic.Int64
	// dataSincePing is set when gw sent DATA with a payload since the client's last PING.
	dataSincePing atomic.Bool

	mu            sync.Mutex
	cond          sync.Cond
	bw            *bufio.Writer
	hdr           h2write.HeaderBlock // the response header block being written
	status        [3]byte
	date          []byte // Date's value, formatted once a second (dateNow)
	dateSecond    int64
	dateBuf       [len(http.TimeFormat)]byte
	number        [20]byte // content-length's digits
	sendWindow    int32
	initialWindow int32
	peerMaxFrame  uint32
	open          int // streams whose handler has not finished, refused or not
	goAwaySent    bool
	dead          bool
	// work hands a stream to an idle stream goroutine; done closes when the connection
	// ends, which lets them go.
	work chan *h2Stream
	done chan struct{}
	// flusher writes out what is buffered once the goroutines ready to run have had their
	// turn: with -m 10 the answers of several streams, whose nodes answered together, go
	// out in one write instead of one each.
	flusher h2write.Flusher
}

// flushLocked is the flusher's flush: what is buffered, unless the connection died.
func (c *h2Conn) flushLocked() {
	if !c.dead && c.bw.Buffered() > 0 {
		if err := c.bw.Flush(); err != nil {
			c.dead = true
			c.cond.Broadcast()
		}
	}
}

// h2Stream is one request on an h2Conn, pooled with its RequestCtx.
type h2Stream struct {
	c  *h2Conn
	id uint32
	// ctx is the request as the handler sees it; its connection is ec (or tlsc over TLS),
	// the stream's own request state (plugins' Ctx, proxy scratch, real IP), which on HTTP/1.1
	// an edgeConn keeps for the one request it has at a time.
	ctx  fasthttp.RequestCtx
	ec   edgeConn
	tlsc tlsStreamConn

	// under c.mu
	sendWindow   int32
	recvWindow   int32 // what the client may still send before gw's next WINDOW_UPDATE
	reset        bool  // the client reset it, or the connection is gone
	stalled      bool  // send_timeout passed with the client's window shut
	body         h2Body
	remoteClosed bool // END_STREAM came (read loop, and respond under mu)

	// gRPC (grpc.go): grpcAnswered is set once proxyGRPC took the response over, so
	// respond writes nothing; cancel (under c.mu) ends the node's call, and is called
	// when the client resets the stream.
	grpcAnswered bool
	cancel       func()
	// grpcBody is the request body as the call's pump reads it, and bodyReader the body
	// a plugin read whole, as the call reads it.
	grpcBody   grpcBody
	bodyReader bytes.Reader

	// read loop
	declared int64 // content-length, -1 when none
	received int64
	answered bool // the response is out (read under mu)
}

// tlsStreamConn is a stream's connection over TLS: RequestCtx.IsTLS and
// TLSConnectionState look for these two methods.
type tlsStreamConn struct {
	*edgeConn
	tls *tls.Conn
}

func (c *tlsStreamConn) Handshake() error                     { return nil }
func (c *tlsStreamConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

var h2StreamPool = sync.Pool{New: func() any { return new(h2Stream) }}

// h2Body is a stream's request body: what DATA frames brought and the handler has not
// read, at most one stream window. Read gives the window back as the handler reads.
type h2Body struct {
	s        *h2Stream
	buf      *[streamWindow]byte
	start    int
	end      int
	eof      bool
	err      error
	consumed int32 // read and not yet given back to the stream window
}

var h2BodyBufPool = sync.Pool{New: func() any { return new([streamWindow]byte) }}

func (b *h2Body) Read(p []byte) (int, error) {
	c := b.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for b.start == b.end && !b.eof && b.err == nil {
		c.cond.Wait()
	}
	if b.start == b.end {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := copy(p, b.buf[b.start:b.end])
	b.start += n
	if b.start == b.end {
		b.start, b.end = 0, 0
	}
	b.consumed += int32(n)
	if b.consumed >= windowUpdateMin && !b.s.remoteClosed && !b.s.reset && !c.dead {
		if c.fr.WriteWindowUpdate(b.s.id, uint32(b.consumed)) == nil {
			_ = c.bw.Flush()
		}
		b.s.recvWindow += b.consumed
		b.consumed = 0
	}
	return n, nil
}

// serve runs the connection until it ends: the client goes, a limit cuts it, or the drain's
// GOAWAY has let its streams finish. buffered is what was read past the preface (h2c);
// prefaceRead says whether the preface is still to be read (TLS).
func (srv *h2Server) serve(nc net.Conn, ec *edgeConn, tc *tls.Conn, buffered []byte, prefaceUnread bool) error {
	c := &h2Conn{
		srv: srv, nc: nc, ec: ec, tls: tc,
		streams:       map[uint32]*h2Stream{},
		sendWindow:    65535,
		initialWindow: 65535,
		peerMaxFrame:  maxFrameSize,
		work:          make(chan *h2Stream),
		done:          make(chan struct{}),
	}
	c.cond.L = &c.mu
	c.flusher.Start(&c.mu, c.done, c.flushLocked)
	var r io.Reader = nc
	if len(buffered) > 0 {
		r = io.MultiReader(bytes.NewReader(append([]byte(nil), buffered...)), nc)
	}
	c.br = bufio.NewReaderSize(r, maxFrameSize+9)
	c.bw = bufio.NewWriterSize(nc, 32<<10)
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(maxFrameSize)
	c.hdr.Init()
	c.dec = hpack.NewDecoder(4096, c.onField)
	c.dec.SetMaxStringLength(int(srv.maxFieldSize))

	srv.mu.Lock()
	srv.conns[c] = struct{}{}
	goingAway := srv.goingAway
	srv.mu.Unlock()
	defer func() {
		srv.mu.Lock()
		delete(srv.conns, c)
		srv.mu.Unlock()
	}()

	c.mu.Lock()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: srv.maxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: srv.maxHeaderSize},
	)
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, connWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.mu.Unlock()
	if err == nil && prefaceUnread {
		var pre [len(http2.ClientPreface)]byte
		if _, err = io.ReadFull(c.br, pre[:]); err == nil && !bytes.Equal(pre[:], h2ClientPre) {
			err = errors.New("worker: http2: no client preface")
		}
	}
	if err == nil {
		if goingAway {
			c.goAway(http2.ErrCodeNo)
		}
		err = c.readLoop()
	}
	c.shut()
	if err == errCut {
		c.linger()
	}
	return err
}

// lingerTime bounds how long a connection cut off with GOAWAY is read (and what is read
// dropped) before it is closed: closing a socket with unread input resets it, and the
// reset would take the GOAWAY with it, so a flooding client would never learn why.
// nginx's lingering_close does the same.
const lingerTime = 2 * time.Second

func (c *h2Conn) linger() {
	if tcp, ok := c.nc.(interface{ CloseWrite() error }); ok && c.tls == nil {
		_ = tcp.CloseWrite()
	} else if c.ec != nil {
		_ = c.ec.socket.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, c.br, 16<<20)
}

// readLoop reads and handles frames until the connection ends.
func (c *h2Conn) readLoop() error {
	for {
		c.armRead()
		fh, err := c.fr.ReadFrameHeader()
		var f http2.Frame
		if err == nil {
			if fh.Type == http2.FrameHeaders {
				// Read here, not by the Framer, which would make a HeadersFrame for
				// each: the one allocation a request had left.
				if err = c.readHeaders(fh); err != nil {
					return err
				}
				continue
			}
			f, err = c.fr.ReadFrameForHeader(fh)
		}
		if err != nil {
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &ce):
				c.fail(http2.ErrCode(ce), -1)
			case errors.Is(err, http2.ErrFrameTooLarge):
				c.fail(http2.ErrCodeFrameSize, -1)
			default:
				var se http2.StreamError
				if errors.As(err, &se) {
					c.resetStream(se.StreamID, se.Code)
					continue
				}
				if c.quiet() && isTimeout(err) {
					c.goAway(http2.ErrCodeNo) // idle_timeout: say so before closing
				}
			}
			return err
		}
		if err := c.handle(f); err != nil {
			return err
		}
	}
}

// armRead picks the read timeout for the next wait: recv_timeout while a request body is
// coming, idle_timeout otherwise (no stream, or only streams waiting for their answers).
func (c *h2Conn) armRead() {
	if c.ec == nil {
		return
	}
	timeout := c.srv.idleTimeout
	if c.bodyPending.Load() > 0 || c.inBlock {
		timeout = c.srv.recvTimeout
	}
	if c.ec.readPolicy != readBetween || c.ec.readTimeout != timeout {
		c.ec.readFor(readBetween, timeout)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// quiet reports whether no stream is open.
func (c *h2Conn) quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open == 0
}

// errCut ends the read loop after a GOAWAY for an error.
var errCut = errors.New("worker: http2 connection cut off")

func (c *h2Conn) handle(f http2.Frame) error {
	if c.inBlock {
		if cf, ok := f.(*http2.ContinuationFrame); ok {
			return c.continuation(cf)
		}
		// The Framer refuses anything else in a header block as a PROTOCOL_ERROR.
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.data(f)
	case *http2.SettingsFrame:
		return c.settings(f)
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.rstStream(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		// A PING after DATA gw sent is a client measuring the connection (gRPC's BDP
		// estimation pings as it receives DATA), not a flood: only the others are
		// charged. DATA the client sends earns nothing, or interleaving it would make
		// a flood free.
		if !c.dataSincePing.Swap(false) && c.over(abusePing) {
			return errCut
		}
		c.mu.Lock()
		err := c.fr.WritePing(true, f.Data)
		if err == nil {
			err = c.bw.Flush()
		}
		c.mu.Unlock()
		return err
	case *http2.GoAwayFrame:
		c.peerGoneAway = true
		return nil
	case *http2.PushPromiseFrame:
		c.fail(http2.ErrCodeProtocol, -1) // a client must not push (RFC 9113 8.4)
		return errCut
	case *http2.ContinuationFrame:
		c.fail(http2.ErrCodeProtocol, -1) // outside a header block
		return errCut
	}
	return nil // PRIORITY and unknown frames are ignored
}

// over charges one frame to kind's budget, and cuts the connection off once it is spent.
func (c *h2Conn) over(kind abuseKind) bool {
	c.used[kind]++
	if int64(c.used[kind]) <= floodAllowance+c.completed.Load() {
		return false
	}
	c.fail(http2.ErrCodeEnhanceYourCalm, kind)
	return true
}

// fail sends GOAWAY with code and ends the connection; kind >= 0 counts it as abuse.
func (c *h2Conn) fail(code http2.ErrCode, kind abuseKind) {
	if kind >= 0 {
		c.srv.abuse[kind].Add(1)
		c.srv.log("http2: %s from %v: GOAWAY %v", abuseKindNames[kind], c.nc.RemoteAddr(), code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeGoAwayLocked(code)
	c.dead = true
	c.cond.Broadcast()
}

func (c *h2Conn) writeGoAwayLocked(code http2.ErrCode) {
	if c.dead {
		return
	}
	c.goAwaySent = true
	if c.fr.WriteGoAway(c.maxSeenID.Load(), code, nil) == nil {
		_ = c.bw.Flush()
	}
}

// goAway tells the client that no stream after those it has opened will be served; those
// finish (RFC 9113 6.8). The drain calls it from another goroutine.
func (c *h2Conn) goAway(code http2.ErrCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.goAwaySent {
		c.writeGoAwayLocked(code)
	}
	c.markIdleLocked()
}

// markIdleLocked tells the connection tracker whether the connection is busy: the drain
// closes a connection once it has been idle long enough, which after GOAWAY is once its
// streams are done.
func (c *h2Conn) markIdleLocked() {
	if c.ec == nil {
		return
	}
	if c.open > 0 {
		c.ec.mark.idleSince.Store(0)
	} else {
		c.ec.mark.idleSince.Store(monotime.Now())
	}
}

// endStreamLocked closes s once its END_STREAM is written: from then on it no longer
// counts against max_concurrent_streams, as the client counts it, and a request body
// still coming is not wanted (RFC 9113 8.1: a 401 or 413 answered before the body ended).
// The RST_STREAM goes out with the answer.
func (c *h2Conn) endStreamLocked(s *h2Stream) {
	s.answered = true
	if _, ok := c.streams[s.id]; !ok {
		return
	}
	if !s.remoteClosed && !s.reset && !c.dead {
		_ = c.fr.WriteRSTStream(s.id, http2.ErrCodeNo)
	}
	c.closeStreamLocked(s)
}

// observeLocked tells the connection observers of a change to state to, as fasthttp's
// ConnState does for HTTP/1.1: Active once per stream (the observers count requests so),
// Idle when the last stream ends. Once the connection is dead the state is left for
// fasthttp's StateClosed, which the tracker reports from it after serve returns.
func (c *h2Conn) observeLocked(to plugins.ConnState) {
	if c.ec == nil || c.dead || len(c.srv.observers) == 0 {
		return
	}
	m := &c.ec.mark
	if m.state == plugins.ConnClosed {
		return
	}
	for _, o := range c.srv.observers {
		o.ConnChanged(m.state, to)
	}
	m.state = to
}

// resetStream sends RST_STREAM for id and forgets the stream (read loop).
func (c *h2Conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	if s := c.streams[id]; s != nil {
		c.closeStreamLocked(s)
	}
	if !c.dead && c.fr.WriteRSTStream(id, code) == nil {
		_ = c.bw.Flush()
	}
	c.mu.Unlock()
}

// closeStreamLocked ends what the read loop knows of s: its body gets an error if it was
// still coming, and frames for it are ignored from now on. Its handler may still run.
func (c *h2Conn) closeStreamLocked(s *h2Stream) {
	if _, ok := c.streams[s.id]; !ok {
		return
	}
	delete(c.streams, s.id)
	if !s.remoteClosed {
		s.remoteClosed = true
		c.bodyPending.Add(-1)
	}
	if !s.answered {
		s.reset = true
		if s.cancel != nil {
			s.cancel() // a gRPC call's, to the node
		}
	}
	if !s.body.eof && s.body.err == nil {
		s.body.err = errStreamGone
	}
	c.cond.Broadcast()
}

// readHeaders reads a HEADERS frame's payload (the Framer has read its header and checked
// its place among CONTINUATIONs) and handles it: RFC 9113 6.2's padding and priority,
// checked as the Framer checks them.
func (c *h2Conn) readHeaders(fh http2.FrameHeader) error {
	p := c.headersBuf[:fh.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return err
	}
	if fh.StreamID == 0 {
		c.fail(http2.ErrCodeProtocol, -1)
		return errCut
	}
	pad := 0
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			c.fail(http2.ErrCodeProtocol, -1)
			return errCut
		}
		pad, p = int(p[0]), p[1:]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			c.fail(http2.ErrCodeProtocol, -1)
			return errCut
		}
		p = p[5:] // stream dependency and weight: priorities are not used
	}
	if pad > len(p) {
		c.fail(http2.ErrCodeProtocol, -1) // padding longer than the payload
		return errCut
	}
	p = p[:len(p)-pad]
	return c.headers(fh.StreamID, p, fh.Flags.Has(http2.FlagHeadersEndStream), fh.Flags.Has(http2.FlagHeadersEndHeaders))
}

func (c *h2Conn) headers(id uint32, fragment []byte, endStream, endHeaders bool) error {
	c.mu.Lock()
	existing := c.streams[id]
	c.mu.Unlock()
	if existing != nil || id <= c.maxSeenID.Load() {
		if existing == nil || existing.remoteClosed || !endStream {
			// HEADERS on a closed stream, or a second header block that is not trailers.
			c.fail(http2.ErrCodeProtocol, -1)
			return errCut
		}
		// Trailers: decoded to keep HPACK in step, then dropped (the upstream request is
		// HTTP/1.1 with a body already framed).
		c.beginBlock(id, nil)
		c.endStreamOnBlock(existing)
		return c.fragment(fragment, endHeaders)
	}
	if id%2 == 0 {
		c.fail(http2.ErrCodeProtocol, -1)
		return errCut
	}
	c.maxSeenID.Store(id)
	c.mu.Lock()
	// The client counts a stream against max_concurrent_streams until it has the stream's
	// END_STREAM, and gw the same (c.streams); a handler may run on after its stream was
	// reset, so those are bounded too, at twice the limit, by the reset budget beyond.
	refuse := c.goAwaySent || c.dead || uint32(len(c.streams)) >= c.srv.maxStreams || uint32(c.open) >= 2*c.srv.maxStreams
	c.mu.Unlock()
	if refuse || c.peerGoneAway {
		// Decoded all the same, to keep HPACK in step; refused streams count against the
		// reset budget, as a flood of them costs the decoding.
		c.beginBlock(id, nil)
		if err := c.fragment(fragment, endHeaders); err != nil {
			return err
		}
		if c.over(abuseRapidReset) {
			return errCut
		}
		c.resetStream(id, http2.ErrCodeRefusedStream)
		return nil
	}
	s := c.newStream(id)
	s.remoteClosed = endStream
	c.beginBlock(id, s)
	return c.fragment(fragment, endHeaders)
}

func (c *h2Conn) newStream(id uint32) *h2Stream {
	s := h2StreamPool.Get().(*h2Stream)
	s.c, s.id, s.declared, s.received, s.recvWindow = c, id, -1, 0, streamWindow
	s.reset, s.stalled, s.answered, s.remoteClosed = false, false, false, false
	s.body = h2Body{s: s}
	s.grpcAnswered, s.cancel = false, nil
	ec := &s.ec
	ec.stream = s
	ec.peerLen, ec.trusted, ec.inBody, ec.body, ec.h2Stream = 0, false, false, limitedBody{}, true
	if c.ec != nil {
		ec.socket, ec.l, ec.trusted = c.ec.socket, c.ec.l, c.ec.trusted
	} else {
		tcp, _ := c.nc.(*net.TCPConn) // tests: the addresses, no edge
		ec.socket = tcp
	}
	var conn net.Conn = ec
	if c.tls != nil {
		s.tlsc = tlsStreamConn{edgeConn: ec, tls: c.tls}
		conn = &s.tlsc
	}
	s.ctx.Init2(conn, c.srv.logger, false)
	s.ctx.Response.Header.SetNoDefaultContentType(true)
	s.ctx.Request.Header.SetProtocol(h2ProtoHTTP20)
	return s
}

// endStreamOnBlock notes the client's END_STREAM on s, which trailers carry.
func (c *h2Conn) endStreamOnBlock(s *h2Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endBodyLocked(s)
}

// endBodyLocked ends s's request body: whole, or short of its content-length.
func (c *h2Conn) endBodyLocked(s *h2Stream) {
	if s.remoteClosed {
		return
	}
	s.remoteClosed = true
	c.bodyPending.Add(-1)
	if s.declared >= 0 && s.received != s.declared {
		s.body.err = errBodyShort
	} else {
		s.body.eof = true
	}
	c.cond.Broadcast()
}

func (c *h2Conn) beginBlock(id uint32, s *h2Stream) {
	c.inBlock, c.blockID, c.decoding = true, id, s
	c.blockSize, c.blockCont, c.listSize = 0, 0, 0
	c.tooLarge, c.malformed, c.pseudo, c.regular, c.expectContinue = false, false, 0, false, false
	c.dec.SetEmitEnabled(true)
}

func (c *h2Conn) continuation(f *http2.ContinuationFrame) error {
	c.blockCont++
	// A client needs a CONTINUATION only for a block past its frame size, so even at the
	// smallest frames a block within max_header_size takes this many.
	if c.blockCont > int(c.srv.maxHeaderSize)/1024+2 {
		c.fail(http2.ErrCodeEnhanceYourCalm, abuseContinuation)
		return errCut
	}
	return c.fragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

// fragment decodes one piece of a header block; at the block's end it starts the stream.
func (c *h2Conn) fragment(p []byte, end bool) error {
	c.blockSize += len(p)
	if c.blockSize > int(c.srv.maxHeaderSize) {
		// Encoded past the limit: decoded it could only be larger (or a CONTINUATION
		// flood of padding-sized pieces).
		c.fail(http2.ErrCodeEnhanceYourCalm, abuseHeaderSize)
		return errCut
	}
	if _, err := c.dec.Write(p); err != nil {
		if errors.Is(err, hpack.ErrStringLength) {
			c.fail(http2.ErrCodeEnhanceYourCalm, abuseHeaderSize)
		} else {
			c.fail(http2.ErrCodeCompression, -1)
		}
		return errCut
	}
	if c.tooLarge {
		c.fail(http2.ErrCodeEnhanceYourCalm, abuseHeaderSize)
		return errCut
	}
	if !end {
		return nil
	}
	c.inBlock = false
	if err := c.dec.Close(); err != nil {
		c.fail(http2.ErrCodeCompression, -1)
		return errCut
	}
	s := c.decoding
	c.decoding = nil
	if s == nil {
		return nil
	}
	const required = pseudoMethod | pseudoScheme | pseudoPath
	if c.malformed || c.pseudo&required != required {
		c.releaseUnstarted(s)
		c.resetStream(s.id, http2.ErrCodeProtocol)
		return nil
	}
	c.start(s)
	return nil
}

// releaseUnstarted puts back a stream whose handler never ran.
func (c *h2Conn) releaseUnstarted(s *h2Stream) {
	s.ctx.Request.Reset()
	s.ctx.ResetUserValues()
	s.c, s.body, s.tlsc = nil, h2Body{}, tlsStreamConn{}
	h2StreamPool.Put(s)
}

const (
	pseudoMethod uint8 = 1 << iota
	pseudoScheme
	pseudoPath
	pseudoAuthority
)

// onField is the HPACK decoder's emit: one header field of the block being read.
func (c *h2Conn) onField(f hpack.HeaderField) {
	c.listSize += f.Size()
	if c.listSize > c.srv.maxHeaderSize || uint32(len(f.Name)+len(f.Value)) > c.srv.maxFieldSize {
		c.tooLarge = true
		c.dec.SetEmitEnabled(false)
		return
	}
	s := c.decoding
	if s == nil || c.malformed {
		return
	}
	h := &s.ctx.Request.Header
	if !validFieldValue(f.Value) {
		c.malformed = true
		return
	}
	if f.IsPseudo() {
		var bit uint8
		switch f.Name {
		case ":method":
			bit = pseudoMethod
			if !validToken(f.Value) {
				c.malformed = true
				return
			}
			h.SetMethod(f.Value)
		case ":scheme":
			bit = pseudoScheme
		case ":path":
			bit = pseudoPath
			if !validPath(f.Value) {
				c.malformed = true
				return
			}
			h.SetRequestURI(f.Value)
		case ":authority":
			bit = pseudoAuthority
			h.SetHost(f.Value)
		}
		if bit == 0 || c.regular || c.pseudo&bit != 0 {
			c.malformed = true // unknown, late or repeated (RFC 9113 8.3)
			return
		}
		c.pseudo |= bit
		return
	}
	c.regular = true
	if !validFieldName(f.Name) {
		c.malformed = true
		return
	}
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		c.malformed = true // connection-specific (RFC 9113 8.2.2)
		return
	case "te":
		if f.Value != "trailers" {
			c.malformed = true
		}
		return
	case "expect":
		// Answered here (start) with 100 before the body is read, as fasthttp's server
		// does on HTTP/1.1; the upstream gets the body, not the expectation.
		if asciiEqualFold(f.Value, "100-continue") {
			c.expectContinue = true
		}
		return
	case "host":
		if c.pseudo&pseudoAuthority != 0 {
			return // :authority names the host; an HTTP/1.1 upstream gets it as Host
		}
	case "content-length":
		n, err := strconv.ParseInt(f.Value, 10, 64)
		if err != nil || n < 0 || (s.declared >= 0 && n != s.declared) {
			c.malformed = true
			return
		}
		s.declared = n
		h.SetContentLength(int(n))
		return
	}
	h.Add(f.Name, f.Value)
}

func asciiEqualFold(a, b string) bool {
	return len(a) == len(b) && bytes.EqualFold(bytesconv.Bytes(a), bytesconv.Bytes(b))
}

// validFieldName: lowercase token characters only (RFC 9113 8.2.1).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !conf.IsTokenByte(b) || ('A' <= b && b <= 'Z') {
			return false
		}
	}
	return true
}

func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !conf.IsTokenByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// validFieldValue refuses what would split or end the header line the upstream gets.
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b == '\r' || b == '\n' || b == 0 {
			return false
		}
	}
	return true
}

// validPath: an origin-form target (or *), nothing that would end the request line.
func validPath(s string) bool {
	if s == "" || (s[0] != '/' && s != "*") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == 0x7f {
			return false
		}
	}
	return true
}

// start hands a stream whose header block is whole to a stream goroutine.
func (c *h2Conn) start(s *h2Stream) {
	req := &s.ctx.Request
	if !s.remoteClosed {
		c.bodyPending.Add(1)
		s.body.buf = h2BodyBufPool.Get().(*[streamWindow]byte)
		req.SetBodyStream(&s.body, int(s.declared))
	} else if s.declared > 0 {
		c.releaseUnstarted(s)
		c.resetStream(s.id, http2.ErrCodeProtocol) // a length with no body
		return
	}
	c.mu.Lock()
	c.streams[s.id] = s
	s.sendWindow = c.initialWindow
	c.open++
	c.markIdleLocked()
	c.observeLocked(plugins.ConnActive)
	if c.expectContinue && !s.remoteClosed && !c.dead {
		c.hdr.Reset()
		c.writeStatus(fasthttp.StatusContinue)
		if c.writeHeadersLocked(s.id, false) == nil {
			_ = c.bw.Flush()
		}
	}
	c.mu.Unlock()
	select {
	case c.work <- s:
	default:
		go c.streamLoop(s)
	}
}

// streamLoop serves s, then waits for the connection's next stream while it lasts.
func (c *h2Conn) streamLoop(s *h2Stream) {
	for {
		s.serve()
		select {
		case s = <-c.work:
		case <-c.done:
			return
		}
	}
}

func (s *h2Stream) serve() {
	c := s.c
	c.srv.handler(&s.ctx)
	s.respond()
	c.mu.Lock()
	s.answered = true
	c.closeStreamLocked(s) // if no END_STREAM went out (reset, cut off, connection gone)
	c.open--
	goAway := !c.goAwaySent && c.srv.draining()
	c.markIdleLocked()
	if c.open == 0 {
		c.observeLocked(plugins.ConnIdle)
	}
	c.mu.Unlock()
	c.completed.Add(1)
	if goAway {
		c.goAway(http2.ErrCodeNo)
	}
	if s.body.buf != nil {
		h2BodyBufPool.Put(s.body.buf)
	}
	s.ctx.Request.Reset()
	s.ctx.Response.Reset()
	s.ctx.ResetUserValues()
	s.c, s.body = nil, h2Body{}
	s.grpcAnswered, s.cancel = false, nil
	s.grpcBody = grpcBody{}
	s.bodyReader.Reset(nil)
	s.tlsc = tlsStreamConn{}
	h2StreamPool.Put(s)
}

// respond writes the handler's response: HEADERS, then the body as DATA within the
// client's windows, streamed from the node when the proxy left it streaming.
func (s *h2Stream) respond() {
	c := s.c
	resp := &s.ctx.Response
	if s.grpcAnswered {
		return
	}
	if resp.StatusCode() != fasthttp.StatusOK && isGRPCRequest(&s.ctx.Request.Header) {
		s.respondGRPCError()
		return
	}
	var body []byte
	var src io.Reader
	if resp.IsBodyStream() {
		src = resp.BodyStream()
		defer resp.CloseBodyStream() //nolint:errcheck // the proxy's stream reports through OnStreamEnd
	} else {
		body = resp.Body()
	}
	status := resp.StatusCode()
	noBody := s.ctx.IsHead() || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified
	if noBody {
		body, src = nil, nil
	}
	contentLength := resp.Header.ContentLength()
	switch {
	case status == fasthttp.StatusNoContent:
		contentLength = -1
	case src == nil && !noBody:
		contentLength = len(body)
	}
	endNow := src == nil && len(body) == 0

	c.mu.Lock()
	if s.reset || c.dead {
		c.mu.Unlock()
		return
	}
	c.hdr.Reset()
	c.writeStatus(status)
	for k, v := range resp.Header.All() {
		if skipResponseHeader(k) {
			continue
		}
		c.hdr.Field(k, v)
	}
	if contentLength >= 0 {
		c.hdr.Field(headerContentLength, strconv.AppendInt(c.number[:0], int64(contentLength), 10))
	}
	if len(resp.Header.Server()) == 0 {
		c.hdr.Field(headerServer, h2ServerName)
	}
	if len(resp.Header.Peek(fasthttp.HeaderDate)) == 0 {
		c.hdr.Field(headerDate, c.dateNow())
	}
	err := c.writeHeadersLocked(s.id, endNow)
	if err == nil && endNow {
		c.endStreamLocked(s)
		c.flusher.FlushLaterLocked()
	}
	c.mu.Unlock()
	if err != nil || endNow {
		return
	}
	if src == nil {
		_ = s.writeData(body, true)
		return
	}
	buf := h2CopyBufPool.Get().(*[maxFrameSize]byte)
	defer h2CopyBufPool.Put(buf)
	for {
		n, rerr := src.Read(buf[:])
		if n > 0 {
			if s.writeData(buf[:n], false) != nil {
				return
			}
		}
		if rerr == io.EOF {
			_ = s.writeData(nil, true)
			return
		}
		if rerr != nil {
			// The node broke the body off: the client must see it cut, not complete.
			c.mu.Lock()
			if !s.reset && !c.dead && c.fr.WriteRSTStream(s.id, http2.ErrCodeInternal) == nil {
				_ = c.bw.Flush()
			}
			s.reset = true
			c.mu.Unlock()
			return
		}
	}
}

var (
	h2CopyBufPool = sync.Pool{New: func() any { return new([maxFrameSize]byte) }}
	headerServer  = []byte("server")
	headerDate    = []byte("date")
)

// skipResponseHeader leaves out what HTTP/2 forbids (connection-specific fields, RFC 9113
// 8.2.2) and what respond writes itself.
func skipResponseHeader(k []byte) bool {
	for _, name := range h2SkippedHeaders {
		if len(k) == len(name) && bytes.EqualFold(k, name) {
			return true
		}
	}
	return false
}

var h2SkippedHeaders = [][]byte{
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"),
	[]byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Content-Length"),
}

// dateNow is the Date header's value, as fasthttp's server sends it on HTTP/1.1: the
// clock is read per response, the text made once a second (under mu).
func (c *h2Conn) dateNow() []byte {
	now := time.Now()
	if sec := now.Unix(); sec != c.dateSecond || c.date == nil {
		c.dateSecond = sec
		c.date = fasthttp.AppendHTTPDate(c.dateBuf[:0], now)
	}
	return c.date
}

func (c *h2Conn) writeStatus(status int) {
	if status < 100 || status > 999 {
		status = fasthttp.StatusInternalServerError
	}
	c.status = [3]byte{byte('0' + status/100), byte('0' + status/10%10), byte('0' + status%10)}
	c.hdr.Pseudo(":status", c.status[:])
}

// writeHeadersLocked writes the header block as HEADERS and CONTINUATION frames.
func (c *h2Conn) writeHeadersLocked(id uint32, endStream bool) error {
	err := c.hdr.WriteFrames(c.fr, id, endStream, c.peerMaxFrame)
	if err != nil {
		c.dead = true
		c.cond.Broadcast()
	}
	return err
}

// writeData sends p as DATA frames as the client's windows allow, END_STREAM with the
// last when end. A window shut for send_timeout cuts the connection off (slow_reader):
// the response it holds, and the node's connection behind it, are not the client's to
// keep.
func (s *h2Stream) writeData(p []byte, end bool) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if s.reset || c.dead {
			return errStreamGone
		}
		n := 0
		if len(p) > 0 {
			n = min(len(p), int(c.peerMaxFrame), int(c.sendWindow), int(s.sendWindow))
		}
		if n <= 0 && len(p) > 0 {
			if err := c.waitWindowLocked(s); err != nil {
				return err
			}
			continue
		}
		last := end && n == len(p)
		if err := c.fr.WriteData(s.id, last, p[:n]); err != nil {
			c.dead = true
			c.cond.Broadcast()
			return err
		}
		if last {
			c.endStreamLocked(s)
		}
		c.sendWindow -= int32(n)
		s.sendWindow -= int32(n)
		if n > 0 && !c.dataSincePing.Load() {
			c.dataSincePing.Store(true)
		}
		p = p[n:]
		if len(p) == 0 {
			c.flusher.FlushLaterLocked()
			return nil
		}
	}
}

// waitWindowLocked waits for the client to open a window s may send in, at most
// send_timeout.
func (c *h2Conn) waitWindowLocked(s *h2Stream) error {
	if err := c.bw.Flush(); err != nil {
		c.dead = true
		c.cond.Broadcast()
		return err
	}
	timer := time.AfterFunc(c.srv.sendTimeout, func() {
		c.mu.Lock()
		s.stalled = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	for !s.reset && !c.dead && !s.stalled && (c.sendWindow <= 0 || s.sendWindow <= 0) {
		c.cond.Wait()
	}
	timer.Stop()
	if s.stalled && !s.reset && !c.dead {
		c.srv.abuse[abuseSlowReader].Add(1)
		c.srv.log("http2: %s from %v: GOAWAY %v", abuseKindNames[abuseSlowReader], c.nc.RemoteAddr(), http2.ErrCodeEnhanceYourCalm)
		c.writeGoAwayLocked(http2.ErrCodeEnhanceYourCalm)
		c.dead = true
		c.cond.Broadcast()
		_ = c.nc.Close() // the read loop may be waiting for frames that will not come
		return errStreamGone
	}
	s.stalled = false
	return nil
}

func (c *h2Conn) data(f *http2.DataFrame) error {
	n := int32(f.Length) // padding included: it counts against the windows too
	c.connCredit += n
	if c.connCredit >= connWindow/4 {
		c.mu.Lock()
		if !c.dead && c.fr.WriteWindowUpdate(0, uint32(c.connCredit)) == nil {
			_ = c.bw.Flush()
		}
		c.mu.Unlock()
		c.connCredit = 0
	}
	data := f.Data()
	if len(data) == 0 && !f.StreamEnded() && c.over(abuseEmptyFrames) {
		return errCut
	}
	c.mu.Lock()
	s := c.streams[f.StreamID]
	var code http2.ErrCode
	switch {
	case s == nil || s.remoteClosed:
		c.mu.Unlock()
		if f.StreamID > c.maxSeenID.Load() {
			c.fail(http2.ErrCodeProtocol, -1) // DATA on an idle stream
			return errCut
		}
		return nil // a stream gw reset or finished: its share of the window is given back above
	case n > s.recvWindow:
		code = http2.ErrCodeFlowControl // past the window gw gave it (RFC 9113 6.9.1)
	case s.declared >= 0 && s.received+int64(len(data)) > s.declared:
		code = http2.ErrCodeProtocol // longer than its content-length (RFC 9113 8.1.1)
		s.body.err = errBodyTooLong
	}
	if code != 0 {
		c.mu.Unlock()
		c.resetStream(s.id, code)
		return nil
	}
	s.recvWindow -= n
	s.received += int64(len(data))
	b := &s.body
	if len(data) > 0 {
		if len(b.buf)-b.end < len(data) {
			b.end = copy(b.buf[:], b.buf[b.start:b.end])
			b.start = 0
		}
		b.end += copy(b.buf[b.end:], data)
	}
	// Padding is never read: it is given back with the next window update.
	b.consumed += n - int32(len(data))
	if f.StreamEnded() {
		c.endBodyLocked(s)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	return nil
}

func (c *h2Conn) settings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if c.over(abuseSettings) {
		return errCut
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingInitialWindowSize:
			delta := int32(st.Val) - c.initialWindow
			c.initialWindow = int32(st.Val)
			for _, s := range c.streams {
				s.sendWindow += delta
			}
			c.cond.Broadcast()
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = st.Val
		}
		return nil
	})
	if err != nil {
		var ce http2.ConnectionError
		code := http2.ErrCodeProtocol
		if errors.As(err, &ce) {
			code = http2.ErrCode(ce)
		}
		c.writeGoAwayLocked(code)
		c.dead = true
		c.cond.Broadcast()
		return errCut
	}
	if err := c.fr.WriteSettingsAck(); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *h2Conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if int64(c.sendWindow)+inc > 1<<31-1 {
			c.writeGoAwayLocked(http2.ErrCodeFlowControl)
			c.dead = true
			c.cond.Broadcast()
			return errCut
		}
		c.sendWindow += int32(inc)
	} else if s := c.streams[f.StreamID]; s != nil {
		if int64(s.sendWindow)+inc > 1<<31-1 {
			c.closeStreamLocked(s)
			if c.fr.WriteRSTStream(f.StreamID, http2.ErrCodeFlowControl) == nil {
				_ = c.bw.Flush()
			}
			return nil
		}
		s.sendWindow += int32(inc)
	}
	c.cond.Broadcast()
	return nil
}

func (c *h2Conn) rstStream(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	s := c.streams[f.StreamID]
	active := s != nil && !s.answered
	if s != nil {
		c.closeStreamLocked(s)
	}
	c.mu.Unlock()
	if f.StreamID > c.maxSeenID.Load() {
		c.fail(http2.ErrCodeProtocol, -1) // RST_STREAM on an idle stream
		return errCut
	}
	// A stream reset before its answer still holds its handler (and maybe a node's
	// connection) until the handler returns: many of them are the rapid-reset attack.
	if active && c.over(abuseRapidReset) {
		return errCut
	}
	return nil
}

// shut ends the connection's state once the read loop is over: streams still running
// see the connection gone, idle stream goroutines leave.
func (c *h2Conn) shut() {
	c.mu.Lock()
	c.dead = true
	for _, s := range c.streams {
		c.closeStreamLocked(s)
	}
	c.cond.Broadcast()
	c.mu.Unlock()
	close(c.done)
}

// goAwayAll sends GOAWAY to every HTTP/2 connection: the drain's equivalent of
// Connection: close. Their streams finish; the drain closes each connection once it has
// been idle for idleGrace. Each GOAWAY is written on a goroutine of its own: a connection
// whose writer waits on a client that stopped reading (for up to send_timeout) must not
// hold up the others, nor the drain.
func (srv *h2Server) goAwayAll() {
	srv.mu.Lock()
	srv.goingAway = true
	conns := make([]*h2Conn, 0, len(srv.conns))
	for c := range srv.conns {
		conns = append(conns, c)
	}
	srv.mu.Unlock()
	for _, c := range conns {
		go c.goAway(http2.ErrCodeNo)
	}
}
