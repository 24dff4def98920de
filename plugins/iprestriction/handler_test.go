package iprestriction

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

func request(client string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI("/hello")
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(client), Port: 5000})
	return ctx
}

func TestAccess(t *testing.T) {
	const refused = `{"message":"Your IP address is not allowed"}` + "\n"
	for _, tc := range []struct {
		name, cfg, client string
		wantStatus        int // 0: let through
		wantBody          string
	}{
		// t/plugin/ip-restriction.t TEST 8 "hit route and ip cidr in the whitelist".
		{"cidr in whitelist", `{"whitelist":["127.0.0.0/24","113.74.26.106"]}`, "127.0.0.1", 0, ""},
		// TEST 9 "hit route and ip in the whitelist".
		{"ip in whitelist", `{"whitelist":["127.0.0.0/24","113.74.26.106"]}`, "113.74.26.106", 0, ""},
		// TEST 10 "hit route and ip not in the whitelist".
		{"ip not in whitelist", `{"whitelist":["127.0.0.0/24","113.74.26.106"]}`, "114.114.114.114", 403, refused},
		// TEST 11 "hit route and IPv6 not in the whitelist".
		{"v6 not in whitelist", `{"whitelist":["127.0.0.0/24","113.74.26.106"]}`, "2001:db8::2", 403, refused},
		// TEST 13, 14 "hit route and ip (cidr) in the blacklist", TEST 15 "not in".
		{"cidr in blacklist", `{"blacklist":["127.0.0.0/24","113.74.26.106"]}`, "127.0.0.1", 403, refused},
		{"ip in blacklist", `{"blacklist":["127.0.0.0/24","113.74.26.106"]}`, "113.74.26.106", 403, refused},
		{"ip not in blacklist", `{"blacklist":["127.0.0.0/24","113.74.26.106"]}`, "114.114.114.114", 0, ""},
		// TEST 16 "hit route and IPv6 not in the blacklist".
		{"v6 not in blacklist", `{"blacklist":["127.0.0.0/24"]}`, "2001:db8::2", 0, ""},
		// TEST 22, 23 "hit route and IPv6 in the blacklist".
		{"v6 in blacklist", `{"blacklist":["::1","fe80::/32"]}`, "::1", 403, refused},
		{"v6 cidr in blacklist", `{"blacklist":["::1","fe80::/32"]}`, "fe80::2", 403, refused},
		// An IPv4 client on a dual-stack socket comes mapped; IPv4 prefixes cover it.
		{"mapped v4", `{"whitelist":["10.0.0.0/8"]}`, "::ffff:10.1.2.3", 0, ""},
		{"masked prefix", `{"whitelist":["10.1.2.3/8"]}`, "10.200.0.1", 0, ""},
		// TEST 27 "hit route and ip cidr in the blacklist" with a message.
		{"message", `{"blacklist":["127.0.0.0/24"],"message":"Do you want to do something bad?"}`, "127.0.0.1",
			403, `{"message":"Do you want to do something bad?"}` + "\n"},
		// TEST 34 "hit route and ip not in the whitelist expect 404".
		{"404", `{"whitelist":["1.1.1.1"],"response_code":404}`, "127.0.0.1", 404, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.client)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg).Access(c); err != nil {
				t.Fatal(err)
			}
			if tc.wantStatus == 0 {
				if c.Answered() {
					t.Fatalf("answered %d %q, want let through", ctx.Response.StatusCode(), ctx.Response.Body())
				}
				return
			}
			if !c.Answered() || ctx.Response.StatusCode() != tc.wantStatus || string(ctx.Response.Body()) != tc.wantBody {
				t.Fatalf("answered %v %d %q, want %d %q", c.Answered(), ctx.Response.StatusCode(), ctx.Response.Body(), tc.wantStatus, tc.wantBody)
			}
			if ct := string(ctx.Response.Header.ContentType()); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// A client that is not on TCP has no address: a whitelist refuses it, a blacklist lets it
// through.
func TestNoAddress(t *testing.T) {
	for cfg, wantAnswered := range map[string]bool{`{"whitelist":["0.0.0.0/0","::/0"]}`: true, `{"blacklist":["0.0.0.0/0","::/0"]}`: false} {
		ctx := &fasthttp.RequestCtx{}
		ctx.SetRemoteAddr(&net.UnixAddr{Name: "/tmp/s", Net: "unix"})
		c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{}, 0)
		instance(t, cfg).Access(c)
		if c.Answered() != wantAnswered {
			t.Errorf("%s: answered %v", cfg, c.Answered())
		}
		plugins.ReleaseCtx(c)
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, client := range []string{"10.0.0.1", "2001:db8::2", "192.168.1.1"} {
		p := instance(t, `{"whitelist":["127.0.0.0/24","2001:db8::/32","10.0.0.0/8"]}`)
		c := plugins.AcquireCtx(request(client), &plugins.RouteInfo{}, 0)
		allocs := testing.AllocsPerRun(200, func() {
			if p.Access(c) != nil {
				t.Fatal("error")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", client, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{"whitelist":["127.0.0.0/24","2001:db8::/32","10.0.0.0/8","192.168.0.0/16"]}`)
	c := plugins.AcquireCtx(request("192.168.1.1"), &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.Access(c)
	}
}
