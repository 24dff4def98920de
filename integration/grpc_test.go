package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"gw/internal/testcert"
	"gw/internal/testnet"
)

// The gRPC tests run a real gRPC server (google.golang.org/grpc) behind the real gwctl
// binary and call it with grpc-go's client over h2c (prior knowledge) to node_listen.
// The service is written without generated code: messages are raw bytes (rawCodec), the
// methods a grpc.ServiceDesc, so each kind of call is exercised as the wire carries it.

// rawCodec passes messages as the bytes they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

// grpcTestServer is the node: Echo (unary), Count (server-streaming: n messages),
// Sum (client-streaming: how many messages and bytes), Chat (bidi: each message back),
// Hang (unary that waits for its cancellation, which it reports), Tick (server-streaming:
// n messages 0.5 s apart), Stall (server-streaming: one message, then Hang's wait) and
// Deaf (client-streaming that reads nothing, then Hang's wait).
type grpcTestServer struct {
	addr      string
	name      string
	cancelled chan struct{} // Hang's context ended
	calls     atomic.Int64
	flooded   atomic.Int64 // MiB Flood managed to send
}

func startGRPCServer(t *testing.T, name string, creds credentials.TransportCredentials) *grpcTestServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &grpcTestServer{addr: ln.Addr().String(), name: name, cancelled: make(chan struct{}, 16)}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(rawCodec{})}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Echo", Handler: s.echo},
			{MethodName: "Hang", Handler: s.hang},
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "Count", Handler: s.count, ServerStreams: true},
			{StreamName: "Flood", Handler: s.flood, ServerStreams: true},
			{StreamName: "Sum", Handler: s.sum, ClientStreams: true},
			{StreamName: "Chat", Handler: s.chat, ServerStreams: true, ClientStreams: true},
			{StreamName: "Greet", Handler: s.greet, ServerStreams: true, ClientStreams: true},
			{StreamName: "Tick", Handler: s.tick, ServerStreams: true},
			{StreamName: "Stall", Handler: s.stall, ServerStreams: true},
			{StreamName: "Deaf", Handler: s.deaf, ClientStreams: true},
		},
	}, s)
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(srv.Stop)
	return s
}

func (s *grpcTestServer) echo(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	s.calls.Add(1)
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-want-status"); len(v) > 0 {
		code, _ := strconv.Atoi(v[0])
		return nil, status.Error(codes.Code(code), "asked for "+v[0])
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-node", s.name, "x-seen-authority", strings.Join(md.Get(":authority"), ",")))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "from "+s.name))
	out := append([]byte(s.name+":"), in...)
	return &out, nil
}

func (s *grpcTestServer) hang(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		s.cancelled <- struct{}{}
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		out := []byte("woke")
		return &out, nil
	}
}

// waitCancelled waits for the call's cancellation, which it reports, or 30 s.
func (s *grpcTestServer) waitCancelled(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.cancelled <- struct{}{}
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return status.Error(codes.Internal, "not cancelled in 30 s")
	}
}

func (s *grpcTestServer) tick(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(in))
	for i := range n {
		time.Sleep(500 * time.Millisecond)
		msg := []byte(strconv.Itoa(i))
		if err := stream.SendMsg(&msg); err != nil {
			return err
		}
	}
	return nil
}

func (s *grpcTestServer) stall(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	if err := stream.SendMsg(&in); err != nil {
		return err
	}
	return s.waitCancelled(stream.Context())
}

// deaf takes the call and reads none of it: its flow-control window shuts.
func (s *grpcTestServer) deaf(_ any, stream grpc.ServerStream) error {
	return s.waitCancelled(stream.Context())
}

func (s *grpcTestServer) count(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(in))
	for i := range n {
		msg := []byte(strconv.Itoa(i))
		if err := stream.SendMsg(&msg); err != nil {
			return err
		}
	}
	return nil
}

// flood sends 1 MiB messages, up to 512, as fast as the flow-control windows let it.
func (s *grpcTestServer) flood(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	msg := []byte(strings.Repeat("f", 1<<20))
	for range 512 {
		if err := stream.SendMsg(&msg); err != nil {
			return err
		}
		s.flooded.Add(1)
	}
	return nil
}

func (s *grpcTestServer) sum(_ any, stream grpc.ServerStream) error {
	messages, total := 0, 0
	for {
		var in []byte
		err := stream.RecvMsg(&in)
		if err == io.EOF {
			out := []byte(fmt.Sprintf("%d messages, %d bytes", messages, total))
			return stream.SendMsg(&out)
		}
		if err != nil {
			return err
		}
		messages++
		total += len(in)
	}
}

func (s *grpcTestServer) chat(_ any, stream grpc.ServerStream) error {
	for {
		var in []byte
		err := stream.RecvMsg(&in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(&in); err != nil {
			return err
		}
	}
}

// greet speaks first: a greeting before the client has sent anything, then it reads the
// client's messages to the end.
func (s *grpcTestServer) greet(_ any, stream grpc.ServerStream) error {
	hello := []byte("hello from " + s.name)
	if err := stream.SendMsg(&hello); err != nil {
		return err
	}
	for {
		var in []byte
		if err := stream.RecvMsg(&in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// dialGW is a gRPC client of the gateway's node_listen, h2c with prior knowledge.
func dialGW(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func unary(ctx context.Context, cc *grpc.ClientConn, method, msg string, opts ...grpc.CallOption) (string, error) {
	in, out := []byte(msg), []byte(nil)
	err := cc.Invoke(ctx, "/test.Echo/"+method, &in, &out, opts...)
	return string(out), err
}

func putGRPCRoute(t *testing.T, in *instance, id, uri string, upstream map[string]any, plugins string) {
	t.Helper()
	up, _ := json.Marshal(upstream)
	if plugins == "" {
		plugins = "{}"
	}
	body := fmt.Sprintf(`{"uri":%q,"plugins":%s,"upstream":%s}`, uri, plugins, up)
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
		t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msgPart string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || !strings.Contains(st.Message(), msgPart) {
		t.Fatalf("%s: got %v, want code %v with message containing %q", what, err, code, msgPart)
	}
}

// Unary, server-, client- and bidi-streaming calls through a grpc route, with headers
// and trailers passed both ways and the node's own status codes kept.
func TestGRPCCallsThroughTheGateway(t *testing.T) {
	node := startGRPCServer(t, "n1", nil)
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("worker_processes: 1\nssl:\n  enabled: true\n  listen: [%q]\n", tlsAddr))
	in.start()
	cert := newTLSTestCert(t, "grpc.test")
	in.mustPut("/apisix/admin/ssls/1", cert.sslBody("grpc.test"))
	putGRPCRoute(t, in, "1", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1}}, "")
	cc := dialGW(t, in.data)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Over TLS, h2 by ALPN, as over h2c.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(cert.cert))
	secure, err := grpc.NewClient(tlsAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "grpc.test"})),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	if out, err := unary(ctx, secure, "Echo", "over tls"); err != nil || out != "n1:over tls" {
		t.Fatalf("unary over TLS: %q, %v", out, err)
	}

	var header, trailer metadata.MD
	out, err := unary(ctx, cc, "Echo", "hello", grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || out != "n1:hello" {
		t.Fatalf("unary: %q, %v", out, err)
	}
	if got := header.Get("x-node"); len(got) != 1 || got[0] != "n1" {
		t.Fatalf("unary: response header x-node %v, want [n1]", got)
	}
	if got := header.Get("x-seen-authority"); len(got) != 1 || got[0] != in.data {
		t.Fatalf("the node saw :authority %v, want the client's %q (pass_host pass)", got, in.data)
	}
	if got := trailer.Get("x-trailer"); len(got) != 1 || got[0] != "from n1" {
		t.Fatalf("unary: trailer x-trailer %v, want [from n1]", got)
	}
	// The node's own status, in its trailers-only response.
	_, err = unary(metadata.AppendToOutgoingContext(ctx, "x-want-status", "5"), cc, "Echo", "x")
	wantCode(t, "the node's NOT_FOUND", err, codes.NotFound, "asked for 5")

	// Server-streaming: 1000 messages, in order.
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Count")
	if err != nil {
		t.Fatal(err)
	}
	n := []byte("1000")
	if err := stream.SendMsg(&n); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	for i := 0; ; i++ {
		var msg []byte
		err := stream.RecvMsg(&msg)
		if err == io.EOF {
			if i != 1000 {
				t.Fatalf("server-streaming: %d messages, want 1000", i)
			}
			break
		}
		if err != nil || string(msg) != strconv.Itoa(i) {
			t.Fatalf("server-streaming message %d: %q, %v", i, msg, err)
		}
	}

	// Client-streaming: 500 messages of 1 KiB, past the stream's flow-control window.
	stream, err = cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Echo/Sum")
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 1024))
	for range 500 {
		if err := stream.SendMsg(&chunk); err != nil {
			t.Fatal(err)
		}
	}
	_ = stream.CloseSend()
	var sum []byte
	if err := stream.RecvMsg(&sum); err != nil || string(sum) != "500 messages, 512000 bytes" {
		t.Fatalf("client-streaming: %q, %v", sum, err)
	}

	// Bidi: 10,000 messages, each answered before the next is sent, so the call is
	// full duplex through the gateway: a buffered body would never answer the first.
	stream, err = cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		msg := []byte("m" + strconv.Itoa(i))
		if err := stream.SendMsg(&msg); err != nil {
			t.Fatalf("bidi send %d: %v", i, err)
		}
		var back []byte
		if err := stream.RecvMsg(&back); err != nil || string(back) != string(msg) {
			t.Fatalf("bidi message %d: %q, %v", i, back, err)
		}
	}
	_ = stream.CloseSend()
	var tail []byte
	if err := stream.RecvMsg(&tail); err != io.EOF {
		t.Fatalf("bidi end: %v, want io.EOF (status OK)", err)
	}

	// Bidi where the node speaks first: the call reaches the node before the client
	// sends a message (its HEADERS are not held back for a first DATA).
	greetCtx, greetCancel := context.WithTimeout(ctx, 20*time.Second)
	defer greetCancel()
	stream, err = cc.NewStream(greetCtx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Echo/Greet")
	if err != nil {
		t.Fatal(err)
	}
	var hello []byte
	if err := stream.RecvMsg(&hello); err != nil || string(hello) != "hello from n1" {
		t.Fatalf("bidi, the node first: %q, %v, want its greeting before the client sends", hello, err)
	}
	_ = stream.CloseSend()
	if err := stream.RecvMsg(&hello); err != io.EOF {
		t.Fatalf("bidi, the node first, end: %v, want io.EOF (status OK)", err)
	}

	// An HTTP/1.1 request to the gRPC route is refused, naming why.
	resp, body := in.get("/test.Echo/Echo")
	if resp.StatusCode != 400 || !strings.Contains(body, "needs HTTP/2") {
		t.Fatalf("HTTP/1.1 to a grpc route: %d %s", resp.StatusCode, body)
	}
}

// A client's cancellation reaches the node; grpc-timeout is the upstream call's deadline,
// past which the client gets DEADLINE_EXCEEDED; a node down is UNAVAILABLE; no route is
// UNIMPLEMENTED, as the 404 APISIX answers reads to a gRPC client.
func TestGRPCCancelDeadlineAndGatewayErrors(t *testing.T) {
	node := startGRPCServer(t, "n1", nil)
	in := newInstance(t, "worker_processes: 1\n")
	in.start()
	putGRPCRoute(t, in, "1", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1}}, "")
	cc := dialGW(t, in.data)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := unary(ctx, cc, "Hang", "x"); done <- err }()
	time.Sleep(500 * time.Millisecond) // the call reaches the node
	cancel()
	select {
	case <-node.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the client's cancellation did not reach the node in 20 s")
	}
	wantCode(t, "cancelled call", <-done, codes.Canceled, "")

	// The client sends grpc-timeout; the gateway gives the node's call that deadline. The
	// node (Hang) honours it too: whichever ends first, the client sees DEADLINE_EXCEEDED.
	ctx, cancel = context.WithTimeout(context.Background(), 1*time.Second)
	_, err := unary(ctx, cc, "Hang", "x")
	cancel()
	wantCode(t, "deadline", err, codes.DeadlineExceeded, "")

	// Upstream down: a port nothing listens on.
	dead := fmt.Sprintf("127.0.0.1:%d", testnet.RefusedPort(t))
	putGRPCRoute(t, in, "2", "/down.Svc/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{dead: 1}}, "")
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in2, out := []byte("x"), []byte(nil)
	err = cc.Invoke(ctx, "/down.Svc/M", &in2, &out)
	wantCode(t, "node down", err, codes.Unavailable, "no upstream node answered")

	err = cc.Invoke(ctx, "/nothing.Here/M", &in2, &out)
	wantCode(t, "no route", err, codes.Unimplemented, "404 Route Not Found")

	// A node that refuses the connection is passed over for the next (retries), as the
	// HTTP forward does: every call is answered.
	putGRPCRoute(t, in, "3", "/test.Echo/Echo", map[string]any{"scheme": "grpc", "nodes": map[string]int{dead: 1, node.addr: 1}}, "")
	for i := range 4 {
		if out, err := unary(ctx, cc, "Echo", "again"); err != nil || out != "n1:again" {
			t.Fatalf("call %d with one node down: %q, %v", i+1, out, err)
		}
	}
}

// The upstream's timeout.read and timeout.send are nginx's grpc_read_timeout and
// grpc_send_timeout, per call: a node silent past timeout.read (before or after its
// response header) or that takes none of the request for timeout.send has its call reset,
// and the client gets UNAVAILABLE naming the timeout, as nginx's 504 reads to a gRPC
// client; a stream whose messages come closer together than timeout.read lives on.
func TestGRPCUpstreamTimeouts(t *testing.T) {
	node := startGRPCServer(t, "n1", nil)
	in := newInstance(t, "worker_processes: 1\naccess_log:\n  flush_interval: 100ms\n")
	in.start()
	putGRPCRoute(t, in, "1", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1},
		"timeout": map[string]float64{"connect": 5, "send": 1, "read": 2}}, "")
	cc := dialGW(t, in.data)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wantCancelled := func(what string) {
		t.Helper()
		select {
		case <-node.cancelled:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the node's call was not cancelled in 20 s", what)
		}
	}
	// took checks that a call ended about its timeout after start, not sooner and not
	// long after. A stream's clock starts in gw at the node's last frame, a moment
	// before the client sees what that frame carried and takes its start: so the client
	// may count a little less than the timeout (1.9993 s for 2 s once, under load). A
	// quarter of a second is far more than that moment, and far less than a timeout that
	// fires early for a wrong reason would show.
	took := func(what string, start time.Time, least time.Duration) {
		t.Helper()
		const clientLag = 250 * time.Millisecond
		if d := time.Since(start); d < least-clientLag || d > least+20*time.Second {
			t.Fatalf("%s: ended after %v, want %v (and not 20 s later)", what, d, least)
		}
	}

	// A unary call whose node answers nothing.
	start := time.Now()
	_, err := unary(ctx, cc, "Hang", "x")
	wantCode(t, "a node silent past timeout.read", err, codes.Unavailable, "upstream sent nothing for 2s (timeout.read)")
	took("a node silent past timeout.read", start, 2*time.Second)
	wantCancelled("timeout.read before the header")

	// A stream with a message every 0.5 s, 4 s in all, lives on.
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Tick")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	n := []byte("8")
	if err := stream.SendMsg(&n); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	for i := 0; ; i++ {
		var msg []byte
		err := stream.RecvMsg(&msg)
		if err == io.EOF && i == 8 {
			break
		}
		if err != nil || string(msg) != strconv.Itoa(i) {
			t.Fatalf("a message every 0.5 s with timeout.read 2 s, message %d: %q, %v", i, msg, err)
		}
	}
	took("a stream of 8 messages 0.5 s apart", start, 4*time.Second)

	// A stream whose node goes silent after its first message: the timeout ends it in
	// trailers.
	stream, err = cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Stall")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&n); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var first []byte
	if err := stream.RecvMsg(&first); err != nil || string(first) != "8" {
		t.Fatalf("the stalling stream's first message: %q, %v", first, err)
	}
	start = time.Now()
	err = stream.RecvMsg(&first)
	wantCode(t, "a stream silent past timeout.read", err, codes.Unavailable, "upstream sent nothing for 2s (timeout.read)")
	took("a stream silent past timeout.read", start, 2*time.Second)
	wantCancelled("timeout.read after the header")

	// A node that reads none of a client's stream: its window shuts, and the request
	// waits for it past timeout.send.
	stream, err = cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Echo/Deaf")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	go func() {
		chunk := []byte(strings.Repeat("d", 16<<10))
		for range 4096 { // 64 MiB at most: far past any window on the way
			if stream.SendMsg(&chunk) != nil {
				return // the call ended
			}
		}
	}()
	var none []byte
	err = stream.RecvMsg(&none)
	wantCode(t, "a node that takes none of the request", err, codes.Unavailable, "upstream took none of the request for 1s (timeout.send)")
	took("a node that takes none of the request", start, time.Second)
	wantCancelled("timeout.send")

	// The connection stays for the next call.
	if out, err := unary(ctx, cc, "Echo", "after"); err != nil || out != "n1:after" {
		t.Fatalf("a call after the timeouts: %q, %v", out, err)
	}

	// The access log has nginx's statuses: 504 for a timeout before the node's response
	// header, the node's 200 after it.
	want := []string{`"POST /test.Echo/Hang HTTP/2.0" 504 `, `"POST /test.Echo/Tick HTTP/2.0" 200 `,
		`"POST /test.Echo/Stall HTTP/2.0" 200 `, `"POST /test.Echo/Deaf HTTP/2.0" 504 `}
	if !waitFor(10*time.Second, func() bool {
		log := in.accessLog()
		for _, w := range want {
			if !strings.Contains(log, w) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("access log:\n%s\nwant lines with %q", in.accessLog(), want)
	}
}

// A client that stops reading a server-streaming call holds the node back: the gateway
// passes on only what the client's window takes and buffers at most a window of the
// rest, so the node's sends block instead of piling up in the gateway. Cancelling the
// call then frees the node.
func TestGRPCSlowClientHoldsTheNodeBack(t *testing.T) {
	node := startGRPCServer(t, "n1", nil)
	in := newInstance(t, "worker_processes: 1\n")
	in.start()
	putGRPCRoute(t, in, "1", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1}}, "")
	cc := dialGW(t, in.data)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Echo/Flood",
		grpc.MaxCallRecvMsgSize(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	start := []byte("go")
	if err := stream.SendMsg(&start); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var first []byte
	if err := stream.RecvMsg(&first); err != nil || len(first) != 1<<20 {
		t.Fatalf("first message: %d bytes, %v", len(first), err)
	}
	// Then the client reads nothing. The node gets as far as the windows and socket
	// buffers on the way let it (a few MiB: the client's own window, which grpc-go
	// grows, the gateway's 256 KiB, the kernel's), never the 512 MiB it has to send.
	time.Sleep(3 * time.Second)
	stalled := node.flooded.Load()
	time.Sleep(2 * time.Second)
	if now := node.flooded.Load(); now >= 64 {
		t.Fatalf("the node sent %d MiB, then %d MiB, to a client that reads nothing: want it held back below 64 MiB", stalled, now)
	}
	t.Logf("the node was held back after %d MiB", stalled)
	cancel()
}

// The route's plugins run on the call's header: key-auth refuses a call without a key
// (UNAUTHENTICATED), limit-count one over the limit (UNAVAILABLE, as gRPC clients read a
// 429 or 503), and prometheus counts the calls.
func TestGRPCRouteWithPlugins(t *testing.T) {
	node := startGRPCServer(t, "n1", nil)
	in := newMetricsInstance(t, "worker_processes: 1\n")
	in.start()
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"grpc-key"}}}`)
	putGRPCRoute(t, in.instance, "1", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1}},
		`{"key-auth":{},"limit-count":{"count":3,"time_window":60,"rejected_code":429,"key":"consumer_name"},"prometheus":{}}`)
	cc := dialGW(t, in.data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := unary(ctx, cc, "Echo", "x")
	wantCode(t, "no key", err, codes.Unauthenticated, "Missing API key")
	keyed := metadata.AppendToOutgoingContext(ctx, "apikey", "grpc-key")
	for i := range 3 {
		if out, err := unary(keyed, cc, "Echo", "x"); err != nil || out != "n1:x" {
			t.Fatalf("call %d within the limit: %q, %v", i+1, out, err)
		}
	}
	_, err = unary(keyed, cc, "Echo", "x")
	wantCode(t, "over the limit", err, codes.Unavailable, "")
	if got := node.calls.Load(); got != 3 {
		t.Fatalf("the node got %d calls, want 3: refused calls must not reach it", got)
	}
	// jwt-auth, on a route for another host (the client's :authority).
	in.mustPut("/apisix/admin/consumers", `{"username":"jill","plugins":{"jwt-auth":{"key":"jwt-key","secret":"grpc-jwt-secret"}}}`)
	putGRPCRoute(t, in.instance, "2", "/test.Echo/*", map[string]any{"scheme": "grpc", "nodes": map[string]int{node.addr: 1}}, `{"jwt-auth":{}}`)
	if status, resp := in.adminCall("PATCH", "/apisix/admin/routes/2", `{"host":"jwt.test"}`); status != 200 {
		t.Fatalf("PATCH route 2: %d %s", status, resp)
	}
	jwtConn, err := grpc.NewClient(in.data, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("jwt.test"),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer jwtConn.Close()
	_, err = unary(ctx, jwtConn, "Echo", "x")
	wantCode(t, "jwt-auth without a token", err, codes.Unauthenticated, "Missing JWT token in request")
	token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"key": "jwt-key", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("grpc-jwt-secret"))
	if out, err := unary(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), jwtConn, "Echo", "signed"); err != nil || out != "n1:signed" {
		t.Fatalf("jwt-auth with a valid token: %q, %v", out, err)
	}

	var ok, over float64
	waitFor(10*time.Second, func() bool {
		f := in.scrape()
		ok = f["apisix_http_status"].Sum("apisix_http_status", map[string]string{"route": "1", "code": "200"})
		over = f["apisix_http_status"].Sum("apisix_http_status", map[string]string{"route": "1", "code": "429"})
		return ok == 3 && over == 1
	})
	if ok != 3 || over != 1 {
		t.Fatalf("apisix_http_status{route=1}: %v 200s and %v 429s, want 3 and 1", ok, over)
	}
}

// A grpcs upstream is verified as an https one: against ssl.ssl_trusted_certificate, for
// the name sent (pass_host node: the node's address); a node whose certificate does not
// verify is UNAVAILABLE, unless tls.verify is false.
func TestGRPCSUpstreamVerified(t *testing.T) {
	ca := testcert.NewCA(t, "grpc upstream CA")
	good := ca.Issue(t, testcert.Options{Names: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	rogue := testcert.SelfSigned(t, testcert.Options{Names: []string{"127.0.0.1"}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	trusted := startGRPCServer(t, "trusted", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{good.Pair}}))
	untrusted := startGRPCServer(t, "untrusted", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{rogue.Pair}}))

	in := newInstance(t, "worker_processes: 1\nssl:\n  ssl_trusted_certificate: conf/upstream-ca.pem\n")
	if err := os.WriteFile(filepath.Join(in.prefix, "conf", "upstream-ca.pem"), []byte(ca.CertPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	in.start()
	route := func(id, prefix, addr string, verify *bool) {
		up := map[string]any{"scheme": "grpcs", "pass_host": "node", "nodes": map[string]int{addr: 1}}
		if verify != nil {
			up["tls"] = map[string]any{"verify": *verify}
		}
		putGRPCRoute(t, in, id, "/"+prefix+"/*", up, "")
	}
	off := false
	route("1", "test.Echo", trusted.addr, nil)
	route("2", "bad.Echo", untrusted.addr, nil)
	route("3", "unverified.Echo", untrusted.addr, &off)
	cc := dialGW(t, in.data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := unary(ctx, cc, "Echo", "hi"); err != nil || out != "trusted:hi" {
		t.Fatalf("verified grpcs node: %q, %v", out, err)
	}
	in2, out := []byte("hi"), []byte(nil)
	err := cc.Invoke(ctx, "/bad.Echo/Echo", &in2, &out)
	wantCode(t, "unverified certificate", err, codes.Unavailable, "did not verify")
	if !strings.Contains(in.errorLog(), "certificate") {
		t.Fatalf("error log does not say why the certificate failed:\n%s", lastLines(in.errorLog(), 20))
	}
	// The node's service is test.Echo; the gateway forwards the path as it is.
	err = cc.Invoke(ctx, "/unverified.Echo/Echo", &in2, &out)
	wantCode(t, "tls.verify false reaches the node", err, codes.Unimplemented, "unknown service unverified.Echo")
}

// The Admin API takes scheme grpc and grpcs and gives them back as written; tls with
// grpc (in the clear) is refused naming the field.
func TestGRPCAdminAPI(t *testing.T) {
	in := newInstance(t, "")
	in.start()
	for _, scheme := range []string{"grpc", "grpcs"} {
		body := fmt.Sprintf(`{"scheme":%q,"nodes":{"127.0.0.1:50051":1}}`, scheme)
		if status, resp := in.adminCall("PUT", "/apisix/admin/upstreams/"+scheme, body); status != 200 && status != 201 {
			t.Fatalf("PUT upstream scheme %s: %d %s", scheme, status, resp)
		}
		_, resp := in.adminCall("GET", "/apisix/admin/upstreams/"+scheme, "")
		if !strings.Contains(resp, fmt.Sprintf(`"scheme":%q`, scheme)) {
			t.Fatalf("GET upstream scheme %s: %s", scheme, resp)
		}
	}
	status, resp := in.adminCall("PUT", "/apisix/admin/upstreams/bad", `{"scheme":"grpc","tls":{"verify":true},"nodes":{"127.0.0.1:50051":1}}`)
	if status != 400 || !strings.Contains(resp, `property \"tls\"`) || !strings.Contains(resp, `scheme \"grpc\"`) {
		t.Fatalf("tls with scheme grpc: %d %s", status, resp)
	}
	status, resp = in.adminCall("PUT", "/apisix/admin/routes/bad", `{"uri":"/x","upstream":{"scheme":"grpcs","checks":{"active":{"type":"http"}},"nodes":{"127.0.0.1:50051":1}}}`)
	if status != 400 || !strings.Contains(resp, `upstream.checks.active.type`) || !strings.Contains(resp, `must be \"tcp\"`) {
		t.Fatalf("an http health check on a grpcs upstream: %d %s", status, resp)
	}
	status, resp = in.adminCall("PUT", "/apisix/admin/upstreams/bad", `{"scheme":"tcp","nodes":{"127.0.0.1:50051":1}}`)
	if status != 400 || !strings.Contains(resp, "not supported yet") {
		t.Fatalf("scheme tcp: %d %s", status, resp)
	}
}
