package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// proxy-mirror through the real binary, after t/plugin/proxy-mirror.t TEST 6 to 9, 18 to
// 20 and 27 to 29: the client gets the upstream's answer, the mirror a copy; a mirror that
// never answers changes nothing for the client.
func TestProxyMirror(t *testing.T) {
	type copyOf struct{ method, target, header, body string }
	copies := make(chan copyOf, 64)
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		copies <- copyOf{r.Method, r.RequestURI, r.Header.Get("X-A"), string(b)}
		w.WriteHeader(500) // the mirror's answer is nobody's
		io.WriteString(w, "mirror")
	}))
	defer mirror.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts and never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	up := startUpstream(t, "hello world")

	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"proxy-mirror":{"host":%q}},"upstream":{"nodes":{%q:1}}}`, mirror.URL, up.addr))
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/a/*","plugins":{"proxy-mirror":{"host":%q,"path":"/m","path_concat_mode":"prefix"}},"upstream":{"nodes":{%q:1}}}`, mirror.URL, up.addr))
	in.mustPut("/apisix/admin/services/s1", fmt.Sprintf(`{"plugins":{"proxy-mirror":{"host":%q,"path":"/replaced"}},"upstream":{"nodes":{%q:1}}}`, mirror.URL, up.addr))
	in.mustPut("/apisix/admin/routes/3", `{"uri":"/svc","service_id":"s1"}`)
	in.mustPut("/apisix/admin/routes/4", fmt.Sprintf(`{"uri":"/silent","plugins":{"proxy-mirror":{"host":"http://%s"}},"upstream":{"nodes":{%q:1}}}`, silent.Addr(), up.addr))

	next := func() copyOf {
		t.Helper()
		select {
		case c := <-copies:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no copy reached the mirror")
		}
		return copyOf{}
	}
	for _, tc := range []struct {
		method, path, body string
		want               copyOf
	}{
		{"GET", "/hello?x=1", "", copyOf{"GET", "/hello?x=1", "a", ""}},           // TEST 7, 9
		{"POST", "/hello", "the body", copyOf{"POST", "/hello", "a", "the body"}}, // the body to both
		{"GET", "/a/b?c=1", "", copyOf{"GET", "/m/a/b?c=1", "a", ""}},             // TEST 29: prefix
		{"GET", "/svc?q=2", "", copyOf{"GET", "/replaced?q=2", "a", ""}},          // TEST 20, on a service
	} {
		status, body := call(t, tc.method, "http://"+in.data+tc.path, tc.body, "X-A", "a")
		if status != 200 || body != "hello world" {
			t.Errorf("%s %s: %d %q, want the upstream's answer", tc.method, tc.path, status, body)
		}
		if got := next(); got != tc.want {
			t.Errorf("%s %s: the mirror got %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
	// A mirror that never answers: every request still gets the upstream's answer, as
	// quickly as the client's own timeout (10s) allows at the very least.
	for range 20 {
		if resp, body := in.get("/silent"); resp.StatusCode != 200 || body != "hello world" {
			t.Fatalf("with a silent mirror: %d %q", resp.StatusCode, body)
		}
	}

	// Bad configuration is a 400 naming the field, and changes nothing.
	status, body := in.adminCall("PUT", "/apisix/admin/routes/9", `{"uri":"/x","plugins":{"proxy-mirror":{"host":"http://127.0.0.1:1999/invalid_uri"}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "host: must be") {
		t.Errorf("TEST 5, a path in host: %d %s", status, body)
	}
	status, body = in.adminCall("PUT", "/apisix/admin/routes/9", `{"uri":"/x","plugins":{"proxy-mirror":{"host":"http://127.0.0.1:1999","sample_ratio":10}},"upstream":{"nodes":{"127.0.0.1:1":1}}}`)
	if status != 400 || !strings.Contains(body, "sample_ratio: must be a number from 0.00001 to 1, got 10") {
		t.Errorf("TEST 13: %d %s", status, body)
	}
}
