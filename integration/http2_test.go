package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// curlH2 runs curl with args and returns the HTTP version, the status and the body, from
// curl's own report (-w), so an HTTP/1.1 answer cannot pass for HTTP/2.
func curlH2(t *testing.T, args ...string) (version, status, body string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl); CI installs it")
	}
	out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "10", "-w", "\n%{http_version} %{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	s := string(out)
	nl := strings.LastIndexByte(s, '\n')
	fields := strings.Fields(s[nl+1:])
	if len(fields) != 2 {
		t.Fatalf("curl %v: no -w report in %q", args, s)
	}
	return fields[0], fields[1], s[:nl]
}

// h2cClient is Go's HTTP/2 client with prior knowledge, in the clear: its requests to one
// address share one connection while they are within max_concurrent_streams (past it, Go's
// client opens another).
func h2cClient() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}, Timeout: 20 * time.Second}
}

// curl --http2-prior-knowledge on node_listen and curl --http2 on the TLS listener get
// HTTP/2 answers through a route with key-auth, limit-count, proxy-rewrite and prometheus,
// as an HTTP/1.1 client does; the access log and the metrics count them.
func TestHTTP2ThroughPluginsWithCurl(t *testing.T) {
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newMetricsInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\naccess_log:\n  flush_interval: 200ms\n", tlsAddr))
	in.start()
	up := startUpstream(t, "hello over h2")
	cert := newTLSTestCert(t, "h2.test")
	in.mustPut("/apisix/admin/ssls/1", cert.sslBody("h2.test"))
	in.mustPut("/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"h2-key"},"basic-auth":{"username":"jack","password":"h2-pass"}}}`)
	// t/plugin/basic-auth.t TEST 5 "verify, missing authorization" and TEST 8 "verify".
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/basic","plugins":{"basic-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	// t/plugin/proxy-rewrite.t TEST 2-style uri and header rewrite; t/plugin/limit-count.t
	// TEST 4 "up the limit" with count 4; t/plugin/key-auth.t TEST 3 "valid consumer".
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/h2","plugins":{`+
		`"key-auth":{},"limit-count":{"count":4,"time_window":60,"rejected_code":503,"key":"consumer_name"},`+
		`"proxy-rewrite":{"uri":"/rewritten","headers":{"set":{"X-Forwarded-Proto":"custom"}}},"prometheus":{}},`+
		`"upstream":{"nodes":{%q:1}}}`, up.addr))

	h2c := []string{"--http2-prior-knowledge"}
	h2tls := []string{"--http2", "-k", "--resolve", "h2.test:" + strings.Split(tlsAddr, ":")[1] + ":127.0.0.1"}
	plain := "http://" + in.data + "/h2"
	secure := "https://h2.test:" + strings.Split(tlsAddr, ":")[1] + "/h2"

	for _, c := range []struct {
		name string
		args []string
		url  string
	}{{"h2c", h2c, plain}, {"h2", h2tls, secure}} {
		// No key: key-auth answers before the route's other plugins.
		if v, status, body := curlH2(t, append(c.args, c.url)...); v != "2" || status != "401" || !strings.Contains(body, "Missing API key") {
			t.Fatalf("%s without a key: HTTP/%s %s %q", c.name, v, status, body)
		}
		v, status, body := curlH2(t, append(c.args, "-D", "-", "-H", "apikey: h2-key", c.url)...)
		if v != "2" || status != "200" || !strings.HasSuffix(body, "hello over h2") {
			t.Fatalf("%s with the key: HTTP/%s %s %q", c.name, v, status, body)
		}
		lower := strings.ToLower(body)
		for _, want := range []string{"x-seen-path: /rewritten", "x-seen-x-forwarded-proto: custom", "x-ratelimit-remaining:"} {
			if !strings.Contains(lower, want) {
				t.Fatalf("%s: response lacks %q:\n%s", c.name, want, body)
			}
		}
	}
	if v, status, _ := curlH2(t, append(h2c, "http://"+in.data+"/basic")...); v != "2" || status != "401" {
		t.Fatalf("basic-auth without credentials over h2c: HTTP/%s %s", v, status)
	}
	if v, status, body := curlH2(t, append(h2tls, "-u", "jack:h2-pass", "https://h2.test:"+strings.Split(tlsAddr, ":")[1]+"/basic")...); v != "2" || status != "200" || body != "hello over h2" {
		t.Fatalf("basic-auth over h2: HTTP/%s %s %q", v, status, body)
	}
	// Four allowed in the window, two used: the next two pass, then limit-count refuses.
	for i, want := range []string{"200", "200", "503"} {
		if v, status, _ := curlH2(t, append(h2c, "-H", "apikey: h2-key", plain)...); v != "2" || status != want {
			t.Fatalf("request %d over the limit: HTTP/%s %s, want %s", i+1, v, status, want)
		}
	}

	if !waitFor(10*time.Second, func() bool { return strings.Count(in.accessLog(), " HTTP/2.0\" ") >= 7 }) {
		t.Fatalf("access log after 7 HTTP/2 requests, as nginx logs them (\"GET ... HTTP/2.0\"):\n%s", in.accessLog())
	}
	var (
		f    = in.scrape()
		ok   = f["apisix_http_status"].Sum("apisix_http_status", map[string]string{"route": "1", "code": "200"})
		over = f["apisix_http_status"].Sum("apisix_http_status", map[string]string{"route": "1", "code": "503"})
	)
	if ok != 4 || over != 1 {
		t.Fatalf("apisix_http_status{route=1}: %v 200s and %v 503s, want 4 and 1", ok, over)
	}
}

// Many streams at once on one connection from Go's client, each proxied to the upstream
// and answered; and h2c turned off for an address answers HTTP/1.1 only.
func TestHTTP2ManyStreamsOnOneConnection(t *testing.T) {
	in := newMetricsInstance(t, "")
	in.start()
	requestsBefore := in.scrape()["apisix_http_requests_total"].Sum("apisix_http_requests_total", nil)
	up := startUpstream(t, "multiplexed")
	in.putRoute("1", "/m", up.addr)
	client := h2cClient()
	var wg sync.WaitGroup
	var failed atomic.Int32
	// 100 at a time, within max_concurrent_streams (128), so that Go's client keeps to one
	// connection; 300 in all.
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				resp, err := client.Get("http://" + in.data + "/m")
				if err != nil {
					t.Error(err)
					failed.Add(1)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "multiplexed" || resp.ProtoMajor != 2 {
					t.Errorf("HTTP/%d %d %q", resp.ProtoMajor, resp.StatusCode, body)
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of 300 streams failed\n%s", failed.Load(), lastLines(in.errorLog(), 20))
	}
	// Each stream is a request to nginx's stub_status set, and the connection, still
	// open with no stream, is waiting, as an idle keep-alive one is.
	f := in.scrape()
	requests := f["apisix_http_requests_total"].Sum("apisix_http_requests_total", nil) - requestsBefore
	conns := f["apisix_nginx_http_current_connections"]
	waiting := conns.Sum("apisix_nginx_http_current_connections", map[string]string{"state": "waiting"})
	reading := conns.Sum("apisix_nginx_http_current_connections", map[string]string{"state": "reading"})
	writing := conns.Sum("apisix_nginx_http_current_connections", map[string]string{"state": "writing"})
	if requests != 300 || waiting != 1 || reading != 0 || writing != 0 {
		t.Fatalf("after 300 streams on one open connection: %v requests counted, waiting %v reading %v writing %v; want 300, 1, 0, 0",
			requests, waiting, reading, writing)
	}
}

func TestHTTP2H2CDisabledPerAddress(t *testing.T) {
	in := newInstance(t, "")
	in.writeConfig(fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: %q\nhttp2:\n  h2c_disable: [%q]\n", in.data, in.admin, in.data))
	in.start()
	up := startUpstream(t, "one")
	in.putRoute("1", "/one", up.addr)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl); CI installs it")
	}
	out, _ := exec.Command("curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-w", "%{http_version}", "http://"+in.data+"/one").CombinedOutput()
	if strings.HasSuffix(string(out), "2") {
		t.Fatalf("h2c_disable: curl --http2-prior-knowledge still got HTTP/2: %s", out)
	}
	if resp, body := in.get("/one"); resp.StatusCode != 200 || body != "one" {
		t.Fatalf("HTTP/1.1 beside it: %d %q", resp.StatusCode, body)
	}
}

// Reloads under HTTP/2 load: the old workers send GOAWAY and let their streams finish, so
// not one request fails (TestReloadsUnderLoadFailNothing's h2 twin).
func TestHTTP2ReloadsUnderLoadFailNothing(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newInstance(t, "")
	base := fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: %q\nworker_shutdown_timeout: 20s\n", in.data, in.admin)
	in.writeConfig(base + "worker_processes: 2\n")
	in.start()
	in.putRoute("1", "/load", up.addr)

	load := startH2Load(in.data, "/load", 4, 4)
	for i, n := range []int{1, 2, 1, 2, 2} {
		time.Sleep(200 * time.Millisecond)
		in.writeConfig(base + fmt.Sprintf("worker_processes: %d\n", n))
		in.reload()
		if got := len(in.status().pids("ready")); got != n {
			t.Fatalf("reload %d: %d ready workers, want %d", i+1, got, n)
		}
	}
	// The old workers' connections moved on at their GOAWAY, so the old workers are gone
	// long before worker_shutdown_timeout (20s), with the load still running.
	if !waitFor(10*time.Second, func() bool { return len(in.status().Workers) == 2 }) {
		t.Errorf("old workers still draining 10s after the last reload: %+v", in.status().Workers)
	}
	if ok, failed, first := load.finish(); failed != 0 || ok == 0 {
		t.Fatalf("h2 clients across reloads: %d ok, %d failed (first: %v)", ok, failed, first)
	} else {
		t.Logf("h2 clients across 5 reloads: %d ok", ok)
	}
}

// h2Load is HTTP/2 load from Go's client: clients connections, each with streams requests
// in flight at a time, none retried by the test (Go's client itself retries only a request
// the server refused unprocessed, REFUSED_STREAM or past a GOAWAY, as HTTP/2 allows).
type h2Load struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startH2Load(address, path string, clients, streams int) *h2Load {
	l := &h2Load{stop: make(chan struct{})}
	for range clients {
		client := h2cClient()
		for range streams {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for {
					select {
					case <-l.stop:
						return
					default:
					}
					resp, err := client.Get("http://" + address + path)
					if err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || string(body) != "ok" {
							err = fmt.Errorf("HTTP/%d %d %q", resp.ProtoMajor, resp.StatusCode, body)
						}
					}
					if err != nil {
						l.failed.Add(1)
						l.firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					l.ok.Add(1)
				}
			}()
		}
	}
	return l
}

func (l *h2Load) finish() (ok, failed int64, first any) {
	close(l.stop)
	l.wg.Wait()
	return l.ok.Load(), l.failed.Load(), l.firstErr.Load()
}

// Binary upgrades under HTTP/2 load: the old master's workers send GOAWAY, and not one
// request fails (TestUpgradesUnderLoadFailNothingAndKeepCounters's h2 twin).
func TestHTTP2UpgradesUnderLoadFailNothing(t *testing.T) {
	v2, _ := upgradeBuilds(t)
	up := startUpstream(t, "ok")
	in := newUpgradableInstance(t)
	in.start("--workers", "2")
	in.putRoute("1", "/up", up.addr)
	load := startH2Load(in.data, "/up", 4, 4)
	for i, bin := range []string{v2, gwctl} {
		time.Sleep(300 * time.Millisecond)
		in.installBinary(bin)
		if out, err := in.gwctl("upgrade"); err != nil {
			t.Fatalf("upgrade %d: %v\n%s\n%s", i+1, err, out, lastLines(in.errorLog(), 15))
		}
	}
	time.Sleep(300 * time.Millisecond)
	if ok, failed, first := load.finish(); failed != 0 || ok == 0 {
		t.Fatalf("h2 clients across upgrades: %d ok, %d failed (first: %v)", ok, failed, first)
	} else {
		t.Logf("h2 clients across 2 upgrades: %d ok", ok)
	}
}

// A SETTINGS flood on node_listen gets GOAWAY ENHANCE_YOUR_CALM from the real worker,
// which serves others on, and gw_http2_abuse_total counts it.
func TestHTTP2AbuseIsCountedInMetrics(t *testing.T) {
	in := newMetricsInstance(t, "")
	in.start()
	up := startUpstream(t, "still serving")
	in.putRoute("1", "/s", up.addr)
	conn, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := http2.NewFramer(conn, conn)
	go func() {
		_, _ = io.WriteString(conn, http2.ClientPreface)
		for range 100000 {
			if fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}) != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var code http2.ErrCode = 255
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			code = ga.ErrCode
			break
		}
	}
	if code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("SETTINGS flood: GOAWAY code %v, want ENHANCE_YOUR_CALM", code)
	}
	if resp, err := h2cClient().Get("http://" + in.data + "/s"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("another client after the flood: %v %v", resp, err)
	}
	var got float64
	if !waitFor(10*time.Second, func() bool {
		if fam := in.scrape()["gw_http2_abuse_total"]; fam != nil {
			got = fam.Sum("gw_http2_abuse_total", map[string]string{"kind": "settings_flood"})
		}
		return got == 1
	}) {
		t.Fatalf("gw_http2_abuse_total{kind=\"settings_flood\"} = %v, want 1", got)
	}
}

// gwctl quit with a slow HTTP/2 stream in flight: the worker sends GOAWAY NO_ERROR naming
// the stream as processed, and the stream's answer still comes, whole, on the same
// connection (TestQuitFinishesASlowRequest's h2 twin).
func TestHTTP2QuitSendsGoAwayAndFinishesTheStream(t *testing.T) {
	slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		w.Write([]byte("slow but sure"))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go slow.Serve(ln)
	defer slow.Close()
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putRoute("1", "/slow", ln.Addr().String())

	conn, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := http2.NewFramer(conn, conn)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/slow"}, {":authority", in.data}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_, _ = io.WriteString(conn, http2.ClientPreface)
	_ = fr.WriteSettings()
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	quit := make(chan string, 1)
	go func() {
		out, err := in.gwctl("quit")
		quit <- fmt.Sprint(err, " ", out)
	}()

	var status, body string
	var goAway *http2.GoAwayFrame
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for done := false; !done; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading (GOAWAY %v, status %q, body %q): %v", goAway, status, body, err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			g := *f
			goAway = &g
		case *http2.HeadersFrame:
			_, _ = dec.Write(f.HeaderBlockFragment())
			done = f.StreamEnded()
		case *http2.DataFrame:
			body += string(f.Data())
			done = f.StreamEnded()
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset across quit: %v", f.ErrCode)
		}
	}
	if goAway == nil || goAway.ErrCode != http2.ErrCodeNo || goAway.LastStreamID != 1 {
		t.Fatalf("GOAWAY before the answer: %+v, want NO_ERROR with last stream 1", goAway)
	}
	if status != "200" || body != "slow but sure" {
		t.Fatalf("the in-flight stream across quit: %s %q", status, body)
	}
	if out := <-quit; !strings.HasPrefix(out, "<nil>") {
		t.Fatalf("gwctl quit: %s", out)
	}
}
