package proxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"gw/conf"
	"gw/internal/monotime"
)

// The margins below are wide on purpose: a timeout must not fire before its time, and
// must fire within seconds of it however busy the machine is.

// upstreamWithTimeouts is n's upstream with timeout.send and timeout.read, in seconds.
func (n *rawNode) upstreamWithTimeouts(t *testing.T, send, read float64) *Upstream {
	return build(t, &conf.Upstream{Scheme: "grpc", Nodes: conf.Nodes{{Host: "127.0.0.1", Port: n.port(), Weight: 1}},
		Timeout: &conf.Timeout{Connect: 60, Send: send, Read: read}}, nil)
}

// wantTimedOut checks that err is a call stopped by the timeout named, after at least
// least, and not long after.
func wantTimedOut(t *testing.T, call *GRPCCall, err error, took, least time.Duration, which string) {
	t.Helper()
	if !errors.Is(err, ErrGRPCStopped) || !strings.Contains(call.TimedOut(), which) || call.Expired() {
		t.Fatalf("got %v (timed out: %q, expired %v), want ErrGRPCStopped by %s", err, call.TimedOut(), call.Expired(), which)
	}
	if took < least || took > least+15*time.Second {
		t.Fatalf("the call stopped after %v, want %s's %v (and not 15 s later)", took, which, least)
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("still not so after 20 s: %s", what)
		}
	}
}

// A node that sends nothing for timeout.read after the request is reset (CANCEL), as
// nginx's grpc_read_timeout ends the call; the connection stays, for the next call.
func TestGRPCClientReadTimeoutBeforeTheHeader(t *testing.T) {
	node := newRawNode(t, 100, func(c *rawNodeConn, id uint32, nth int) nodeAction {
		if nth == 1 {
			return nodeSilent
		}
		return nodeAnswer
	})
	up := node.upstreamWithTimeouts(t, 60, 0.3)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	var info Info
	start := time.Now()
	err := up.RoundTripGRPC(call, ctx, bytes.NewReader(ctx.Request.Body()), &info)
	wantTimedOut(t, call, err, time.Since(start), 300*time.Millisecond, "timeout.read")
	if msg := call.TimedOut(); msg != "upstream sent nothing for 0.3s (timeout.read)" {
		t.Fatalf("TimedOut() = %q", msg)
	}
	ReleaseGRPCCall(call)
	waitFor(t, "the node got RST_STREAM CANCEL for the call", func() bool { return node.cancels.Load() == 1 })
	body, trailers, err := unary(t, up, "y")
	if err != nil || body != string(nodeBody) || trailers["grpc-status"] != "0" {
		t.Fatalf("the next call: %q %v %v", body, trailers, err)
	}
	if n := node.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want the one the timed-out call was on, kept", n)
	}
}

// After the header, the node's silence is timed too: between two frames, not over the
// whole response.
func TestGRPCClientReadTimeoutAfterTheHeader(t *testing.T) {
	node := newRawNode(t, 100, func(*rawNodeConn, uint32, int) nodeAction { return nodeHeadersOnly })
	up := node.upstreamWithTimeouts(t, 60, 0.3)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	start := time.Now()
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(call)
	wantTimedOut(t, call, err, time.Since(start), 300*time.Millisecond, "timeout.read")
}

// A response whose frames come closer together than timeout.read lives on however long
// it lasts in all.
func TestGRPCClientReadTimeoutStartsOverAtEachFrame(t *testing.T) {
	node := newRawNode(t, 100, func(*rawNodeConn, uint32, int) nodeAction { return nodeTrickle })
	node.trickleEvery, node.trickleCount = 100*time.Millisecond, 12
	up := node.upstreamWithTimeouts(t, 60, 1)
	start := time.Now()
	body, trailers, err := unary(t, up, "x")
	if err != nil || body != strings.Repeat(string(nodeBody), 12) || trailers["grpc-status"] != "0" {
		t.Fatalf("a response of a message every 100 ms with timeout.read 1 s: %q %v %v", body, trailers, err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the response took %v, not past timeout.read: the test proves nothing", took)
	}
}

// While the client still streams its request and the node has not answered, the node's
// silence is not timed (nginx's is not either): a client-streaming call answers at the
// end.
func TestGRPCClientReadTimeoutWaitsForTheRequestsEnd(t *testing.T) {
	node := newRawNode(t, 100, nil)
	up := node.upstreamWithTimeouts(t, 60, 0.3)
	pr, pw := io.Pipe()
	go func() {
		for range 12 {
			time.Sleep(100 * time.Millisecond)
			if _, err := pw.Write([]byte("\x00\x00\x00\x00\x01m")); err != nil {
				return
			}
		}
		pw.Close()
	}()
	ctx := grpcCtx("/svc/M", "")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	start := time.Now()
	if err := up.RoundTripGRPC(call, ctx, pr, &info); err != nil {
		t.Fatalf("a request streamed for 1.2 s to a node that answers at its end, timeout.read 0.3 s: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the node answered after %v, before the request's end", took)
	}
	if body, err := io.ReadAll(call); err != nil || string(body) != string(nodeBody) {
		t.Fatalf("response %q, %v", body, err)
	}
}

// A caller slow to read holds the node back with the call's window: the node may not
// send meanwhile, so its silence is not timed until the window opens again.
func TestGRPCClientReadTimeoutPausedWhileTheWindowIsShut(t *testing.T) {
	node := newRawNode(t, 100, func(*rawNodeConn, uint32, int) nodeAction { return nodeBigBody })
	up := node.upstreamWithTimeouts(t, 60, 0.3)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	cn := call.conn.Load()
	waitFor(t, "the node filled the call's window", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return call.recvWindow == 0
	})
	time.Sleep(1200 * time.Millisecond) // four times timeout.read
	n, err := io.Copy(io.Discard, call)
	if err != nil || n != 1<<20 {
		t.Fatalf("read %d bytes, %v, after a pause with the window shut; want the whole 1 MiB", n, err)
	}
}

// A node that stops reading the request body shuts its window: a write that waits for it
// for timeout.send stops the call.
func TestGRPCClientSendTimeoutOnAShutWindow(t *testing.T) {
	node := newRawNode(t, 100, nil)
	node.stopOnData.Store(true)
	up := node.upstreamWithTimeouts(t, 0.3, 60)
	call, err, took, pw := endlessBodyCall(t, node, up)
	wantTimedOut(t, call, err, took, 300*time.Millisecond, "timeout.send")
	if msg := call.TimedOut(); msg != "upstream took none of the request for 0.3s (timeout.send)" {
		t.Fatalf("TimedOut() = %q", msg)
	}
	pw.Close()
	ReleaseGRPCCall(call)
}

// A node that gives windows enough but reads nothing from its socket blocks the write
// to the socket itself, with the connection's lock held: the connection is closed after
// timeout.send, as it is wedged for every call on it.
func TestGRPCClientSendTimeoutOnABlockedSocket(t *testing.T) {
	node := newRawNode(t, 100, nil)
	node.grantWindow = 1 << 30
	node.stopOnData.Store(true)
	up := node.upstreamWithTimeouts(t, 0.3, 60)
	call, err, took, pw := endlessBodyCall(t, node, up)
	wantTimedOut(t, call, err, took, 300*time.Millisecond, "timeout.send")
	cn := call.conn.Load()
	cn.mu.Lock()
	dead, sent := cn.dead, int64(1<<30)-int64(call.sendWindow)
	cn.mu.Unlock()
	if !dead {
		t.Fatal("the connection whose socket write was blocked is still open")
	}
	if sent <= 65535 {
		t.Fatalf("sent %d bytes: the window, not the socket, held the body back; the test proves nothing", sent)
	}
	pw.Close()
	ReleaseGRPCCall(call)
}

// endlessBodyCall starts a call to up (node's) whose request body streams on without
// end, and waits for RoundTripGRPC's answer; the caller closes pw and releases call.
func endlessBodyCall(t *testing.T, node *rawNode, up *Upstream) (*GRPCCall, error, time.Duration, *io.PipeWriter) {
	t.Helper()
	pr, pw := io.Pipe()
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
	start := time.Now()
	go func() { done <- up.RoundTripGRPC(call, ctx, pr, &info) }()
	select {
	case err := <-done:
		return call, err, time.Since(start), pw
	case <-time.After(30 * time.Second):
		// A write still blocked would hold the connection, and the pools' cleanup with
		// it: the node's side goes first.
		node.mu.Lock()
		for _, c := range node.open {
			c.Close()
		}
		node.mu.Unlock()
		t.Fatal("the call still waits after 30 s")
	}
	return nil, nil, 0, nil
}

// A pooled call's timer is left armed for its last acquisition's timeouts: a call that
// needs it sooner (a shorter timeout.read) must still be stopped in time.
func TestGRPCClientShortTimeoutAfterLongOnes(t *testing.T) {
	answering := newRawNode(t, 100, nil)
	long := answering.upstream(t) // 60 s each
	for range 50 {
		if _, _, err := unary(t, long, "x"); err != nil {
			t.Fatal(err)
		}
	}
	silent := newRawNode(t, 100, func(*rawNodeConn, uint32, int) nodeAction { return nodeSilent })
	short := silent.upstreamWithTimeouts(t, 60, 0.3)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	start := time.Now()
	err := short.RoundTripGRPC(call, ctx, nil, &info)
	wantTimedOut(t, call, err, time.Since(start), 300*time.Millisecond, "timeout.read")
}

// An upstream without a timeout has APISIX's (nginx's): 60 s each.
func TestGRPCClientTimeoutsDefaultToAPISIXs(t *testing.T) {
	node := newRawNode(t, 100, nil)
	up := node.upstream(t)
	ctx := grpcCtx("/svc/M", "x")
	call := AcquireGRPCCall(0)
	defer ReleaseGRPCCall(call)
	var info Info
	if err := up.RoundTripGRPC(call, ctx, nil, &info); err != nil {
		t.Fatal(err)
	}
	if r, s := time.Duration(call.readTimeout.Load()), time.Duration(call.sendTimeout.Load()); r != time.Minute || s != time.Minute {
		t.Fatalf("timeout.read %v, timeout.send %v, want 1m0s each", r, s)
	}
}

// BenchmarkGRPCCallTimer is what the timeouts add to a call that ends in time: its
// acquisition and release, with the timer armed for timeout.send and timeout.read (and a
// grpc-timeout or none), in the steady state where the pooled call's timer is armed
// already.
func BenchmarkGRPCCallTimer(b *testing.B) {
	for _, deadline := range []time.Duration{0, 10 * time.Second} {
		b.Run("grpc-timeout="+deadline.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := AcquireGRPCCall(deadline)
				c.watchIO(time.Minute, time.Minute, monotime.Now())
				ReleaseGRPCCall(c)
			}
		})
	}
}
