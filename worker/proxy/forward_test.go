package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/monotime"
	"gw/internal/testnet"
	"gw/plugins"
)

// stub is an upstream started by a test: a fasthttp server on loopback that counts the
// connections it accepts.
type stub struct {
	addr  string
	port  int
	conns atomic.Int64
}

func startStub(tb testing.TB, h fasthttp.RequestHandler) *stub {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &stub{addr: ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port}
	srv := &fasthttp.Server{
		Handler: h,
		ConnState: func(_ net.Conn, st fasthttp.ConnState) {
			if st == fasthttp.StateNew {
				s.conns.Add(1)
			}
		},
		StreamRequestBody: true,
	}
	go srv.Serve(ln) //nolint:errcheck
	// Closing the listener is enough: Shutdown would wait out keep-alive connections.
	tb.Cleanup(func() { ln.Close() })
	return s
}

func (s *stub) node(weight int) conf.Node {
	return conf.Node{Host: "127.0.0.1", Port: s.port, Weight: weight}
}

// deadPort returns a loopback port that refuses every connection.
func deadPort(t *testing.T) int { return testnet.RefusedPort(t) }

// startProxy serves up.Forward the way the worker will: fasthttp, streaming request bodies.
func startProxy(tb testing.TB, up *Upstream) string {
	tb.Helper()
	return startProxyWith(tb, up.Forward)
}

// startPristineProxy is startProxy for requests nothing rewrote: they go out by
// writePristine (Info.Pristine), or the usual way when pristine is false.
func startPristineProxy(tb testing.TB, up *Upstream, pristine bool) string {
	tb.Helper()
	return startProxyWith(tb, func(ctx *fasthttp.RequestCtx) {
		up.ForwardInfo(ctx, &Info{Pristine: pristine})
	})
}

func startProxyWith(tb testing.TB, handler fasthttp.RequestHandler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler:                      handler,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
	}
	go srv.Serve(ln) //nolint:errcheck
	// Closing the listener is enough: Shutdown would wait out keep-alive connections.
	tb.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func newUpstream(t *testing.T, u *conf.Upstream) (*Upstream, *Pools) {
	t.Helper()
	p := NewPools()
	t.Cleanup(p.Close)
	up, err := p.Upstream(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return up, p
}

// get sends one request through the proxy with a fresh client connection.
func get(t *testing.T, proxy, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+proxy+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

var client = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func reply(body string) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) { ctx.WriteString(body) } //nolint:errcheck
}

func TestForwardBalancesAcrossNodes(t *testing.T) {
	a, b := startStub(t, reply("a")), startStub(t, reply("b"))
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{a.node(2), b.node(1)}})
	proxy := startProxy(t, up)
	var got strings.Builder
	for range 6 {
		status, body := get(t, proxy, "/")
		if status != 200 {
			t.Fatalf("status %d, body %s", status, body)
		}
		got.WriteString(body)
	}
	if got.String() != "abaaba" {
		t.Errorf("bodies %q, want abaaba (smooth 2:1)", got.String())
	}
}

func TestForwardRetriesNextNodeOnConnectFailure(t *testing.T) {
	live := startStub(t, reply("live"))
	dead := conf.Node{Host: "127.0.0.1", Port: deadPort(t), Weight: 100}
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{dead, live.node(1)}})
	proxy := startProxy(t, up)
	for range 5 {
		if status, body := get(t, proxy, "/"); status != 200 || body != "live" {
			t.Fatalf("status %d body %q, want 200 live", status, body)
		}
	}
}

func TestForwardRetriesLimited(t *testing.T) {
	live := startStub(t, reply("live"))
	dead := conf.Node{Host: "127.0.0.1", Port: deadPort(t), Weight: 100}
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{dead, live.node(1)}, Retries: intPtr(0)})
	proxy := startProxy(t, up)
	status, body := get(t, proxy, "/")
	if status != 502 || body != `{"error_msg":"502 Bad Gateway: no upstream node answered"}` {
		t.Errorf("retries 0 with the dead node picked first: status %d body %s, want 502", status, body)
	}
}

func TestForwardErrors(t *testing.T) {
	slow := startStub(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(500 * time.Millisecond)
		ctx.WriteString("late") //nolint:errcheck
	})
	dead1, dead2 := deadPort(t), deadPort(t)
	tests := []struct {
		name       string
		u          *conf.Upstream
		wantStatus int
		wantBody   string
	}{
		{"all nodes dead", &conf.Upstream{Nodes: conf.Nodes{
			{Host: "127.0.0.1", Port: dead1, Weight: 1}, {Host: "127.0.0.1", Port: dead2, Weight: 1},
		}}, 502, `{"error_msg":"502 Bad Gateway: no upstream node answered"}`},
		// APISIX's t/admin/upstream-array-nodes.t and t/admin/upstream2.t, TEST 8 "hit
		// empty nodes upstream": 503, "no valid upstream node". Nodes of weight 0 only
		// leave none to try either.
		{"no nodes", &conf.Upstream{}, 503, `{"error_msg":"503 Service Unavailable: no valid upstream node"}`},
		{"empty nodes", &conf.Upstream{Nodes: conf.Nodes{}}, 503, `{"error_msg":"503 Service Unavailable: no valid upstream node"}`},
		{"all weights 0", &conf.Upstream{Nodes: conf.Nodes{
			{Host: "127.0.0.1", Port: dead1, Weight: 0}, {Host: "127.0.0.1", Port: dead2, Weight: 0},
		}}, 503, `{"error_msg":"503 Service Unavailable: no valid upstream node"}`},
		{"read timeout", &conf.Upstream{Nodes: conf.Nodes{slow.node(1)},
			Timeout: &conf.Timeout{Connect: 1, Send: 1, Read: 0.1}},
			504, `{"error_msg":"504 Gateway Timeout: upstream did not answer within 0.1s"}`},
		{"unresolvable name", &conf.Upstream{Nodes: conf.Nodes{{Host: "gw-proxy-test.invalid", Port: 80, Weight: 1}}},
			502, `{"error_msg":"502 Bad Gateway: no upstream node answered"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, _ := newUpstream(t, tt.u)
			proxy := startProxy(t, up)
			resp, err := client.Get("http://" + proxy + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
		})
	}
}

// TestForwardNoRetryAfterSend has every node take the request and drop the connection
// without answering: only the first may see it.
func TestForwardNoRetryAfterSend(t *testing.T) {
	var hits atomic.Int64
	var ports []int
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					br := bufio.NewReader(c)
					if line, _ := br.ReadString('\n'); strings.HasPrefix(line, "POST") {
						hits.Add(1)
					}
					c.Close()
				}()
			}
		}()
	}
	var ns conf.Nodes
	for _, p := range ports {
		ns = append(ns, conf.Node{Host: "127.0.0.1", Port: p, Weight: 1})
	}
	up, _ := newUpstream(t, &conf.Upstream{Nodes: ns, Retries: intPtr(2)})
	proxy := startProxy(t, up)
	resp, err := client.Post("http://"+proxy+"/", "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d nodes received the request, want 1", n)
	}
}

// TestForwardReplaysOnStaleKeepAlive has the node close a kept-alive connection after
// answering: the next bodyless GET goes out again on a fresh connection instead of failing.
func TestForwardReplaysOnStaleKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				// Claim keep-alive, then close as soon as the answer is out.
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") //nolint:errcheck
			}()
		}
	}()
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Weight: 1}}})
	proxy := startProxy(t, up)
	for i := range 3 {
		if status, body := get(t, proxy, "/"); status != 200 || body != "ok" {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
		time.Sleep(20 * time.Millisecond) // let the close reach the proxy's side
	}
	if conns.Load() != 3 {
		t.Errorf("node saw %d connections, want 3", conns.Load())
	}
}

func TestForwardKeepAlive(t *testing.T) {
	s := startStub(t, reply("ok"))
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	proxy := startProxy(t, up)
	for range 20 {
		if status, _ := get(t, proxy, "/"); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("20 sequential requests used %d upstream connections, want 1", n)
	}
}

func TestForwardKeepAliveRequestsLimit(t *testing.T) {
	s := startStub(t, reply("ok"))
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)},
		KeepalivePool: &conf.KeepalivePool{Size: 10, IdleTimeout: 60, Requests: 3}})
	proxy := startProxy(t, up)
	for range 9 {
		get(t, proxy, "/")
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("9 requests with requests=3 used %d connections, want 3", n)
	}
}

func TestForwardIdleTimeoutAndRetain(t *testing.T) {
	s := startStub(t, reply("ok"))
	up, p := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)},
		KeepalivePool: &conf.KeepalivePool{Size: 10, IdleTimeout: 0.2, Requests: 100}})
	proxy := startProxy(t, up)
	get(t, proxy, "/")
	pool := up.nodes[0].pool
	if pool.idleCount() != 1 {
		t.Fatalf("idle connections after one request = %d, want 1", pool.idleCount())
	}
	p.evictIdle(monotime.Now() + int64(300*time.Millisecond))
	if pool.idleCount() != 0 {
		t.Errorf("idle connection survived its idle_timeout")
	}
	get(t, proxy, "/")
	if s.conns.Load() != 2 {
		t.Errorf("after eviction the node saw %d connections, want 2", s.conns.Load())
	}
	p.Retain(nil)
	if pool.idleCount() != 0 {
		t.Errorf("Retain(nil) left idle connections")
	}
	if status, _ := get(t, proxy, "/"); status != 200 {
		t.Errorf("an upstream whose pool was dropped stopped working: %d", status)
	}
}

// TestForwardResolvesName: the very first request to a named node is served, looked up
// on the spot when the background resolver has not answered yet (the Admin API has
// already said the route serves), and concurrent first requests share one lookup.
func TestForwardResolvesName(t *testing.T) {
	s := startStub(t, reply("by name"))
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "localhost", Port: s.port, Weight: 1}}})
	proxy := startProxy(t, up)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, body := get(t, proxy, "/"); status != 200 || body != "by name" {
				t.Errorf("first requests: %d %q, want 200 by name at once", status, body)
			}
		}()
	}
	wg.Wait()
}

func TestForwardPassHost(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) { ctx.Write(ctx.Host()) }) //nolint:errcheck
	tests := []struct {
		name string
		u    *conf.Upstream
		want string
	}{
		{"pass", &conf.Upstream{}, "client.example"},
		{"node", &conf.Upstream{PassHost: "node"}, "127.0.0.1:" + strconv.Itoa(s.port)},
		{"node by name", &conf.Upstream{PassHost: "node", Nodes: conf.Nodes{{Host: "localhost", Port: s.port, Weight: 1}}},
			"localhost:" + strconv.Itoa(s.port)},
		{"rewrite", &conf.Upstream{PassHost: "rewrite", UpstreamHost: "rewritten.example"}, "rewritten.example"},
	}
	for _, pristine := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s pristine=%v", tt.name, pristine), func(t *testing.T) {
				testPassHost(t, s, tt.u, tt.want, pristine)
			})
		}
	}
}

func testPassHost(t *testing.T, s *stub, u *conf.Upstream, want string, pristine bool) {
	withNodes := *u
	if withNodes.Nodes == nil {
		withNodes.Nodes = conf.Nodes{s.node(1)}
	}
	up, _ := newUpstream(t, &withNodes)
	proxy := startPristineProxy(t, up, pristine)
	deadline := time.Now().Add(3 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/", nil)
		req.Host = "client.example"
		status, body := do(t, req)
		if status == 502 && time.Now().Before(deadline) { // a name still resolving
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if status != 200 || body != want {
			t.Errorf("upstream saw Host %q (status %d), want %q", body, status, want)
		}
		return
	}
}

// TestForwardInfoHost: a Host chosen by the caller (proxy-rewrite's host) wins over every
// pass_host mode, and X-Forwarded-Host stays the client's.
func TestForwardInfoHost(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		ctx.Write(ctx.Host())                                                        //nolint:errcheck
		ctx.Write([]byte(" " + string(ctx.Request.Header.Peek("X-Forwarded-Host")))) //nolint:errcheck
	})
	for _, pristine := range []bool{false, true} {
		for _, u := range []*conf.Upstream{{}, {PassHost: "node"}, {PassHost: "rewrite", UpstreamHost: "rewritten.example"}} {
			testInfoHost(t, s, u, pristine)
		}
	}
}

func testInfoHost(t *testing.T, s *stub, u *conf.Upstream, pristine bool) {
	u.Nodes = conf.Nodes{s.node(1)}
	up, _ := newUpstream(t, u)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := []byte("chosen.example")
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		up.ForwardInfo(ctx, &Info{Host: host, Pristine: pristine})
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	req.Host = "client.example"
	if status, body := do(t, req); status != 200 || body != "chosen.example client.example" {
		t.Errorf("pass_host %q, pristine %v: upstream saw %q (status %d), want Host chosen.example, X-Forwarded-Host client.example", u.PassHost, pristine, body, status)
	}
}

// rawExchange sends raw request bytes to addr and returns the response head and body.
func rawExchange(t *testing.T, addr, request string) (head, body string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h strings.Builder
	resp.Header.Write(&h) //nolint:errcheck
	for _, te := range resp.TransferEncoding {
		h.WriteString("Transfer-Encoding: " + te + "\r\n")
	}
	return h.String(), string(b)
}

// TestForwardHeaders runs both ways a request can go out: re-serialised from fasthttp's
// parsed header, and pristine (the client's lines, filtered); the node must see the same.
func TestForwardHeaders(t *testing.T) {
	for _, pristine := range []bool{false, true} {
		t.Run(fmt.Sprintf("pristine=%v", pristine), func(t *testing.T) { testForwardHeaders(t, pristine) })
	}
}

func testForwardHeaders(t *testing.T, pristine bool) {
	// The node echoes the request head it received, as the wire carried it, and answers
	// with hop-by-hop headers of its own.
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
				br := bufio.NewReader(c)
				var head strings.Builder
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					head.WriteString(line)
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Node-Hop\r\nX-Node-Hop: 1\r\n"+
					"Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nTrailer: X-Sum\r\n"+
					"X-Node-End: 1\r\nServer: node/1.0\r\nContent-Length: %d\r\n\r\n%s", head.Len(), head.String())
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: port, Weight: 1}}})
	proxy := startPristineProxy(t, up, pristine)
	_, proxyPort, _ := net.SplitHostPort(proxy)

	respHead, sent := rawExchange(t, proxy, "GET /a%2Fb/../c?x=1&y=%20 HTTP/1.1\r\n"+
		"Host: client.example:8080\r\n"+
		"Connection: keep-alive, X-Client-Hop\r\n"+
		"X-Client-Hop: 1\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"TE: trailers\r\n"+
		"Upgrade: websocket\r\n"+
		"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"+
		"X-Forwarded-For: 10.0.0.1\r\n"+
		"X-Forwarded-For: 10.0.0.2\r\n"+
		"X-Real-IP: 6.6.6.6\r\n"+
		"x-lower-case: 1\r\n"+
		"X-End: 1\r\n\r\n")

	// The way out shows in a name's spelling: fasthttp's serialiser normalises it, a
	// pristine request keeps the client's, as nginx does.
	wantSpelling := "X-Lower-Case: 1\r\n"
	if pristine {
		wantSpelling = "x-lower-case: 1\r\n"
	}
	if !strings.Contains(sent, wantSpelling) {
		t.Errorf("the upstream did not get %q (pristine %v):\n%s", wantSpelling, pristine, sent)
	}

	lines := strings.Split(strings.TrimSpace(sent), "\r\n")
	if lines[0] != "GET /a%2Fb/../c?x=1&y=%20 HTTP/1.1" {
		t.Errorf("request line %q, want the client's verbatim", lines[0])
	}
	got := map[string][]string{}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ": ")
		got[strings.ToLower(k)] = append(got[strings.ToLower(k)], v)
	}
	want := map[string]string{
		"host":              "client.example:8080",
		"x-real-ip":         "127.0.0.1",
		"x-forwarded-for":   "10.0.0.1, 10.0.0.2, 127.0.0.1",
		"x-forwarded-proto": "http",
		"x-forwarded-host":  "client.example:8080",
		"x-forwarded-port":  proxyPort,
		"x-end":             "1",
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v {
			t.Errorf("upstream got %s: %q, want exactly %q", k, got[k], v)
		}
	}
	for _, k := range []string{"connection", "x-client-hop", "keep-alive", "proxy-connection", "te", "upgrade",
		"proxy-authorization", "trailer", "transfer-encoding"} {
		if _, ok := got[k]; ok {
			t.Errorf("hop-by-hop request header %s reached the upstream: %q", k, got[k])
		}
	}

	lower := strings.ToLower(respHead)
	for _, k := range []string{"x-node-hop", "keep-alive", "proxy-authenticate", "upgrade", "trailer"} {
		if strings.Contains(lower, k+":") {
			t.Errorf("hop-by-hop response header %s reached the client:\n%s", k, respHead)
		}
	}
	if !strings.Contains(lower, "x-node-end: 1") {
		t.Errorf("end-to-end response header lost:\n%s", respHead)
	}
	if strings.Contains(lower, "node/1.0") {
		t.Errorf("the node's Server header reached the client:\n%s", respHead)
	}
	if strings.Contains(lower, "content-type") {
		t.Errorf("a Content-Type the node did not send reached the client:\n%s", respHead)
	}
}

func TestForwardResponseFramings(t *testing.T) {
	big := strings.Repeat("x", maxBufferedBody+1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	responses := map[string]string{
		"/chunked":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
		"/untilclose": "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
		"/big":        "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big,
		"/empty":      "HTTP/1.1 204 No Content\r\n\r\n",
		"/continue":   "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter",
		"/head":       "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.WriteString(c, responses[req.URL.Path]) //nolint:errcheck
					if req.URL.Path == "/untilclose" {
						return
					}
				}
			}()
		}
	}()
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Weight: 1}}})
	proxy := startProxy(t, up)
	tests := []struct {
		path, body string
		status     int
	}{
		{"/chunked", "abcde", 200},
		{"/untilclose", "until close", 200},
		{"/big", big, 200},
		{"/empty", "", 204},
		{"/continue", "after", 200},
		{"/chunked", "abcde", 200},
	}
	for _, tt := range tests {
		status, body := get(t, proxy, tt.path)
		if status != tt.status || body != tt.body {
			t.Errorf("%s: %d %q, want %d %q", tt.path, status, truncate(body), tt.status, truncate(tt.body))
		}
	}
	resp, err := client.Head("http://" + proxy + "/head")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 1234 {
		t.Errorf("HEAD: %d with Content-Length %d, want 200 with the node's 1234", resp.StatusCode, resp.ContentLength)
	}
	if status, body := get(t, proxy, "/chunked"); status != 200 || body != "abcde" {
		t.Errorf("GET after HEAD on the same connection: %d %q", status, body)
	}
}

func TestForwardHTTPS(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure "+r.Host) //nolint:errcheck
	}))
	t.Cleanup(s.Close)
	port := s.Listener.Addr().(*net.TCPAddr).Port
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate()) // valid for 127.0.0.1, which pass_host node sends
	p := NewPoolsWith(Options{RootCAs: roots})
	t.Cleanup(p.Close)
	up, err := p.Upstream(&conf.Upstream{Scheme: "https", PassHost: "node",
		Nodes: conf.Nodes{{Host: "127.0.0.1", Port: port, Weight: 1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, up)
	want := "secure 127.0.0.1:" + strconv.Itoa(port)
	if status, body := get(t, proxy, "/"); status != 200 || body != want {
		t.Errorf("https node: %d %q, want 200 %q", status, body, want)
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// pattern is an endless, allocation-free body source.
type pattern struct{ n int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(b)), p.n)
	for i := range b[:n] {
		b[i] = byte(i)
	}
	p.n -= n
	return int(n), nil
}

const largeBody = 50 << 20

func allocatedBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func TestForwardStreamsLargeResponse(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/warm-up" {
			return
		}
		ctx.SetBodyStream(&pattern{n: largeBody}, largeBody)
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	proxy := startProxy(t, up)
	get(t, proxy, "/warm-up")

	before := allocatedBytes()
	resp, err := client.Get("http://" + proxy + "/")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	allocated := allocatedBytes() - before
	if err != nil || n != largeBody {
		t.Fatalf("read %d bytes (%v), want %d", n, err, largeBody)
	}
	if allocated > largeBody/4 {
		t.Errorf("passing a %d MiB response allocated %d MiB in the test process", largeBody>>20, allocated>>20)
	}
	if s.conns.Load() != 1 {
		t.Errorf("the streamed response did not give its connection back: %d connections", s.conns.Load())
	}
}

func TestForwardStreamsLargeRequest(t *testing.T) {
	var received atomic.Int64
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		if body := ctx.RequestBodyStream(); body != nil {
			n, _ := io.Copy(io.Discard, body)
			received.Store(n)
		}
		ctx.WriteString("got it") //nolint:errcheck
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	proxy := startProxy(t, up)
	get(t, proxy, "/warm-up")

	for _, chunked := range []bool{false, true} {
		before := allocatedBytes()
		var body io.Reader = &pattern{n: largeBody}
		req, _ := http.NewRequest(http.MethodPost, "http://"+proxy+"/", body)
		if !chunked {
			req.ContentLength = largeBody
		}
		status, reply := do(t, req)
		allocated := allocatedBytes() - before
		if status != 200 || reply != "got it" || received.Load() != largeBody {
			t.Fatalf("chunked=%v: status %d %q, upstream received %d bytes, want %d", chunked, status, reply, received.Load(), largeBody)
		}
		if allocated > largeBody/4 {
			t.Errorf("chunked=%v: passing a %d MiB request allocated %d MiB", chunked, largeBody>>20, allocated>>20)
		}
	}
}

func TestForwardConcurrent(t *testing.T) {
	a, b := startStub(t, reply("a")), startStub(t, reply("b"))
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{a.node(1), b.node(1)}})
	proxy := startProxy(t, up)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				resp, err := client.Get("http://" + proxy + "/")
				if err != nil {
					failures.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body) //nolint:errcheck
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Errorf("%d of 400 concurrent requests failed", failures.Load())
	}
}

// TestForwardedProto: X-Forwarded-Proto is the scheme the client spoke to the gateway.
func TestForwardedProto(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		ctx.Write(ctx.Request.Header.Peek("X-Forwarded-Proto")) //nolint:errcheck
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	if status, body := get(t, startProxy(t, up), "/"); status != 200 || body != "http" {
		t.Errorf("plain client: %d %q, want http", status, body)
	}

	ca := newTestCA(t, "gateway CA")
	_, _, pair := ca.issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	go (&fasthttp.Server{Handler: up.Forward}).Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "https" {
		t.Errorf("TLS client: X-Forwarded-Proto %q, want https", body)
	}
}

// TestForwardLeavesTakenForwardedHeaders: the X-Forwarded-* headers the chain took over
// (Info.Forwarded, proxy-rewrite's) go as the chain left them, set or removed; the proxy
// sets the others over the client's.
func TestForwardLeavesTakenForwardedHeaders(t *testing.T) {
	s := startStub(t, func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Request.Header
		fmt.Fprintf(ctx, "proto=%q host=%q port=%q", h.Peek("X-Forwarded-Proto"), h.Peek("X-Forwarded-Host"), h.Peek("X-Forwarded-Port"))
	})
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{s.node(1)}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		// As proxy-rewrite leaves them: Proto set, Host removed; Port not taken.
		ctx.Request.Header.Set("X-Forwarded-Proto", "https")
		ctx.Request.Header.Del("X-Forwarded-Host")
		up.ForwardInfo(ctx, &Info{Forwarded: plugins.ForwardedProto | plugins.ForwardedHost})
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { ln.Close() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	req.Header.Set("X-Forwarded-Port", "1")
	want := `proto="https" host="" port="` + port + `"`
	if status, body := do(t, req); status != 200 || body != want {
		t.Errorf("upstream saw %s (status %d), want %s", body, status, want)
	}
}
