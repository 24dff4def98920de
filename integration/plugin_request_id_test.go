package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// request-id through the binary: the upstream gets the id, the client gets the same one
// back; a client's id is kept; a global rule and a route each set their own header; ids
// are unique across workers.
func TestPluginRequestID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The upstream echoes the ids it received in a body, not in headers, so that the
		// response's headers are the plugin's alone.
		fmt.Fprintf(w, "%s|%s", r.Header.Get("X-Request-Id"), r.Header.Get("Custom-Header-Name"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	up := ln.Addr().String()

	in := newInstance(t, "")
	in.start("--workers", "2")
	// t/plugin/request-id.t TEST 3 "add plugin with include_in_response true".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/opentracing","plugins":{"request-id":{}},"upstream":{"nodes":{%q:1}}}`, up))
	// TEST 15 "add plugin with algorithm nanoid".
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/nano","plugins":{"request-id":{"algorithm":"nanoid","include_in_response":false}},"upstream":{"nodes":{%q:1}}}`, up))

	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	// TEST 4: the id in the response is the one the upstream got.
	resp, body := in.get("/opentracing")
	id := resp.Header.Get("X-Request-Id")
	if !uuid.MatchString(id) || body != id+"|" {
		t.Errorf("response id %q, upstream saw %q", id, body)
	}
	// TEST 14 "echo back the client's header if given".
	if resp, body := in.get("/opentracing", "X-Request-Id", "123"); resp.Header.Get("X-Request-Id") != "123" || body != "123|" {
		t.Errorf("client's id: response %q, upstream %q", resp.Header.Get("X-Request-Id"), body)
	}
	// TEST 9: include_in_response false; the upstream still gets a nanoid.
	resp, body = in.get("/nano")
	if resp.Header.Get("X-Request-Id") != "" || !regexp.MustCompile(`^[-_0-9a-zA-Z]{21}\|$`).MatchString(body) {
		t.Errorf("nanoid: response %q, upstream %q", resp.Header.Get("X-Request-Id"), body)
	}

	// TEST 5 "check for unique id": 200 requests over both workers, at once.
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				r, err := freshConnections.Get("http://" + in.data + "/opentracing")
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				mu.Lock()
				seen[r.Header.Get("X-Request-Id")] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Errorf("200 requests got %d distinct ids", len(seen))
	}

	// TEST 10, 11: a global rule with a custom header and the route's default one; the
	// two ids differ.
	in.mustPut("/apisix/admin/global_rules/1", `{"plugins":{"request-id":{"header_name":"Custom-Header-Name"}}}`)
	resp, body = in.get("/opentracing")
	a, b := resp.Header.Get("X-Request-Id"), resp.Header.Get("Custom-Header-Name")
	if !uuid.MatchString(a) || !uuid.MatchString(b) || a == b || body != a+"|"+b {
		t.Errorf("global rule and route: X-Request-Id %q, Custom-Header-Name %q, upstream %q", a, b, body)
	}

	// TEST 12 "wrong algorithm type".
	status, msg := in.adminCall("PUT", "/apisix/admin/routes/3", `{"uri":"/x","plugins":{"request-id":{"algorithm":"bad_algorithm"}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(msg, "algorithm: must be one of") {
		t.Errorf("bad algorithm: %d %s", status, msg)
	}
}
