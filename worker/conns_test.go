package worker

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"gw/internal/monotime"
)

// The tracker's count must return to zero once clients are gone, or a draining worker
// waits for worker_shutdown_timeout for nothing.
// Both kinds of connection are tracked: an edgeConn carries its own mark, any other
// connection gets one in the tracker's set.
func TestConnTrackerCountsBackToZero(t *testing.T) {
	for _, edged := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "edge"}[edged], func(t *testing.T) {
			testConnTrackerCountsBackToZero(t, edged)
		})
	}
}

func testConnTrackerCountsBackToZero(t *testing.T, edged bool) {
	tracker := newConnTracker()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hook := func(c net.Conn, s fasthttp.ConnState) {
		if _, isEdge := c.(*edgeConn); isEdge != edged {
			t.Errorf("connection %T, want an edgeConn: %v", c, edged)
		}
		tracker.hook(c, s, nil)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.WriteString("ok") }, ConnState: hook}
	var ln net.Listener = countingListener{Listener: inner, t: tracker}
	if edged {
		ln = newEdgeListener(ln, &edge{}, 100)
	}
	go srv.Serve(ln)
	defer srv.Shutdown()
	for _, keepAlive := range []bool{true, false} {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
		for i := 0; i < 5; i++ {
			resp, err := client.Get("http://" + inner.Addr().String() + "/")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		client.CloseIdleConnections()
	}
	if !waitUntil(2*time.Second, func() bool { return tracker.closeIdle(time.Hour) == 0 }) {
		t.Fatalf("open %d after every client left", tracker.open.Load())
	}
	// An idle keep-alive connection is closed once it has been idle for the grace period.
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 512)
	c.Read(buf)
	if n := tracker.closeIdle(time.Hour); n != 1 {
		t.Fatalf("open %d with one idle client", n)
	}
	if !waitUntil(2*time.Second, func() bool { return tracker.closeIdle(10*time.Millisecond) == 0 }) {
		t.Fatalf("idle connection not closed: open %d", tracker.open.Load())
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Going idle, a connection takes the time its answer was ready for its idle stamp (and
// the keep-alive wait's start) instead of reading the clock, unless writing the answer
// had to wait, which may have taken any time.
func TestIdleStampTakesTheAnswersTime(t *testing.T) {
	tracker := newConnTracker()
	ec := &edgeConn{l: &edgeListener{e: &edge{}}}
	tracker.hook(ec, fasthttp.StateNew, nil)
	tracker.hook(ec, fasthttp.StateActive, nil)

	answered := monotime.Now() - int64(time.Hour) // far enough back to tell apart
	ec.answeredAt = answered
	tracker.hook(ec, fasthttp.StateIdle, nil)
	if got := ec.mark.idleSince.Load(); got != answered {
		t.Fatalf("idle since %d, want the answer's time %d", got, answered)
	}
	if ec.answeredAt != 0 || ec.waitFrom != answered {
		t.Fatalf("answeredAt %d, waitFrom %d: want it taken, and the wait's now", ec.answeredAt, ec.waitFrom)
	}

	tracker.hook(ec, fasthttp.StateActive, nil)
	ec.answeredAt = answered
	ec.ArmWrite(false) // the answer's write waits
	tracker.hook(ec, fasthttp.StateIdle, nil)
	if got := ec.mark.idleSince.Load(); got <= answered+int64(30*time.Minute) {
		t.Fatalf("idle since %d after a write that waited: want a fresh reading, not the answer's %d", got, answered)
	}
}

// The set stays consistent whatever order connections leave in: each mark's index points
// at its own connection, and the drain closes exactly the idle ones still open.
func TestConnTrackerSetSwapsOnRemove(t *testing.T) {
	tracker := newConnTracker()
	conns := make([]*edgeConn, 64)
	for i := range conns {
		conns[i] = &edgeConn{}
		tracker.hook(conns[i], fasthttp.StateNew, nil)
		tracker.hook(conns[i], fasthttp.StateActive, nil) // busy: the drain leaves it
	}
	tracker.open.Store(int64(len(conns)))
	// Remove every third, from the middle, the end and the start alike; a second close
	// (StateClosed after StateHijacked) removes nothing more.
	for i := len(conns) - 1; i >= 0; i -= 3 {
		tracker.hook(conns[i], fasthttp.StateHijacked, nil)
		tracker.hook(conns[i], fasthttp.StateClosed, nil)
	}
	removed := func(i int) bool { return (len(conns)-1-i)%3 == 0 }
	want := 0
	for i, ec := range conns {
		if removed(i) {
			if ec.mark.tracked {
				t.Errorf("connection %d removed but still tracked", i)
			}
			continue
		}
		want++
		if at := ec.mark.at; !ec.mark.tracked || int(at) >= len(tracker.conns) || tracker.conns[at] != net.Conn(ec) || tracker.marks[at] != &ec.mark {
			t.Errorf("connection %d: tracked %v at %d, not where the set holds it", i, ec.mark.tracked, at)
		}
	}
	if len(tracker.conns) != want || len(tracker.marks) != want || tracker.open.Load() != int64(want) {
		t.Fatalf("set holds %d connections and %d marks, open %d; want %d", len(tracker.conns), len(tracker.marks), tracker.open.Load(), want)
	}
	if n := tracker.closeIdle(0); n != want {
		t.Fatalf("closeIdle with every connection busy: %d open, want %d", n, want)
	}
}

// connMark's index lives in padding: the edgeConn stays in the 896-byte size class that
// makes a new connection one small allocation.
func TestEdgeConnSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(edgeConn{}); size > 896 {
		t.Fatalf("edgeConn is %d bytes, past the 896-byte size class", size)
	}
}
