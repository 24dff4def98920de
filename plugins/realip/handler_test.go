package realip

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
	"gw/plugins/vars"
)

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

// request is a request from 127.0.0.1:5000 with the given header fields, repeated
// names kept as separate fields.
func request(headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Add(headers[i], headers[i+1])
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

func TestAccess(t *testing.T) {
	const xff = `{"source":"http_xff"}`
	const forwarded = `{"source":"http_x_forwarded_for"}`
	for _, tc := range []struct {
		name, cfg string
		headers   []string
		want      string // the client afterwards, ip:port
	}{
		// t/plugin/real-ip.t TEST 3-7.
		{"hit", xff, []string{"XFF", "1.1.1.1"}, "1.1.1.1:5000"},
		{"with port", xff, []string{"XFF", "1.1.1.1:80"}, "1.1.1.1:80"},
		{"miss address", xff, nil, "127.0.0.1:5000"},
		{"bad address", xff, []string{"XFF", "1.1.1.1.1"}, "127.0.0.1:5000"},
		{"bad port", xff, []string{"XFF", "1.1.1.1:65536"}, "127.0.0.1:5000"},
		{"port 0", xff, []string{"XFF", "1.1.1.1:0"}, "127.0.0.1:5000"},
		// TEST 9-11: IPv6, with a port, with brackets.
		{"ipv6", xff, []string{"XFF", "::2"}, "[::2]:5000"},
		{"ipv6 with port", xff, []string{"XFF", "[::2]:80"}, "[::2]:80"},
		{"ipv6 with bracket", xff, []string{"XFF", "[::2]"}, "[::2]:5000"},
		{"ipv6 bad bracket", xff, []string{"XFF", "[::2"}, "127.0.0.1:5000"},
		{"zone", xff, []string{"XFF", "fe80::1%eth0"}, "127.0.0.1:5000"},
		// TEST 13 "check port": $remote_port after it (see TestVariablesSeeTheClient).
		{"port", xff, []string{"XFF", "1.1.1.1:7090"}, "1.1.1.1:7090"},
		// TEST 15-17: X-Forwarded-For, its last address, of its last field.
		{"xff last address", forwarded, []string{"X-Forwarded-For", "::1, ::2"}, "[::2]:5000"},
		{"xff last field", forwarded, []string{"X-Forwarded-For", "::1", "X-Forwarded-For", "::2"}, "[::2]:5000"},
		{"xff missing", forwarded, nil, "127.0.0.1:5000"},
		// TEST 19, 21: trusted_addresses judge the TCP peer.
		{"peer not trusted", `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16"]}`,
			[]string{"X-Forwarded-For", "1.1.1.1"}, "127.0.0.1:5000"},
		{"peer trusted", `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"]}`,
			[]string{"X-Forwarded-For", "1.1.1.1"}, "1.1.1.1:5000"},
		// TEST 23 "X-Forwarded-For and recursive".
		{"recursive", `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`,
			[]string{"X-Forwarded-For", "1.1.1.1, 192.128.1.1, 127.0.0.1"}, "1.1.1.1:5000"},
		{"recursive stops at the first untrusted", `{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24"],"recursive":true}`,
			[]string{"X-Forwarded-For", "1.1.1.1, 2.2.2.2, 127.0.0.1"}, "2.2.2.2:5000"},
		{"recursive, all trusted", `{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24"],"recursive":true}`,
			[]string{"X-Forwarded-For", "127.0.0.2,127.0.0.3"}, "127.0.0.2:5000"},
		{"not recursive takes the last", `{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24"]}`,
			[]string{"X-Forwarded-For", "1.1.1.1, 127.0.0.3"}, "127.0.0.3:5000"},
		{"query argument", `{"source":"arg_realip"}`, nil, "127.0.0.1:5000"},
		{"mapped", xff, []string{"XFF", "::ffff:10.0.0.1"}, "10.0.0.1:5000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.headers...)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg).Access(c); err != nil || c.Answered() {
				t.Fatalf("Access: %v, answered %v", err, c.Answered())
			}
			if got := c.RemoteAddr().String(); got != tc.want {
				t.Errorf("client %s, want %s", got, tc.want)
			}
		})
	}
}

// $remote_addr and $remote_port read the address real-ip named (TEST 13), and ReleaseCtx
// leaves the request pointing at nothing of the pooled Ctx.
func TestVariablesSeeTheClient(t *testing.T) {
	ctx := request("XFF", "1.1.1.1:7090")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	instance(t, `{"source":"http_xff"}`).Access(c)
	r := c.VarsRequest()
	for name, want := range map[string]string{"remote_addr": "1.1.1.1", "remote_port": "7090"} {
		v, _ := conf.ParseVar(name)
		if got, _ := vars.Value(&r, &v, nil); string(got) != want {
			t.Errorf("$%s = %q, want %q", name, got, want)
		}
	}
	plugins.ReleaseCtx(c)
	if got := ctx.RemoteAddr().String(); got != "0.0.0.0:0" {
		t.Errorf("after ReleaseCtx the request's client is %s, want none set", got)
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct{ cfg, header, value string }{
		{`{"source":"http_xff"}`, "XFF", "1.1.1.1:80"},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24","10.0.0.0/8"],"recursive":true}`, "X-Forwarded-For", "1.1.1.1, 10.1.1.1, 127.0.0.1"},
		{`{"source":"http_x_forwarded_for"}`, "X-Forwarded-For", "2001:db8::1, ::2"},
	} {
		p := instance(t, tc.cfg)
		peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
		ctx := request(tc.header, tc.value)
		c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		allocs := testing.AllocsPerRun(200, func() {
			ctx.SetRemoteAddr(peer)
			if p.Access(c) != nil || c.RemoteAddr() == peer {
				t.Fatal("no client named")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", tc.cfg, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24","10.0.0.0/8"],"recursive":true}`)
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	ctx := request("X-Forwarded-For", "1.1.1.1, 10.1.1.1, 127.0.0.1")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		ctx.SetRemoteAddr(peer)
		p.Access(c)
	}
}
