package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/conf"
	"gw/internal/race"
)

// rawNode is an HTTP/2 node on the Framer alone, allocating nothing per call once a
// connection is up, so that an allocation count measures the client. Each call (a
// stream whose END_STREAM came) is answered per its behave function: a 200 with body and
// grpc-status 0 by default.
type rawNode struct {
	t          testing.TB
	ln         net.Listener
	maxStreams uint32
	// behave decides what to do with stream id, the n-th call on the connection (from 1);
	// nil answers every call.
	behave func(n *rawNodeConn, id uint32, nth int) nodeAction
	conns  atomic.Int32
	live   atomic.Int32 // connections open now
	// stopOnData makes the node stop reading at a connection's first DATA frame.
	stopOnData atomic.Bool
	// resetOnHeaders makes the node reset each stream (INTERNAL_ERROR) as its HEADERS
	// come, before its request ends.
	resetOnHeaders atomic.Bool
	quit           chan struct{}
	// calls counts the calls that reached the node (whose request ended).
	calls atomic.Int32
	// cancels counts the RST_STREAM CANCEL frames the client sent.
	cancels atomic.Int32
	// grantWindow, when set before the first connection, is the stream and connection
	// window the node gives the client (SETTINGS_INITIAL_WINDOW_SIZE, WINDOW_UPDATE).
	grantWindow uint32
	// trickleEvery and trickleCount shape nodeTrickle's answer.
	trickleEvery time.Duration
	trickleCount int

	mu    sync.Mutex
	open  []net.Conn
	resps [][]byte
}

type nodeAction int

const (
	nodeAnswer      nodeAction = iota
	nodeRefuse                 // RST_STREAM REFUSED_STREAM
	nodeReset                  // RST_STREAM INTERNAL_ERROR
	nodeGoAway                 // GOAWAY with the previous stream as the last, then close
	nodeClose                  // close the connection without a word
	nodeHeadersOnly            // the response header, then nothing
	nodeBigBody                // the response header and 1 MiB of DATA as windows allow
	nodeSilent                 // nothing at all: the stream stays open
	nodeTrickle                // the header, a DATA frame every trickleEvery, trickleCount times, trailers
)

type rawNodeConn struct {
	node     *rawNode
	nc       net.Conn
	fr       *http2.Framer
	bw       *bufio.Writer
	nth      int
	credit   uint32
	lastSeen uint32
	payload  [16384]byte
	// sendWindow is the client's window for this connection's big bodies (under mu).
	mu         sync.Mutex
	cond       sync.Cond
	sendWindow int64
	streamWin  map[uint32]int64
	enc        *hpack.Encoder
	hbuf       bytes.Buffer
	// initialWindow is the client's SETTINGS_INITIAL_WINDOW_SIZE.
	initialWindow int64
}

var nodeBody = []byte("\x00\x00\x00\x00\x05hello")

// respHeaders and respTrailers encode a response's header and trailer blocks with the
// connection's dynamic table, as grpc-go does: after the first call, each field is an
// index (under mu).
func (c *rawNodeConn) respHeaders() []byte {
	c.hbuf.Reset()
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	_ = c.enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	return c.hbuf.Bytes()
}

func (c *rawNodeConn) respTrailers() []byte {
	c.hbuf.Reset()
	_ = c.enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
	_ = c.enc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: "fine"})
	return c.hbuf.Bytes()
}

func newRawNode(t testing.TB, maxStreams uint32, behave func(n *rawNodeConn, id uint32, nth int) nodeAction) *rawNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &rawNode{t: t, ln: ln, maxStreams: maxStreams, behave: behave, quit: make(chan struct{})}
	go n.accept()
	t.Cleanup(func() {
		close(n.quit)
		ln.Close()
		n.mu.Lock()
		for _, c := range n.open {
			c.Close()
		}
		n.mu.Unlock()
	})
	return n
}

func (n *rawNode) port() int { return n.ln.Addr().(*net.TCPAddr).Port }

func (n *rawNode) upstream(t *testing.T) *Upstream {
	return build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: n.port(), Weight: 1}}}, nil)
}

func (n *rawNode) accept() {
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.conns.Add(1)
		n.mu.Lock()
		n.open = append(n.open, nc)
		n.mu.Unlock()
		c := &rawNodeConn{node: n, nc: nc, sendWindow: 65535, initialWindow: 65535, streamWin: map[uint32]int64{}}
		c.cond.L = &c.mu
		c.enc = hpack.NewEncoder(&c.hbuf)
		go c.serve()
	}
}

func (c *rawNodeConn) serve() {
	c.node.live.Add(1)
	defer c.node.live.Add(-1)
	defer c.nc.Close()
	br := bufio.NewReader(c.nc)
	c.bw = bufio.NewWriter(c.nc)
	c.fr = http2.NewFramer(c.bw, br)
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return
	}
	c.mu.Lock()
	if w := c.node.grantWindow; w > 0 {
		_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.node.maxStreams},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: w})
		_ = c.fr.WriteWindowUpdate(0, w)
	} else {
		_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.node.maxStreams})
	}
	_ = c.bw.Flush()
	c.mu.Unlock()
	for {
		fh, err := c.fr.ReadFrameHeader()
		if err != nil {
			return
		}
		p := c.payload[:fh.Length]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		end := false
		switch fh.Type {
		case http2.FrameSettings:
			if !fh.Flags.Has(http2.FlagSettingsAck) {
				c.mu.Lock()
				for i := 0; i+6 <= len(p); i += 6 {
					if http2.SettingID(binary.BigEndian.Uint16(p[i:])) == http2.SettingInitialWindowSize {
						c.initialWindow = int64(binary.BigEndian.Uint32(p[i+2:]))
					}
				}
				_ = c.fr.WriteSettingsAck()
				_ = c.bw.Flush()
				c.mu.Unlock()
			}
		case http2.FrameHeaders:
			end = fh.Flags.Has(http2.FlagHeadersEndStream)
			c.lastSeen = fh.StreamID
			c.mu.Lock()
			c.streamWin[fh.StreamID] = c.initialWindow
			if c.node.resetOnHeaders.Load() {
				_ = c.fr.WriteRSTStream(fh.StreamID, http2.ErrCodeInternal)
				_ = c.bw.Flush()
			}
			c.mu.Unlock()
		case http2.FrameData:
			if c.node.stopOnData.Load() {
				<-c.node.quit // stop reading: the client's windows must close
				return
			}
			end = fh.Flags.Has(http2.FlagDataEndStream)
			c.credit += fh.Length
			if c.credit >= 16384 {
				c.mu.Lock()
				_ = c.fr.WriteWindowUpdate(0, c.credit)
				_ = c.bw.Flush()
				c.mu.Unlock()
				c.credit = 0
			}
		case http2.FrameWindowUpdate:
			inc := int64(binary.BigEndian.Uint32(p) & 0x7fffffff)
			c.mu.Lock()
			if fh.StreamID == 0 {
				c.sendWindow += inc
			} else {
				c.streamWin[fh.StreamID] += inc
			}
			c.cond.Broadcast()
			c.mu.Unlock()
		case http2.FrameRSTStream:
			if len(p) == 4 && http2.ErrCode(binary.BigEndian.Uint32(p)) == http2.ErrCodeCancel {
				c.node.cancels.Add(1)
			}
		case http2.FramePing:
			if !fh.Flags.Has(http2.FlagPingAck) {
				c.mu.Lock()
				_ = c.fr.WritePing(true, [8]byte(p))
				_ = c.bw.Flush()
				c.mu.Unlock()
			}
		}
		if !end {
			continue
		}
		c.node.calls.Add(1)
		c.nth++
		action := nodeAnswer
		if c.node.behave != nil {
			action = c.node.behave(c, fh.StreamID, c.nth)
		}
		if c.act(action, fh.StreamID) {
			return
		}
	}
}

// act does what the node was told for stream id; true ends the connection.
func (c *rawNodeConn) act(action nodeAction, id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch action {
	case nodeAnswer:
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respHeaders(), EndHeaders: true})
		_ = c.fr.WriteData(id, false, nodeBody)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respTrailers(), EndHeaders: true, EndStream: true})
	case nodeRefuse:
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
	case nodeReset:
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respHeaders(), EndHeaders: true})
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeInternal)
	case nodeGoAway:
		_ = c.fr.WriteGoAway(id-2, http2.ErrCodeNo, nil)
		_ = c.bw.Flush()
		return true
	case nodeClose:
		return true
	case nodeHeadersOnly:
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respHeaders(), EndHeaders: true})
	case nodeBigBody:
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respHeaders(), EndHeaders: true})
		_ = c.bw.Flush()
		go c.sendBig(id)
	case nodeSilent:
	case nodeTrickle:
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respHeaders(), EndHeaders: true})
		go c.trickle(id)
	}
	_ = c.bw.Flush()
	return false
}

// sendBig sends 1 MiB of DATA on id as the client's windows allow, then trailers.
func (c *rawNodeConn) sendBig(id uint32) {
	chunk := make([]byte, 16384)
	c.mu.Lock()
	defer c.mu.Unlock()
	for left := 1 << 20; left > 0; {
		n := int64(min(left, len(chunk)))
		n = min(n, c.sendWindow, c.streamWin[id])
		if n <= 0 {
			c.cond.Wait()
			continue
		}
		if c.fr.WriteData(id, false, chunk[:n]) != nil || c.bw.Flush() != nil {
			return
		}
		c.sendWindow -= n
		c.streamWin[id] -= n
		left -= int(n)
	}
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respTrailers(), EndHeaders: true, EndStream: true})
	_ = c.bw.Flush()
}

// trickle sends nodeBody on id every trickleEvery, trickleCount times, then trailers.
func (c *rawNodeConn) trickle(id uint32) {
	for range c.node.trickleCount {
		select {
		case <-time.After(c.node.trickleEvery):
		case <-c.node.quit:
			return
		}
		c.mu.Lock()
		err := c.fr.WriteData(id, false, nodeBody)
		if err == nil {
			err = c.bw.Flush()
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.respTrailers(), EndHeaders: true, EndStream: true})
	_ = c.bw.Flush()
}

// unary makes one call to up with body and reads it through: the body, the trailers,
// and the error if any.
func unary(t testing.TB, up *Upstream, body string) (string, map[string]string, error) {
	t.Helper()
	ctx := grpcCtx("/svc/M", body)
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, bytes.NewReader(ctx.Request.Body()), &info); err != nil {
		return "", nil, err
	}
	got, err := io.ReadAll(call)
	return string(got), fieldsOf(call.Trailers(), call.Trailer), err
}

func TestGRPCClientUnaryAndTrailers(t *testing.T) {
	node := newRawNode(t, 100, nil)
	up := node.upstream(t)
	for range 3 {
		body, trailers, err := unary(t, up, "0123456789")
		if err != nil || body != string(nodeBody) || trailers["grpc-status"] != "0" || trailers["grpc-message"] != "fine" {
			t.Fatalf("call: %q %v %v, want %q and grpc-status 0", body, trailers, err, nodeBody)
		}
	}
	if n := node.conns.Load(); n != 1 {
		t.Fatalf("three calls in turn opened %d connections, want 1 kept alive", n)
	}
}

// Calls beyond the node's SETTINGS_MAX_CONCURRENT_STREAMS go on a second connection.
func TestGRPCClientOpensAnotherConnectionAtMaxStreams(t *testing.T) {
	node := newRawNode(t, 2, func(c *rawNodeConn, id uint32, nth int) nodeAction {
		return nodeHeadersOnly // held open until the test ends them
	})
	up := node.upstream(t)
	calls := make([]*GRPCCall, 3)
	for i := range calls {
		ctx := grpcCtx("/svc/M", "x")
		calls[i] = AcquireGRPCCall(0)
		var info Info
		if err := up.RoundTripGRPC(calls[i], ctx, nil, &info); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := node.conns.Load(); n != 2 {
		t.Fatalf("3 calls at once on a node allowing 2 streams a connection opened %d connections, want 2", n)
	}
	for _, c := range calls {
		ReleaseGRPCCall(c)
	}
}

// REFUSED_STREAM and a GOAWAY below the call: the node did not process the call, which
// goes again on a new connection and succeeds.
func TestGRPCClientRetriesCallsTheNodeDidNotProcess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action nodeAction
	}{{"REFUSED_STREAM", nodeRefuse}, {"GOAWAY", nodeGoAway}} {
		t.Run(tc.name, func(t *testing.T) {
			var refusedOnce atomic.Bool
			node := newRawNode(t, 100, func(c *rawNodeConn, id uint32, nth int) nodeAction {
				if nth == 2 && refusedOnce.CompareAndSwap(false, true) {
					return tc.action
				}
				return nodeAnswer
			})
			up := node.upstream(t)
			for i := range 3 {
				body, trailers, err := unary(t, up, "x")
				if err != nil || body != string(nodeBody) || trailers["grpc-status"] != "0" {
					t.Fatalf("call %d: %q %v %v", i, body, trailers, err)
				}
			}
			if got := node.calls.Load(); got != 4 {
				t.Fatalf("node saw %d calls, want 4 (the refused one sent again)", got)
			}
		})
	}
}

// A call the node resets after its response header, or a connection the node closes
// mid-call, ends the call with an error, not a hang; the next call works.
func TestGRPCClientNodeResetsOrClosesMidCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action nodeAction
	}{{"RST_STREAM", nodeReset}, {"close", nodeClose}} {
		t.Run(tc.name, func(t *testing.T) {
			node := newRawNode(t, 100, func(c *rawNodeConn, id uint32, nth int) nodeAction {
				if nth == 1 && c.node.conns.Load() == 1 {
					return tc.action
				}
				return nodeAnswer
			})
			up := node.upstream(t)
			done := make(chan error, 1)
			go func() {
				_, _, err := unary(t, up, "x")
				done <- err
			}()
			select {
			case err := <-done:
				var ge *GRPCError
				if err == nil {
					t.Fatal("a call the node broke off succeeded")
				}
				if tc.action == nodeClose && (!errors.As(err, &ge) || ge.Message != "the upstream broke the call off") {
					t.Fatalf("closed mid-call: %v, want GRPCError \"the upstream broke the call off\"", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a call the node broke off still waits after 10 s")
			}
			body, _, err := unary(t, up, "x")
			if err != nil || body != string(nodeBody) {
				t.Fatalf("next call: %q %v", body, err)
			}
		})
	}
}

// A caller that stops reading a big response holds at most the call's window of it: the
// node is held back by flow control, and the client's buffer stays bounded.
func TestGRPCClientSlowReaderHoldsTheNodeBack(t *testing.T) {
	node := newRawNode(t, 100, func(*rawNodeConn, uint32, int) nodeAction { return nodeBigBody })
	up := node.upstream(t)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	cn := call.conn.Load()
	buffered := func() int {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return len(call.buf) - call.start
	}
	// The node sends what the window lets it: wait for most of it, however busy the
	// machine, then give it time to send more than it may.
	for end := time.Now().Add(20 * time.Second); buffered() < grpcStreamBuffer-16384; {
		if time.Now().After(end) {
			t.Fatalf("the call buffered only %d bytes in 20 s: the node did not send", buffered())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if held := buffered(); held > grpcStreamBuffer {
		t.Fatalf("the call buffered %d bytes unread, past its window %d", held, grpcStreamBuffer)
	}
	n, err := io.Copy(io.Discard, call)
	if err != nil || n != 1<<20 {
		t.Fatalf("read %d bytes, %v; want the whole 1 MiB once read", n, err)
	}
}

// A node that stops reading the request body holds the sender back at the node's
// window: the body's goroutine waits, nothing piles up, and the call can still be
// cancelled.
func TestGRPCClientNodeStopsReading(t *testing.T) {
	node := newRawNode(t, 100, nil)
	node.stopOnData.Store(true)
	up := node.upstream(t)
	// A body that never ends, streamed: the pump sends it as the windows allow.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		chunk := make([]byte, 16384)
		for {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	ctx := grpcCtx("/svc/M", "")
	call := AcquireGRPCCall(0)
	var info Info
	done := make(chan error, 1)
	go func() { done <- up.RoundTripGRPC(call, ctx, pr, &info) }()
	sent := func() (int32, bool) {
		cn := call.conn.Load()
		if cn == nil {
			return 0, false
		}
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return 65535 - call.sendWindow, call.pumping
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := sent(); n == 65535 || time.Now().After(end) {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // time to send more than it may
	if n, pumping := sent(); n != 65535 || !pumping {
		t.Fatalf("sent %d bytes (pump running %v) to a node that stopped reading, want its whole window, 65535, and the pump waiting", n, pumping)
	}
	call.Cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrGRPCStopped) {
			t.Fatalf("a cancelled call whose node stopped reading: %v, want ErrGRPCStopped", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call still waits 20 s after it was cancelled")
	}
	pw.Close() // the pump's read returns
	ReleaseGRPCCall(call)
}

// A unary call, once the connection is up, allocates nothing on the client's side.
func TestGRPCClientUnaryAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	node := newRawNode(t, 100, nil)
	up := node.upstream(t)
	ctx := grpcCtx("/svc/M", "0123456789")
	var info Info
	var rd bytes.Reader
	buf := make([]byte, 64)
	// With a grpc-timeout and without: either way the call's one timer also watches
	// timeout.read and timeout.send.
	for _, deadline := range []time.Duration{10 * time.Second, 0} {
		one := func() {
			call := AcquireGRPCCall(deadline)
			rd.Reset(ctx.Request.Body())
			if err := up.RoundTripGRPC(call, ctx, &rd, &info); err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := call.Read(buf); err != nil {
					break
				}
			}
			ReleaseGRPCCall(call)
		}
		for range 100 {
			one()
		}
		runtime.GC()
		if allocs := testing.AllocsPerRun(1000, one); allocs > 0.05 {
			t.Fatalf("a unary call (grpc-timeout %v) allocates %.2f times, want 0", deadline, allocs)
		}
	}
}

// The request's headers go as HTTP/2 wants them: lowercase, no connection-specific ones.
func TestGRPCClientRequestHeaders(t *testing.T) {
	host, port := h2cNodeEcho(t)
	up := build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: host, Port: port, Weight: 1}}}, nil)
	ctx := grpcCtx("/svc/M?x=1", "b")
	ctx.Request.Header.Set("X-Custom", "v1")
	ctx.Request.Header.Set("Connection", "keep-alive")
	ctx.Request.Header.Set("Te", "gzip")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(call)
	for _, want := range []string{"path=/svc/M?x=1", "host=gw.test", "x-custom=v1", "te=trailers", "connection=\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the node saw %q, want it to hold %q", got, want)
		}
	}
}

// h2cNodeEcho is an h2c node that answers with what it saw of the request's header.
func h2cNodeEcho(t *testing.T) (host string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protocols, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		fmt.Fprintf(w, "path=%s\nhost=%s\nx-custom=%s\nte=%s\nconnection=%s\n", r.URL.RequestURI(), r.Host,
			r.Header.Get("X-Custom"), r.Header.Get("Te"), r.Header.Get("Connection"))
	})}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// BenchmarkGRPCClientUnary is one unary call over a kept-alive h2c connection to a node
// that allocates nothing per call (rawNode), with a deadline as grpcload sets one: the
// client's own cost, allocations included.
func BenchmarkGRPCClientUnary(b *testing.B) {
	node := newRawNode(b, 100, nil)
	p := NewPools()
	defer p.Close()
	up, err := p.Upstream(&conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port(), Weight: 1}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := grpcCtx("/svc/M", "0123456789")
	var info Info
	var rd bytes.Reader
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		call := AcquireGRPCCall(10 * time.Second)
		rd.Reset(ctx.Request.Body())
		if err := up.RoundTripGRPC(call, ctx, &rd, &info); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := call.Read(buf); err != nil {
				break
			}
		}
		ReleaseGRPCCall(call)
	}
}

// A call whose deadline passes while its connection is still being set up (a node that
// takes the connection and never says SETTINGS) stops then, not at the connect timeout.
func TestGRPCClientDeadlineWhileDialling(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent until the test ends
		}
	}()
	up := build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Weight: 1}},
		Timeout: &conf.Timeout{Connect: 60, Send: 60, Read: 60}}, nil)
	call := AcquireGRPCCall(300 * time.Millisecond)
	defer ReleaseGRPCCall(call)
	ctx := grpcCtx("/svc/M", "x")
	var info Info
	start := time.Now()
	err = up.RoundTripGRPC(call, ctx, nil, &info)
	if !errors.Is(err, ErrGRPCStopped) || !call.Expired() {
		t.Fatalf("a call past its deadline while dialling: %v (expired %v), want ErrGRPCStopped", err, call.Expired())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the call took %v to stop, past its 300 ms deadline by far", took)
	}
}

// grpcs: the node's certificate is verified for the name sent, and the node must agree
// on h2 by ALPN; a node that speaks only HTTP/1.1 over TLS is a failed handshake.
func TestGRPCClientOverTLS(t *testing.T) {
	ca := newTestCA(t, "test CA")
	_, _, pair := ca.issue(t, x509.ExtKeyUsageServerAuth, "a.example.test")
	for _, tt := range []struct {
		name    string
		h2      bool
		host    string
		wantErr string // the GRPCError's message; "" for a call that succeeds
		wantLog string
	}{
		{"h2", true, "a.example.test", "", ""},
		{"wrong name", true, "b.example.test", "the upstream's TLS certificate did not verify; the error log says why", `for name "b.example.test"`},
		{"no h2 by ALPN", false, "a.example.test", "the TLS handshake with the upstream failed; the error log says why", "did not agree on HTTP/2 by ALPN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "Grpc-Status")
				w.Header().Set("Content-Type", "application/grpc")
				fmt.Fprintf(w, "sni=%s proto=%s", r.TLS.ServerName, r.Proto)
				w.Header().Set("Grpc-Status", "0")
			}))
			srv.EnableHTTP2 = tt.h2
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
			srv.Config.ErrorLog = discardLog
			srv.StartTLS()
			t.Cleanup(srv.Close)
			log := &logRecorder{}
			p := NewPoolsWith(Options{RootCAs: ca.pool(), Logf: log.logf})
			t.Cleanup(p.Close)
			up, err := p.Upstream(&conf.Upstream{Scheme: "grpcs", PassHost: "pass",
				Nodes: conf.Nodes{{Host: "127.0.0.1", Port: srv.Listener.Addr().(*net.TCPAddr).Port, Weight: 1}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := grpcCtx("/svc/M", "x")
			ctx.Request.Header.SetHost(tt.host)
			call := AcquireGRPCCall(0)
			defer ReleaseGRPCCall(call)
			var info Info
			err = up.RoundTripGRPC(call, ctx, nil, &info)
			var ge *GRPCError
			switch {
			case tt.wantErr == "":
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(call)
				if want := "sni=" + tt.host + " proto=HTTP/2.0"; string(body) != want {
					t.Fatalf("the node saw %q, want %q", body, want)
				}
			case !errors.As(err, &ge) || ge.Message != tt.wantErr:
				t.Fatalf("got %v, want GRPCError %q", err, tt.wantErr)
			case !strings.Contains(log.String(), tt.wantLog):
				t.Fatalf("logged %q, want %q", log.String(), tt.wantLog)
			}
		})
	}
}

// A streamed call the node resets before answering, while the client's body is still
// open, fails at once: giving it up does not wait for the client's next message.
func TestGRPCClientStreamingCallResetByNode(t *testing.T) {
	node := newRawNode(t, 100, nil)
	node.resetOnHeaders.Store(true)
	up := node.upstream(t)
	pr, pw := io.Pipe() // the client sends nothing more until told
	ctx := grpcCtx("/svc/M", "")
	call := AcquireGRPCCall(0)
	var info Info
	done := make(chan error, 1)
	go func() { done <- up.RoundTripGRPC(call, ctx, pr, &info) }()
	select {
	case err := <-done:
		var ge *GRPCError
		if !errors.As(err, &ge) || ge.Message != "the upstream broke the call off" {
			t.Fatalf("a call the node reset: %v, want GRPCError \"the upstream broke the call off\"", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call the node reset still waits after 10 s, for its client's body")
	}
	pw.Close() // what the worker does (closes the client's body) before the release
	ReleaseGRPCCall(call)
}

// An upstream whose pools were closed (replaced by a new config while a call was on its
// way) still serves its calls, each on a connection of its own, as Pools.Close says.
func TestGRPCClientAfterPoolsClose(t *testing.T) {
	node := newRawNode(t, 100, nil)
	p := NewPools()
	up, err := p.Upstream(&conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port(), Weight: 1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	for i := range 2 {
		body, trailers, err := unary(t, up, "x")
		if err != nil || body != string(nodeBody) || trailers["grpc-status"] != "0" {
			t.Fatalf("call %d after Close: %q %v %v", i, body, trailers, err)
		}
	}
	if n := node.conns.Load(); n != 2 {
		t.Fatalf("2 calls after Close opened %d connections, want one each", n)
	}
}

// keepalive_pool.size caps the idle connections kept, as for HTTP/1.1 nodes: past it a
// connection whose last call ended is closed.
func TestGRPCClientKeepsPoolSizeIdleConnections(t *testing.T) {
	node := newRawNode(t, 1, func(*rawNodeConn, uint32, int) nodeAction { return nodeHeadersOnly })
	up := build(t, &conf.Upstream{Scheme: "grpc", KeepalivePool: &conf.KeepalivePool{Size: 1, IdleTimeout: 60, Requests: 1000},
		Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port(), Weight: 1}}}, nil)
	calls := make([]*GRPCCall, 3)
	for i := range calls {
		ctx := grpcCtx("/svc/M", "x")
		calls[i] = AcquireGRPCCall(0)
		var info Info
		if err := up.RoundTripGRPC(calls[i], ctx, nil, &info); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for _, c := range calls {
		ReleaseGRPCCall(c)
	}
	for end := time.Now().Add(20 * time.Second); node.live.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections open to the node 20 s after their calls ended, want keepalive_pool.size, 1", node.live.Load())
		}
	}
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	if n := node.conns.Load(); n != 3 {
		t.Fatalf("the node saw %d connections, want 3: the next call reuses the one kept", n)
	}
}

// The call's goroutine reads the response headers while the read loop decodes the
// trailers that came right behind them (the node sends both in one write): the headers
// must stay as they came, and under -race the two must not touch the same memory.
func TestGRPCClientHeadersStayWhileTrailersArrive(t *testing.T) {
	node := newRawNode(t, 100, nil)
	up := node.upstream(t)
	for i := range 300 {
		ctx := grpcCtx("/svc/M", "0123456789")
		call := AcquireGRPCCall(0)
		var info Info
		if err := up.RoundTripGRPC(call, ctx, bytes.NewReader(ctx.Request.Body()), &info); err != nil {
			t.Fatal(err)
		}
		headers := map[string]string{}
		for range 20 { // read them over while the trailers come
			headers = fieldsOf(call.Headers(), call.Header)
			runtime.Gosched()
		}
		body, err := io.ReadAll(call)
		trailers := fieldsOf(call.Trailers(), call.Trailer)
		if err != nil || string(body) != string(nodeBody) || len(headers) != 1 || headers["content-type"] != "application/grpc" ||
			len(trailers) != 2 || trailers["grpc-status"] != "0" || trailers["grpc-message"] != "fine" {
			t.Fatalf("call %d: headers %v, body %q %v, trailers %v", i, headers, body, err, trailers)
		}
		ReleaseGRPCCall(call)
	}
}
