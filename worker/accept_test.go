package worker

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"gw/internal/race"
)

// connCost is what a test learns of one client connection's socket and system calls.
type connCost struct {
	keepAlive, inq []int // SO_KEEPALIVE and TCP_INQ as each request's handler found them
	noDelay        []int // TCP_NODELAY, likewise
	reads          int   // read system calls of the connection's Stream, counted at close
	registered     bool  // the socket joined the runtime's poller (epoll_ctl(2)), as seen at close
}

// servedLikeAWorker serves "ok" through a listener made as a worker makes it from the
// master's socket (inheritListener), the edge and the connection tracker's hook, and
// reports each connection's cost once it closed, in the order they closed. With
// deferAccept the listener hands a connection over only once its first bytes came
// (TCP_DEFER_ACCEPT), so that a test knows its request is there when the server accepts.
func servedLikeAWorker(t *testing.T, deferAccept bool) (addr string, costs <-chan connCost) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if deferAccept {
		raw, _ := ln.(*net.TCPListener).SyscallConn()
		var serr error
		_ = raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 10) })
		if serr != nil {
			t.Fatalf("TCP_DEFER_ACCEPT: %v", serr)
		}
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
				cost.registered = ec.own.Registered()
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
	addr, costs := servedLikeAWorker(t, true)
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
	// The listener defers the accept until the request came, so one read finds it.
	if cost.reads != 1 {
		t.Errorf("%d reads, want 1: a read at close (or a second one for the request) is a system call nginx does not make", cost.reads)
	}
	// Nothing waited, so the socket never joined the poller: no epoll_ctl(2) to add it, none
	// to remove it.
	if cost.registered {
		t.Error("a connection whose one read found its request and whose answer went at once was registered with the poller")
	}
}

// A kept-alive connection still reads once per request: it waits before each read from its
// second request on, having turned TCP_INQ on when it first went idle.
func TestAKeptAliveConnectionStillReadsOncePerRequest(t *testing.T) {
	const requests = 20
	addr, costs := servedLikeAWorker(t, false)
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

// A connection that serves one request and closes allocates one object in the worker, its
// edgeConn (which holds its Socket, its Stream and the request's working state): the
// accept, the Stream's set-up, the request and the close allocate nothing more. Each
// allocation is garbage the collector must find, once per connection under seed 001's ab.
// The client here makes raw system calls, which allocate nothing, so every allocation
// counted is the server's.
func TestAConnectionPerRequestAllocatesOnlyItsConn(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	addr := serveForAllocs(t, func(ctx *fasthttp.RequestCtx) { ctx.WriteString("ok") })
	if allocs := allocsPerConnection(t, addr, "GET / HTTP/1.0\r\nHost: a\r\n\r\n"); allocs > 1 {
		t.Errorf("a connection that serves one request allocates %.0f objects in the worker, want 1 (its edgeConn)", allocs)
	}
}

// The same through the worker's handler, proxying to an upstream: a connection's first
// request takes pooled working state (the proxy's scratch, the plugins' Ctx), grown
// already, instead of growing the connection's own.
func TestAProxiedConnectionPerRequestAllocatesOnlyItsConn(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	w := benchWorker(t, startStubUpstream(t), `{"proxy-rewrite":{"regex_uri":["^/hel(.*)","/hel$1"]}}`)
	addr := serveForAllocs(t, w.handle)
	if allocs := allocsPerConnection(t, addr, "GET /hello HTTP/1.0\r\nHost: a\r\n\r\n"); allocs > 1 {
		t.Errorf("a proxied connection that serves one request allocates %.0f objects in the worker, want 1 (its edgeConn)", allocs)
	}
}

// serveForAllocs serves handler through a listener made as a worker makes it and returns
// its address.
func serveForAllocs(t *testing.T, handler fasthttp.RequestHandler) string {
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
	srv := &fasthttp.Server{
		Handler:   handler,
		ConnState: func(c net.Conn, state fasthttp.ConnState) { tracker.hook(c, state, nil) },
	}
	go srv.Serve(newEdgeListener(countingListener{Listener: inherited, t: tracker}, &edge{}, 16)) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { _ = srv.Shutdown() })
	return inherited.Addr().String()
}

// allocsPerConnection is the allocations, all the server's, of a connection that sends
// request and reads the 200 to the server's close, made with raw system calls.
func allocsPerConnection(t *testing.T, addr, request string) float64 {
	t.Helper()
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	to := &unix.SockaddrInet4{Port: tcp.Port, Addr: [4]byte{127, 0, 0, 1}}
	req := []byte(request)
	answer := make([]byte, 4096)
	var failed error
	oneConnection := func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			failed = err
			return
		}
		defer unix.Close(fd)
		// A blocking socket with a receive timeout: a server that never answers fails
		// the test instead of hanging it.
		tv := unix.Timeval{Sec: 10}
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if err := unix.Connect(fd, to); err != nil {
			failed = err
			return
		}
		if _, err := unix.Write(fd, req); err != nil {
			failed = err
			return
		}
		got := 0
		for got < len(answer) {
			n, err := unix.Read(fd, answer[got:])
			if err != nil {
				failed = err
				return
			}
			if n == 0 {
				break // the server's close
			}
			got += n
		}
		if !bytes.HasPrefix(answer[:got], []byte("HTTP/1.1 200")) {
			failed = errors.New("answer " + string(answer[:got]))
		}
	}
	for range 50 { // fasthttp's pools, the upstream's connections and first-use state fill up
		oneConnection()
	}
	allocs := testing.AllocsPerRun(1000, oneConnection)
	if failed != nil {
		t.Fatal(failed)
	}
	return allocs
}
