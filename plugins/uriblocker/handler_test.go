package uriblocker

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

func request(uri string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	return ctx
}

func TestAccess(t *testing.T) {
	const msg = `{"error_msg":"access is not allowed"}` + "\n"
	for _, tc := range []struct {
		name, cfg, uri string
		wantStatus     int // 0: let through
		wantBody       string
	}{
		// t/plugin/uri-blocker.t TEST 5 "hit block rule", TEST 6 "miss block rule".
		{"hit", `{"block_rules":["aa"]}`, "/hello?aa=1", 403, ""},
		{"miss", `{"block_rules":["aa"]}`, "/hello?bb=2", 0, ""},
		// TEST 8-11, multiple block rules.
		{"second rule", `{"block_rules":["aa","bb","c\\d+"]}`, "/hello?x=bb", 403, ""},
		{"second rule in a name", `{"block_rules":["aa","bb","c\\d+"]}`, "/hello?bb=2", 403, ""},
		{"third rule", `{"block_rules":["aa","bb","c\\d+"]}`, "/hello?c1=2", 403, ""},
		{"no rule", `{"block_rules":["aa","bb","c\\d+"]}`, "/hello?cc=2", 0, ""},
		// TEST 13-15 "SQL injection".
		{"select from", `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`, "/hello?name=;select%20from%20sys", 403, ""},
		{"union select", `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`, "/hello?name=;union%20select%20", 403, ""},
		{"innocent", `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`, "/hello?name=;union%20", 0, ""},
		// TEST 18 "hit block rule and return rejected_msg".
		{"message", `{"block_rules":["aa"],"rejected_msg":"access is not allowed"}`, "/hello?aa=1", 403, msg},
		// TEST 20: case_insensitive.
		{"case insensitive", `{"block_rules":["AA"],"rejected_msg":"access is not allowed","case_insensitive":true}`, "/hello?aa=1", 403, msg},
		{"case sensitive", `{"block_rules":["AA"]}`, "/hello?aa=1", 0, ""},
		// TEST 22 "can't bypass with url without normalization".
		{"dot segment", `{"block_rules":["^/internal/"]}`, "/./internal/x?aa=1", 403, ""},
		{"dot dot", `{"block_rules":["^/internal/"]}`, "/public/../internal/x", 403, ""},
		{"encoded path", `{"block_rules":["^/internal/"]}`, "/%69nternal/x", 403, ""},
		{"anchor misses", `{"block_rules":["^/internal/"]}`, "/x/internal/", 0, ""},
		{"code", `{"block_rules":["aa"],"rejected_code":410}`, "/aa", 410, ""},
		{"empty rules", `{"block_rules":[]}`, "/aa", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := request(tc.uri)
			c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
			defer plugins.ReleaseCtx(c)
			if err := instance(t, tc.cfg).Access(c); err != nil {
				t.Fatal(err)
			}
			if tc.wantStatus == 0 {
				if c.Answered() {
					t.Fatalf("answered %d, want let through", ctx.Response.StatusCode())
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
	p := instance(t, `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))","^/internal/"],"case_insensitive":true}`)
	for _, uri := range []string{"/hello?name=x&page=2", "/internal/a"} {
		c := plugins.AcquireCtx(request(uri), &plugins.RouteInfo{}, 0)
		allocs := testing.AllocsPerRun(200, func() {
			if p.Access(c) != nil {
				t.Fatal("error")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", uri, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccess(b *testing.B) {
	p := instance(b, `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))","^/internal/"]}`)
	c := plugins.AcquireCtx(request("/api/v1/orders?page=2&size=20"), &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.Access(c)
	}
}
