package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gw/conf"
)

// startBrokenNode starts an upstream that answers every request with head (a status line,
// a header and maybe part of a body) and then breaks the connection: it closes it, or with
// reset set, resets it (SO_LINGER 0, an RST instead of a FIN). When after is not nil the
// node breaks the connection only once after is closed, so that a test can first look at
// what the client was sent.
func startBrokenNode(t *testing.T, head string, reset bool, after <-chan struct{}) conf.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// The request is read whole first: closing with unread bytes would reset the
				// connection whatever the case asks for.
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				if after != nil {
					<-after
				}
				if reset {
					_ = c.(*net.TCPConn).SetLinger(0)
				}
			}()
		}
	}()
	return conf.Node{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Weight: 1}
}

// clientView is what a client got for one request: the response (its body already read),
// the body's bytes up to where they stopped, and why they stopped (nil when the body
// was whole).
type clientView struct {
	resp    *http.Response
	body    string
	bodyErr error
	// closed is set when the server closed the connection after the response; a
	// connection it kept open for the next request leaves it unset.
	closed bool
}

// getRaw sends one GET to proxy on a connection of its own, calls headerSeen (when not nil)
// once the response header has arrived, then reads the body and checks whether the
// connection is closed after it. Nothing here waits longer than a few seconds.
func getRaw(t *testing.T, proxy string, headerSeen func()) clientView {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /broken HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response header: %v", err)
	}
	if headerSeen != nil {
		headerSeen()
	}
	body, bodyErr := io.ReadAll(resp.Body)
	v := clientView{resp: resp, body: string(body), bodyErr: bodyErr}
	// A connection kept alive sends nothing more: the short deadline tells it from one
	// the server closed, which reads EOF at once.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = br.ReadByte()
	v.closed = errors.Is(err, io.EOF)
	return v
}

// TestForwardBrokenBody has nodes break the connection after the response header: the
// client gets a 502 when nothing of the response has been sent yet, else the response's
// start and then a closed connection, so that it knows the body is cut short; never a
// response that looks whole.
func TestForwardBrokenBody(t *testing.T) {
	const (
		chunked  = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		streamed = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" // more than maxBufferedBody
		buffered = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
	)
	part := strings.Repeat("p", 100)
	many := strings.Repeat("m", 50000)
	tests := []struct {
		name string
		// head is what the node sends before it breaks the connection.
		head  string
		reset bool
		// afterHeader has the node break the connection only once the client has the
		// response header (without it a reset could overtake the bytes before it).
		afterHeader bool
		// want502 asks for gw's JSON 502. Otherwise the client must get a 200 whose body
		// is a prefix of sent, at least minBody long, then a closed connection.
		want502 bool
		sent    string
		minBody int
	}{
		{name: "buffered length, closed within the body", head: buffered + part, want502: true},
		{name: "buffered length, reset within the body", head: buffered + part, reset: true, want502: true},
		{name: "streamed length, closed before the body", head: streamed, want502: true},
		{name: "streamed length, reset before the body", head: streamed, reset: true, want502: true},
		{name: "streamed length, closed within the body", head: streamed + part, sent: part},
		{name: "streamed length, reset within the body", head: streamed + part, reset: true, afterHeader: true, sent: part},
		{name: "streamed length, closed far into the body", head: streamed + many, sent: many},
		{name: "streamed length, reset far into the body", head: streamed + many, reset: true, afterHeader: true, sent: many},
		{name: "chunked, closed before the first chunk", head: chunked, want502: true},
		{name: "chunked, invalid first chunk", head: chunked + "zz\r\n", want502: true},
		{name: "chunked, invalid chunk after one", head: chunked + "5\r\nhello\r\nzz\r\n", sent: "hello", minBody: 5},
		// A chunk that ends in a bare LF, then what reads as the last chunk: a response
		// that looks whole unless the first error sticks.
		{name: "chunked, first chunk ends without CR", head: chunked + "5\r\nhello\n0\r\n\r\n", want502: true},
		{name: "chunked, later chunk ends without CR", head: chunked + "5\r\nhello\r\n5\r\nworld\n0\r\n\r\n", sent: "helloworld", minBody: 10},
		{name: "chunked, closed within a chunk", head: chunked + "5\r\nhello\r\n10\r\nabc", sent: "helloabc", minBody: 8},
		{name: "chunked, reset within a chunk", head: chunked + "5\r\nhello\r\n10\r\nabc", reset: true, afterHeader: true, sent: "helloabc", minBody: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var after chan struct{}
			var headerSeen func()
			if tt.afterHeader {
				after = make(chan struct{})
				headerSeen = func() { close(after) }
				// The node must not wait forever when the header never comes.
				t.Cleanup(func() {
					select {
					case <-after:
					default:
						close(after)
					}
				})
			}
			up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{startBrokenNode(t, tt.head, tt.reset, after)}})
			v := getRaw(t, startProxy(t, up), headerSeen)
			if tt.want502 {
				if v.resp.StatusCode != 502 || v.body != string(msgBadResponse) || v.bodyErr != nil {
					t.Fatalf("got %d %q (%v), want 502 %s", v.resp.StatusCode, v.body, v.bodyErr, msgBadResponse)
				}
				if ct := v.resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
				return
			}
			if v.resp.StatusCode != 200 {
				t.Fatalf("status %d, want the node's 200", v.resp.StatusCode)
			}
			if !strings.HasPrefix(tt.sent, v.body) || len(v.body) < tt.minBody {
				t.Errorf("body %q, want a prefix of %q at least %d bytes long", truncate(v.body), truncate(tt.sent), tt.minBody)
			}
			if !errors.Is(v.bodyErr, io.ErrUnexpectedEOF) {
				t.Errorf("the body ended with %v, want it cut short (unexpected EOF)", v.bodyErr)
			}
			if !v.closed {
				t.Error("the connection stayed open after a broken body")
			}
		})
	}
}
