package router

import (
	"bufio"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins/vars"
)

// addrConn is the connection a test request arrived on: only its addresses are read.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// newRequest parses a raw HTTP/1.1 request (with "\n" line ends) as arriving from peer
// ("ip:port") at 10.0.0.1:9080.
func newRequest(tb testing.TB, raw, peer string) *fasthttp.RequestCtx {
	tb.Helper()
	ctx := &fasthttp.RequestCtx{}
	remote, err := net.ResolveTCPAddr("tcp", peer)
	if err != nil {
		tb.Fatal(err)
	}
	ctx.Init2(addrConn{local: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9080}, remote: remote}, quietLogger{}, true)
	raw = strings.ReplaceAll(raw, "\n", "\r\n") + "\r\n\r\n"
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatalf("reading %q: %v", raw, err)
	}
	return ctx
}

// sample is a request using every kind of variable.
const sample = `GET /api/Users/42?a=1&b=x%20y&flag&dup=1&dup=2&n=10.5 HTTP/1.1
Host: API.Example.com:8443
X-Api-Key: secret
X-Empty:
X-Multi: one
X-Multi: two
X-Real-IP: 192.168.7.7
Cookie: session=abc; theme = dark ;dup=1
Cookie: dup=2`

func mustVars(tb testing.TB, vars string) *conf.Expr {
	tb.Helper()
	e, err := conf.ParseVars(json.RawMessage(vars))
	if err != nil {
		tb.Fatalf("ParseVars(%s): %v", vars, err)
	}
	return e
}

func TestVarsEvaluation(t *testing.T) {
	tests := []struct {
		vars string
		want bool
	}{
		// Variables.
		{`[["uri", "==", "/api/Users/42"]]`, true},
		{`[["request_uri", "==", "/api/Users/42?a=1&b=x%20y&flag&dup=1&dup=2&n=10.5"]]`, true},
		{`[["args", "~~", "^a=1&"]]`, true},
		{`[["query_string", "~~", "n=10.5$"]]`, true},
		{`[["host", "==", "api.example.com"]]`, true},
		{`[["host", "==", "API.Example.com"]]`, false},
		{`[["remote_addr", "==", "127.0.0.1"]]`, true},
		{`[["remote_port", "==", 50000]]`, true},
		{`[["server_addr", "==", "10.0.0.1"]]`, true},
		{`[["server_port", "==", "9080"]]`, true},
		{`[["request_method", "==", "GET"]]`, true},
		{`[["scheme", "==", "http"]]`, true},
		{`[["http_x_api_key", "==", "secret"]]`, true},
		{`[["http_X_API_KEY", "==", "secret"]]`, true},
		{`[["http_x_api_key", "==", "Secret"]]`, false},
		{`[["http_host", "==", "API.Example.com:8443"]]`, true},
		{`[["http_x_multi", "==", "one"]]`, true},
		{`[["arg_a", "==", "1"]]`, true},
		{`[["arg_b", "==", "x y"]]`, true},
		{`[["arg_dup", "==", "1"]]`, true},
		{`[["arg_A", "==", "1"]]`, false},
		{`[["cookie_session", "==", "abc"]]`, true},
		{`[["cookie_theme", "==", "dark"]]`, true},
		{`[["cookie_dup", "==", "1"]]`, true},
		{`[["cookie_none", "==", "abc"]]`, false},
		{`[["server_name", "==", "_"]]`, true},
		// While routing there is no route nor consumer yet, as in APISIX.
		{`[["route_id", "==", null]]`, true},
		{`[["consumer_name", "==", null]]`, true},
		{`[["mqtt_client_id", "==", null]]`, true},

		// Present but empty, and absent.
		{`[["http_x_empty", "==", ""]]`, true},
		{`[["http_x_empty", "==", null]]`, false},
		{`[["http_x_none", "==", null]]`, true},
		{`[["http_x_none", "=="]]`, true},
		{`[["http_x_api_key", "~=", null]]`, true},
		{`[["http_x_none", "~=", null]]`, false},
		{`[["arg_flag", "==", ""]]`, true},
		{`[["arg_none", "==", ""]]`, false},
		{`[["arg_none", "~=", "1"]]`, true},
		{`[["arg_none", "~=", 1]]`, true},

		// == and ~= with numbers read the variable as a number.
		{`[["arg_n", "==", 10.5]]`, true},
		{`[["arg_a", "==", 1.0]]`, true},
		{`[["arg_a", "==", "1.0"]]`, false},
		{`[["arg_b", "==", 1]]`, false},
		{`[["arg_b", "~=", 1]]`, true},
		{`[["arg_a", "~=", "2"]]`, true},
		{`[["arg_a", "~=", "1"]]`, false},
		{`[["arg_a", "1"]]`, true},

		// Ordering operators.
		{`[["arg_n", ">", 10]]`, true},
		{`[["arg_n", ">", "10.5"]]`, false},
		{`[["arg_n", ">=", "10.5"]]`, true},
		{`[["arg_n", "<", 11]]`, true},
		{`[["arg_n", "<", 10.5]]`, false},
		{`[["arg_n", "<=", 10.5]]`, true},
		{`[["arg_b", ">", 0]]`, false},
		{`[["arg_b", "<", 0]]`, false},
		{`[["arg_none", "<", 0]]`, false},
		{`[["remote_port", ">", 49999]]`, true},

		// Regular expressions.
		{`[["http_x_api_key", "~~", "^sec"]]`, true},
		{`[["http_x_api_key", "~~", "^SEC"]]`, false},
		{`[["http_x_api_key", "~*", "^SEC"]]`, true},
		{`[["http_x_none", "~~", ".*"]]`, false},
		{`[["remote_addr", "~~", "^127\\."]]`, true},
		{`[["host", "~~", "^api\\.example\\.com$"]]`, true},

		// in, has, ipmatch.
		{`[["arg_a", "in", ["0", "1"]]]`, true},
		{`[["arg_a", "in", ["0", "2"]]]`, false},
		{`[["arg_a", "in", [2, 1]]]`, true},
		{`[["arg_none", "in", ["", "1"]]]`, false},
		{`[["request_method", "in", ["GET", "HEAD"]]]`, true},
		{`[["http_x_multi", "has", "two"]]`, true},
		{`[["http_x_multi", "has", "three"]]`, false},
		{`[["arg_dup", "has", "2"]]`, true},
		{`[["arg_dup", "has", "3"]]`, false},
		{`[["cookie_dup", "has", "2"]]`, true},
		{`[["cookie_dup", "has", "3"]]`, false},
		{`[["request_method", "has", "GET"]]`, true},
		{`[["remote_addr", "ipmatch", "127.0.0.0/8"]]`, true},
		{`[["remote_addr", "ipmatch", ["10.0.0.0/8", "::1"]]]`, false},
		{`[["remote_addr", "ipmatch", "127.0.0.1"]]`, true},
		{`[["http_x_real_ip", "ipmatch", ["192.168.0.0/16"]]]`, true},
		{`[["http_x_api_key", "ipmatch", ["0.0.0.0/0"]]]`, false},
		{`[["http_x_none", "ipmatch", ["0.0.0.0/0"]]]`, false},

		// Negation.
		{`[["arg_a", "!", "==", "1"]]`, false},
		{`[["arg_a", "!", "==", "2"]]`, true},
		{`[["arg_none", "!", "~~", "x"]]`, true},
		{`[["remote_addr", "!", "ipmatch", "10.0.0.0/8"]]`, true},

		// Logic.
		{`[["arg_a", "==", "1"], ["arg_b", "==", "x y"]]`, true},
		{`[["arg_a", "==", "1"], ["arg_b", "==", "no"]]`, false},
		{`["AND", ["arg_a", "==", "1"], ["arg_b", "==", "no"]]`, false},
		{`["OR", ["arg_a", "==", "2"], ["arg_b", "==", "x y"]]`, true},
		{`["or", ["arg_a", "==", "2"], ["arg_b", "==", "no"]]`, false},
		{`["!AND", ["arg_a", "==", "1"], ["arg_b", "==", "no"]]`, true},
		{`["!OR", ["arg_a", "==", "2"], ["arg_b", "==", "no"]]`, true},
		{`["!OR", ["arg_a", "==", "1"], ["arg_b", "==", "no"]]`, false},
		{`["AND", ["arg_a", "==", "1"], ["OR", ["arg_b", "==", "no"], ["http_x_api_key", "==", "secret"]]]`, true},
		{`[[["arg_a", "==", "1"], ["arg_n", ">", 1]], ["uri", "~~", "^/api/"]]`, true},
	}
	req := newRequest(t, sample, "127.0.0.1:50000")
	for _, tt := range tests {
		e := mustVars(t, tt.vars)
		if got := evalExpr(e, &vars.Request{HTTP: req}); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.vars, got, tt.want)
		}
	}
}

func TestVarsOnIPv6AndTLSLessRequests(t *testing.T) {
	req := newRequest(t, "GET / HTTP/1.1\nHost: a", "[::1]:4000")
	for _, tt := range []struct {
		vars string
		want bool
	}{
		{`[["remote_addr", "==", "::1"]]`, true},
		{`[["remote_addr", "ipmatch", "::/64"]]`, true},
		{`[["remote_addr", "ipmatch", "127.0.0.0/8"]]`, false},
		{`[["args", "==", null]]`, true},
		{`[["host", "==", "a"]]`, true},
	} {
		if got := evalExpr(mustVars(t, tt.vars), &vars.Request{HTTP: req}); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.vars, got, tt.want)
		}
	}
	// An IPv4 peer on a dual-stack socket arrives mapped; IPv4 prefixes still cover it.
	mapped := newRequest(t, "GET / HTTP/1.1\nHost: a", "[::ffff:10.1.2.3]:4000")
	if !evalExpr(mustVars(t, `[["remote_addr", "ipmatch", "10.0.0.0/8"]]`), &vars.Request{HTTP: mapped}) {
		t.Error("a mapped IPv4 peer is not inside 10.0.0.0/8")
	}
	if !evalExpr(mustVars(t, `[["remote_addr", "==", "10.1.2.3"]]`), &vars.Request{HTTP: mapped}) {
		t.Error("a mapped IPv4 peer's remote_addr is not its IPv4 form")
	}
}

func TestMatchCtxConditions(t *testing.T) {
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	other := netip.MustParsePrefix("10.0.0.0/8")
	entries := []Entry{
		// The highest priority under "/c" fails its vars unless ?a=1: the next one tries.
		{Paths: paths("/c"), Priority: 10, Vars: mustVars(t, `[["arg_a", "==", "1"]]`), Value: 1},
		{Paths: paths("/c"), Priority: 5, RemoteAddrs: []netip.Prefix{other}, Value: 2},
		{Paths: paths("/c"), Priority: 1, RemoteAddrs: []netip.Prefix{other, loopback}, Value: 3},
		// An exact path whose conditions fail falls to the prefixes.
		{Paths: paths("/p/x"), Vars: mustVars(t, `[["http_x_k", "~~", "^ok"]]`), Value: 4},
		{Paths: paths("/p/*"), Vars: mustVars(t, `[["request_method", "==", "POST"]]`), Value: 5},
		{Paths: paths("/*"), Value: 6},
		// A host route whose vars fail falls to the routes without hosts.
		{Paths: paths("/h"), Hosts: []string{"h.test"}, Vars: mustVars(t, `[["arg_h", "~=", null]]`), Value: 7},
		// Conditions only: nothing matches without a request.
		{Paths: paths("/only"), RemoteAddrs: []netip.Prefix{loopback}, Value: 8},
	}
	r, err := Build(entries)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		raw, peer string
		want      int
	}{
		{"GET /c?a=1 HTTP/1.1\nHost: x", "127.0.0.1:1", 1},
		{"GET /c?a=2 HTTP/1.1\nHost: x", "127.0.0.1:1", 3},
		{"GET /c HTTP/1.1\nHost: x", "10.9.9.9:1", 2},
		{"GET /c HTTP/1.1\nHost: x", "192.168.1.1:1", 6},
		{"GET /p/x HTTP/1.1\nHost: x\nX-K: okay", "127.0.0.1:1", 4},
		{"POST /p/x HTTP/1.1\nHost: x\nX-K: no", "127.0.0.1:1", 5},
		{"GET /p/x HTTP/1.1\nHost: x\nX-K: no", "127.0.0.1:1", 6},
		{"GET /h?h HTTP/1.1\nHost: h.test", "127.0.0.1:1", 7},
		{"GET /h HTTP/1.1\nHost: h.test", "127.0.0.1:1", 6},
		{"GET /only HTTP/1.1\nHost: x", "127.0.0.1:1", 8},
		{"GET /only HTTP/1.1\nHost: x", "[::1]:1", 6},
	}
	for _, tt := range tests {
		req := newRequest(t, tt.raw, tt.peer)
		m, ok := r.MatchCtx(req.Method(), req.Host(), req.Path(), req)
		if !ok || m.Value != tt.want {
			t.Errorf("%q from %s: MatchCtx = %d, %v; want %d", tt.raw, tt.peer, m.Value, ok, tt.want)
		}
	}
	// Match has no request: every entry with conditions is skipped.
	checkRequests(t, r, []request{
		{"GET", "x", "/c", 6},
		{"GET", "x", "/only", 6},
		{"GET", "h.test", "/h", 6},
	})
}

// TestMatchCtxAllocations pins what a vars route costs per request: nothing, except a
// regular expression on a value the router formats.
func TestMatchCtxAllocations(t *testing.T) {
	tests := []struct {
		vars   string
		allocs float64
	}{
		{`[["arg_a", "==", "1"], ["http_x_api_key", "~~", "^sec"], ["cookie_theme", "==", "dark"]]`, 0},
		{`[["remote_addr", "==", "127.0.0.1"], ["server_port", ">", 80], ["host", "==", "api.example.com"]]`, 0},
		{`[["arg_n", ">=", 10], ["arg_a", "in", ["3", 1]], ["arg_dup", "has", "2"], ["http_x_multi", "has", "two"]]`, 0},
		{`[["remote_addr", "ipmatch", ["10.0.0.0/8", "127.0.0.0/8"]], ["cookie_dup", "has", "2"]]`, 0},
		{`["OR", ["uri", "~*", "^/API/"], ["scheme", "==", "https"]]`, 0},
		{`[["remote_addr", "~~", "^127"]]`, 1},
	}
	req := newRequest(t, sample, "127.0.0.1:50000")
	for _, tt := range tests {
		r, err := Build([]Entry{{
			Paths: paths("/api/*"), Vars: mustVars(t, tt.vars),
			RemoteAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Value: 1,
		}})
		if err != nil {
			t.Fatal(err)
		}
		method, host, path := req.Method(), req.Host(), req.Path()
		if m, ok := r.MatchCtx(method, host, path, req); !ok || m.Value != 1 {
			t.Fatalf("%s: no match", tt.vars)
		}
		allocs := testing.AllocsPerRun(100, func() { r.MatchCtx(method, host, path, req) })
		if allocs != tt.allocs {
			t.Errorf("%s: %v allocations per match, want %v", tt.vars, allocs, tt.allocs)
		}
	}
}

func BenchmarkMatchCtxVars(b *testing.B) {
	req := newRequest(b, sample, "127.0.0.1:50000")
	r, err := Build([]Entry{
		{Paths: paths("/api/*"), Priority: 1, Vars: mustVars(b, `[["arg_a", "==", "2"]]`), Value: 1},
		{Paths: paths("/api/*"), Vars: mustVars(b, `[["arg_a", "==", "1"], ["http_x_api_key", "~~", "^sec"]]`),
			RemoteAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Value: 2},
	})
	if err != nil {
		b.Fatal(err)
	}
	method, host, path := req.Method(), req.Host(), req.Path()
	b.ReportAllocs()
	for b.Loop() {
		if m, _ := r.MatchCtx(method, host, path, req); m.Value != 2 {
			b.Fatalf("MatchCtx = %d, want 2", m.Value)
		}
	}
}
