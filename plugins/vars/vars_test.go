package vars

import (
	"bufio"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
)

// testConn is the connection a test request arrived on: only its addresses are read.
type testConn struct {
	net.Conn
	local, remote net.Addr
}

func (c testConn) LocalAddr() net.Addr  { return c.local }
func (c testConn) RemoteAddr() net.Addr { return c.remote }

// tlsTestConn is a testConn that fasthttp takes for TLS.
type tlsTestConn struct{ testConn }

func (tlsTestConn) Handshake() error                     { return nil }
func (tlsTestConn) ConnectionState() tls.ConnectionState { return tls.ConnectionState{} }

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// newRequest parses raw (lines ending "\n") as arriving from peer at local; conn, when
// not nil, is the connection instead.
func newRequest(tb testing.TB, raw string, conn net.Conn) *fasthttp.RequestCtx {
	tb.Helper()
	if conn == nil {
		conn = testConn{local: tcpAddr(tb, "10.0.0.1:9080"), remote: tcpAddr(tb, "192.0.2.7:50000")}
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init2(conn, quietLogger{}, true)
	raw = strings.ReplaceAll(raw, "\n", "\r\n") + "\r\n\r\n"
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		tb.Fatalf("reading %q: %v", raw, err)
	}
	return ctx
}

func tcpAddr(tb testing.TB, s string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func mustVar(tb testing.TB, name string) conf.Var {
	tb.Helper()
	v, err := conf.ParseVar(name)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// sample is a request with something for every kind of variable.
const sample = `GET /api/./Users/%34%32?a=1&b=x%20y&plus=a+b&flag&empty=&dup=1&dup=2&k%65y=v&bad=%zz HTTP/1.1
Host: API.Example.com.:8443
X-Api-Key: secret
X-Empty:
X-Multi: one
X-Multi: two
Cookie: session=abc; theme = dark ;dup=1
Cookie: dup=2`

func TestValue(t *testing.T) {
	host, _ := os.Hostname()
	full := &Request{RouteID: "r1", RouteName: "orders", ServiceID: "s1", ServiceName: "shop", Consumer: "jack"}
	tests := []struct {
		name  string
		r     *Request // nil: the request alone, as while routing
		value string
		ok    bool
	}{
		{"uri", nil, "/api/Users/42", true},
		{"request_uri", nil, "/api/./Users/%34%32?a=1&b=x%20y&plus=a+b&flag&empty=&dup=1&dup=2&k%65y=v&bad=%zz", true},
		{"args", nil, "a=1&b=x%20y&plus=a+b&flag&empty=&dup=1&dup=2&k%65y=v&bad=%zz", true},
		{"query_string", nil, "a=1&b=x%20y&plus=a+b&flag&empty=&dup=1&dup=2&k%65y=v&bad=%zz", true},
		{"host", nil, "api.example.com", true},
		{"hostname", nil, host, true},
		{"server_name", nil, "_", true},
		{"remote_addr", nil, "192.0.2.7", true},
		{"remote_port", nil, "50000", true},
		{"server_addr", nil, "10.0.0.1", true},
		{"server_port", nil, "9080", true},
		{"request_method", nil, "GET", true},
		{"scheme", nil, "http", true},
		{"http_x_api_key", nil, "secret", true},
		{"http_X-API-KEY", nil, "secret", true},
		{"http_x_empty", nil, "", true},
		{"http_x_missing", nil, "", false},
		{"http_x_multi", nil, "one", true},
		{"http_host", nil, "API.Example.com.:8443", true},
		{"arg_a", nil, "1", true},
		{"arg_b", nil, "x y", true},
		{"arg_plus", nil, "a b", true},
		{"arg_flag", nil, "", true},
		{"arg_empty", nil, "", true},
		{"arg_dup", nil, "1", true},
		{"arg_key", nil, "v", true}, // the name is decoded too
		{"arg_bad", nil, "%zz", true},
		{"arg_A", nil, "", false},
		{"arg_missing", nil, "", false},
		{"cookie_session", nil, "abc", true},
		{"cookie_theme", nil, "dark", true},
		{"cookie_dup", nil, "1", true},
		{"cookie_Session", nil, "", false},
		{"cookie_none", nil, "", false},
		{"route_id", nil, "", false},
		{"consumer_name", nil, "", false},
		{"route_id", full, "r1", true},
		{"route_name", full, "orders", true},
		{"service_id", full, "s1", true},
		{"service_name", full, "shop", true},
		{"consumer_name", full, "jack", true},
		{"mqtt_client_id", full, "", false},
	}
	ctx := newRequest(t, sample, nil)
	for _, tt := range tests {
		r := Request{}
		if tt.r != nil {
			r = *tt.r
		}
		r.HTTP = ctx
		v := mustVar(t, tt.name)
		var scratch [64]byte
		value, ok := Value(&r, &v, scratch[:0])
		if string(value) != tt.value || ok != tt.ok {
			t.Errorf("Value(%s) = %q, %v; want %q, %v", tt.name, value, ok, tt.value, tt.ok)
		}
		appended, ok := Append([]byte("<"), &r, &v)
		if string(appended) != "<"+tt.value || ok != tt.ok {
			t.Errorf("Append(<, %s) = %q, %v; want %q, %v", tt.name, appended, ok, "<"+tt.value, tt.ok)
		}
	}
	// Had the arguments been parsed by fasthttp, the proxy would send them re-encoded
	// (key=v&bad=%25zz).
	if sent := string(ctx.URI().RequestURI()); !strings.HasSuffix(sent, "?a=1&b=x%20y&plus=a+b&flag&empty=&dup=1&dup=2&k%65y=v&bad=%zz") {
		t.Errorf("reading changed the request line the proxy sends: %s", sent)
	}
}

func TestValueOfTheConnection(t *testing.T) {
	v6 := testConn{local: tcpAddr(t, "[2001:db8::1]:443"), remote: tcpAddr(t, "[2001:db8::2]:4000")}
	mapped := testConn{local: tcpAddr(t, "[::ffff:10.0.0.1]:80"), remote: tcpAddr(t, "[::ffff:10.1.2.3]:5")}
	unix := testConn{local: &net.UnixAddr{Name: "/s", Net: "unix"}, remote: &net.UnixAddr{Name: "@", Net: "unix"}}
	tests := []struct {
		conn      net.Conn
		name      string
		value     string
		ok        bool
		assertion string
	}{
		{v6, "remote_addr", "2001:db8::2", true, "IPv6"},
		{v6, "server_addr", "2001:db8::1", true, "IPv6"},
		{v6, "server_port", "443", true, "IPv6"},
		{mapped, "remote_addr", "10.1.2.3", true, "an IPv4 peer on a dual-stack socket is unmapped"},
		{mapped, "server_addr", "10.0.0.1", true, "unmapped"},
		{unix, "remote_addr", "", false, "not TCP"},
		{unix, "remote_port", "", false, "not TCP"},
		{unix, "server_addr", "", false, "not TCP"},
		{unix, "server_port", "", false, "not TCP"},
		{tlsTestConn{v6}, "scheme", "https", true, "TLS"},
	}
	for _, tt := range tests {
		ctx := newRequest(t, "GET / HTTP/1.1\nHost: [::1]:80", tt.conn)
		v := mustVar(t, tt.name)
		value, ok := Value(&Request{HTTP: ctx}, &v, nil)
		if string(value) != tt.value || ok != tt.ok {
			t.Errorf("%s: Value(%s) = %q, %v; want %q, %v", tt.assertion, tt.name, value, ok, tt.value, tt.ok)
		}
	}
	ctx := newRequest(t, "GET / HTTP/1.1\nHost: [::1]:80", v6)
	if value, _ := Value(&Request{HTTP: ctx}, &conf.Var{Kind: conf.VarHost}, nil); string(value) != "[::1]" {
		t.Errorf("host of [::1]:80 = %q, want [::1]", value)
	}
	// No query string: $args has no value, an argument neither.
	for _, name := range []string{"args", "arg_a"} {
		v := mustVar(t, name)
		if value, ok := Value(&Request{HTTP: ctx}, &v, nil); ok {
			t.Errorf("%s without a query = %q, want no value", name, value)
		}
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		name, want string
		holds      bool
	}{
		{"http_x_multi", "one", true},
		{"http_x_multi", "two", true},
		{"http_x_multi", "three", false},
		{"http_x_none", "", false},
		{"arg_dup", "1", true},
		{"arg_dup", "2", true},
		{"arg_dup", "3", false},
		{"arg_b", "x y", true},
		{"arg_key", "v", true},
		{"arg_flag", "", true},
		{"cookie_dup", "1", true},
		{"cookie_dup", "2", true},
		{"cookie_dup", "3", false},
		{"request_method", "GET", true},
		{"host", "api.example.com", true},
		{"remote_addr", "192.0.2.7", true},
		{"route_id", "", false},
	}
	ctx := newRequest(t, sample, nil)
	for _, tt := range tests {
		v := mustVar(t, tt.name)
		if got := Contains(&Request{HTTP: ctx}, &v, tt.want); got != tt.holds {
			t.Errorf("Contains(%s, %q) = %v, want %v", tt.name, tt.want, got, tt.holds)
		}
	}
}

func TestNextCookie(t *testing.T) {
	tests := []struct{ in, name, value, rest string }{
		{"a=1; b=2", "a", "1", " b=2"},
		{" b = 2 ", "b", "2", ""},
		{"novalue", "", "novalue", ""},
		{"a=; b", "a", "", " b"},
		{"x=y=z", "x", "y=z", ""},
	}
	for _, tt := range tests {
		name, value, rest := nextCookie([]byte(tt.in))
		if string(name) != tt.name || string(value) != tt.value || string(rest) != tt.rest {
			t.Errorf("nextCookie(%q) = %q, %q, %q; want %q, %q, %q", tt.in, name, value, rest, tt.name, tt.value, tt.rest)
		}
	}
}

// decodedEquals must agree with fasthttp's decoding, which APISIX's get_uri_args matches.
func TestDecodedEqualsAgreesWithFasthttp(t *testing.T) {
	for _, enc := range []string{"", "a", "a+b", "%41", "%4", "%", "%zz1", "%%41", "a%2Bb", "%e2%82%ac", "+%20+", "x%4g"} {
		decoded := string(fasthttp.AppendUnquotedArg(nil, []byte(enc)))
		if !decodedEquals([]byte(enc), decoded) {
			t.Errorf("decodedEquals(%q, %q) = false", enc, decoded)
		}
		if decodedEquals([]byte(enc), decoded+"x") || len(decoded) > 0 && decodedEquals([]byte(enc), decoded[1:]) {
			t.Errorf("decodedEquals(%q) holds for a different text", enc)
		}
	}
}

// Reading allocates nothing with a buffer on the stack, whatever the variable.
func TestValueAllocatesNothing(t *testing.T) {
	ctx := newRequest(t, sample, nil)
	r := Request{HTTP: ctx, RouteID: "r1", Consumer: "jack"}
	for _, name := range []string{"uri", "request_uri", "args", "host", "remote_addr", "remote_port", "server_addr",
		"server_port", "request_method", "scheme", "http_x_api_key", "http_x_missing", "arg_b", "arg_key", "arg_missing",
		"cookie_theme", "route_id", "consumer_name", "hostname", "server_name"} {
		v := mustVar(t, name)
		allocs := testing.AllocsPerRun(100, func() {
			var scratch [64]byte
			Value(&r, &v, scratch[:0])
			Contains(&r, &v, "x")
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per read", name, allocs)
		}
	}
}

func BenchmarkValue(b *testing.B) {
	ctx := newRequest(b, sample, nil)
	r := Request{HTTP: ctx}
	for _, name := range []string{"uri", "remote_addr", "host", "http_x_api_key", "arg_b", "cookie_theme"} {
		v := mustVar(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var scratch [64]byte
				Value(&r, &v, scratch[:0])
			}
		})
	}
}

func TestNextArg(t *testing.T) {
	tests := []struct {
		in, key, value, rest string
		keyEscaped, escaped  bool
	}{
		{"a=1&b=2", "a", "1", "b=2", false, false},
		{"a", "a", "", "", false, false},
		{"a&", "a", "", "", false, false},
		{"=x", "", "x", "", false, false},
		{"a=b=c", "a", "b=c", "", false, false},
		{"a==", "a", "=", "", false, false},
		{"%41=1", "%41", "1", "", true, false},
		{"a=%41&", "a", "%41", "", false, true},
		{"a+b=c+d&e", "a+b", "c+d", "e", true, true},
		{"&a=1", "", "", "a=1", false, false},
	}
	for _, tt := range tests {
		key, value, rest, keyEscaped, escaped := nextArg([]byte(tt.in))
		if string(key) != tt.key || string(value) != tt.value || string(rest) != tt.rest || keyEscaped != tt.keyEscaped || escaped != tt.escaped {
			t.Errorf("nextArg(%q) = %q, %q, %q, %v, %v; want %q, %q, %q, %v, %v", tt.in, key, value, rest, keyEscaped, escaped,
				tt.key, tt.value, tt.rest, tt.keyEscaped, tt.escaped)
		}
	}
}

func TestHashValue(t *testing.T) {
	v4 := testConn{local: tcpAddr(t, "10.0.0.1:9080"), remote: tcpAddr(t, "[::ffff:192.0.2.7]:50000")}
	v6 := testConn{local: tcpAddr(t, "[2001:db8::1]:443"), remote: tcpAddr(t, "[2001:db8::2]:1")}
	unix := testConn{local: &net.UnixAddr{Name: "/s", Net: "unix"}, remote: &net.UnixAddr{Name: "@", Net: "unix"}}
	tests := []struct {
		conn  net.Conn
		name  string
		value []byte
		ok    bool
	}{
		{v4, "remote_addr", []byte{192, 0, 2, 7}, true},
		{v4, "server_addr", []byte{10, 0, 0, 1}, true},
		{v4, "remote_port", []byte{50000 >> 8, 50000 & 0xff}, true},
		{v4, "server_port", []byte{9080 >> 8, 9080 & 0xff}, true},
		{v6, "remote_addr", []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, true},
		{v6, "server_port", []byte{443 >> 8, 443 & 0xff}, true},
		{unix, "remote_addr", nil, false},
		{unix, "remote_port", nil, false},
		{v4, "uri", []byte("/p"), true}, // the others as Value reads them
		{v4, "host", []byte("gw"), true},
	}
	for _, tt := range tests {
		ctx := newRequest(t, "GET /p HTTP/1.1\nHost: GW", tt.conn)
		v := mustVar(t, tt.name)
		var scratch [64]byte
		value, ok := HashValue(&Request{HTTP: ctx}, &v, scratch[:0])
		if string(value) != string(tt.value) || ok != tt.ok {
			t.Errorf("HashValue(%s) = %v, %v; want %v, %v", tt.name, value, ok, tt.value, tt.ok)
		}
	}
}

func TestHostName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a.test", "a.test"},
		{"A.Test:8080", "A.Test"},
		{"a.test.", "a.test"},
		{"a.test.:80", "a.test"},
		{"a.test..", "a.test."},
		{":80", ""},
		{"[::1]:8080", "[::1]"},
		{"[::1]", "[::1]"},
		{"[::1", "[::1"},
		{"a:b:c", "a"},
		{".", ""},
	}
	for _, tt := range tests {
		if got := string(HostName([]byte(tt.in))); got != tt.want {
			t.Errorf("HostName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
