package consumerrestriction

import (
	"encoding/json"
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

func TestAccess(t *testing.T) {
	const forbidden = `{"message":"The consumer_name is forbidden."}` + "\n"
	route := &plugins.RouteInfo{ID: "1", ServiceID: "s1"}
	for _, tc := range []struct {
		name, cfg, method, consumer string
		route                       *plugins.RouteInfo
		wantStatus                  int // 0: let through
		wantBody                    string
	}{
		// t/plugin/consumer-restriction.t TEST 7, 8: a whitelist.
		{"whitelisted", `{"whitelist":["jack1"]}`, "GET", "jack1", route, 0, ""},
		{"not whitelisted", `{"whitelist":["jack1"]}`, "GET", "jack2", route, 403, forbidden},
		// TEST 11, 12: a blacklist.
		{"blacklisted", `{"blacklist":["jack1"]}`, "GET", "jack1", route, 403, forbidden},
		{"not blacklisted", `{"blacklist":["jack1"]}`, "GET", "jack2", route, 0, ""},
		// TEST 14 "verify unauthorized" without an auth plugin: no consumer.
		{"no consumer", `{"whitelist":["jack1"]}`, "GET", "", route, 401,
			`{"message":"The request is rejected, please check the consumer_name for this request"}` + "\n"},
		// TEST 22, 24: allowed_by_methods.
		{"method not allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, "GET", "jack1", route, 403, forbidden},
		{"method allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST","GET"]}]}`, "GET", "jack1", route, 0, ""},
		{"user not named", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, "GET", "jack2", route, 0, ""},
		{"first item decides", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]},{"user":"jack1","methods":["GET"]}]}`, "GET", "jack1", route, 403, forbidden},
		// TEST 26, 27 "test blacklist priority": the blacklist wins over the whitelist.
		{"blacklist first", `{"blacklist":["jack1"],"whitelist":["jack1","jack2"]}`, "GET", "jack1", route, 403, forbidden},
		{"whitelist after", `{"blacklist":["jack1"],"whitelist":["jack1","jack2"]}`, "GET", "jack2", route, 0, ""},
		// TEST 29, 30 "whitelist blacklist priority": whitelisted skips allowed_by_methods.
		{"whitelist beats methods", `{"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, "GET", "jack1", route, 0, ""},
		{"neither", `{"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack2","methods":["GET"]}]}`, "GET", "jack2", route, 403, forbidden},
		// TEST 38, 41: service_id.
		{"service whitelisted", `{"type":"service_id","whitelist":["s1"]}`, "GET", "", route, 0, ""},
		{"service not whitelisted", `{"type":"service_id","whitelist":["s2"],"rejected_code":401}`, "GET", "", route, 401,
			`{"message":"The service_id is forbidden."}` + "\n"},
		{"no service", `{"type":"service_id","whitelist":["s1"]}`, "GET", "", &plugins.RouteInfo{ID: "1"}, 401,
			`{"message":"The request is rejected, please check the service_id for this request"}` + "\n"},
		// TEST 50: route_id blacklisted, with rejected_msg.
		{"route blacklisted", `{"type":"route_id","blacklist":["1"],"rejected_msg":"request is forbidden"}`, "GET", "", route, 403,
			`{"message":"request is forbidden"}` + "\n"},
		{"route not blacklisted", `{"type":"route_id","blacklist":["2"]}`, "GET", "", route, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI("/hello")
			c := plugins.AcquireCtx(ctx, tc.route, 0)
			defer plugins.ReleaseCtx(c)
			c.Consumer = tc.consumer
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
		})
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	p := instance(t, `{"blacklist":["bad"],"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack2","methods":["GET","POST"]}]}`)
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod("POST")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	for _, consumer := range []string{"jack1", "jack2", "bad"} {
		c.Consumer = consumer
		allocs := testing.AllocsPerRun(200, func() {
			if p.Access(c) != nil {
				t.Fatal("error")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", consumer, allocs)
		}
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{"whitelist":["jack1","jack2","jack3"],"allowed_by_methods":[{"user":"jack4","methods":["GET"]}]}`)
	ctx := &fasthttp.RequestCtx{}
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	c.Consumer = "jack3"
	b.ReportAllocs()
	for b.Loop() {
		p.Access(c)
	}
}
