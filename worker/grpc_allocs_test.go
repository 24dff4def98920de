package worker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"gw/internal/race"
)

// grpcEchoNode is a gRPC node on the Framer alone that answers every call with a
// 10-byte message and grpc-status 0, its header fields indexed in its dynamic table as
// grpc-go's are: once a connection is up it allocates nothing, so that an allocation
// count measures the worker.
func grpcEchoNode(t testing.TB, calls *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveGRPCEcho(c, calls)
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}

func serveGRPCEcho(c net.Conn, calls *atomic.Int64) {
	defer c.Close()
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	fr := http2.NewFramer(bw, br)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return
	}
	_ = fr.WriteSettings()
	_ = fr.WriteWindowUpdate(0, 1<<30)
	_ = bw.Flush()
	var payload [16384]byte
	message := []byte("\x00\x00\x00\x00\x0a0123456789")
	for {
		fh, err := fr.ReadFrameHeader()
		if err != nil {
			return
		}
		p := payload[:fh.Length]
		if _, err := io.ReadFull(br, p); err != nil {
			return
		}
		switch {
		case fh.Type == http2.FrameSettings && !fh.Flags.Has(http2.FlagSettingsAck):
			_ = fr.WriteSettingsAck()
		case fh.Type == http2.FrameData && fh.Length > 0:
			_ = fr.WriteWindowUpdate(0, fh.Length)
		}
		if (fh.Type != http2.FrameHeaders && fh.Type != http2.FrameData) || !fh.Flags.Has(http2.FlagDataEndStream) {
			_ = bw.Flush()
			continue
		}
		hbuf.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: fh.StreamID, BlockFragment: hbuf.Bytes(), EndHeaders: true})
		_ = fr.WriteData(fh.StreamID, false, message)
		hbuf.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: fh.StreamID, BlockFragment: hbuf.Bytes(), EndHeaders: true, EndStream: true})
		_ = bw.Flush()
		calls.Add(1)
	}
}

// newGRPCLoop is h2Loop for a unary gRPC call, as grpcload makes them: HEADERS (POST,
// application/grpc, te, grpc-timeout) and a DATA frame that ends the stream, the header
// block all indexes after the first call.
func newGRPCLoop(t testing.TB, addr string) *h2Loop {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l := &h2Loop{conn: conn, buf: make([]byte, 64<<10), id: 1}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	fields := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/bench.Echo/Call"}, {Name: ":authority", Value: "gw.test"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "grpc-go/1.83.2"},
		{Name: "te", Value: "trailers"}, {Name: "grpc-timeout", Value: "9999927u"}}
	block := func() []byte {
		hbuf.Reset()
		for _, f := range fields {
			_ = enc.WriteField(f)
		}
		return append([]byte(nil), hbuf.Bytes()...)
	}
	first := block()
	l.block = block()
	message := []byte("\x00\x00\x00\x00\x0a0123456789")
	fr := http2.NewFramer(conn, conn)
	_, _ = io.WriteString(conn, http2.ClientPreface)
	_ = fr.WriteSettings()
	_ = fr.WriteWindowUpdate(0, 1<<30)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: l.id, BlockFragment: first, EndHeaders: true})
	_ = fr.WriteData(l.id, true, message)
	l.id += 2
	l.await(t)
	// HEADERS then DATA with END_STREAM, whose stream ids round patches (both at 5).
	var frames bytes.Buffer
	fw := http2.NewFramer(&frames, nil)
	_ = fw.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: l.block, EndHeaders: true})
	l.frame = append([]byte(nil), frames.Bytes()...)
	frames.Reset()
	_ = fw.WriteData(1, true, message)
	l.data = append([]byte(nil), frames.Bytes()...)
	return l
}

// A unary gRPC call through the worker's handler, from the client's HEADERS and DATA to
// the node and back, allocates nothing: the stream, the call's state (proxy.GRPCCall)
// and the request body's reader are pooled, the header blocks read without the Framer's
// frame values, and the fields both peers index decoded without copies.
func TestGRPCUnaryAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	var calls atomic.Int64
	node := grpcEchoNode(t, &calls)
	w := benchWorkerFor(t, fmt.Appendf(nil, `{"uri":"/bench.Echo/*","upstream":{"scheme":"grpc","type":"roundrobin","nodes":{%q:1}}}`, node))
	f := newH2Fixture(t, nil, w.handle)
	l := newGRPCLoop(t, f.addr)
	for range 200 {
		l.round(t)
	}
	n := testing.AllocsPerRun(1000, func() { l.round(t) })
	if got := calls.Load(); got != 1+200+1001 {
		t.Fatalf("the node answered %d calls, want every one of the %d made", got, 1+200+1001)
	}
	if n > 0 {
		t.Fatalf("%.2f allocations per proxied unary gRPC call, want 0", n)
	}
}

// BenchmarkGRPCUnary is one unary gRPC call through the worker's handler and client, one
// call in flight on the connection.
func BenchmarkGRPCUnary(b *testing.B) {
	var calls atomic.Int64
	node := grpcEchoNode(b, &calls)
	w := benchWorkerFor(b, fmt.Appendf(nil, `{"uri":"/bench.Echo/*","upstream":{"scheme":"grpc","type":"roundrobin","nodes":{%q:1}}}`, node))
	f := newH2Fixture(b, nil, w.handle)
	l := newGRPCLoop(b, f.addr)
	b.ReportAllocs()
	for b.Loop() {
		l.round(b)
	}
}
