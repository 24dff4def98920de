package forwardauth

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/race"
	"gw/plugins"
)

// authService is t/plugin/forward-auth.t's /auth route (TEST 2) as a Go server: it
// decides by the Authorization header, or for a POST by the body's "authorization".
func authService(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Method == http.MethodPost {
			var body struct{ Authorization string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			auth = body.Authorization
		}
		switch auth {
		case "111", "555-ok":
			w.WriteHeader(200)
		case "222", "555":
			w.Header().Set("X-User-ID", "i-am-an-user")
			w.WriteHeader(200)
		case "333", "666":
			w.Header().Set("Location", "http://example.com/auth")
			w.WriteHeader(403)
		case "444":
			// Echo the headers the call carried, lower-cased as APISIX's echo.
			seen := map[string]string{}
			for name := range r.Header {
				seen[strings.ToLower(name)] = r.Header.Get(name)
			}
			w.WriteHeader(403)
			_ = json.NewEncoder(w).Encode(seen)
		case "777":
			if r.Header.Get("Tenant_id") == "123" || r.Header.Get("X-Tenant") == "123" {
				w.Header().Set("X-User-ID", "i-am-an-user")
				w.WriteHeader(200)
				return
			}
			w.WriteHeader(400)
			_, _ = io.WriteString(w, "tenant_id is "+r.Header.Get("X-Tenant"))
		case "slow":
			time.Sleep(2 * time.Second)
			w.WriteHeader(200)
		default:
			w.WriteHeader(401)
			_, _ = io.WriteString(w, "who are you")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func instance(t testing.TB, cfg string) plugins.AccessPhase {
	t.Helper()
	built, err := plugins.BuildInstance(Name, json.RawMessage(cfg), &plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return built.(plugins.AccessPhase)
}

func request(method, uri, body string, headers ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("localhost")
	for i := 0; i+1 < len(headers); i += 2 {
		ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		ctx.Request.SetBodyString(body)
	}
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000})
	return ctx
}

// run runs the instance's access phase on ctx and reports whether it answered.
func run(t testing.TB, h plugins.AccessPhase, ctx *fasthttp.RequestCtx) bool {
	t.Helper()
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	if err := h.Access(c); err != nil {
		t.Fatal(err)
	}
	c.ApplyResponseHeaders()
	return c.Answered()
}

// The cases of t/plugin/forward-auth.t, TEST 3 to 15, against the service above.
func TestAccess(t *testing.T) {
	auth := authService(t).URL + "/auth"
	route1 := `{"uri":"` + auth + `","request_headers":["Authorization"],"upstream_headers":["X-User-ID"],"client_headers":["Location"]}`
	route2 := `{"uri":"` + auth + `","request_headers":["Authorization"]}`
	route3 := `{"uri":"` + auth + `","request_method":"POST","upstream_headers":["X-User-ID"],"client_headers":["Location"]}`

	t.Run("TEST 3: request_headers reach the service", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "111")
		if run(t, instance(t, route1), ctx) {
			t.Fatalf("answered %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 4: upstream_headers reach the upstream", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "222")
		if run(t, instance(t, route1), ctx) || string(ctx.Request.Header.Peek("X-User-ID")) != "i-am-an-user" {
			t.Fatalf("answered %v, X-User-ID %q", ctx.Response.StatusCode(), ctx.Request.Header.Peek("X-User-ID"))
		}
	})
	t.Run("TEST 5: client_headers reach the client", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "333")
		if !run(t, instance(t, route1), ctx) || ctx.Response.StatusCode() != 403 ||
			string(ctx.Response.Header.Peek("Location")) != "http://example.com/auth" {
			t.Fatalf("status %d, Location %q", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
		}
	})
	t.Run("TEST 6: gw's X-Forwarded-* win over the client's", func(t *testing.T) {
		ctx := request("GET", "/hello?a=1", "", "Authorization", "444", "X-Forwarded-Host", "apisix.apache.org")
		if !run(t, instance(t, route1), ctx) || ctx.Response.StatusCode() != 403 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
		var seen map[string]string
		if err := json.Unmarshal(ctx.Response.Body(), &seen); err != nil {
			t.Fatalf("body %q: %v", ctx.Response.Body(), err)
		}
		want := map[string]string{"x-forwarded-proto": "http", "x-forwarded-method": "GET", "x-forwarded-host": "localhost",
			"x-forwarded-uri": "/hello?a=1", "x-forwarded-for": "127.0.0.1", "authorization": "444"}
		for k, v := range want {
			if seen[k] != v {
				t.Errorf("%s: %q, want %q (all: %v)", k, seen[k], v, seen)
			}
		}
	})
	t.Run("TEST 7: no upstream_headers, nothing copied", func(t *testing.T) {
		ctx := request("GET", "/empty", "", "Authorization", "222")
		if run(t, instance(t, route2), ctx) || ctx.Request.Header.Peek("X-User-ID") != nil {
			t.Fatalf("X-User-ID %q", ctx.Request.Header.Peek("X-User-ID"))
		}
	})
	t.Run("TEST 8: no client_headers, nothing copied", func(t *testing.T) {
		ctx := request("GET", "/empty", "", "Authorization", "333")
		if !run(t, instance(t, route2), ctx) || ctx.Response.StatusCode() != 403 || ctx.Response.Header.Peek("Location") != nil {
			t.Fatalf("status %d, Location %q", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
		}
	})
	t.Run("TEST 9: POST sends the body", func(t *testing.T) {
		ctx := request("POST", "/ping", `{"authorization": "555"}`)
		if run(t, instance(t, route3), ctx) || string(ctx.Request.Header.Peek("X-User-ID")) != "i-am-an-user" {
			t.Fatalf("X-User-ID %q", ctx.Request.Header.Peek("X-User-ID"))
		}
		if string(ctx.Request.Body()) != `{"authorization": "555"}` {
			t.Fatalf("the upstream's body is %q", ctx.Request.Body())
		}
	})
	t.Run("TEST 10: POST, client_headers", func(t *testing.T) {
		ctx := request("POST", "/ping", `{"authorization": "666"}`)
		if !run(t, instance(t, route3), ctx) || ctx.Response.StatusCode() != 403 ||
			string(ctx.Response.Header.Peek("Location")) != "http://example.com/auth" {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 11: unreachable, status_on_error", func(t *testing.T) {
		ctx := request("GET", "/nodegr", "", "Authorization", "111")
		if !run(t, instance(t, `{"uri":"http://127.0.0.1:1/auth"}`), ctx) || ctx.Response.StatusCode() != 403 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 12: unreachable, allow_degradation", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "111")
		if run(t, instance(t, `{"uri":"http://127.0.0.1:1/auth","allow_degradation":true}`), ctx) {
			t.Fatalf("answered %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 13: status_on_error 503", func(t *testing.T) {
		ctx := request("GET", "/onerror", "")
		if !run(t, instance(t, `{"uri":"http://127.0.0.1:1/auth","status_on_error":503}`), ctx) || ctx.Response.StatusCode() != 503 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 15: extra_headers with variables", func(t *testing.T) {
		cfg := `{"uri":"` + auth + `","request_headers":["Authorization"],"upstream_headers":["X-User-ID"],"extra_headers":{"X-Tenant":"$arg_tenant"}}`
		ctx := request("GET", "/ping3?tenant=123", "", "Authorization", "777")
		if run(t, instance(t, cfg), ctx) || string(ctx.Request.Header.Peek("X-User-ID")) != "i-am-an-user" {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
		ctx = request("GET", "/ping3?tenant=9", "", "Authorization", "777")
		if !run(t, instance(t, cfg), ctx) || ctx.Response.StatusCode() != 400 || string(ctx.Response.Body()) != "tenant_id is 9" {
			t.Fatalf("status %d, body %q", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	})
	t.Run("TEST 16: a CR LF from a variable is no header", func(t *testing.T) {
		cfg := `{"uri":"` + auth + `","request_headers":["Authorization"],"extra_headers":{"X-User":"$arg_user"}}`
		ctx := request("GET", "/crlf?user=guest%0d%0ax-user1:%20admin", "", "Authorization", "111")
		if !run(t, instance(t, cfg), ctx) || ctx.Response.StatusCode() != 403 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	t.Run("TEST 18: POST body over max_req_body_size", func(t *testing.T) {
		cfg := `{"uri":"` + auth + `","request_method":"POST","max_req_body_size":10}`
		ctx := request("POST", "/toolarge", `{"authorization":"555"}`)
		if !run(t, instance(t, cfg), ctx) || ctx.Response.StatusCode() != 413 {
			t.Fatalf("status %d", ctx.Response.StatusCode())
		}
	})
	t.Run("a client cannot forge an upstream header the service did not set", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "111", "X-User-ID", "admin")
		if run(t, instance(t, route1), ctx) || ctx.Request.Header.Peek("X-User-ID") != nil {
			t.Fatalf("X-User-ID %q", ctx.Request.Header.Peek("X-User-ID"))
		}
	})
	t.Run("the service's status and body are the client's", func(t *testing.T) {
		ctx := request("GET", "/hello", "", "Authorization", "nobody")
		if !run(t, instance(t, route1), ctx) || ctx.Response.StatusCode() != 401 || string(ctx.Response.Body()) != "who are you" {
			t.Fatalf("status %d, body %q", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	})
}

// A silent service holds the request no longer than timeout: the call gives up and the
// request is answered status_on_error.
func TestTimeout(t *testing.T) {
	auth := authService(t).URL
	h := instance(t, `{"uri":"`+auth+`","request_headers":["Authorization"],"timeout":100}`)
	ctx := request("GET", "/", "", "Authorization", "slow")
	start := time.Now()
	if !run(t, h, ctx) || ctx.Response.StatusCode() != 403 {
		t.Fatalf("status %d", ctx.Response.StatusCode())
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("the call took %v with a 100ms timeout (the service answers after 2s)", took)
	}
}

// A call the service lets through allocates nothing once the pools are warm: the call's
// request and answer, and the buffers, are pooled, and the connection kept alive. The
// service is a fasthttp server, which allocates nothing either (AllocsPerRun counts every
// goroutine's).
func TestAccessAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	h := instance(t, `{"uri":"http://`+fastService(t)+`/auth","request_headers":["Authorization"],"upstream_headers":["X-User-ID"],"extra_headers":{"X-Route":"$route_id"}}`)
	ctx := request("GET", "/hello", "", "Authorization", "222")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	allocs := testing.AllocsPerRun(200, func() {
		if err := h.Access(c); err != nil || c.Answered() {
			t.Fatal("refused")
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per call", allocs)
	}
}

// fastService is an auth service that lets every request through with an X-User-ID, on
// a fasthttp server; it returns the address.
func fastService(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("X-User-ID", "i-am-an-user")
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// BenchmarkAccess is one call to a service on loopback that lets the request through: the
// plugin's cost per request, its service's answer and the loopback round trip included.
func BenchmarkAccess(b *testing.B) {
	h := instance(b, `{"uri":"http://`+fastService(b)+`/auth","request_headers":["Authorization"],"upstream_headers":["X-User-ID"]}`)
	ctx := request("GET", "/hello", "", "Authorization", "222")
	c := plugins.AcquireCtx(ctx, &plugins.RouteInfo{ID: "1"}, 0)
	defer plugins.ReleaseCtx(c)
	b.ReportAllocs()
	for b.Loop() {
		if err := h.Access(c); err != nil || c.Answered() {
			b.Fatal("refused")
		}
	}
}

// keepalive_pool bounds the connections kept open once the calls are over: calls made
// together open one connection each, and only keepalive_pool of them stay open.
func TestKeepalivePoolBoundsIdleConnections(t *testing.T) {
	for _, tc := range []struct{ pool, calls, wantOpen int }{{2, 8, 2}, {8, 8, 8}, {1, 4, 1}} {
		t.Run(fmt.Sprintf("pool %d, %d calls", tc.pool, tc.calls), func(t *testing.T) {
			var mu sync.Mutex
			open := 0
			arrived := make(chan struct{}, tc.calls)
			release := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				<-release
			}))
			srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
				mu.Lock()
				defer mu.Unlock()
				switch state {
				case http.StateNew:
					open++
				case http.StateClosed, http.StateHijacked:
					open--
				}
			}
			srv.Start()
			t.Cleanup(srv.Close)
			h := instance(t, fmt.Sprintf(`{"uri":%q,"keepalive_pool":%d,"timeout":60000}`, srv.URL, tc.pool))
			var wg sync.WaitGroup
			for range tc.calls {
				wg.Go(func() {
					ctx := request("GET", "/", "")
					if run(t, h, ctx) {
						t.Errorf("refused: %d %q", ctx.Response.StatusCode(), ctx.Response.Body())
					}
				})
			}
			// Every call holds its own connection until all have arrived: none can reuse
			// another's.
			for range tc.calls {
				select {
				case <-arrived:
				case <-time.After(30 * time.Second):
					t.Fatal("the calls did not all reach the service")
				}
			}
			close(release)
			wg.Wait()
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n := open
				mu.Unlock()
				if n == tc.wantOpen {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d connections open after the calls, want keepalive_pool's %d", n, tc.wantOpen)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// And they are reused: another round opens none.
			if ctx := request("GET", "/", ""); run(t, h, ctx) {
				t.Fatalf("refused: %d", ctx.Response.StatusCode())
			}
			mu.Lock()
			defer mu.Unlock()
			if open != tc.wantOpen {
				t.Fatalf("%d connections open after one more call, want %d (the pool's reused)", open, tc.wantOpen)
			}
		})
	}
}
