package integration

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startStatusUpstream is a backend answering the status its ?code= asks for.
func startStatusUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		if code == 0 {
			code = 200
		}
		w.WriteHeader(code)
		fmt.Fprint(w, "upstream")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func (in *instance) putBreakerRoute(id, uri, upstream, breaker string) {
	in.t.Helper()
	body := fmt.Sprintf(`{"uri":%q,"plugins":{"api-breaker":%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, breaker, upstream)
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
		in.t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

// t/plugin/api-breaker.t TEST 9 and 10 ("trigger breaker") and TEST 12 (half open after
// the 2 s break, closed by healthy answers), over fresh connections spread across two
// workers: one breaker for the route's workers.
func TestAPIBreakerSharedByWorkers(t *testing.T) {
	up := startStatusUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putBreakerRoute("1", "/api_breaker", up, `{"break_response_code": 599,
		"unhealthy": {"http_statuses": [500, 503], "failures": 3}, "healthy": {"http_statuses": [200, 206], "successes": 3}}`)
	check := func(step string, codes []int, want []int) {
		t.Helper()
		for i, code := range codes {
			if resp, _ := in.get(fmt.Sprintf("/api_breaker?code=%d", code)); resp.StatusCode != want[i] {
				t.Fatalf("%s: request %d (code=%d): %d, want %d", step, i, code, resp.StatusCode, want[i])
			}
		}
	}
	check("trigger", []int{200, 500, 503, 500, 500, 500}, []int{200, 500, 503, 500, 599, 599})
	time.Sleep(3 * time.Second) // past the 2 s break
	check("half open", []int{200, 200, 200, 200, 500, 500, 500, 500}, []int{200, 200, 200, 200, 500, 500, 500, 599})
}

// t/plugin/api-breaker.t TEST 13 to 15: the break response's body and headers; and a bad
// configuration is a 400 naming the field.
func TestAPIBreakerResponseAndBadConfig(t *testing.T) {
	up := startStatusUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putBreakerRoute("1", "/api_breaker", up, `{"break_response_code": 502,
		"break_response_body": "{\"message\":\"breaker opened.\"}",
		"break_response_headers": [{"key":"Content-Type","value":"application/json"},{"key":"Content-Type","value":"application/json+v1"}],
		"unhealthy": {"failures": 3}, "healthy": {"successes": 3}}`)
	for i, code := range []int{200, 500, 503, 500, 500} {
		want := code
		if resp, _ := in.get(fmt.Sprintf("/api_breaker?code=%d", code)); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	resp, body := in.get("/api_breaker?code=500")
	if resp.StatusCode != 502 || body != `{"message":"breaker opened."}` || resp.Header.Get("Content-Type") != "application/json+v1" {
		t.Fatalf("break response: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	for _, tt := range []struct{ conf, want string }{
		{`{}`, "break_response_code: is required"},
		{`{"break_response_code": 502, "max_breaker_sec": -1}`, "max_breaker_sec: must be an integer from 3"},
		{`{"break_response_code": 502, "unhealthy": {"http_statuses": [500, 600]}}`, "unhealthy.http_statuses[1]"},
		{`{"break_response_code": 200, "break_response_headers": [{"content-type": "application/json"}]}`, "break_response_headers[0].content-type: unknown field"},
	} {
		body := fmt.Sprintf(`{"uri":"/api_breaker","plugins":{"api-breaker":%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, tt.conf, up)
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", body)
		if status != 400 || !strings.Contains(resp, "api-breaker") || !strings.Contains(resp, tt.want) {
			t.Fatalf("%s: %d %s, want 400 naming %q", tt.conf, status, resp, tt.want)
		}
	}
	// The refused writes changed nothing: the stored route keeps its breaker.
	if status, body := in.adminCall("GET", "/apisix/admin/routes/1", ""); status != 200 || !strings.Contains(body, "breaker opened.") {
		t.Fatalf("after refused writes: %d %s", status, body)
	}
}
