package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/internal/h2write"
	"gw/internal/monotime"
)

// grpcConn is one HTTP/2 connection to a grpc or grpcs node, gw's own client on
// golang.org/x/net/http2's Framer and HPACK, as worker/http2.go is gw's own server.
// Calls are multiplexed on it up to the node's SETTINGS_MAX_CONCURRENT_STREAMS; its
// goroutine in readLoop reads the node's frames and hands each call its response
// (headers, DATA within the call's receive window, trailers); the callers write their
// own HEADERS and DATA under mu, within the node's windows.
//
// A connection stops taking calls (retired) when the node sends GOAWAY, its stream ids
// run out, it has been idle for the pool's idle_timeout or the pool shuts; it closes once
// its last call ends. A connection error ends every call on it.
type grpcConn struct {
	np  *nodePool
	sni string
	nc  net.Conn
	// ready is closed once the connection is up and the node's first SETTINGS came, or
	// dialling failed (dialErr).
	ready   chan struct{}
	dialErr error

	// read loop
	br *bufio.Reader
	// readAt is when the last read from the socket returned (monotime): the time the
	// frames it brought arrived, for the calls' read timeouts, at one clock reading per
	// read rather than one per frame.
	readAt   int64
	fr       *http2.Framer // reads here; writes under mu
	dec      *hpack.Decoder
	payload  [grpcMaxFrame]byte // a HEADERS, WINDOW_UPDATE, RST_STREAM or PING payload
	decoding *GRPCCall          // the call whose header block is being read; nil to drop it
	// The block being read is decoded here, the read loop's own, and copied into its
	// call under mu at the block's end if the call still holds its stream: the call's
	// goroutine reads its headers while the next block (the trailers) is being decoded,
	// and may release the call (to the pool, to another connection) at any time.
	blockStatus int
	blockFields []grpcField
	blockArena  []byte
	trailers    bool  // the block being read is the call's trailers
	blockEnd    bool  // the block being read ends the stream
	blockBad    error // why the block being read is refused, if it is
	inBlock     bool
	blockID     uint32
	connCredit  int32

	mu            sync.Mutex
	bw            *bufio.Writer
	hdr           h2write.HeaderBlock // the request header block being written
	calls         map[uint32]*GRPCCall
	nextID        uint32
	active        int    // calls open or being opened on it
	maxStreams    uint32 // the node's SETTINGS_MAX_CONCURRENT_STREAMS
	sendWindow    int32
	initialWindow int32
	peerMaxFrame  uint32
	retired       bool // no new calls
	unpooled      bool // made for one call after the pool shut: closes when it ends
	lastID        uint32
	gotGoAway     bool
	dead          bool
	err           error // why it died
	idleSince     int64
	idleTimer     *time.Timer
	idleCounted   bool // counted in the pool's idle connections
	// flusher writes out what is buffered once the goroutines ready to run have had their
	// turn: the calls a client sent together go to the node in one write instead of one
	// each, as worker/http2.go does towards clients.
	flusher h2write.Flusher
	done    chan struct{} // closed when the read loop ends

	// writingSince is when the write to the socket under way began (monotime), 0 when
	// none is: a call's timer closes a socket blocked past the call's timeout.send
	// (grpctimeout.go), since the writer holds mu.
	writingSince atomic.Int64
}

// grpcSocketWriter is what the connection's bufio.Writer writes to: the socket, each
// write stamped in writingSince while it lasts.
type grpcSocketWriter struct{ cn *grpcConn }

func (w grpcSocketWriter) Write(p []byte) (int, error) {
	w.cn.writingSince.Store(monotime.Now())
	n, err := w.cn.nc.Write(p)
	w.cn.writingSince.Store(0)
	return n, err
}

// grpcSocketReader is what the read loop's bufio.Reader reads from: the socket, each
// read stamped in readAt.
type grpcSocketReader struct{ cn *grpcConn }

func (r grpcSocketReader) Read(p []byte) (int, error) {
	n, err := r.cn.nc.Read(p)
	r.cn.readAt = monotime.Now()
	return n, err
}

const (
	grpcMaxFrame = 16384 // the default SETTINGS_MAX_FRAME_SIZE, which gw keeps
	// grpcConnWindow is the connection's receive window; it is given back as DATA arrives,
	// since each call's window bounds what the call holds.
	grpcConnWindow = 4 << 20
	// grpcMaxHeaderList bounds each response header and trailer block a call keeps.
	grpcMaxHeaderList = 64 << 10
	// grpcMaxStreamID: past it the connection takes no new call (RFC 9113 5.1.1).
	grpcMaxStreamID = 1<<31 - 1
)

var (
	errGRPCConnClosed  = errors.New("proxy: gRPC connection to the node closed")
	errGRPCRefused     = errors.New("proxy: the node refused the call before processing it")
	errGRPCHeaderLarge = errors.New("proxy: the node's response header block is too large")
)

// grpcConns is a node pool's HTTP/2 connections, by server name ("" in the clear).
type grpcConns struct {
	mu     sync.Mutex
	bySNI  map[string][]*grpcConn
	order  []string
	closed bool
	// idle counts the connections without a call kept open, which keepalive_pool.size
	// caps as it caps HTTP/1.1 nodes' idle connections (at least one is kept).
	idle atomic.Int32
}

// grpcMaxNames bounds the server names a pool keeps connections for; past it the oldest
// name's connections are retired (a grpcs upstream with pass_host pass and many
// :authority values).
const grpcMaxNames = 16

// grpcConnFor returns a connection to the node that takes one more call, counted in its
// active calls: an open one with room, or a new one, which call waits for while it is
// dialled (as do the calls that come meanwhile) unless call is stopped first. sni is the
// server name ("" in the clear).
func (np *nodePool) grpcConnFor(sni string, connectTimeout time.Duration, call *GRPCCall) (*grpcConn, error) {
	g := &np.grpc
	for {
		g.mu.Lock()
		if g.closed {
			// The upstream was replaced while this call was on its way: it still goes,
			// on a connection of its own that closes after it (as Pools.Close says).
			g.mu.Unlock()
			cn := &grpcConn{np: np, sni: sni, ready: make(chan struct{}), active: 1, unpooled: true}
			go cn.dial(connectTimeout)
			if !cn.waitReady(call) {
				cn.mu.Lock()
				cn.active--
				cn.mu.Unlock()
				return nil, ErrGRPCStopped
			}
			if cn.dialErr != nil {
				return nil, cn.dialErr
			}
			return cn, nil
		}
		var cn *grpcConn
		for _, c := range g.bySNI[sni] {
			c.mu.Lock()
			if !c.retired && !c.dead && (c.maxStreams == 0 || uint32(c.active) < c.maxStreams) {
				c.active++
				c.idleSince = 0
				if c.idleCounted {
					c.idleCounted = false
					g.idle.Add(-1)
				}
				cn = c
			}
			c.mu.Unlock()
			if cn != nil {
				break
			}
		}
		dialing := false
		if cn == nil {
			cn = &grpcConn{np: np, sni: sni, ready: make(chan struct{}), active: 1}
			g.addLocked(sni, cn)
			dialing = true
		}
		g.mu.Unlock()
		if dialing {
			go cn.dial(connectTimeout)
		}
		if !cn.waitReady(call) {
			cn.mu.Lock()
			cn.active--
			cn.mu.Unlock()
			return nil, ErrGRPCStopped
		}
		if cn.dialErr != nil {
			return nil, cn.dialErr
		}
		cn.mu.Lock()
		ok := !cn.dead && !cn.retired
		if !ok {
			cn.endCallLocked()
		}
		cn.mu.Unlock()
		if ok {
			return cn, nil
		}
	}
}

// waitReady waits for the connection to be dialled, or for call to stop (the client
// left, or its deadline passed) first: false then. The dial goes on for the others.
func (cn *grpcConn) waitReady(call *GRPCCall) bool {
	select {
	case <-cn.ready:
		return true
	default:
	}
	// Only while a connection is dialled: the ticker's allocation is no call's cost.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-cn.ready:
			return true
		case <-tick.C:
			if call.Stopped() {
				return false
			}
		}
	}
}

func (g *grpcConns) addLocked(sni string, cn *grpcConn) {
	if g.bySNI == nil {
		g.bySNI = map[string][]*grpcConn{}
	}
	if _, ok := g.bySNI[sni]; !ok {
		if len(g.order) >= grpcMaxNames {
			oldest := g.order[0]
			g.order = g.order[1:]
			for _, c := range g.bySNI[oldest] {
				c.retire()
			}
			delete(g.bySNI, oldest)
		}
		g.order = append(g.order, sni)
	}
	g.bySNI[sni] = append(g.bySNI[sni], cn)
}

// remove takes cn out of the pool: it takes no new call.
func (g *grpcConns) remove(cn *grpcConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	list := g.bySNI[cn.sni]
	for i, c := range list {
		if c == cn {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(g.bySNI, cn.sni)
		for i, s := range g.order {
			if s == cn.sni {
				g.order = append(g.order[:i], g.order[i+1:]...)
				break
			}
		}
	} else {
		g.bySNI[cn.sni] = list
	}
}

// shutGRPC retires the pool's HTTP/2 connections: idle ones close now, those carrying
// calls when their calls end.
func (np *nodePool) shutGRPC() {
	g := &np.grpc
	g.mu.Lock()
	g.closed = true
	var all []*grpcConn
	for _, list := range g.bySNI {
		all = append(all, list...)
	}
	g.bySNI, g.order = nil, nil
	g.mu.Unlock()
	for _, c := range all {
		c.retire()
	}
}

// retire makes the connection take no new call, and closes it when it has none.
func (cn *grpcConn) retire() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.retired = true
	if cn.active == 0 && cn.nc != nil {
		_ = cn.nc.Close()
	}
}

// dial connects, shakes hands (TLS with ALPN h2 for grpcs, verified as https nodes are),
// sends the preface and gw's SETTINGS, and waits for the node's SETTINGS, within
// timeout; then starts the read loop. It closes ready either way.
func (cn *grpcConn) dial(timeout time.Duration) {
	defer close(cn.ready)
	np := cn.np
	deadline := time.Now().Add(timeout)
	nc, err := np.dialTCP(deadline)
	if err == nil && np.tlsConfig != nil {
		nc, err = np.handshakeH2(nc, cn.sni, deadline)
	}
	if err != nil {
		cn.dialFailed(err)
		return
	}
	cn.mu.Lock()
	cn.nc = nc // under mu: retire and the pool's shut may close it while it is set up
	closed := (cn.retired || cn.unpooled) && cn.active == 0
	cn.mu.Unlock()
	if closed {
		nc.Close()
	}
	cn.br = bufio.NewReaderSize(grpcSocketReader{cn}, grpcMaxFrame+9)
	cn.bw = bufio.NewWriterSize(grpcSocketWriter{cn}, 32<<10)
	cn.fr = http2.NewFramer(cn.bw, cn.br)
	cn.fr.SetReuseFrames()
	cn.fr.SetMaxReadFrameSize(grpcMaxFrame)
	cn.hdr.Init()
	cn.dec = hpack.NewDecoder(4096, cn.onField)
	cn.dec.SetMaxStringLength(grpcMaxHeaderList)
	cn.calls = map[uint32]*GRPCCall{}
	cn.nextID = 1
	cn.sendWindow, cn.initialWindow, cn.peerMaxFrame = 65535, 65535, grpcMaxFrame

	_ = nc.SetDeadline(deadline)
	_, err = cn.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = cn.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: grpcStreamBuffer},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: grpcMaxHeaderList},
		)
	}
	if err == nil {
		err = cn.fr.WriteWindowUpdate(0, grpcConnWindow-65535)
	}
	if err == nil {
		err = cn.bw.Flush()
	}
	if err == nil {
		// The node's SETTINGS come first (RFC 9113 3.4): its stream limit and windows are
		// known before the first call.
		var f http2.Frame
		f, err = cn.fr.ReadFrame()
		if sf, ok := f.(*http2.SettingsFrame); err == nil && (!ok || sf.IsAck()) {
			err = fmt.Errorf("the node's first frame is %v, not SETTINGS", f.Header().Type)
		} else if err == nil {
			err = cn.settings(sf)
		}
	}
	if err != nil {
		nc.Close()
		if isTimeout(err) {
			err = fmt.Errorf("HTTP/2 preface: %w", err)
		}
		cn.dialFailed(err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	cn.done = make(chan struct{})
	cn.flusher.Start(&cn.mu, cn.done, cn.flushBufferedLocked)
	go cn.readLoop()
	cn.mu.Lock()
	if cn.active == 0 {
		// Every call that waited for it stopped: idle from now on.
		cn.active++
		cn.endCallLocked()
	}
	cn.mu.Unlock()
}

func (cn *grpcConn) dialFailed(err error) {
	cn.mu.Lock()
	cn.dead, cn.err = true, err
	cn.mu.Unlock()
	cn.dialErr = &dialFailed{err}
	cn.np.grpc.remove(cn)
}

// dialTCP connects to the node by deadline.
func (np *nodePool) dialTCP(deadline time.Time) (net.Conn, error) {
	ip := np.ip
	if np.resolver != nil {
		a := np.resolver.current(deadline)
		if a == nil {
			return nil, errUnresolved
		}
		ip = *a
	}
	// No keep-alive probes, as for HTTP/1.1 nodes (pools.go).
	d := net.Dialer{Deadline: deadline, KeepAlive: -1}
	return d.Dial("tcp", netip.AddrPortFrom(ip, np.key.port).String())
}

// handshakeH2 is the TLS handshake of a grpcs connection, for server name sni, which
// must agree on h2 by ALPN.
func (np *nodePool) handshakeH2(conn net.Conn, sni string, deadline time.Time) (net.Conn, error) {
	config := np.tlsConfig.Clone()
	config.ServerName = sni
	config.NextProtos = []string{"h2"}
	tc := tls.Client(conn, config)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		conn.Close()
		if isTimeout(err) {
			return nil, err
		}
		// A server that offers ALPN but not h2 refuses the handshake with this alert,
		// which crypto/tls gives as text only.
		if strings.Contains(err.Error(), "no application protocol") {
			err = fmt.Errorf("the node did not agree on HTTP/2 by ALPN (%w): a gRPC server must", err)
		}
		return nil, np.handshakeFailed(sni, err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		conn.Close()
		return nil, np.handshakeFailed(sni, fmt.Errorf("the node did not agree on HTTP/2 by ALPN (protocol %q): a gRPC server must", p))
	}
	return tc, nil
}

// endCallLocked counts a call out; the last one out of a retired connection closes it,
// and an idle connection is closed after the pool's idle_timeout.
func (cn *grpcConn) endCallLocked() {
	cn.active--
	if cn.active > 0 || cn.nc == nil {
		return
	}
	if cn.retired || cn.dead || cn.unpooled {
		_ = cn.nc.Close()
		return
	}
	if g := &cn.np.grpc; g.idle.Add(1) > int32(max(cn.np.key.size, 1)) {
		g.idle.Add(-1)
		cn.retired = true // keepalive_pool.size idle connections are kept already
		_ = cn.nc.Close()
		return
	}
	cn.idleCounted = true
	cn.idleSince = monotime.Now()
	timeout := cn.idleTimeout()
	if cn.idleTimer == nil {
		cn.idleTimer = time.AfterFunc(timeout, cn.idleCheck)
	} else {
		cn.idleTimer.Reset(timeout)
	}
}

func (cn *grpcConn) idleTimeout() time.Duration {
	if t := cn.np.key.idleTimeout; t > 0 {
		return t
	}
	// keepalive_pool.idle_timeout 0 keeps no idle connection; calls that end and start
	// again at once still share one.
	return time.Second
}

// idleCheck closes the connection if it has been idle for the idle timeout.
func (cn *grpcConn) idleCheck() {
	cn.mu.Lock()
	idle := cn.active == 0 && cn.idleSince != 0 && time.Duration(monotime.Now()-cn.idleSince) >= cn.idleTimeout()-time.Millisecond
	if idle {
		cn.retired = true
		_ = cn.nc.Close()
	}
	cn.mu.Unlock()
	if idle {
		cn.np.grpc.remove(cn)
	}
}

// open starts call on the connection: a stream id, and its HEADERS, with END_STREAM
// when the request has no body; the flush is left to the DATA when more follows. The
// caller holds a place in active (grpcConnFor).
func (cn *grpcConn) open(call *GRPCCall, h *fasthttp.RequestHeader, scheme, host []byte, endStream, more bool) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.dead || cn.retired {
		if cn.err != nil {
			return refused(cn.err)
		}
		return refused(errGRPCConnClosed)
	}
	id := cn.nextID
	cn.nextID += 2
	if cn.nextID > grpcMaxStreamID {
		cn.retired = true
		go cn.np.grpc.remove(cn)
	}
	call.id = id
	call.sendWindow = cn.initialWindow
	call.recvWindow = grpcStreamBuffer
	cn.calls[id] = call
	call.localDone = endStream
	if endStream {
		call.readSince = monotime.Now() // the node's turn
	}
	cn.encodeRequest(h, scheme, host)
	if err := cn.writeHeadersLocked(id, endStream); err != nil {
		return refused(err) // the connection broke before the node had the call
	}
	if !more {
		cn.flusher.FlushLaterLocked()
	}
	return nil
}

// refusedError marks a call that never reached the node's application: it may be sent
// again, on another connection.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

func refused(err error) error { return &refusedError{err} }

// writeHeadersLocked writes the header block as HEADERS and CONTINUATION frames.
func (cn *grpcConn) writeHeadersLocked(id uint32, endStream bool) error {
	err := cn.hdr.WriteFrames(cn.fr, id, endStream, cn.peerMaxFrame)
	if err != nil {
		cn.failLocked(err)
	}
	return err
}

// flushBufferedLocked is the flusher's flush: what is buffered, unless the connection died.
func (cn *grpcConn) flushBufferedLocked() {
	if !cn.dead && cn.bw.Buffered() > 0 {
		_ = cn.flushLocked()
	}
}

func (cn *grpcConn) flushLocked() error {
	if err := cn.bw.Flush(); err != nil {
		cn.failLocked(err)
		return err
	}
	return nil
}

// failLocked ends the connection for err: every call on it ends with err, a write
// error included (the read loop then sees the socket closed).
func (cn *grpcConn) failLocked(err error) {
	if cn.dead {
		return
	}
	cn.dead, cn.err = true, err
	_ = cn.nc.Close()
	for id, call := range cn.calls {
		call.failLocked(err, id > cn.lastID && cn.gotGoAway)
		delete(cn.calls, id)
	}
}

// writeData sends p on call's stream as the node's windows allow, END_STREAM with the
// last frame when end. It waits for window as long as the call lasts.
func (cn *grpcConn) writeData(call *GRPCCall, p []byte, end bool) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for {
		if err := call.sendErrLocked(); err != nil {
			call.sendWaitSince = 0
			return err
		}
		n := 0
		if len(p) > 0 {
			n = min(len(p), int(cn.peerMaxFrame), int(cn.sendWindow), int(call.sendWindow))
			if n <= 0 {
				if call.sendWaitSince == 0 {
					call.sendWaitSince = monotime.Now() // timeout.send runs
				}
				if err := cn.flushLocked(); err != nil {
					return err
				}
				call.cond.Wait()
				continue
			}
		}
		call.sendWaitSince = 0
		last := end && n == len(p)
		if err := cn.fr.WriteData(call.id, last, p[:n]); err != nil {
			cn.failLocked(err)
			return err
		}
		cn.sendWindow -= int32(n)
		call.sendWindow -= int32(n)
		p = p[n:]
		if last {
			call.localDone = true
			call.readSince = monotime.Now() // the node's turn
		}
		if len(p) == 0 {
			cn.flusher.FlushLaterLocked()
			return nil
		}
	}
}

// release takes call off the connection: a call the node has not ended is reset
// (CANCEL), so the node stops working on it.
func (cn *grpcConn) release(call *GRPCCall) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	// Under mu: the call's timer reads the stamps under it while the call is on cn.
	call.conn.Store(nil)
	call.readSince, call.sendWaitSince = 0, 0
	if cn.calls[call.id] == call {
		delete(cn.calls, call.id)
		if !cn.dead && (!call.remoteDone || !call.localDone) {
			if cn.fr.WriteRSTStream(call.id, http2.ErrCodeCancel) == nil {
				cn.flusher.FlushLaterLocked()
			}
		}
	}
	cn.endCallLocked()
}

// readLoop reads the node's frames until the connection ends.
func (cn *grpcConn) readLoop() {
	err := cn.readFrames()
	cn.mu.Lock()
	if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		err = errGRPCConnClosed
	}
	cn.failLocked(err)
	if cn.idleTimer != nil {
		cn.idleTimer.Stop()
	}
	if cn.idleCounted {
		cn.idleCounted = false
		cn.np.grpc.idle.Add(-1)
	}
	cn.mu.Unlock()
	close(cn.done)
	cn.np.grpc.remove(cn)
}

func (cn *grpcConn) readFrames() error {
	for {
		fh, err := cn.fr.ReadFrameHeader()
		if err != nil {
			return err
		}
		// HEADERS, WINDOW_UPDATE, RST_STREAM and PING are read here, not by the Framer,
		// which would make a frame value for each.
		switch fh.Type {
		case http2.FrameHeaders, http2.FrameWindowUpdate, http2.FrameRSTStream, http2.FramePing:
			p := cn.payload[:fh.Length]
			if _, err := io.ReadFull(cn.br, p); err != nil {
				return err
			}
			if err := cn.handleRaw(fh, p); err != nil {
				return err
			}
			continue
		}
		f, err := cn.fr.ReadFrameForHeader(fh)
		if err != nil {
			return err
		}
		if err := cn.handle(f); err != nil {
			return err
		}
	}
}

// protocolError ends the connection with GOAWAY PROTOCOL_ERROR.
func (cn *grpcConn) protocolError(code http2.ErrCode, why string) error {
	cn.mu.Lock()
	if !cn.dead && cn.fr.WriteGoAway(0, code, nil) == nil {
		_ = cn.bw.Flush()
	}
	cn.mu.Unlock()
	return fmt.Errorf("proxy: the node broke HTTP/2 (%v): %s", code, why)
}

func (cn *grpcConn) handleRaw(fh http2.FrameHeader, p []byte) error {
	if cn.inBlock {
		return cn.protocolError(http2.ErrCodeProtocol, "a frame inside a header block")
	}
	switch fh.Type {
	case http2.FrameHeaders:
		return cn.headers(fh, p)
	case http2.FrameWindowUpdate:
		if len(p) != 4 {
			return cn.protocolError(http2.ErrCodeFrameSize, "WINDOW_UPDATE size")
		}
		return cn.windowUpdate(fh.StreamID, binary.BigEndian.Uint32(p)&0x7fffffff)
	case http2.FrameRSTStream:
		if len(p) != 4 || fh.StreamID == 0 {
			return cn.protocolError(http2.ErrCodeProtocol, "RST_STREAM")
		}
		cn.rstStream(fh.StreamID, http2.ErrCode(binary.BigEndian.Uint32(p)))
		return nil
	case http2.FramePing:
		if len(p) != 8 || fh.StreamID != 0 {
			return cn.protocolError(http2.ErrCodeProtocol, "PING")
		}
		if fh.Flags.Has(http2.FlagPingAck) {
			return nil
		}
		cn.mu.Lock()
		defer cn.mu.Unlock()
		if cn.dead {
			return nil
		}
		if err := cn.fr.WritePing(true, [8]byte(p)); err != nil {
			return err
		}
		return cn.bw.Flush()
	}
	return nil
}

func (cn *grpcConn) handle(f http2.Frame) error {
	if cn.inBlock {
		if cf, ok := f.(*http2.ContinuationFrame); ok {
			return cn.fragment(cf.HeaderBlockFragment(), cf.HeadersEnded())
		}
		return cn.protocolError(http2.ErrCodeProtocol, "a frame inside a header block")
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		return cn.data(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return cn.settings(f)
	case *http2.GoAwayFrame:
		cn.goAway(f.LastStreamID, f.ErrCode)
		return nil
	case *http2.PushPromiseFrame:
		return cn.protocolError(http2.ErrCodeProtocol, "PUSH_PROMISE, which gw disabled")
	case *http2.ContinuationFrame:
		return cn.protocolError(http2.ErrCodeProtocol, "CONTINUATION outside a header block")
	}
	return nil // PRIORITY and unknown frames
}

func (cn *grpcConn) settings(f *http2.SettingsFrame) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingInitialWindowSize:
			delta := int32(st.Val) - cn.initialWindow
			cn.initialWindow = int32(st.Val)
			for _, call := range cn.calls {
				call.sendWindow += delta
				call.cond.Broadcast()
			}
		case http2.SettingMaxFrameSize:
			cn.peerMaxFrame = st.Val
		case http2.SettingMaxConcurrentStreams:
			cn.maxStreams = max(st.Val, 1)
		}
		return nil
	})
	if cn.maxStreams == 0 {
		cn.maxStreams = 100 // unlimited: as many as net/http would open
	}
	if err != nil {
		return err
	}
	if err := cn.fr.WriteSettingsAck(); err != nil {
		return err
	}
	return cn.bw.Flush()
}

func (cn *grpcConn) windowUpdate(id uint32, inc uint32) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if id == 0 {
		if int64(cn.sendWindow)+int64(inc) > 1<<31-1 {
			return errors.New("proxy: the node's connection window overflowed")
		}
		cn.sendWindow += int32(inc)
		for _, call := range cn.calls {
			call.cond.Broadcast()
		}
		return nil
	}
	if call := cn.calls[id]; call != nil {
		call.sendWindow += int32(inc)
		call.cond.Broadcast()
	}
	return nil
}

func (cn *grpcConn) rstStream(id uint32, code http2.ErrCode) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.calls[id]
	if call == nil {
		return
	}
	delete(cn.calls, id)
	call.remoteDone = true
	if code == http2.ErrCodeRefusedStream {
		call.failLocked(errGRPCRefused, true)
		return
	}
	call.failLocked(http2.StreamError{StreamID: id, Code: code}, false)
}

// goAway: calls above lastID were not processed and may go again on another
// connection; the others finish.
func (cn *grpcConn) goAway(lastID uint32, code http2.ErrCode) {
	cn.mu.Lock()
	cn.retired, cn.gotGoAway, cn.lastID = true, true, lastID
	for id, call := range cn.calls {
		if id > lastID {
			delete(cn.calls, id)
			call.failLocked(fmt.Errorf("proxy: the node sent GOAWAY (%v) before the call", code), true)
		}
	}
	if cn.active == 0 {
		_ = cn.nc.Close()
	}
	cn.mu.Unlock()
	cn.np.grpc.remove(cn)
}

func (cn *grpcConn) data(f *http2.DataFrame) error {
	n := int32(f.Length) // padding included: it counts against the windows too
	cn.connCredit += n
	if cn.connCredit >= grpcConnWindow/4 {
		cn.mu.Lock()
		if !cn.dead && cn.fr.WriteWindowUpdate(0, uint32(cn.connCredit)) == nil {
			_ = cn.bw.Flush()
		}
		cn.mu.Unlock()
		cn.connCredit = 0
	}
	if f.StreamID == 0 {
		return cn.protocolError(http2.ErrCodeProtocol, "DATA on stream 0")
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.calls[f.StreamID]
	if call == nil {
		return nil // a call that ended: its share of the window is given back above
	}
	var bad error
	switch {
	case call.status == 0 || call.remoteDone:
		bad = http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
	case n > call.recvWindow:
		bad = http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	if bad != nil {
		delete(cn.calls, f.StreamID)
		if cn.fr.WriteRSTStream(f.StreamID, http2.ErrCodeProtocol) == nil {
			_ = cn.bw.Flush()
		}
		call.failLocked(bad, false)
		return nil
	}
	call.recvWindow -= n
	call.consumed += n - int32(len(f.Data())) // padding is never read
	call.readSince = cn.readAt
	call.buf = append(call.buf, f.Data()...)
	if f.StreamEnded() {
		call.remoteDone = true
		// A response ended without trailers: the worker gives the client grpc-status.
	}
	call.cond.Broadcast()
	return nil
}

// headers starts reading a header block: a call's response headers, or its trailers.
func (cn *grpcConn) headers(fh http2.FrameHeader, p []byte) error {
	if fh.StreamID == 0 {
		return cn.protocolError(http2.ErrCodeProtocol, "HEADERS on stream 0")
	}
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return cn.protocolError(http2.ErrCodeProtocol, "HEADERS padding")
		}
		pad := int(p[0])
		p = p[1:]
		if pad > len(p) {
			return cn.protocolError(http2.ErrCodeProtocol, "HEADERS padding")
		}
		p = p[:len(p)-pad]
	}
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return cn.protocolError(http2.ErrCodeProtocol, "HEADERS priority")
		}
		p = p[5:]
	}
	cn.inBlock, cn.blockID, cn.blockBad = true, fh.StreamID, nil
	cn.blockStatus, cn.blockFields, cn.blockArena = 0, cn.blockFields[:0], cn.blockArena[:0]
	cn.blockEnd = fh.Flags.Has(http2.FlagHeadersEndStream)
	cn.mu.Lock()
	call := cn.calls[fh.StreamID]
	cn.decoding, cn.trailers = nil, false
	if call != nil && !call.remoteDone {
		cn.decoding = call
		cn.trailers = call.gotHeaders && !call.informational
		call.informational = false
		if cn.trailers && !cn.blockEnd {
			cn.blockBad = errors.New("proxy: the node sent a second header block without END_STREAM")
		}
	}
	cn.mu.Unlock()
	return cn.fragment(p, fh.Flags.Has(http2.FlagHeadersEndHeaders))
}

// fragment decodes a piece of the header block; at its end the call gets it.
func (cn *grpcConn) fragment(p []byte, end bool) error {
	if _, err := cn.dec.Write(p); err != nil {
		return cn.protocolError(http2.ErrCodeCompression, err.Error())
	}
	if !end {
		return nil
	}
	cn.inBlock = false
	if err := cn.dec.Close(); err != nil {
		return cn.protocolError(http2.ErrCodeCompression, err.Error())
	}
	call := cn.decoding
	cn.decoding = nil
	if call == nil {
		return nil
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.calls[cn.blockID] != call {
		return nil // released while its block was read
	}
	call.readSince = cn.readAt
	if cn.blockBad == nil && !cn.trailers && cn.blockStatus == 0 {
		cn.blockBad = errors.New("proxy: the node's response has no :status")
	}
	if cn.blockBad != nil {
		delete(cn.calls, cn.blockID)
		if cn.fr.WriteRSTStream(cn.blockID, http2.ErrCodeProtocol) == nil {
			_ = cn.bw.Flush()
		}
		call.failLocked(cn.blockBad, false)
		return nil
	}
	if !cn.trailers && cn.blockStatus >= 100 && cn.blockStatus < 200 {
		// An informational response (100 Continue): the real one follows.
		call.informational = true
		call.gotHeaders = true
		return nil
	}
	if cn.trailers {
		call.trailerFields = append(call.trailerFields[:0], cn.blockFields...)
		call.trailerArena = append(call.trailerArena[:0], cn.blockArena...)
	} else {
		call.status = cn.blockStatus
		call.headers = append(call.headers[:0], cn.blockFields...)
		call.arena = append(call.arena[:0], cn.blockArena...)
	}
	call.gotHeaders = true
	if cn.blockEnd {
		call.remoteDone = true
		if !cn.trailers {
			call.trailersOnly = true
		}
	}
	call.cond.Broadcast()
	return nil
}

// onField is the HPACK decoder's emit: one field of the block being read, kept in the
// connection's block arena until the block ends (fragment).
func (cn *grpcConn) onField(f hpack.HeaderField) {
	if cn.decoding == nil || cn.blockBad != nil {
		return
	}
	if len(cn.blockArena)+len(f.Name)+len(f.Value) > grpcMaxHeaderList {
		cn.blockBad = errGRPCHeaderLarge
		return
	}
	if f.IsPseudo() {
		if f.Name != ":status" || cn.trailers || cn.blockStatus != 0 {
			cn.blockBad = fmt.Errorf("proxy: the node sent pseudo-header %q in a response", f.Name)
			return
		}
		st, err := strconv.Atoi(f.Value)
		if err != nil || st < 100 || st > 999 {
			cn.blockBad = fmt.Errorf("proxy: the node sent :status %q", f.Value)
			return
		}
		cn.blockStatus = st
		return
	}
	start := int32(len(cn.blockArena))
	cn.blockArena = append(cn.blockArena, f.Name...)
	mid := int32(len(cn.blockArena))
	cn.blockArena = append(cn.blockArena, f.Value...)
	cn.blockFields = append(cn.blockFields, grpcField{start, mid, int32(len(cn.blockArena))})
}
