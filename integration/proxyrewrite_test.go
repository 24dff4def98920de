package integration

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"gw/internal/testnet"
)

// proxy-rewrite's headers apply on top of the X-Forwarded-* headers gw sets, so a route
// can set them and remove them; the ones it does not name are gw's, whatever the client
// sent.
func TestProxyRewriteWinsOverForwardedHeaders(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	in.start("--workers", "1")
	// t/plugin/proxy-rewrite2.t TEST 4 "customize X-Forwarded-Proto", TEST 7 "customize
	// X-Forwarded-Port", TEST 10 "remove X-Forwarded-Host from a trusted client".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/echo","plugins":{"proxy-rewrite":{"headers":{`+
		`"set":{"X-Forwarded-Proto":"https","X-Forwarded-Port":"10080"},"remove":["X-Forwarded-Host"]}}},`+
		`"upstream":{"nodes":{%q:1}}}`, up.addr))
	// t/plugin/proxy-rewrite2.t TEST 11 "customize X-Forwarded-Host"; TEST 8: without the
	// plugin naming it, the client's X-Forwarded-Proto is replaced.
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/host","plugins":{"proxy-rewrite":{"headers":{`+
		`"X-Forwarded-Host":"my-upstream.example.com"}}},"upstream":{"nodes":{%q:1}}}`, up.addr))

	resp, _ := in.get("/echo", "X-Forwarded-Proto", "grpc", "X-Forwarded-Port", "8080", "X-Forwarded-Host", "client.example.com")
	for h, want := range map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Port": "10080", "X-Forwarded-Host": ""} {
		if got := resp.Header.Get("X-Seen-" + h); got != want {
			t.Errorf("/echo: upstream saw %s %q, want %q", h, got, want)
		}
	}
	_, port, _ := net.SplitHostPort(in.data)
	resp, _ = in.get("/host", "X-Forwarded-Proto", "grpc", "X-Forwarded-Host", "client.example.com")
	for h, want := range map[string]string{"X-Forwarded-Proto": "http", "X-Forwarded-Port": port, "X-Forwarded-Host": "my-upstream.example.com"} {
		if got := resp.Header.Get("X-Seen-" + h); got != want {
			t.Errorf("/host: upstream saw %s %q, want %q", h, got, want)
		}
	}
}

// use_real_request_uri_unsafe: the upstream's request line holds the client's bytes as
// sent. A raw upstream records each request line, so nothing between normalises it.
func TestProxyRewriteRealRequestURI(t *testing.T) {
	lines := make(chan string, 16)
	node := testnet.Serve(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimRight(line, "\r\n")
			for { // the header block
				h, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if h == "\r\n" {
					break
				}
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	in := newInstance(t, "")
	in.start("--workers", "1")
	route := func(id, uri, plugin string) {
		in.mustPut("/apisix/admin/routes/"+id, fmt.Sprintf(`{"uri":%q,"plugins":{"proxy-rewrite":%s},"upstream":{"nodes":{%q:1}}}`, uri, plugin, node.String()))
	}
	// t/plugin/proxy-rewrite.t TEST 49 "set route(conf.uri carries its own query,
	// use_real_request_uri_unsafe)"; TEST 53 "set route(conf.uri echoing raw request_uri,
	// use_real_request_uri_unsafe)"; proxy-rewrite3.t TEST 8 "set route(unsafe uri not
	// normalized at request with unsafe allowed)"; proxy-rewrite3.t TEST 40 "use regex uri
	// with unsafe allowed".
	route("merge", "/hello", `{"uri":"/plugin_proxy_rewrite_args?x=1","use_real_request_uri_unsafe":true}`)
	route("raw", "/print*", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":true}`)
	route("alone", "/print_uri_detailed", `{"use_real_request_uri_unsafe":true}`)
	route("regex", "/regex/*", `{"regex_uri":["/regex/(.+)","/hello?unsafe_variable=$1"],"use_real_request_uri_unsafe":true}`)

	for _, tc := range []struct{ target, want string }{
		{"/hello?q=apisix", "/plugin_proxy_rewrite_args?x=1&q=apisix"},                               // TEST 50
		{"/printx?name=a%20b&x=%E4%B8%AD", "/print_uri_detailed?name=a%20b&x=%E4%B8%AD"},             // TEST 54
		{"/printx?a=1?b=2", "/print_uri_detailed?a=1?b=2"},                                           // TEST 55
		{"/print%5Furi%5Fdetailed?a=%2f&&b", "/print%5Furi%5Fdetailed?a=%2f&&b"},                     // proxy-rewrite3.t TEST 9
		{"/regex/%ED%85%8C%EC%8A%A4%ED%8A%B8", "/hello?unsafe_variable=%ED%85%8C%EC%8A%A4%ED%8A%B8"}, // proxy-rewrite3.t TEST 41
	} {
		status := rawGet(t, in.data, tc.target)
		if status != "HTTP/1.1 200 OK" {
			t.Errorf("GET %s: %s", tc.target, status)
			continue
		}
		select {
		case got := <-lines:
			if want := "GET " + tc.want + " HTTP/1.1"; got != want {
				t.Errorf("GET %s: upstream's request line %q, want %q", tc.target, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("GET %s: the upstream got no request", tc.target)
		}
	}
}

// rawGet sends "GET target" as written (no client library to normalise it) and returns
// the status line.
func rawGet(t *testing.T, addr, target string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", target)
	status, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(status, "\r\n")
}
