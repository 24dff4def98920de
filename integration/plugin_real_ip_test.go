package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// real-ip through the binary: the client it names is what ip-restriction judges, what
// the upstream's X-Real-IP says and what the access log writes; the next request on the
// same connection, on a route without it, is the TCP peer's again.
func TestPluginRealIP(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "access_log:\n  flush_interval: 100ms\n")
	in.start("--workers", "1")
	// t/plugin/real-ip.t TEST 2 "sanity": real-ip from XFF, then a whitelist of 1.1.1.1.
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"real-ip":{"source":"http_xff"},`+
		`"ip-restriction":{"whitelist":["1.1.1.1","::2"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	// TEST 22 "X-Forwarded-For and recursive".
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/xff","plugins":{"real-ip":{"source":"http_x_forwarded_for",`+
		`"trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true},"ip-restriction":{"whitelist":["1.1.1.1"]}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	in.putRoute("3", "/plain", up.addr)

	in.overBothProtocols(func() {
		for _, tc := range []struct {
			path, header, value string
			wantStatus          int
			wantRealIP          string
		}{
			{"/hello", "XFF", "1.1.1.1", 200, "1.1.1.1"},                                   // TEST 3
			{"/hello", "XFF", "1.1.1.1:80", 200, "1.1.1.1"},                                // TEST 4
			{"/hello", "", "", 403, ""},                                                    // TEST 5 "miss address"
			{"/hello", "XFF", "1.1.1.1.1", 403, ""},                                        // TEST 6 "bad address"
			{"/hello", "XFF", "1.1.1.1:65536", 403, ""},                                    // TEST 7 "bad port"
			{"/hello", "XFF", "[::2]:80", 200, "::2"},                                      // TEST 10
			{"/xff", "X-Forwarded-For", "1.1.1.1, 192.128.1.1, 127.0.0.1", 200, "1.1.1.1"}, // TEST 23
		} {
			var headers []string
			if tc.header != "" {
				headers = []string{tc.header, tc.value}
			}
			resp, _ := in.get(tc.path, headers...)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("%s %s: %q: %d, want %d", tc.path, tc.header, tc.value, resp.StatusCode, tc.wantStatus)
			}
			if tc.wantRealIP != "" && resp.Header.Get("X-Seen-X-Real-IP") != tc.wantRealIP {
				t.Errorf("%s %s: %q: upstream saw X-Real-IP %q, want %q", tc.path, tc.header, tc.value, resp.Header.Get("X-Seen-X-Real-IP"), tc.wantRealIP)
			}
		}
	})
	if !waitFor(5*time.Second, func() bool { return strings.HasPrefix(in.accessLog(), "1.1.1.1 - ") }) {
		t.Errorf("access log %q, want its first line from 1.1.1.1", lastLines(in.accessLog(), 3))
	}

	// One connection, two requests: the second, on a route without real-ip, is the TCP
	// peer's, whatever the first was named.
	conn, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for i, target := range []string{"/hello", "/plain"} {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gw\r\nXFF: 1.1.1.1\r\n\r\n", target)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := []string{"1.1.1.1", "127.0.0.1"}[i]
		if got := resp.Header.Get("X-Seen-X-Real-IP"); resp.StatusCode != 200 || got != want {
			t.Errorf("request %d (%s) on one connection: %d, upstream saw X-Real-IP %q, want %q", i+1, target, resp.StatusCode, got, want)
		}
	}

	// TEST 1 "schema check".
	status, msg := in.adminCall("PUT", "/apisix/admin/routes/4", `{"uri":"/x","plugins":{"real-ip":{"source":"http_xff","trusted_addresses":["::1/129"]}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(msg, "trusted_addresses: item 1: invalid ip address") {
		t.Errorf("bad trusted_addresses: %d %s", status, msg)
	}
}
