package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gw/internal/testnet"
)

// logCollector is an HTTP collector started by the test: it keeps each POST's body.
type logCollector struct {
	mu     sync.Mutex
	bodies []string
	srv    *httptest.Server
}

func startLogCollector(t *testing.T, delay time.Duration) *logCollector {
	c := &logCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// next returns the n-th body (from 0), waiting up to 15 s for it.
func (c *logCollector) next(t *testing.T, n int) string {
	t.Helper()
	var body string
	if !waitFor(15*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.bodies) > n {
			body = c.bodies[n]
			return true
		}
		return false
	}) {
		t.Fatalf("the collector got no entry %d in 15s", n+1)
	}
	return body
}

// http-logger through the real binary: the default entry with every field APISIX's has,
// a log_format from plugin_metadata, and a collector that is slow or dead costs the
// client nothing.
func TestHTTPLogger(t *testing.T) {
	collector := startLogCollector(t, 0)
	slow := startLogCollector(t, 5*time.Second)
	deadAddr := fmt.Sprintf("127.0.0.1:%d", testnet.RefusedPort(t)) // every POST is refused
	up := startUpstream(t, "hello world")

	in := newInstance(t, "")
	in.start("--workers", "1")
	in.mustPut("/apisix/admin/consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"k-jack"}}}`)
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"key-auth":{},"http-logger":{"uri":%q,"batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, collector.srv.URL+"/log", up.addr))

	before := time.Now()
	status, body := call(t, "GET", "http://"+in.data+"/hello?a=1&a=2&b=x%20y", "", "apikey", "k-jack", "X-Trace", "t1")
	if status != 200 || body != "hello world" {
		t.Fatalf("GET /hello: %d %q", status, body)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(collector.next(t, 0)), &e); err != nil {
		t.Fatal(err)
	}
	req, _ := e["request"].(map[string]any)
	resp, _ := e["response"].(map[string]any)
	if req == nil || resp == nil {
		t.Fatalf("entry without request or response: %v", e)
	}
	_, port, _ := net.SplitHostPort(in.data)
	want := map[string]any{
		"request.url":                  "http://127.0.0.1:" + port + "/hello?a=1&a=2&b=x%20y",
		"request.uri":                  "/hello?a=1&a=2&b=x%20y",
		"request.method":               "GET",
		"request.headers.x-trace":      "t1",
		"request.querystring.a":        []any{"1", "2"},
		"request.querystring.b":        "x y",
		"response.status":              200.0,
		"response.headers.x-seen-path": "/hello?a=1&a=2&b=x%20y",
		"upstream":                     up.addr,
		"route_id":                     "1",
		"service_id":                   "",
		"consumer":                     map[string]any{"username": "jack"},
		"client_ip":                    "127.0.0.1",
	}
	got := map[string]any{
		"request.url": req["url"], "request.uri": req["uri"], "request.method": req["method"],
		"request.headers.x-trace":      req["headers"].(map[string]any)["x-trace"],
		"request.querystring.a":        req["querystring"].(map[string]any)["a"],
		"request.querystring.b":        req["querystring"].(map[string]any)["b"],
		"response.status":              resp["status"],
		"response.headers.x-seen-path": resp["headers"].(map[string]any)["x-seen-path"],
		"upstream":                     e["upstream"], "route_id": e["route_id"], "service_id": e["service_id"],
		"consumer": e["consumer"], "client_ip": e["client_ip"],
	}
	for k, w := range want {
		g, _ := json.Marshal(got[k])
		wj, _ := json.Marshal(w)
		if string(g) != string(wj) {
			t.Errorf("%s = %s, want %s", k, g, wj)
		}
	}
	for _, k := range []string{"upstream_latency", "apisix_latency", "latency"} {
		if v, ok := e[k].(float64); !ok || v < 0 || v > 10000 {
			t.Errorf("%s = %v, want milliseconds", k, e[k])
		}
	}
	if st, ok := e["start_time"].(float64); !ok || st < float64(before.Add(-time.Second).UnixMilli()) || st > float64(time.Now().UnixMilli()) {
		t.Errorf("start_time = %v, want Unix milliseconds of the request (%d)", e["start_time"], before.UnixMilli())
	}
	for _, k := range []string{"size"} {
		if v, ok := req[k].(float64); !ok || v < 50 {
			t.Errorf("request.size = %v", req[k])
		}
		if v, ok := resp[k].(float64); !ok || v < float64(len("hello world")) {
			t.Errorf("response.size = %v", resp[k])
		}
	}
	if s, _ := e["server"].(map[string]any); s == nil || s["hostname"] == "" || s["version"] == nil || s["version"] == "" {
		t.Errorf("server = %v", e["server"])
	}

	// The metadata's log_format, for every http-logger route without its own.
	in.mustPut("/apisix/admin/plugin_metadata/http-logger", `{"log_format":{"host":"$host","@timestamp":"$time_iso8601","client_ip":"$remote_addr","fixed":"text"}}`)
	call(t, "GET", "http://"+in.data+"/hello", "", "apikey", "k-jack")
	e = map[string]any{}
	if err := json.Unmarshal([]byte(collector.next(t, 1)), &e); err != nil {
		t.Fatal(err)
	}
	if e["host"] != "127.0.0.1" || e["client_ip"] != "127.0.0.1" || e["fixed"] != "text" || e["route_id"] != "1" || len(e) != 5 {
		t.Errorf("metadata's log_format: %v", e)
	}
	if ts, _ := e["@timestamp"].(string); len(ts) != len("2006-01-02T15:04:05+00:00") {
		t.Errorf("@timestamp = %v", e["@timestamp"])
	}
	status, body = in.adminCall("PUT", "/apisix/admin/plugin_metadata/http-logger", `{"log_format":{"a":"$nope"}}`)
	if status != 400 || !strings.Contains(body, `log_format.a: unknown variable \"nope\"`) {
		t.Errorf("a bad log_format: %d %s", status, body)
	}
	status, body = in.adminCall("PUT", "/apisix/admin/plugin_metadata/key-auth", `{}`)
	if status != 400 || !strings.Contains(body, "no metadata schema for plugin key-auth") {
		t.Errorf("metadata of a plugin without: %d %s", status, body)
	}
	if status, body := in.adminCall("DELETE", "/apisix/admin/plugin_metadata/http-logger", ""); status != 200 {
		t.Errorf("DELETE the metadata: %d %s", status, body)
	}

	// A collector that takes 5 s per POST, and one that refuses connections: requests
	// take what they take without a logger (a second is a generous bound on loopback).
	in.mustPut("/apisix/admin/routes/2", fmt.Sprintf(`{"uri":"/slow","plugins":{"http-logger":{"uri":%q,"batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, slow.srv.URL, up.addr))
	in.mustPut("/apisix/admin/routes/3", fmt.Sprintf(`{"uri":"/dead","plugins":{"http-logger":{"uri":"http://%s/","batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, deadAddr, up.addr))
	in.mustPut("/apisix/admin/routes/4", fmt.Sprintf(`{"uri":"/plain","upstream":{"nodes":{%q:1}}}`, up.addr))
	for _, path := range []string{"/plain", "/slow", "/dead"} {
		var slowest time.Duration
		for range 20 {
			t0 := time.Now()
			resp, body := in.get(path)
			slowest = max(slowest, time.Since(t0))
			if resp.StatusCode != 200 || body != "hello world" {
				t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
			}
		}
		t.Logf("%s: the slowest of 20 requests took %v", path, slowest)
		if slowest > time.Second {
			t.Errorf("%s: a request took %v: the collector delayed it", path, slowest)
		}
	}
	// The dead collector's batches failed and were counted.
	if !waitFor(15*time.Second, func() bool {
		_, m := getOn(t, in.metrics, "/apisix/prometheus/metrics")
		return strings.Contains(m, `gw_http_logger_dropped_entries_total{reason="send_failed"} 20`)
	}) {
		_, m := getOn(t, in.metrics, "/apisix/prometheus/metrics")
		t.Errorf("metrics do not count the 20 entries the dead collector lost: %s", grepLines(m, "gw_http_logger"))
	}
	if got := slow.next(t, 0); !strings.Contains(got, `"uri":"/slow"`) {
		t.Errorf("the slow collector's first entry: %s", got)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// tcp-logger and udp-logger through the real binary: a TCP and a UDP listener started by
// the test get APISIX's entry, and the plugin_metadata's log_format.
func TestTCPAndUDPLoggers(t *testing.T) {
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpLn.Close()
	tcpGot := make(chan string, 8)
	go func() {
		for {
			c, err := tcpLn.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			tcpGot <- string(b)
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpGot := make(chan string, 8)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			udpGot <- string(buf[:n])
		}
	}()
	next := func(ch chan string, what string) map[string]any {
		t.Helper()
		select {
		case s := <-ch:
			var e map[string]any
			if err := json.Unmarshal([]byte(s), &e); err != nil {
				t.Fatalf("%s: %q: %v", what, s, err)
			}
			return e
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no entry in 15s", what)
		}
		return nil
	}
	up := startUpstream(t, "hello world")
	_, tcpPort, _ := net.SplitHostPort(tcpLn.Addr().String())
	_, udpPort, _ := net.SplitHostPort(udp.LocalAddr().String())

	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/t", fmt.Sprintf(`{"uri":"/tcp","plugins":{"tcp-logger":{"host":"127.0.0.1","port":%s,"batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, tcpPort, up.addr))
	in.mustPut("/apisix/admin/routes/u", fmt.Sprintf(`{"uri":"/udp","plugins":{"udp-logger":{"host":"127.0.0.1","port":%s,"batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, udpPort, up.addr))
	for _, tc := range []struct {
		path, route string
		ch          chan string
	}{{"/tcp?x=1", "t", tcpGot}, {"/udp?x=1", "u", udpGot}} {
		if resp, body := in.get(tc.path, "X-Trace", "t2"); resp.StatusCode != 200 || body != "hello world" {
			t.Fatalf("%s: %d %q", tc.path, resp.StatusCode, body)
		}
		e := next(tc.ch, tc.path)
		req, _ := e["request"].(map[string]any)
		resp, _ := e["response"].(map[string]any)
		if req == nil || resp == nil || req["uri"] != tc.path || req["method"] != "GET" ||
			req["headers"].(map[string]any)["x-trace"] != "t2" || req["querystring"].(map[string]any)["x"] != "1" ||
			resp["status"] != 200.0 || e["route_id"] != tc.route || e["upstream"] != up.addr || e["client_ip"] != "127.0.0.1" {
			t.Errorf("%s: entry %v", tc.path, e)
		}
		for _, k := range []string{"latency", "apisix_latency", "upstream_latency", "start_time"} {
			if _, ok := e[k].(float64); !ok {
				t.Errorf("%s: %s = %v", tc.path, k, e[k])
			}
		}
	}
	in.mustPut("/apisix/admin/plugin_metadata/udp-logger", `{"log_format":{"client_ip":"$remote_addr","m":"$request_method"}}`)
	in.get("/udp")
	if e := next(udpGot, "/udp with metadata"); e["client_ip"] != "127.0.0.1" || e["m"] != "GET" || e["route_id"] != "u" || len(e) != 3 {
		t.Errorf("udp-logger with the metadata's log_format: %v", e)
	}
}

// file-logger through the real binary: entries in a file under the prefix, a line each,
// and after a rename and gwctl reopen, in the file created again.
func TestFileLogger(t *testing.T) {
	up := startUpstream(t, "hello world")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/f", fmt.Sprintf(`{"uri":"/file","plugins":{"file-logger":{"path":"logs/file.json"}},"upstream":{"nodes":{%q:1}}}`, up.addr))
	path := filepath.Join(in.prefix, "logs", "file.json")
	lines := func(p string, n int) []map[string]any {
		t.Helper()
		var entries []map[string]any
		if !waitFor(15*time.Second, func() bool {
			b, _ := os.ReadFile(p)
			entries = nil
			for line := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n"), "\n") {
				var e map[string]any
				if json.Unmarshal([]byte(line), &e) == nil {
					entries = append(entries, e)
				}
			}
			return len(entries) >= n
		}) {
			b, _ := os.ReadFile(p)
			t.Fatalf("%s holds %q, want %d entries", p, b, n)
		}
		return entries
	}
	for range 3 {
		in.get("/file?n=1")
	}
	for _, e := range lines(path, 3) {
		req, _ := e["request"].(map[string]any)
		if req == nil || req["uri"] != "/file?n=1" || e["route_id"] != "f" || e["upstream"] != up.addr {
			t.Errorf("entry %v", e)
		}
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if out, err := in.gwctl("reopen"); err != nil {
		t.Fatalf("gwctl reopen: %v %s", err, out)
	}
	in.get("/file?n=2")
	if e := lines(path, 1)[0]; e["request"].(map[string]any)["uri"] != "/file?n=2" {
		t.Errorf("after the rotation: %v", e)
	}
	if got := len(lines(path+".1", 3)); got != 3 {
		t.Errorf("the rotated file holds %d entries, want 3", got)
	}
}

// syslog through the real binary: a TCP syslog listener started by the test gets RFC 5424
// messages, APISIX's entry as the message.
func TestSyslog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			got <- string(b)
		}
	}()
	up := startUpstream(t, "hello world")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.mustPut("/apisix/admin/routes/s", fmt.Sprintf(`{"uri":"/syslog","plugins":{"syslog":{"host":"127.0.0.1","port":%s,"batch_max_size":2}},"upstream":{"nodes":{%q:1}}}`, port, up.addr))
	in.get("/syslog?a=1")
	in.get("/syslog?a=2")
	var batch string
	select {
	case batch = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the syslog listener got nothing in 15s")
	}
	line := regexp.MustCompile(`^<46>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z 127\.0\.0\.1 apisix \d+ - - (\{.*\})$`)
	lines := strings.Split(strings.TrimSuffix(batch, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("batch of %d lines, want 2: %q", len(lines), batch)
	}
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d is not APISIX's RFC 5424 message: %q", i, l)
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(m[1]), &e); err != nil {
			t.Fatal(err)
		}
		req, _ := e["request"].(map[string]any)
		if req == nil || req["uri"] != fmt.Sprintf("/syslog?a=%d", i+1) || e["route_id"] != "s" || e["client_ip"] != "127.0.0.1" {
			t.Errorf("line %d: entry %v", i, e)
		}
	}
}

// plugin_metadata on etcd: the Admin API's write is stored at
// /apisix/plugin_metadata/<name> without an id, as APISIX stores it, and one written into
// etcd directly (by APISIX, or etcdctl) is served.
func TestPluginMetadataOnEtcd(t *testing.T) {
	srv, cli := startEtcd(t)
	collector := startLogCollector(t, 0)
	up := startUpstream(t, "up")
	in := etcdNode(t, srv, "traditional")
	in.start()
	in.mustPut("/apisix/admin/routes/1", fmt.Sprintf(`{"uri":"/m","plugins":{"http-logger":{"uri":%q,"batch_max_size":1}},"upstream":{"nodes":{%q:1}}}`, collector.srv.URL, up.addr))
	in.mustPut("/apisix/admin/plugin_metadata/http-logger", `{"log_format":{"via":"admin"}}`)
	kv, err := cli.Get(context.Background(), "/apisix/plugin_metadata/http-logger")
	if err != nil || len(kv.Kvs) != 1 || strings.Contains(string(kv.Kvs[0].Value), `"id"`) || !strings.Contains(string(kv.Kvs[0].Value), `"via":"admin"`) {
		t.Fatalf("etcd holds %v (%v), want the metadata without an id", kv, err)
	}
	in.get("/m")
	if got := collector.next(t, 0); got != `{"via":"admin","route_id":"1"}` {
		t.Errorf("with the Admin API's metadata: %s\n%s", got, lastLines(in.errorLog(), 20))
	}
	etcdPut(t, cli, "/apisix/plugin_metadata/http-logger", `{"log_format":{"via":"etcd","ip":"$remote_addr"}}`)
	var got string
	if !waitFor(15*time.Second, func() bool {
		in.get("/m")
		collector.mu.Lock()
		defer collector.mu.Unlock()
		got = collector.bodies[len(collector.bodies)-1]
		return strings.Contains(got, `"via":"etcd"`)
	}) {
		t.Fatalf("the metadata written into etcd is not served: last entry %s", got)
	}
	if got != `{"via":"etcd","ip":"127.0.0.1","route_id":"1"}` {
		t.Errorf("with etcd's metadata: %s", got)
	}
}

// plugin_metadata in a standalone file, as APISIX's deployment-modes doc writes it (the
// plugin's name in id): served, changed with the file, and a metadata the plugin refuses
// is left out and reported while the route keeps serving.
func TestPluginMetadataInStandaloneFile(t *testing.T) {
	collector := startLogCollector(t, 0)
	up := startUpstream(t, "up")
	in := newInstance(t, "deployment:\n  role: data_plane\n  config_provider: yaml\n")
	file := func(logFormat string) string {
		return fmt.Sprintf(`routes:
  - id: 1
    uri: /m
    plugins:
      http-logger:
        batch_max_size: 1
        uri: %s
    upstream:
      nodes:
        %q: 1
plugin_metadata:
  - id: http-logger # note the id is the plugin name
    log_format:
%s
#END
`, collector.srv.URL, up.addr, logFormat)
	}
	in.writeStandalone("apisix.yaml", file("        host: \"$host\"\n        via: file"))
	in.start()
	if got := in.bodyOf("/m"); got != "up" {
		t.Fatalf("/m: %q\n%s", got, in.errorLog())
	}
	if got := collector.next(t, 0); got != `{"host":"127.0.0.1","via":"file","route_id":"1"}` {
		t.Errorf("with the file's metadata: %s\n%s", got, lastLines(in.errorLog(), 20))
	}
	in.writeStandalone("apisix.yaml", file("        via: changed"))
	var got string
	if !waitFor(15*time.Second, func() bool {
		in.get("/m")
		collector.mu.Lock()
		defer collector.mu.Unlock()
		got = collector.bodies[len(collector.bodies)-1]
		return strings.Contains(got, `"via":"changed"`)
	}) {
		t.Fatalf("the changed metadata is not served: last entry %s", got)
	}
	if got != `{"via":"changed","route_id":"1"}` {
		t.Errorf("with the changed metadata: %s", got)
	}
	// log_format's values are strings: a number is refused by the plugin's schema.
	in.writeStandalone("apisix.yaml", file("        via: 7"))
	if !waitFor(15*time.Second, func() bool { return strings.Contains(in.errorLog(), "plugin_metadata/http-logger") }) {
		t.Fatalf("a bad metadata is not reported:\n%s", lastLines(in.errorLog(), 10))
	}
	if got := in.bodyOf("/m"); got != "up" {
		t.Errorf("/m beside a bad metadata: %q, want it served", got)
	}
}
