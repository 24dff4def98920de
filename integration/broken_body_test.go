package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/internal/testnet"
)

// breakCase is how a breaking upstream answers one path.
type breakCase struct {
	// head is what the node sends: a status line, a header, maybe part of a body.
	head string
	// reset breaks the connection with an RST instead of a FIN.
	reset bool
	// afterHeader, when not nil, holds the break back until it is closed: the test closes
	// it when the client has the response header, so that a reset cannot overtake what
	// came before it.
	afterHeader chan struct{}
}

// startBreakingUpstream starts an upstream that answers GET /broken/<name> with the start
// of a response and then breaks the connection off, as cases[name] says. It returns its
// address.
func startBreakingUpstream(t *testing.T, cases map[string]breakCase) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		bc := cases[strings.TrimPrefix(req.URL.Path, "/broken/")]
		if _, err := io.WriteString(c, bc.head); err != nil {
			return
		}
		if bc.afterHeader != nil {
			select {
			case <-bc.afterHeader:
			case <-time.After(10 * time.Second):
			}
		}
		if bc.reset {
			_ = c.(*net.TCPConn).SetLinger(0)
		}
	}).String()
}

// cutView is what a client got: the status, the body up to where it stopped, whether it
// stopped short of its framing's end (curl: "transfer closed with N bytes remaining",
// exit 18), and whether the server then closed the connection.
type cutView struct {
	status    int
	body      string
	truncated bool
	closed    bool
}

// getWatching sends one GET on a connection of its own, calls headerSeen (when not nil)
// once the response header has arrived, reads the body and looks whether the connection
// was closed after it.
func getWatching(t *testing.T, address, path string, headerSeen func()) cutView {
	t.Helper()
	c, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: no response (curl: empty reply from server): %v", path, err)
	}
	if headerSeen != nil {
		headerSeen()
	}
	body, err := io.ReadAll(resp.Body)
	v := cutView{status: resp.StatusCode, body: string(body), truncated: errors.Is(err, io.ErrUnexpectedEOF)}
	if err != nil && !v.truncated {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	// A connection kept open for the next request sends nothing more: the short deadline
	// tells it from one the server closed, which reads EOF at once.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = br.ReadByte()
	v.closed = errors.Is(err, io.EOF)
	return v
}

// TestBrokenUpstreamBody runs the real binary against an upstream that breaks responses
// off after the header, the way issue 17 describes (a close, a reset, a bad chunk): the
// client gets gw's 502 when nothing had been sent yet, else the response's start and a
// closed connection, never an empty reply or a response that looks whole; the access log
// and the metrics say the status sent and the bytes the client got, not the
// Content-Length.
func TestBrokenUpstreamBody(t *testing.T) {
	const (
		streamed = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" // too large to buffer
		buffered = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
		chunked  = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	)
	many, part := strings.Repeat("m", 50000), strings.Repeat("p", 100)
	cases := map[string]breakCase{
		"streamed-closed":         {head: streamed + many},
		"streamed-reset":          {head: streamed + many, reset: true, afterHeader: make(chan struct{})},
		"streamed-closed-early":   {head: streamed + part},
		"streamed-before-body":    {head: streamed},
		"buffered-closed":         {head: buffered + part},
		"buffered-reset":          {head: buffered + part, reset: true},
		"chunked-invalid":         {head: chunked + "5\r\nhello\r\nzz\r\n"},
		"chunked-closed":          {head: chunked + "5\r\nhello\r\n10\r\nabc"},
		"chunked-reset":           {head: chunked + "5\r\nhello\r\n10\r\nabc", reset: true, afterHeader: make(chan struct{})},
		"chunked-invalid-at-once": {head: chunked + "zz\r\n"},
	}
	// want502 names the cases broken off before anything could go to the client.
	want502 := map[string]bool{"streamed-before-body": true, "buffered-closed": true, "buffered-reset": true, "chunked-invalid-at-once": true}
	// sent is what the node sent of each body that reaches the client in part.
	sent := map[string]string{
		"streamed-closed": many, "streamed-reset": many, "streamed-closed-early": part,
		"chunked-invalid": "hello", "chunked-closed": "helloabc", "chunked-reset": "helloabc",
	}
	node := startBreakingUpstream(t, cases)
	in := newMetricsInstance(t, "access_log:\n  buffer: 0\n")
	in.start("--workers", "1")
	in.putPrometheusRoute("1", "/broken/*", node)

	var mu sync.Mutex
	got := map[string]cutView{}
	for name, bc := range cases {
		t.Run(name, func(t *testing.T) {
			var headerSeen func()
			if bc.afterHeader != nil {
				headerSeen = func() { close(bc.afterHeader) }
			}
			v := getWatching(t, in.data, "/broken/"+name, headerSeen)
			mu.Lock()
			got[name] = v
			mu.Unlock()
			if want502[name] {
				if v.status != 502 || !strings.Contains(v.body, `"error_msg":"502 Bad Gateway`) || v.truncated {
					t.Errorf("got %d %q (cut short: %v), want gw's JSON 502", v.status, v.body, v.truncated)
				}
				return
			}
			if v.status != 200 || !v.truncated || !v.closed || !strings.HasPrefix(sent[name], v.body) {
				t.Errorf("got %d with %d body bytes (cut short: %v, connection closed: %v), want the node's 200 cut short, a prefix of what it sent, then a close",
					v.status, len(v.body), v.truncated, v.closed)
			}
		})
	}

	// One line per request, with the status and the body bytes the client got.
	line := regexp.MustCompile(`"GET /broken/([a-z-]+) HTTP/1\.1" (\d+) (\d+) `)
	var logged [][]string
	if !waitFor(5*time.Second, func() bool {
		logged = line.FindAllStringSubmatch(in.accessLog(), -1)
		return len(logged) >= len(cases)
	}) {
		t.Fatalf("%d access log lines for %d requests:\n%s", len(logged), len(cases), in.accessLog())
	}
	if len(logged) != len(cases) {
		t.Errorf("%d access log lines for %d requests:\n%s", len(logged), len(cases), in.accessLog())
	}
	var egressWant float64
	for _, m := range logged {
		v, ok := got[m[1]]
		if !ok {
			continue // its subtest failed before it got an answer
		}
		if m[2] != strconv.Itoa(v.status) || m[3] != strconv.Itoa(len(v.body)) {
			t.Errorf("access log says %s %s for %s, the client got %d and %d body bytes", m[2], m[3], m[1], v.status, len(v.body))
		}
		egressWant += float64(len(v.body))
	}

	f := in.scrape()
	for code, n := range map[string]float64{"200": float64(len(sent)), "502": float64(len(want502))} {
		if got := f["apisix_http_status"].Sum("apisix_http_status", map[string]string{"route": "1", "code": code}); got != n {
			t.Errorf("apisix_http_status{code=%q} = %g, want %g", code, got, n)
		}
	}
	// Egress is each response's status line and header fields, well under 1 KiB, and
	// its body as sent.
	egress := f["apisix_bandwidth"].Sum("apisix_bandwidth", map[string]string{"route": "1", "type": "egress"})
	if egress < egressWant || egress > egressWant+float64(1024*len(cases)) {
		t.Errorf("egress %g bytes, want the %g body bytes the clients got and the headers", egress, egressWant)
	}
}
