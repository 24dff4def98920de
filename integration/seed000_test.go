package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gw/internal/textparse"
)

// Seed 000 (APISIX's v0.4 benchmark, 000_8202a32459827971.txt): a route with limit-count
// and prometheus written straight into etcd, then driven with wrk. The seed writes through
// etcd's v2 HTTP API in APISIX 0.x's shape ("plugin_config"); APISIX 3 reads etcd's v3 API
// and calls the field "plugins". Here: etcdctl put, APISIX 3's layout.

// seedUpstreams serves body one on 127.0.0.1:port and two on 127.0.0.2:port, one port for
// both as in the seed's nodes, and returns the port.
func seedUpstreams(t *testing.T) int {
	t.Helper()
	serve := func(ln net.Listener, body string) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	for range 100 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		second, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
		if err != nil {
			first.Close()
			continue
		}
		serve(first, "one")
		serve(second, "two")
		return port
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return 0
}

func TestSeed000LimitCountAndPrometheusFromEtcdctl(t *testing.T) {
	srv, _ := startEtcd(t)
	port := seedUpstreams(t)
	in := newInstance(t, fmt.Sprintf("worker_processes: 2\ndeployment:\n  config_provider: etcd\n  etcd:\n    host: [%q]\n", srv.ClientURL))
	in.start()
	nodes := fmt.Sprintf(`{"127.0.0.1:%d":1,"127.0.0.2:%d":1}`, port, port)

	// The seed's value as written: APISIX 3's route schema has no "plugin_config"
	// (additionalProperties false, apisix/schema_def.lua), so APISIX 3 and gw leave the
	// route out and say why, naming the field.
	asWritten := `{"methods":["GET"],"uri":"/hello","id":1,"plugin_config":{"limit-count":{"count":200000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}},"upstream":{"type":"roundrobin","nodes":` + nodes + `}}`
	srv.Etcdctl("put", "/apisix/routes/1", asWritten)
	if !waitFor(10*time.Second, func() bool { return strings.Contains(in.errorLog(), "routes/1 in etcd is left out") }) {
		t.Fatalf("the seed's 0.x value is not reported as left out:\n%s", lastLines(in.errorLog(), 10))
	}
	if log := in.errorLog(); !strings.Contains(log, "plugin_config") {
		t.Fatalf("the report does not name plugin_config:\n%s", lastLines(log, 10))
	}
	if resp, _ := in.get("/hello"); resp.StatusCode != 404 {
		t.Fatalf("GET /hello with the left-out route: %d, want 404", resp.StatusCode)
	}

	// The modern form: "plugins", and a count small enough to reach (the seed's 200000000
	// in 60 s is the benchmark's "no limit").
	const count = 3
	modern := fmt.Sprintf(`{"methods":["GET"],"uri":"/hello","id":1,"plugins":{"limit-count":{"count":%d,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}},"upstream":{"type":"roundrobin","nodes":%s}}`, count, nodes)
	srv.Etcdctl("put", "/apisix/routes/1", modern)
	var first *http.Response
	if !waitFor(10*time.Second, func() bool { first, _ = in.get("/hello"); return first.StatusCode != 404 }) {
		t.Fatal("GET /hello: still 404 10s after etcdctl put of the modern form")
	}
	// The poll's first answer that is not 404 is the first counted request.
	answers := []*http.Response{first}
	for range count {
		resp, body := in.get("/hello")
		if resp.StatusCode == 200 && body != "one" && body != "two" {
			t.Fatalf("GET /hello answered %q, from neither upstream", body)
		}
		answers = append(answers, resp)
	}
	for i, resp := range answers {
		want, remaining := 200, fmt.Sprint(count-1-i)
		if i == count {
			want, remaining = 503, "0"
		}
		if resp.StatusCode != want || resp.Header.Get("X-RateLimit-Remaining") != remaining {
			t.Fatalf("request %d: %d, X-RateLimit-Remaining %q; want %d and %s", i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want, remaining)
		}
	}

	// prometheus counts them all, the rejected one included, under the route's id.
	var got map[string]float64
	if !waitFor(5*time.Second, func() bool {
		_, body := getOn(t, in.metrics, "/apisix/prometheus/metrics")
		fams, err := textparse.Parse(body)
		if err != nil {
			t.Fatalf("exposition does not parse: %v", err)
		}
		got = map[string]float64{}
		status := fams["apisix_http_status"]
		if status == nil {
			return false
		}
		for _, code := range []string{"200", "503"} {
			got[code] = status.Sum("apisix_http_status", map[string]string{"route": "1", "code": code})
		}
		return got["200"] == count && got["503"] == 1
	}) {
		t.Fatalf("apisix_http_status{route=\"1\"} by code: %v, want 200: %d, 503: 1", got, count)
	}
}
