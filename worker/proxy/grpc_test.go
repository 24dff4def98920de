package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// h2cNode serves HTTP/2 with prior knowledge, answering each request with its path and
// a trailer, as a gRPC server frames a call.
func h2cNode(t testing.TB) (host string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protocols, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		_, _ = io.WriteString(w, r.URL.Path+" "+string(body)+" te="+r.Header.Get("Te")+" proto="+r.Proto)
		w.Header().Set("Grpc-Status", "0")
	})}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// fieldsOf collects a call's header or trailer fields.
func fieldsOf(n int, field func(int) ([]byte, []byte)) map[string]string {
	m := map[string]string{}
	for i := range n {
		k, v := field(i)
		m[string(k)] = string(v)
	}
	return m
}

func grpcCtx(path, body string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(path)
	ctx.Request.Header.SetHost("gw.test")
	ctx.Request.Header.SetContentType("application/grpc")
	ctx.Request.SetBodyString(body)
	return &ctx
}

// A call goes to the node over h2c with TE: trailers and comes back with its trailer; a
// node that refuses the connection is passed over for the next.
func TestRoundTripGRPCOverH2C(t *testing.T) {
	host, port := h2cNode(t)
	up := build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{
		{Host: "127.0.0.1", Port: deadPort(t), Weight: 1},
		{Host: host, Port: port, Weight: 1},
	}}, nil)
	if !up.GRPC() {
		t.Fatal("scheme grpc: GRPC() is false")
	}
	for i := range 4 {
		ctx := grpcCtx("/svc/M", "msg"+strconv.Itoa(i))
		var info Info
		call := AcquireGRPCCall(0)
		err := up.RoundTripGRPC(call, ctx, bytes.NewReader(ctx.Request.Body()), &info)
		if err != nil {
			t.Fatalf("call %d: %v (%T)", i, err, errors.Unwrap(err))
		}
		body, err := io.ReadAll(call)
		trailers := fieldsOf(call.Trailers(), call.Trailer)
		ReleaseGRPCCall(call)
		want := "/svc/M msg" + strconv.Itoa(i) + " te=trailers proto=HTTP/2.0"
		if err != nil || string(body) != want || trailers["grpc-status"] != "0" {
			t.Fatalf("call %d: %q %v trailers %v, want %q and grpc-status 0", i, body, err, trailers, want)
		}
	}
}

func TestRoundTripGRPCNodeDown(t *testing.T) {
	up := build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: deadPort(t), Weight: 1}}}, nil)
	ctx := grpcCtx("/svc/M", "x")
	var info Info
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	err := up.RoundTripGRPC(call, ctx, nil, &info)
	var ge *GRPCError
	if !errors.As(err, &ge) || ge.Message != "no upstream node answered" {
		t.Fatalf("node down: %v, want GRPCError \"no upstream node answered\"", err)
	}
	if string(info.Node) == "" || info.UpstreamNanos < 0 {
		t.Fatalf("info not filled: node %q, %d ns", info.Node, info.UpstreamNanos)
	}
}

// BenchmarkRoundTripGRPC is one unary call's upstream side over a kept-alive h2c
// connection to a net/http node in the same process: request, response body and
// trailer. Its allocations are the node's (BenchmarkGRPCClientUnary has the client's
// alone).
func BenchmarkRoundTripGRPC(b *testing.B) {
	host, port := h2cNode(b)
	p := NewPools()
	defer p.Close()
	up, err := p.Upstream(&conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: host, Port: port, Weight: 1}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := grpcCtx("/svc/M", "0123456789")
	b.ReportAllocs()
	for b.Loop() {
		var info Info
		call := AcquireGRPCCall(0)
		if err := up.RoundTripGRPC(call, ctx, bytes.NewReader(ctx.Request.Body()), &info); err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, call)
		ReleaseGRPCCall(call)
	}
}

// BenchmarkGRPCClientUnaryNoDeadline is BenchmarkGRPCClientUnary for a call without
// grpc-timeout: its timer runs for timeout.read and timeout.send alone.
func BenchmarkGRPCClientUnaryNoDeadline(b *testing.B) {
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
		call := AcquireGRPCCall(0)
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
