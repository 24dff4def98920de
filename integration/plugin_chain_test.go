package integration

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The benchmark's chain (key-auth, limit-req, cors, request-id, prometheus) keeps the
// client's header block as it came (the proxy's pristine path) and adds request-id's id to
// it: the node gets the id once, a client's empty one replaced, the key as the client sent
// it, and the X-Forwarded-* the proxy sets; with hide_credentials the key is gone. Over
// HTTP/1.1 and h2c.
func TestChainRequestHeaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%q|%q|%q|%q", r.Header.Values("X-Request-Id"), r.Header.Values("Apikey"),
			r.Header.Values("X-Forwarded-For"), r.Header.Values("X-Client"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	in := newInstance(t, "")
	in.start("--workers", "1")
	in.mustPut("/apisix/admin/consumers", `{"username":"bench","plugins":{"key-auth":{"key":"bench-key"}}}`)
	chain := `"limit-req":{"rate":10000000,"burst":1000000,"nodelay":true,"key":"consumer_name"},"cors":{},"request-id":{},"prometheus":{}`
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"key-auth":{},%s},"upstream":{"nodes":{%q:1}}}`, chain, ln.Addr()))
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/hidden","plugins":{"key-auth":{"hide_credentials":true},%s},"upstream":{"nodes":{%q:1}}}`, chain, ln.Addr()))

	id := regexp.MustCompile(`^\["([0-9a-f-]{36})"\]\|`)
	in.overBothProtocols(func() {
		for _, tc := range []struct {
			path    string
			headers []string
			want    string // the node's view after the id
		}{
			{"/hello", []string{"apikey", "bench-key", "X-Client", "a"}, `|["bench-key"]|["127.0.0.1"]|["a"]`},
			{"/hello", []string{"apikey", "bench-key", "X-Forwarded-For", "10.0.0.1"}, `|["bench-key"]|["10.0.0.1, 127.0.0.1"]|[]`},
			{"/hello", []string{"apikey", "bench-key", "X-Request-Id", ""}, `|["bench-key"]|["127.0.0.1"]|[]`},
			{"/hidden", []string{"apikey", "bench-key", "X-Client", "a"}, `|[]|["127.0.0.1"]|["a"]`},
		} {
			resp, body := in.get(tc.path, append([]string{"Origin", "http://bench.test"}, tc.headers...)...)
			m := id.FindStringSubmatch(body)
			if resp.StatusCode != 200 || m == nil || !strings.HasSuffix(body, tc.want) || len(body) != len(m[0])-1+len(tc.want) {
				t.Errorf("%s %q: %d, the node saw %s, want one id and %s", tc.path, tc.headers, resp.StatusCode, body, tc.want)
				continue
			}
			if got := resp.Header.Get("X-Request-Id"); got != m[1] || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s: the client got id %q (the node %q), Access-Control-Allow-Origin %q", tc.path, got, m[1], resp.Header.Get("Access-Control-Allow-Origin"))
			}
		}
		// A client's own id goes through as it is, once.
		if _, body := in.get("/hello", "apikey", "bench-key", "X-Request-Id", "mine"); !strings.HasPrefix(body, `["mine"]|`) {
			t.Errorf("a client's id: the node saw %s", body)
		}
	})
}
