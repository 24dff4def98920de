package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/internal/testcert"
)

// testCA is a testcert.CA with the short calls these tests make.
type testCA struct{ *testcert.CA }

func newTestCA(t testing.TB, name string) testCA { return testCA{testcert.NewCA(t, name)} }

func (ca testCA) pool() *x509.CertPool { return ca.Pool() }

// issue makes a certificate for names (host names or IP addresses) with usage, valid for an
// hour, returning it as PEM and as a tls.Certificate.
func (ca testCA) issue(t testing.TB, usage x509.ExtKeyUsage, names ...string) (certPEM, keyPEM string, pair tls.Certificate) {
	t.Helper()
	c := ca.Issue(t, testcert.Options{Names: names, Usage: []x509.ExtKeyUsage{usage}, NotAfter: time.Now().Add(time.Hour)})
	return c.CertPEM, c.KeyPEM, c.Pair
}

// tlsNode is an https upstream that answers with what it saw: the SNI, the Host, the
// client certificate's name and which connection carried the request.
type tlsNode struct {
	srv   *httptest.Server
	port  int
	mu    sync.Mutex
	conns map[string]int // remote address -> connection number
}

func startTLSNode(t testing.TB, config *tls.Config) *tlsNode {
	t.Helper()
	n := &tlsNode{conns: map[string]int{}}
	n.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		id, ok := n.conns[r.RemoteAddr]
		if !ok {
			id = len(n.conns) + 1
			n.conns[r.RemoteAddr] = id
		}
		n.mu.Unlock()
		client := "-"
		if len(r.TLS.PeerCertificates) > 0 {
			client = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "sni=%s host=%s client=%s conn=%d", r.TLS.ServerName, r.Host, client, id)
	}))
	n.srv.TLS = config
	n.srv.Config.ErrorLog = discardLog // handshake failures are what some tests cause
	n.srv.StartTLS()
	t.Cleanup(n.srv.Close)
	n.port = n.srv.Listener.Addr().(*net.TCPAddr).Port
	return n
}

// logRecorder collects what Pools logs.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// forwardTo sends one request with Host host (and info.Host infoHost when not empty)
// through up, in process, and returns the status and body.
func forwardTo(up *Upstream, host, infoHost string) (int, string) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.SetRequestURI("/")
	req.Header.SetHost(host)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	info := Info{Host: []byte(infoHost)}
	up.ForwardInfo(&ctx, &info)
	body := ctx.Response.Body()
	if ctx.Response.IsBodyStream() {
		body, _ = io.ReadAll(ctx.Response.BodyStream())
	}
	return ctx.Response.StatusCode(), string(body)
}

func TestForwardHTTPSVerification(t *testing.T) {
	ca, stranger := newTestCA(t, "test CA"), newTestCA(t, "unknown CA")
	_, _, trusted := ca.issue(t, x509.ExtKeyUsageServerAuth, "a.example.test")
	_, _, untrusted := stranger.issue(t, x509.ExtKeyUsageServerAuth, "a.example.test")
	for _, tt := range []struct {
		name     string
		cert     tls.Certificate
		roots    *x509.CertPool
		verify   *bool
		host     string
		wantBody string // substring
		wantLog  string // substring; "" for no log
	}{
		{"trusted CA", trusted, ca.pool(), nil, "a.example.test", "sni=a.example.test", ""},
		{"verify true", trusted, ca.pool(), new(true), "a.example.test", "sni=a.example.test", ""},
		{"unknown CA", untrusted, ca.pool(), nil, "a.example.test", "certificate did not verify",
			"certificate signed by unknown authority"},
		{"system roots only", trusted, nil, nil, "a.example.test", "certificate did not verify",
			"Trust its CA with ssl.ssl_trusted_certificate"},
		{"wrong name", trusted, ca.pool(), nil, "b.example.test", "certificate did not verify",
			`for name "b.example.test"`},
		{"verify false, unknown CA", untrusted, ca.pool(), new(false), "a.example.test", "sni=a.example.test", ""},
		{"verify false, wrong name", trusted, nil, new(false), "b.example.test", "sni=b.example.test", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := startTLSNode(t, &tls.Config{Certificates: []tls.Certificate{tt.cert}})
			log := &logRecorder{}
			p := NewPoolsWith(Options{RootCAs: tt.roots, Logf: log.logf})
			t.Cleanup(p.Close)
			up, err := p.Upstream(&conf.Upstream{Scheme: "https", TLS: &conf.UpstreamTLS{Verify: tt.verify},
				Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port, Weight: 1}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			status, body := forwardTo(up, tt.host, "")
			wantStatus := 200
			if tt.wantLog != "" {
				wantStatus = 502
			}
			if status != wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("got %d %q, want %d with %q", status, body, wantStatus, tt.wantBody)
			}
			if logged := log.String(); tt.wantLog != "" && !strings.Contains(logged, tt.wantLog) || tt.wantLog == "" && logged != "" {
				t.Errorf("logged %q, want %q", logged, tt.wantLog)
			}
		})
	}
}

// TestForwardHTTPSServerName: the name sent as SNI, and checked, is the Host the node
// gets, in each pass_host mode; an IP address is checked but not sent.
func TestForwardHTTPSServerName(t *testing.T) {
	ca := newTestCA(t, "test CA")
	_, _, cert := ca.issue(t, x509.ExtKeyUsageServerAuth, "*.example.test", "localhost", "127.0.0.1")
	node := startTLSNode(t, &tls.Config{Certificates: []tls.Certificate{cert}})
	port := fmt.Sprint(node.port)
	for _, tt := range []struct {
		name           string
		nodeHost       string
		passHost       string
		upstreamHost   string
		host, infoHost string
		want           string
	}{
		{"pass", "127.0.0.1", "pass", "", "a.example.test", "", "sni=a.example.test host=a.example.test "},
		{"pass, port dropped", "127.0.0.1", "pass", "", "a.example.test:9080", "", "sni=a.example.test host=a.example.test:9080 "},
		{"pass, IP address", "127.0.0.1", "pass", "", "127.0.0.1:9080", "", "sni= host=127.0.0.1:9080 "},
		{"pass, no Host", "127.0.0.1", "pass", "", "", "", "sni= host=127.0.0.1:" + port + " "},
		{"node, IP literal", "127.0.0.1", "node", "", "a.example.test", "", "sni= host=127.0.0.1:" + port + " "},
		{"node, name", "localhost", "node", "", "a.example.test", "", "sni=localhost host=localhost:" + port + " "},
		{"rewrite", "127.0.0.1", "rewrite", "r.example.test", "a.example.test", "", "sni=r.example.test host=r.example.test "},
		{"rewrite with port", "127.0.0.1", "rewrite", "r.example.test:8443", "a.example.test", "", "sni=r.example.test host=r.example.test:8443 "},
		{"proxy-rewrite host over node", "127.0.0.1", "node", "", "a.example.test", "h.example.test", "sni=h.example.test host=h.example.test "},
		{"proxy-rewrite host over rewrite", "127.0.0.1", "rewrite", "r.example.test", "a.example.test", "h.example.test", "sni=h.example.test host=h.example.test "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPoolsWith(Options{RootCAs: ca.pool()})
			t.Cleanup(p.Close)
			up, err := p.Upstream(&conf.Upstream{Scheme: "https", PassHost: tt.passHost, UpstreamHost: tt.upstreamHost,
				Nodes: conf.Nodes{{Host: tt.nodeHost, Port: node.port, Weight: 1}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for {
				status, body := forwardTo(up, tt.host, tt.infoHost)
				if status == 200 && strings.HasPrefix(body, tt.want) {
					return
				}
				// A name node waits for the resolver's first answer with 502s.
				if tt.nodeHost == "127.0.0.1" || status != 502 || time.Now().After(deadline) {
					t.Fatalf("got %d %q, want 200 %q...", status, body, tt.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestForwardHTTPSPoolsByServerName: a kept-alive connection made for one name is not
// reused for another, and is for its own.
func TestForwardHTTPSPoolsByServerName(t *testing.T) {
	ca := newTestCA(t, "test CA")
	_, _, cert := ca.issue(t, x509.ExtKeyUsageServerAuth, "*.example.test")
	node := startTLSNode(t, &tls.Config{Certificates: []tls.Certificate{cert}})
	p := NewPoolsWith(Options{RootCAs: ca.pool()})
	t.Cleanup(p.Close)
	up, err := p.Upstream(&conf.Upstream{Scheme: "https",
		Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port, Weight: 1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct{ host, want string }{
		{"a.example.test", "sni=a.example.test host=a.example.test client=- conn=1"},
		{"b.example.test", "sni=b.example.test host=b.example.test client=- conn=2"},
		{"a.example.test", "sni=a.example.test host=a.example.test client=- conn=1"},
		{"b.example.test", "sni=b.example.test host=b.example.test client=- conn=2"},
	} {
		if status, body := forwardTo(up, step.host, ""); status != 200 || body != step.want {
			t.Errorf("request %d: got %d %q, want 200 %q", i+1, status, body, step.want)
		}
	}
}

func TestForwardHTTPSClientCertificate(t *testing.T) {
	ca, clientCA := newTestCA(t, "test CA"), newTestCA(t, "client CA")
	_, _, serverCert := ca.issue(t, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	certPEM, keyPEM, _ := clientCA.issue(t, x509.ExtKeyUsageClientAuth, "gw-client")
	strangerCert, strangerKey, _ := ca.issue(t, x509.ExtKeyUsageClientAuth, "stranger")
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		node := startTLSNode(t, &tls.Config{
			Certificates: []tls.Certificate{serverCert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCA.pool(),
			MaxVersion:   version,
		})
		for _, tt := range []struct {
			name          string
			tls           *conf.UpstreamTLS
			status        int
			body, wantLog string
		}{
			{"client certificate", &conf.UpstreamTLS{ClientCert: certPEM, ClientKey: keyPEM}, 200, "client=gw-client", ""},
			{"none", nil, 502, "", "remote error: tls: "},
			{"one the node does not trust", &conf.UpstreamTLS{ClientCert: strangerCert, ClientKey: strangerKey}, 502, "", "remote error: tls: "},
		} {
			t.Run(fmt.Sprintf("%s/TLS 1.%d", tt.name, version-tls.VersionTLS10), func(t *testing.T) {
				log := &logRecorder{}
				p := NewPoolsWith(Options{RootCAs: ca.pool(), Logf: log.logf})
				t.Cleanup(p.Close)
				up, err := p.Upstream(&conf.Upstream{Scheme: "https", TLS: tt.tls, PassHost: "node",
					Nodes: conf.Nodes{{Host: "127.0.0.1", Port: node.port, Weight: 1}}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				status, body := forwardTo(up, "", "")
				want := tt.body
				if tt.status == 502 && version == tls.VersionTLS12 {
					want = "the TLS handshake with the upstream failed"
				} else if tt.status == 502 {
					want = "the upstream refused the TLS connection"
				}
				if status != tt.status || !strings.Contains(body, want) {
					t.Errorf("got %d %q, want %d with %q", status, body, tt.status, want)
				}
				// TLS 1.2 nodes refuse during the handshake; TLS 1.3 ones after it, with an
				// alert the request's read meets. Either way the log names the alert.
				if logged := log.String(); tt.wantLog != "" && !strings.Contains(logged, tt.wantLog) {
					t.Errorf("logged %q, want %q", logged, tt.wantLog)
				}
			})
		}
	}
}

// TestUpstreamTLSBuild: what Pools.Upstream makes of tls.
func TestUpstreamTLSBuild(t *testing.T) {
	ca := newTestCA(t, "test CA")
	certPEM, keyPEM, _ := ca.issue(t, x509.ExtKeyUsageClientAuth, "gw-client")
	otherCert, _, _ := ca.issue(t, x509.ExtKeyUsageClientAuth, "other")
	log := &logRecorder{}
	p := NewPoolsWith(Options{Logf: log.logf})
	t.Cleanup(p.Close)
	https := func(t *conf.UpstreamTLS) *conf.Upstream {
		return &conf.Upstream{Scheme: "https", TLS: t, Nodes: conf.Nodes{{Host: "127.0.0.1", Port: 1, Weight: 1}}}
	}

	if _, err := p.Upstream(https(&conf.UpstreamTLS{ClientCert: otherCert, ClientKey: keyPEM}), nil); err == nil ||
		!strings.Contains(err.Error(), "tls.client_cert") || strings.Contains(err.Error(), "PRIVATE") {
		t.Errorf("mismatched pair: error %v, want one naming tls.client_cert without key material", err)
	}

	// One pool per way of authenticating: a client certificate or verify false never
	// shares connections with an upstream that differs in them.
	plain, _ := p.Upstream(https(nil), nil)
	withCert, _ := p.Upstream(https(&conf.UpstreamTLS{ClientCert: certPEM, ClientKey: keyPEM}), nil)
	withCertAgain, _ := p.Upstream(https(&conf.UpstreamTLS{ClientCert: certPEM, ClientKey: keyPEM, Verify: new(true)}), nil)
	unverified, _ := p.Upstream(https(&conf.UpstreamTLS{Verify: new(false)}), nil)
	if plain.nodes[0].pool == withCert.nodes[0].pool || plain.nodes[0].pool == unverified.nodes[0].pool ||
		withCert.nodes[0].pool == unverified.nodes[0].pool {
		t.Error("upstreams that authenticate differently share a pool")
	}
	if withCert.nodes[0].pool != withCertAgain.nodes[0].pool {
		t.Error("two upstreams with the same client certificate do not share a pool")
	}
	if len(p.clientCerts) != 1 {
		t.Errorf("%d client certificates parsed, want 1 (shared)", len(p.clientCerts))
	}
	p.Retain([]*Upstream{plain})
	if len(p.clientCerts) != 0 {
		t.Errorf("%d client certificates kept after their upstreams went, want 0", len(p.clientCerts))
	}

	// A client_cert_id that Snapshot.ResolveClientCerts could not resolve.
	dangling, err := p.Upstream(https(&conf.UpstreamTLS{ClientCertID: "7"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	status, body := forwardTo(dangling, "a.example.test", "")
	if status != 502 || !strings.Contains(body, "tls.client_cert_id names ssl 7") {
		t.Errorf("dangling client_cert_id: got %d %q, want 502 naming ssl 7", status, body)
	}
	if !strings.Contains(log.String(), "ssl 7") {
		t.Errorf("dangling client_cert_id not logged: %q", log.String())
	}
}

func TestHostWithoutPort(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "",
		"a.example":           "a.example",
		"a.example:8080":      "a.example",
		"127.0.0.1:80":        "127.0.0.1",
		"[::1]:8443":          "::1",
		"[::1]":               "::1",
		"::1":                 "::1",
		"[broken":             "[broken",
		"A.Example.test:9080": "A.Example.test",
	} {
		if got := string(hostWithoutPort([]byte(in))); got != want {
			t.Errorf("hostWithoutPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// preparedHTTPSForward is preparedForward over TLS with pass_host pass: one Forward on a
// prepared RequestCtx, reusing the pooled connection made for the request's Host.
func preparedHTTPSForward(tb testing.TB) func() {
	tb.Helper()
	ca := newTestCA(tb, "test CA")
	_, _, cert := ca.issue(tb, x509.ExtKeyUsageServerAuth, "client.example")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		tb.Fatal(err)
	}
	go (&fasthttp.Server{Handler: reply("hello")}).Serve(ln) //nolint:errcheck
	tb.Cleanup(func() { ln.Close() })
	p := NewPoolsWith(Options{RootCAs: ca.pool()})
	tb.Cleanup(p.Close)
	up, err := p.Upstream(&conf.Upstream{Scheme: "https",
		Nodes: conf.Nodes{{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Weight: 1}}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var template fasthttp.Request
	template.SetRequestURI("/small")
	template.Header.SetHost("client.example")
	var ctx fasthttp.RequestCtx
	ctx.Init(&template, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	return func() {
		template.CopyTo(&ctx.Request)
		ctx.Request.URI()
		up.Forward(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusOK || string(ctx.Response.Body()) != "hello" {
			tb.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
		ctx.Response.Reset()
	}
}

func TestForwardHTTPSDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled objects are allocated again")
	}
	run := preparedHTTPSForward(t)
	for range 20 {
		run()
	}
	// crypto/tls (Go 1.26) allocates once per record read, in Conn.readFromUntil: here
	// the node's read of the request and gw's read of the response. Anything more is gw's.
	const cryptoTLS = 2
	if allocs := testing.AllocsPerRun(200, run); allocs > cryptoTLS {
		t.Errorf("Forward over a kept-alive TLS connection allocates %.1f times per request, want at most crypto/tls's %d", allocs, cryptoTLS)
	}
}

// BenchmarkForwardHTTPS is BenchmarkForwardPrepared over a kept-alive TLS connection.
func BenchmarkForwardHTTPS(b *testing.B) {
	run := preparedHTTPSForward(b)
	run()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

var discardLog = log.New(io.Discard, "", 0)
