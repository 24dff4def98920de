package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is an upstream that keeps every byte each connection sent it and counts the
// requests it could read whole (request line, headers and body) with Go's parser, which
// is stricter than most: a request the gateway rejected must never be one of them.
type recorder struct {
	addr string
	mu   sync.Mutex
	raw  []byte
	// complete lists the requests read whole, as "METHOD target body".
	complete []string
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &recorder{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *recorder) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(io.TeeReader(c, recordWriter{r}))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.complete = append(r.complete, fmt.Sprintf("%s %s %s", req.Method, req.RequestURI, body))
		r.mu.Unlock()
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

type recordWriter struct{ r *recorder }

func (w recordWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	w.r.raw = append(w.r.raw, p...)
	w.r.mu.Unlock()
	return len(p), nil
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.complete...)
}

// rawExchange sends raw on a new connection and reads one response. With waitClose,
// closed reports whether the gateway then closed the connection (EOF within a few
// seconds).
func rawExchange(t *testing.T, address, raw string, waitClose bool) (resp *http.Response, body string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to %q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !waitClose {
		return resp, string(b), false
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	return resp, string(b), errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// Request smuggling and malformed HTTP: each request in the corpus is refused with its
// status and Connection: close, the gateway closes the connection, and the upstream never
// reads a whole request from it. Well-formed requests around them go through.
func TestEdgeRejectsMalformedAndSmuggling(t *testing.T) {
	rec := startRecorder(t)
	in := newInstance(t, "client_header_buffer_size: 4k\nclient_max_body_size: 1k\n")
	in.start("--workers", "1")
	in.putRoute("1", "/r", rec.addr)

	big := strings.Repeat("a", 5000)
	corpus := []struct {
		name   string
		raw    string
		status int
	}{
		{"CL then TE", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /r?smuggled HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"TE then CL", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n0\r\n\r\nGET /r?smuggled HTTP/1.1\r\n\r\n", 400},
		{"duplicate CL", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc", 400},
		{"duplicate CL same value", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
		{"CL list", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", 400},
		{"CL signed", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", 400},
		{"TE identity", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc", 400},
		{"TE list", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE twice", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE with junk", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400},
		{"TE in HTTP/1.0", "POST /r HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"chunk size not hex", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400},
		{"chunk size 0x", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", 400},
		{"chunk size overflow", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff3\r\nabc\r\n0\r\n\r\n", 400},
		{"chunk size negative", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n", 400},
		{"chunk data too long", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", 400},
		{"chunk size bare LF", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400},
		{"bare LF in headers", "GET /r HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", 400},
		{"bare CR in a value", "GET /r HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", 400},
		{"bare CR after a name", "GET /r HTTP/1.1\r\nHost: a\r\nX-A\r: b\r\n\r\n", 400},
		{"obs-fold", "GET /r HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"obs-fold of Transfer-Encoding", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding:\r\n chunked\r\n\r\nabc", 400},
		{"space in a name", "GET /r HTTP/1.1\r\nHost: a\r\nX A: b\r\n\r\n", 400},
		{"space before the colon", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc", 400},
		{"separator in a name", "GET /r HTTP/1.1\r\nHost: a\r\nX(A): b\r\n\r\n", 400},
		{"empty name", "GET /r HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400},
		{"no Host in HTTP/1.1", "GET /r HTTP/1.1\r\nX-A: b\r\n\r\n", 400},
		{"two Hosts", "GET /r HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"absolute-form to another host", "GET http://other.example/r HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"absolute-form with userinfo", "GET http://a@a/r HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"absolute-form other scheme", "GET ftp://a/r HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"headers past the buffer", "GET /r HTTP/1.1\r\nHost: a\r\nX-Big: " + big + "\r\n\r\n", 431},
		{"request line past the buffer", "GET /r?" + big + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"request line past the buffer, no version yet", "GET /r?" + big, 414},
		{"declared body past the limit", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 1025\r\n\r\nabc", 413},
		{"chunked body past the limit", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + strings.Repeat("b", 1024) + "\r\n1\r\nb\r\n0\r\n\r\n", 413},
	}
	good := []struct{ name, raw, want string }{
		{"plain GET", "GET /r HTTP/1.1\r\nHost: a\r\n\r\n", "GET /r "},
		{"absolute-form to the Host", "GET http://a/r?x HTTP/1.1\r\nHost: a\r\n\r\n", "GET "},
		{"chunked within the limit", "POST /r HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n", "POST /r abc"},
		{"body at the limit", "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 1024\r\n\r\n" + strings.Repeat("c", 1024), "POST /r " + strings.Repeat("c", 1024)},
	}
	for _, g := range good {
		before := len(rec.requests())
		resp, body, _ := rawExchange(t, in.data, g.raw, false)
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q, want the upstream's 200", g.name, resp.StatusCode, body)
		}
		got := rec.requests()
		if len(got) != before+1 || !strings.HasPrefix(got[before], g.want) {
			t.Fatalf("%s: upstream read %q, want one request starting %q", g.name, got[before:], g.want)
		}
	}
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.requests())
			resp, body, closed := rawExchange(t, in.data, tc.raw, true)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			if !resp.Close {
				t.Errorf("no Connection: close in %v", resp.Header)
			}
			if !closed {
				t.Errorf("the gateway kept the connection open")
			}
			if got := rec.requests(); len(got) != before {
				t.Errorf("the upstream read %q", got[before:])
			}
		})
	}
	// Pipelined behind a refused request, a smuggled one must not be served either.
	if got := rec.requests(); len(got) != len(good) {
		t.Fatalf("upstream read %d requests, want the %d good ones: %q", len(got), len(good), got)
	}
	if raw := func() string { rec.mu.Lock(); defer rec.mu.Unlock(); return string(rec.raw) }(); strings.Contains(raw, "smuggled") {
		t.Fatalf("a smuggled request reached the upstream:\n%s", raw)
	}
}

// raiseFileLimit lets this test process hold a thousand sockets.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Skipf("open-file limit %d is below the %d this test needs", lim.Max, want)
	}
	old := lim
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// slowClient is one slowloris connection and when the gateway cut it.
type slowClient struct {
	c      net.Conn
	opened time.Time
	cut    chan time.Duration // how long after opening the gateway closed it
}

// openSlow opens n connections that send prefix and then nothing more, each watched for
// the gateway closing it.
func openSlow(t *testing.T, address, prefix string, n int) []*slowClient {
	t.Helper()
	clients := make([]*slowClient, 0, n)
	for range n {
		c, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatalf("slow connection %d: %v", len(clients), err)
		}
		t.Cleanup(func() { c.Close() })
		s := &slowClient{c: c, opened: time.Now(), cut: make(chan time.Duration, 1)}
		if _, err := io.WriteString(c, prefix); err != nil {
			t.Fatal(err)
		}
		go func() {
			// Whatever the gateway answers (a 408, or nothing), the end is EOF or a reset.
			_, _ = io.Copy(io.Discard, c)
			s.cut <- time.Since(s.opened)
		}()
		clients = append(clients, s)
	}
	return clients
}

// Slowloris: a thousand connections that trickle their headers a byte at a time do not
// keep a normal client from being served, and are cut at client_header_timeout; a hundred
// that stop sending their body are cut at client_body_timeout.
func TestEdgeSlowClientsAreCut(t *testing.T) {
	raiseFileLimit(t, 4096)
	up := startUpstream(t, "fast")
	const timeout = 2 * time.Second
	in := newInstance(t, "client_header_timeout: 2s\nclient_body_timeout: 2s\nworker_connections: 2000\n")
	in.start("--workers", "1")
	in.putRoute("1", "/r", up.addr)

	headers := openSlow(t, in.data, "GET /r HTTP/1.1\r\nHost: a\r\n", 1000)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a header byte every 500 ms on every connection: never done, never idle
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			for _, s := range headers {
				_, _ = io.WriteString(s.c, "X")
			}
		}
	}()
	bodies := openSlow(t, in.data, "POST /r HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc", 100)

	// The slow ones are all open; normal requests are served meanwhile. The figures are
	// logged for the report, not asserted: the first waits behind the slow connections in
	// the accept queue, the others show the steady state.
	time.Sleep(timeout / 4)
	var took []time.Duration
	for range 10 {
		start := time.Now()
		resp, body := in.get("/r")
		took = append(took, time.Since(start))
		if resp.StatusCode != 200 || body != "fast" {
			t.Fatalf("normal request beside slowloris: %d %q", resp.StatusCode, body)
		}
	}
	t.Logf("normal requests beside %d slow connections took %v", len(headers)+len(bodies), took)

	check := func(kind string, clients []*slowClient) {
		for i, s := range clients {
			select {
			case after := <-s.cut:
				// Cut at the timeout: not before 3/4 of it (the body timeout's granularity),
				// and within a generous margin after it.
				if after < timeout*3/4 {
					t.Fatalf("%s connection %d cut after %v, before the %v timeout", kind, i, after, timeout)
				}
			case <-time.After(time.Until(s.opened.Add(timeout + 5*time.Second))):
				t.Fatalf("%s connection %d still open %v after it opened (timeout %v)", kind, i, time.Since(s.opened), timeout)
			}
		}
	}
	check("slow-header", headers)
	check("stalled-body", bodies)

	if resp, _ := in.get("/r"); resp.StatusCode != 200 {
		t.Fatalf("after the slow clients: %d", resp.StatusCode)
	}
	t.Logf("error.log after the slow clients: %d lines, ends:\n%s", strings.Count(in.errorLog(), "\n"), lastLines(in.errorLog(), 3))
}

// worker_connections: past it, a new connection waits in the accept queue (it is not
// refused, and not served) until one of the worker's connections closes.
func TestEdgeWorkerConnectionsQueue(t *testing.T) {
	up := startUpstream(t, "queued")
	in := newInstance(t, "worker_connections: 16\n")
	in.start("--workers", "1")
	in.putRoute("1", "/r", up.addr)

	// The routing call above used the admin port; the data port holds only these.
	var held []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", in.data)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	// Each held connection is accepted: one request on each proves it.
	for i, c := range held {
		if _, err := io.WriteString(c, "GET /r HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("held connection %d: %v %v", i, resp, err)
		}
	}

	extra, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatalf("the 17th connection was refused instead of queued: %v", err)
	}
	defer extra.Close()
	if _, err := io.WriteString(extra, "GET /r HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_ = extra.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("the 17th connection was served (%v) while 16 were open", err)
	case <-time.After(time.Second):
	}
	held[0].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the queued connection, once a slot freed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued connection was not served after a slot freed")
	}
}

// real_ip_from: a trusted peer names the client in real_ip_header, and every user of the
// client address sees that name (the upstream's X-Real-IP and X-Forwarded-For, the access
// log); an untrusted peer's header is ignored. The Admin API on the data port still judges
// the TCP peer.
func TestEdgeRealIP(t *testing.T) {
	up := startUpstream(t, "who")
	cases := []struct {
		name, config, header, wantIP, wantXFF string
	}{
		{"trusted X-Real-IP", "real_ip_from: [127.0.0.1]\n", "203.0.113.9", "203.0.113.9", "203.0.113.9"},
		{"untrusted X-Real-IP", "real_ip_from: [10.0.0.0/8]\n", "203.0.113.9", "127.0.0.1", "127.0.0.1"},
		{"trusted but not an address", "real_ip_from: [127.0.0.0/8]\n", "somebody", "127.0.0.1", "127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstance(t, tc.config+"access_log:\n  flush_interval: 100ms\n")
			in.start("--workers", "1")
			in.putRoute("1", "/r", up.addr)
			resp, _ := in.get("/r", "X-Real-IP", tc.header)
			if got := resp.Header.Get("X-Seen-X-Real-IP"); got != tc.wantIP {
				t.Errorf("upstream saw X-Real-IP %q, want %q", got, tc.wantIP)
			}
			if got := resp.Header.Get("X-Seen-X-Forwarded-For"); got != tc.wantXFF {
				t.Errorf("upstream saw X-Forwarded-For %q, want %q", got, tc.wantXFF)
			}
			if !waitFor(5*time.Second, func() bool { return strings.HasPrefix(in.accessLog(), tc.wantIP+" ") }) {
				t.Errorf("access log %q, want it to start with %s", in.accessLog(), tc.wantIP)
			}
			// Admin on the data port: the loopback TCP peer is what counts, whatever the
			// header claims.
			status, _ := call(t, "GET", "http://"+in.data+"/apisix/admin/routes/1", "", "X-API-KEY", adminKey, "X-Real-IP", tc.header)
			if status != 200 {
				t.Errorf("admin call on the data port from loopback: %d", status)
			}
		})
	}

	// X-Forwarded-For through a chain of trusted proxies.
	in := newInstance(t, "real_ip_from: [127.0.0.1, 10.0.0.0/8]\nreal_ip_header: X-Forwarded-For\nreal_ip_recursive: true\n")
	in.start("--workers", "1")
	in.putRoute("1", "/r", up.addr)
	resp, _ := in.get("/r", "X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.1.1.1")
	if got := resp.Header.Get("X-Seen-X-Real-IP"); got != "203.0.113.9" {
		t.Errorf("recursive X-Forwarded-For: upstream saw X-Real-IP %q, want 203.0.113.9", got)
	}
	if got := resp.Header.Get("X-Seen-X-Forwarded-For"); got != "198.51.100.1, 203.0.113.9, 10.1.1.1, 203.0.113.9" {
		t.Errorf("recursive X-Forwarded-For: upstream saw X-Forwarded-For %q", got)
	}
}

// send_timeout: a client that stops reading a large response is cut once the gateway's
// writes have waited send_timeout, and the worker serves on.
func TestEdgeSendTimeoutCutsStalledReader(t *testing.T) {
	const size = 10 << 20 // past any socket buffers: the worker's writes must block
	const timeout = 2 * time.Second
	big := startUpstream(t, strings.Repeat("x", size))
	small := startUpstream(t, "small")
	in := newInstance(t, fmt.Sprintf("send_timeout: %v\n", timeout))
	in.start("--workers", "1")
	in.putRoute("1", "/big", big.addr)
	in.putRoute("2", "/small", small.addr)
	worker := in.status().Workers[0].PID

	// A small receive buffer, set before connecting so the window is small from the SYN.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	c, err := dialer.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := time.Now()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The worker reports its open connections at most a second late: wait to see this
	// one, then to see it gone. The client reads nothing meanwhile.
	connections := func() int64 { return in.status().Workers[0].Connections }
	if !waitFor(timeout, func() bool { return connections() == 1 }) {
		t.Fatalf("the worker never reported the stalled connection open (%d open)", connections())
	}
	if !waitFor(timeout+5*time.Second, func() bool { return connections() == 0 }) {
		t.Fatalf("the stalled connection is still open %v after its request (send_timeout %v)", time.Since(sent), timeout)
	}
	if after := time.Since(sent); after < timeout {
		t.Fatalf("the stalled connection was cut %v after its request, before send_timeout %v", after, timeout)
	}

	// What the kernel had buffered is still there, then the connection ends short.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, c)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("after %d bytes the connection is still open", got)
	}
	if got >= size {
		t.Fatalf("the client received %d bytes, the whole %d-byte body", got, size)
	}
	t.Logf("cut after %v with %d of %d bytes delivered", time.Since(sent), got, size)

	if resp, body := in.get("/small"); resp.StatusCode != 200 || body != "small" {
		t.Fatalf("after the cut: %d %q", resp.StatusCode, body)
	}
	if now := in.status().Workers[0].PID; now != worker {
		t.Fatalf("the worker changed from pid %d to %d", worker, now)
	}
}

// The read timeouts follow the request, as nginx's do: keepalive_timeout while a
// connection waits for its next request, client_header_timeout once a request's first
// bytes came (and for the first request, from the start), whichever is shorter. The edge
// arms them only when a read waits, so each phase is checked on a connection of its own.
func TestEdgeReadTimeoutsFollowTheRequest(t *testing.T) {
	up := startUpstream(t, "ok")
	// Far apart, so that a phase timed by the wrong one falls outside its window.
	in := newInstance(t, "client_header_timeout: 1s\nkeepalive_timeout: 4s\n")
	in.start("--workers", "1")
	in.putRoute("1", "/ok", up.addr)

	// The phases run in goroutines, side by side: errors are reported, never fatal.
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", in.data)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	request := func(c net.Conn, br *bufio.Reader) bool {
		if c == nil {
			return false
		}
		if _, err := io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Error(err)
			return false
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Error(err)
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("%d %q", resp.StatusCode, body)
			return false
		}
		return true
	}
	// closedAfter waits for the gateway to end the connection and says when it did,
	// counted from start; whatever it sent first (a 408) is read and dropped.
	closedAfter := func(c net.Conn, start time.Time) time.Duration {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			t.Errorf("the connection is still open %v on", time.Since(start))
		}
		return time.Since(start)
	}
	within := func(what string, got, lo, hi time.Duration) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s: closed after %v, want between %v and %v", what, got, lo, hi)
		} else {
			t.Logf("%s: closed after %v", what, got)
		}
	}

	var wg sync.WaitGroup
	wg.Add(4)
	// Idle after a request: keepalive_timeout (4s), not client_header_timeout (1s).
	go func() {
		defer wg.Done()
		c, br := dial()
		if !request(c, br) {
			return
		}
		within("idle keep-alive connection", closedAfter(c, time.Now()), 3500*time.Millisecond, 7*time.Second)
	}()
	// A request that stalls in its header after an idle spell: client_header_timeout from
	// its first bytes, not the idle deadline armed before (which would end it 3.5s on).
	go func() {
		defer wg.Done()
		c, br := dial()
		if !request(c, br) {
			return
		}
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		if _, err := io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n"); err != nil {
			t.Error(err)
			return
		}
		within("second request's stalled header", closedAfter(c, start), 800*time.Millisecond, 2500*time.Millisecond)
	}()
	// The first request's header: client_header_timeout from the start.
	go func() {
		defer wg.Done()
		c, _ := dial()
		if c == nil {
			return
		}
		start := time.Now()
		if _, err := io.WriteString(c, "GET /ok HTTP/1.1\r\n"); err != nil {
			t.Error(err)
			return
		}
		within("first request's stalled header", closedAfter(c, start), 800*time.Millisecond, 2500*time.Millisecond)
	}()
	// A connection that keeps sending requests within keepalive_timeout is never cut,
	// though each idle spell is longer than client_header_timeout.
	go func() {
		defer wg.Done()
		c, br := dial()
		for range 3 {
			if !request(c, br) {
				return
			}
			time.Sleep(1500 * time.Millisecond)
		}
		request(c, br)
	}()
	wg.Wait()
}
