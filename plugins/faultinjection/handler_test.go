package faultinjection

import (
	"encoding/json"
	"net"
	"testing"
	"time"

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

func request(uri string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("gw.test")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

// run runs cfg's Access on a request and returns whether it answered, with the response.
func run(t *testing.T, cfg, uri string, headers ...string) (bool, *fasthttp.RequestCtx) {
	t.Helper()
	ctx := request(uri, headers...)
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := instance(t, cfg).Access(c); err != nil {
		t.Fatal(err)
	}
	c.ApplyResponseHeaders()
	return c.Answered(), ctx
}

func TestAbort(t *testing.T) {
	const varsAbort = `{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`
	for _, tc := range []struct {
		name, cfg, uri string
		headers        []string
		wantStatus     int // 0: let through
		wantBody       string
	}{
		// t/plugin/fault-injection.t TEST 13, 15.
		{"200", `{"abort":{"http_status":200,"body":"Fault Injection!\n"}}`, "/hello", nil, 200, "Fault Injection!\n"},
		{"405", `{"abort":{"http_status":405,"body":"Fault Injection!\n"}}`, "/hello", nil, 405, "Fault Injection!\n"},
		// TEST 19: zero percentage never aborts.
		{"zero percentage", `{"abort":{"http_status":200,"body":"x","percentage":0}}`, "/hello", nil, 0, ""},
		{"full percentage", `{"abort":{"http_status":200,"body":"x","percentage":100}}`, "/hello", nil, 200, "x"},
		// TEST 23 "hit route(body with var)".
		{"body var", `{"abort":{"http_status":200,"body":"client addr: $remote_addr\n"}}`, "/hello", nil, 200, "client addr: 127.0.0.1\n"},
		{"unknown var", `{"abort":{"http_status":200,"body":"[$nope]"}}`, "/hello", nil, 200, "[]"},
		// TEST 25 "hit route(abort without body)".
		{"no body", `{"abort":{"http_status":200}}`, "/hello", nil, 200, ""},
		// TEST 29-33: vars, any expression holding.
		{"all vars", varsAbort, "/hello?name=jack&age=18", []string{"apikey", "api-key"}, 403, "Fault Injection!\n"},
		{"first expression", varsAbort, "/hello?name=jack&age=20", nil, 403, "Fault Injection!\n"},
		{"second expression", varsAbort, "/hello", []string{"apikey", "api-key"}, 403, "Fault Injection!\n"},
		{"age missing", varsAbort, "/hello?name=allen", nil, 0, ""},
		{"none", varsAbort, "/hello", nil, 0, ""},
		{"empty vars", `{"abort":{"http_status":503,"vars":[]}}`, "/hello", nil, 0, ""},
		{"empty expression", `{"abort":{"http_status":503,"vars":[[]]}}`, "/hello", nil, 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answered, ctx := run(t, tc.cfg, tc.uri, tc.headers...)
			if tc.wantStatus == 0 {
				if answered {
					t.Fatalf("answered %d, want let through", ctx.Response.StatusCode())
				}
				return
			}
			if !answered || ctx.Response.StatusCode() != tc.wantStatus || string(ctx.Response.Body()) != tc.wantBody {
				t.Fatalf("answered %v %d %q, want %d %q", answered, ctx.Response.StatusCode(), ctx.Response.Body(), tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestAbortHeaders(t *testing.T) {
	answered, ctx := run(t, `{"abort":{"http_status":503,"body":"{}","headers":{"Content-Type":"application/json","Retry-After":5,"X-Host":"$host"}}}`, "/a")
	if !answered {
		t.Fatal("not answered")
	}
	for name, want := range map[string]string{"Content-Type": "application/json", "Retry-After": "5", "X-Host": "gw.test"} {
		if got := string(ctx.Response.Header.Peek(name)); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// A percentage samples: over 2,000 requests a 30% abort answers between 20% and 40% of
// them (outside is ten standard deviations away: it does not happen).
func TestPercentage(t *testing.T) {
	p := instance(t, `{"abort":{"http_status":503,"percentage":30}}`)
	aborted := 0
	for range 2000 {
		c := plugins.AcquireCtx(request("/a"), &plugins.RouteInfo{}, 0)
		p.Access(c)
		if c.Answered() {
			aborted++
		}
		plugins.ReleaseCtx(c)
	}
	if aborted < 400 || aborted > 800 {
		t.Errorf("30%% aborted %d of 2000", aborted)
	}
}

// The delay holds the request at least its duration, then lets abort run; a delay whose
// vars match nothing does not wait (TEST 36).
func TestDelay(t *testing.T) {
	start := time.Now()
	answered, _ := run(t, `{"delay":{"duration":0.2},"abort":{"http_status":503}}`, "/a")
	if waited := time.Since(start); waited < 200*time.Millisecond || !answered {
		t.Errorf("waited %v, answered %v; want at least 200ms, then the abort", waited, answered)
	}
	start = time.Now()
	answered, _ = run(t, `{"delay":{"duration":30,"vars":[[["arg_name","==","jack"]]]}}`, "/a?name=jill")
	if waited := time.Since(start); waited > 10*time.Second || answered {
		t.Errorf("vars not matching: waited %v, answered %v", waited, answered)
	}
}

func TestAccessDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	for _, cfg := range []string{
		`{"abort":{"http_status":503,"body":"down","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`,
		`{"abort":{"http_status":503,"body":"client $remote_addr on $host","headers":{"X-Fault":"$uri","Retry-After":5},"percentage":50}}`,
		`{"delay":{"duration":0,"percentage":100}}`,
	} {
		p := instance(t, cfg)
		ctx := request("/hello?name=jack&age=20")
		route := &plugins.RouteInfo{}
		c := plugins.AcquireCtx(ctx, route, 0)
		p.Access(c) // the response's and the queue's buffers grow once
		allocs := testing.AllocsPerRun(200, func() {
			c.End()
			c.Begin(ctx, route, 0)
			if p.Access(c) != nil {
				t.Fatal("error")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", cfg, allocs)
		}
		plugins.ReleaseCtx(c)
	}
}

func BenchmarkAccessVarsMiss(b *testing.B) {
	p := instance(b, `{"abort":{"http_status":503,"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`)
	c := plugins.AcquireCtx(request("/hello?name=jill&age=20"), &plugins.RouteInfo{}, 0)
	b.ReportAllocs()
	for b.Loop() {
		p.Access(c)
	}
}
