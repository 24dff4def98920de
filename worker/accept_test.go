package worker

import (
	"bufio"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// connCost is what a test learns of one client connection's socket and system calls.
type connCost struct {
	keepAlive, inq []int // SO_KEEPALIVE and TCP_INQ as each request's handler found them
	noDelay        []int // TCP_NODELAY, likewise
	reads          int   // read system calls of the connection's Stream, counted at close
}

// servedLikeAWorker serves "ok" through a listener made as a worker makes it from the
// master's socket (inheritListener), the edge and the connection tracker's hook, and
// reports each connection's cost once it closed, in the order they closed.
func servedLikeAWorker(t *testing.T) (addr string, costs <-chan connCost) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := inheritListener(f)
	if err != nil {
		t.Fatal(err)
	}
	tracker := newConnTracker()
	out := make(chan connCost, 16)
	var mu sync.Mutex
	seen := map[*edgeConn]*connCost{}
	costOf := func(ec *edgeConn) *connCost {
		mu.Lock()
		defer mu.Unlock()
		if seen[ec] == nil {
			seen[ec] = new(connCost)
		}
		return seen[ec]
	}
	opt := func(ec *edgeConn, level, name int) int {
		raw, err := ec.socket.SyscallConn()
		if err != nil {
			return -1
		}
		v := -1
		_ = raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), level, name) })
		return v
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if ec, ok := ctx.Conn().(*edgeConn); ok {
				c := costOf(ec)
				c.keepAlive = append(c.keepAlive, opt(ec, unix.SOL_SOCKET, unix.SO_KEEPALIVE))
				c.inq = append(c.inq, opt(ec, unix.IPPROTO_TCP, unix.TCP_INQ))
				c.noDelay = append(c.noDelay, opt(ec, unix.IPPROTO_TCP, unix.TCP_NODELAY))
			}
			ctx.WriteString("ok")
		},
		ConnState: func(c net.Conn, state fasthttp.ConnState) {
			tracker.hook(c, state, nil)
			if ec := edgeConnOf(c); ec != nil && state == fasthttp.StateClosed {
				cost := costOf(ec)
				cost.reads = ec.io.ReadCalls() // the connection's own goroutine, after its last read
				out <- *cost
			}
		},
	}
	go srv.Serve(newEdgeListener(countingListener{Listener: inherited, t: tracker}, &edge{}, 16)) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })
	return inherited.Addr().String(), out
}

func nextCost(t *testing.T, costs <-chan connCost) connCost {
	t.Helper()
	select {
	case c := <-costs:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never closed")
	}
	return connCost{}
}

// A connection that serves one request and closes (seed 001's ab) costs what nginx's does:
// no keep-alive probes, no TCP_INQ, no TCP_NODELAY, and one read, the request's; nothing is
// read at close.
func TestAConnectionPerRequestSetsNoOptions(t *testing.T) {
	addr, costs := servedLikeAWorker(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// ab's request: HTTP/1.0 without keep-alive, sent at once.
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\nHost: a\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(c) // to the server's close
	if err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 200") || !strings.HasSuffix(string(answer), "ok") {
		t.Fatalf("answer %q, %v; want 200 ok and the server's close", answer, err)
	}
	cost := nextCost(t, costs)
	if len(cost.keepAlive) != 1 || cost.keepAlive[0] != 0 {
		t.Errorf("SO_KEEPALIVE %v, want 0: four setsockopt(2) calls per connection nginx does not make", cost.keepAlive)
	}
	if len(cost.inq) != 1 || cost.inq[0] != 0 {
		t.Errorf("TCP_INQ %v, want 0: a connection that is not kept alive never waits before a read", cost.inq)
	}
	if len(cost.noDelay) != 1 || cost.noDelay[0] != 0 {
		t.Errorf("TCP_NODELAY %v, want 0: a connection that writes once never meets Nagle's algorithm", cost.noDelay)
	}
	// The request was sent before the accept could have happened, so one read finds it;
	// allow for a slow machine accepting before it came.
	if cost.reads < 1 || cost.reads > 2 {
		t.Errorf("%d reads, want 1: a read at close (or a second one for the request) is a system call nginx does not make", cost.reads)
	}
}

// A kept-alive connection still reads once per request: it waits before each read from its
// second request on, having turned TCP_INQ on when it first went idle.
func TestAKeptAliveConnectionStillReadsOncePerRequest(t *testing.T) {
	const requests = 20
	addr, costs := servedLikeAWorker(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range requests {
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil || string(resp.Body()) != "ok" {
			t.Fatalf("request %d: %q, %v", i, resp.Body(), err)
		}
	}
	c.Close()
	cost := nextCost(t, costs)
	if len(cost.inq) != requests || cost.inq[0] != 0 || cost.inq[1] != 1 || cost.inq[requests-1] != 1 {
		t.Errorf("TCP_INQ by request %v, want 0 for the first and 1 from the second on", cost.inq)
	}
	// Set before the second response's write, so the third request's handler is the first
	// to see it.
	if len(cost.noDelay) != requests || cost.noDelay[1] != 0 || cost.noDelay[2] != 1 || cost.noDelay[requests-1] != 1 {
		t.Errorf("TCP_NODELAY by request %v, want 0 for the first two and 1 from the third on", cost.noDelay)
	}
	for i, v := range cost.keepAlive {
		if v != 0 {
			t.Fatalf("SO_KEEPALIVE %d at request %d, want 0", v, i)
		}
	}
	// One a request, one that finds the close, and up to two that find nothing: the first
	// request's, if it came after the accept, and the second's, before TCP_INQ was on. A
	// connection that read before each wait would take about twice as many.
	if cost.reads > requests+3 {
		t.Errorf("%d requests took %d reads, want at most %d", requests, cost.reads, requests+3)
	}
}

// Connections already queued are accepted one at a time, each served as far as it can go
// before the next is taken, as nginx accepts one per turn of its event loop: taking the
// whole queue first sends all its requests upstream in one burst.
func TestAcceptTakesOneConnectionPerTurn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // a worker's
	const queued = 10
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	ln := &recordingListener{Listener: newEdgeListener(inner, &edge{}, 2*queued), record: record}
	var clients []net.Conn
	for range queued {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.0\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	time.Sleep(50 * time.Millisecond) // every connection and request in the kernel's queues
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { record("served"); ctx.WriteString("ok") }}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })
	for _, c := range clients {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Accepted, served, accepted, served...: at most one accept runs ahead of the serving.
	ahead := 0
	for i, e := range events {
		if e == "accepted" {
			ahead++
		} else {
			ahead--
		}
		if ahead > 2 {
			t.Fatalf("%d connections accepted before the first ones were served (events %v, at %d): the queue is taken in one burst", ahead, events, i)
		}
	}
}

// recordingListener records each accept.
type recordingListener struct {
	net.Listener
	record func(string)
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.record("accepted")
	}
	return c, err
}
