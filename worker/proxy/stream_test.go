package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/testnet"
)

// startBrokenNode starts an upstream that answers every request with head (a status line,
// a header and maybe part of a body) and then breaks the connection: it closes it, or with
// reset set, resets it (SO_LINGER 0, an RST instead of a FIN). When after is not nil the
// node breaks the connection only once after is closed, so that a test can first look at
// what the client was sent.
func startBrokenNode(t *testing.T, head string, reset bool, after <-chan struct{}) conf.Node {
	t.Helper()
	addr := testnet.Serve(t, func(c net.Conn) {
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
	})
	return conf.Node{Host: "127.0.0.1", Port: addr.Port, Weight: 1}
}

// sentRecorder is told what each streamed response sent (OnStreamEnd).
type sentRecorder chan int64

func (r sentRecorder) StreamEnded(sent int64) { r <- sent }

// notStreamed is what a countingProxy reports for a response not left streaming.
const notStreamed = -1

// countingProxy is a proxy serving up on ln, over TLS with config set, that reports for
// each request how many body bytes its stream said went to the client (OnStreamEnd), or
// notStreamed.
type countingProxy struct {
	addr string
	tls  *tls.Config // the client's side; nil over plain TCP
	sent sentRecorder
}

func startCountingProxy(t *testing.T, up *Upstream, overTLS bool) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{addr: ln.Addr().String(), sent: make(sentRecorder, 1)}
	if overTLS {
		// Over TLS the server's writer cannot hand the body to the socket's ReadFrom, so
		// it copies in buffers of its own size: the other way a Read is flushed.
		ca := newTestCA(t, "client side")
		_, _, pair := ca.issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}})
		p.tls = &tls.Config{RootCAs: ca.pool(), ServerName: "127.0.0.1"}
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		up.Forward(ctx)
		if !OnStreamEnd(&ctx.Response, p.sent) {
			p.sent <- notStreamed
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	return p
}

// reported is what the proxy reported for the last request.
func (p *countingProxy) reported(t *testing.T) int64 {
	t.Helper()
	select {
	case n := <-p.sent:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("the stream never said how it ended")
		return 0
	}
}

func (p *countingProxy) dial(t *testing.T) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if p.tls != nil {
		c, err = tls.Dial("tcp", p.addr, p.tls)
	} else {
		c, err = net.Dial("tcp", p.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
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

// get sends one GET on a connection of its own, calls headerSeen (when not nil) once the
// response header has arrived, then reads the body and checks whether the connection is
// closed after it. Nothing here waits longer than a few seconds.
func (p *countingProxy) get(t *testing.T, headerSeen func()) clientView {
	t.Helper()
	c := p.dial(t)
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
// response that looks whole. The stream reports the bytes the client got, no more.
func TestForwardBrokenBody(t *testing.T) {
	for _, overTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "tls"}[overTLS], func(t *testing.T) {
			testForwardBrokenBody(t, overTLS)
		})
	}
}

func testForwardBrokenBody(t *testing.T, overTLS bool) {
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
			proxy := startCountingProxy(t, up, overTLS)
			v := proxy.get(t, headerSeen)
			sent := proxy.reported(t)
			if tt.want502 {
				if v.resp.StatusCode != 502 || v.body != string(msgBadResponse) || v.bodyErr != nil {
					t.Fatalf("got %d %q (%v), want 502 %s", v.resp.StatusCode, v.body, v.bodyErr, msgBadResponse)
				}
				if ct := v.resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
				if sent != notStreamed {
					t.Errorf("a 502 reported a streamed body of %d bytes", sent)
				}
				return
			}
			if sent != int64(len(v.body)) {
				t.Errorf("the stream says it sent %d bytes, the client got %d", sent, len(v.body))
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

// TestForwardReportsWholeBodies checks what a stream reports when nothing broke: every byte
// of the body (the chunked framing not counted), and that a body read whole is no stream.
func TestForwardReportsWholeBodies(t *testing.T) {
	big := strings.Repeat("x", maxBufferedBody+1)
	for _, tt := range []struct {
		name, response string
		want           int64
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big, int64(len(big))},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 5},
		{"until close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", 11},
		{"buffered", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwhole", notStreamed},
	} {
		// The node closes the connection after each response: a whole one, all the same.
		up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{startBrokenNode(t, tt.response, false, nil)}})
		proxy := startCountingProxy(t, up, false)
		status, _ := get(t, proxy.addr, "/")
		if got := proxy.reported(t); status != 200 || got != tt.want {
			t.Errorf("%s: %d, reported %d bytes sent, want 200 and %d", tt.name, status, got, tt.want)
		}
	}
}

// TestForwardReportsAClientThatLeft has the client read part of a large body and hang up:
// the stream reports no more than the server could write before it noticed.
func TestForwardReportsAClientThatLeft(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStream(&pattern{n: largeBody}, largeBody)
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	proxy := startCountingProxy(t, up, false)
	c := proxy.dial(t)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := io.CopyN(io.Discard, resp.Body, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if sent := proxy.reported(t); sent < read || sent >= largeBody {
		t.Errorf("reported %d bytes sent of %d; the client read %d, then left", sent, largeBody, read)
	}
}
