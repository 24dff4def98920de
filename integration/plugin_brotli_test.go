package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
)

// brotli through the real binary, beside gzip on one route: br for the clients that take
// it, gzip for the others, plain for the rest, as APISIX's priorities (996, 995) give.
func TestBrotliBesideGzip(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("<p>hello world</p>\n", 100)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/big" {
			io.WriteString(w, strings.Repeat(page, 100)) // 190 KB, chunked: streamed
			return
		}
		io.WriteString(w, page)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	in := newInstance(t, "")
	in.start("--workers", "1")
	// t/plugin/brotli.t TEST 1 "sanity", with gzip beside it.
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uris":["/page","/big"],"plugins":{"brotli":{"vary":true},"gzip":{}},"upstream":{"nodes":{%q:1}}}`, ln.Addr()))

	in.overBothProtocols(func() {
		resp, body := in.get("/page", "Accept-Encoding", "gzip, deflate, br")
		if resp.Header.Get("Content-Encoding") != "br" || resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("br client: Content-Encoding %q, Vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
		}
		if plain, err := io.ReadAll(brotli.NewReader(strings.NewReader(body))); err != nil || string(plain) != page {
			t.Fatalf("br body: %v, %d bytes", err, len(plain))
		}
		// A streamed body is compressed as it streams, as gzip's.
		resp, body = in.get("/big", "Accept-Encoding", "br")
		if plain, err := io.ReadAll(brotli.NewReader(strings.NewReader(body))); resp.Header.Get("Content-Encoding") != "br" || err != nil || string(plain) != strings.Repeat(page, 100) {
			t.Fatalf("/big to a br client: Content-Encoding %q, %d bytes sent, %d decoded (%v)", resp.Header.Get("Content-Encoding"), len(body), len(plain), err)
		}
		resp, _ = in.get("/page", "Accept-Encoding", "gzip")
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("gzip client: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		resp, body = in.get("/page", "Accept-Encoding", "identity")
		if resp.Header.Get("Content-Encoding") != "" || body != page {
			t.Errorf("plain client: Content-Encoding %q, %d bytes", resp.Header.Get("Content-Encoding"), len(body))
		}
	})
	status, msg := in.adminCall("PUT", "/apisix/admin/routes/2", `{"uri":"/x","plugins":{"brotli":{"comp_level":12}}}`)
	if status != 400 || !strings.Contains(msg, "failed to check the configuration of plugin brotli err: comp_level: must be an integer from 0 to 11, got 12") {
		t.Errorf("comp_level 12: %d %s", status, msg)
	}
}
