package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gw/internal/textparse"
)

// metricsInstance is an instance whose export server listens on its own free port.
type metricsInstance struct {
	*instance
	export string
}

func newMetricsInstance(t *testing.T, extra string) *metricsInstance {
	t.Helper()
	export := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	return &metricsInstance{newInstance(t, fmt.Sprintf("prometheus:\n  export_addr: %q\n%s", export, extra)), export}
}

// scrape fetches and strictly parses the whole exposition.
func (in *metricsInstance) scrape() map[string]*textparse.Family {
	in.t.Helper()
	status, body := call(in.t, "GET", "http://"+in.export+"/apisix/prometheus/metrics", "")
	if status != 200 {
		in.t.Fatalf("scrape: %d %s", status, body)
	}
	fams, err := textparse.Parse(body)
	if err != nil {
		in.t.Fatalf("exposition does not parse: %v\n%s", err, lastLines(body, 40))
	}
	return fams
}

// totals are the sums a test compares across scrapes.
type totals struct {
	status, latencyRequest, latencyUpstream, ingress, egress float64
}

func (in *metricsInstance) totals(route string) totals {
	in.t.Helper()
	f := in.scrape()
	m := map[string]string{"route": route}
	with := func(k, v string) map[string]string { return map[string]string{"route": route, k: v} }
	var t totals
	if s := f["apisix_http_status"]; s != nil {
		t.status = s.Sum("apisix_http_status", m)
	}
	if l := f["apisix_http_latency"]; l != nil {
		t.latencyRequest = l.Sum("apisix_http_latency_count", with("type", "request"))
		t.latencyUpstream = l.Sum("apisix_http_latency_count", with("type", "upstream"))
	}
	if b := f["apisix_bandwidth"]; b != nil {
		t.ingress = b.Sum("apisix_bandwidth", with("type", "ingress"))
		t.egress = b.Sum("apisix_bandwidth", with("type", "egress"))
	}
	return t
}

func (in *metricsInstance) putPrometheusRoute(id, uri, node string) {
	in.t.Helper()
	body := fmt.Sprintf(`{"uri":%q,"plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, node)
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
		in.t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

var keepAlive = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}

// send makes n identical GETs over keep-alive connections from 8 goroutines and fails
// the test unless every one is answered 200.
func (in *metricsInstance) send(n int, path string) {
	in.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				resp, err := keepAlive.Get("http://" + in.data + path)
				if err != nil {
					errs <- err
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		in.t.Fatalf("GET %s: %v", path, err)
	}
}

// After N requests through two workers every sum is exactly N times one request's share.
func TestPrometheusExactSums(t *testing.T) {
	up := startUpstream(t, "1234567890")
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	in.putPrometheusRoute("1", "/hello", up.addr)

	in.send(1, "/hello")
	one := in.totals("1")
	if one.status != 1 || one.latencyRequest != 1 || one.latencyUpstream != 1 || one.ingress == 0 || one.egress < 10 {
		t.Fatalf("after one request: %+v", one)
	}
	in.send(1000, "/hello")
	got := in.totals("1")
	want := totals{1001, 1001, 1001, 1001 * one.ingress, 1001 * one.egress}
	if got != want {
		t.Fatalf("after 1001 requests: %+v, want %+v", got, want)
	}

	// Everything else in the exposition: node info, connections, workers, shm.
	f := in.scrape()
	for _, name := range []string{"apisix_node_info", "apisix_shared_dict_capacity_bytes", "apisix_shared_dict_free_space_bytes",
		"apisix_http_requests_total", "apisix_nginx_http_current_connections", "gw_worker_processes", "gw_worker_restarts_total",
		"gw_reloads_total", "gw_reload_failures_total", "gw_config_version", "gw_metrics_overflow_total"} {
		if f[name] == nil {
			t.Errorf("exposition lacks %s", name)
		}
	}
	if got := f["gw_worker_processes"].Sum("gw_worker_processes", map[string]string{"state": "ready"}); got != 2 {
		t.Errorf("ready workers = %g, want 2", got)
	}
	if got := f["apisix_node_info"].Sum("apisix_node_info", map[string]string{"version": "itest"}); got != 1 {
		t.Errorf("apisix_node_info{version=itest} = %g", got)
	}

	// Only GET on the export URI answers.
	if status, _ := call(t, "GET", "http://"+in.export+"/metrics", ""); status != 404 {
		t.Errorf("GET /metrics = %d, want 404", status)
	}
	if status, _ := call(t, "POST", "http://"+in.export+"/apisix/prometheus/metrics", ""); status != 404 {
		t.Errorf("POST on the export URI = %d, want 404", status)
	}
}

// kill -9 of a worker loses nothing: counts live in the master's shared memory, and no
// scrape ever sees a sum lower than the one before.
func TestPrometheusSurvivesWorkerKill(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	in.putPrometheusRoute("1", "/hello", up.addr)

	in.send(300, "/hello")
	last := in.totals("1")
	if last.status != 300 {
		t.Fatalf("before the kill: %+v", last)
	}
	master := in.masterPID()
	workers := children(master)
	if len(workers) != 2 {
		t.Fatalf("workers: %v", workers)
	}
	keepAlive.CloseIdleConnections()
	if err := syscall.Kill(workers[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		got := in.totals("1")
		if got.status < last.status || got.latencyRequest < last.latencyRequest || got.ingress < last.ingress || got.egress < last.egress {
			t.Fatalf("%s: sums fell from %+v to %+v", when, last, got)
		}
		last = got
	}
	respawned := waitFor(10*time.Second, func() bool {
		check("while the worker respawns")
		kids := children(master)
		return len(kids) == 2 && kids[0] != workers[0] && kids[1] != workers[0]
	})
	if !respawned {
		t.Fatalf("worker %d was not replaced: %v", workers[0], children(master))
	}
	in.send(300, "/hello")
	check("after more requests")
	if last.status != 600 || last.latencyRequest != 600 || last.latencyUpstream != 600 {
		t.Fatalf("after 600 requests and a kill -9: %+v", last)
	}
	if got := in.scrape()["gw_worker_restarts_total"].Sum("gw_worker_restarts_total", nil); got != 1 {
		t.Errorf("gw_worker_restarts_total = %g, want 1", got)
	}
}

func TestPrometheusAcrossReload(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	in.putPrometheusRoute("1", "/hello", up.addr)
	in.send(200, "/hello")
	before := in.totals("1")
	out, err := in.gwctl("reload")
	if err != nil && (strings.Contains(out, "No help topic") || strings.Contains(out, "not a command")) {
		t.Skipf("gwctl reload does not exist yet: %s", strings.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("gwctl reload: %v\n%s", err, out)
	}
	keepAlive.CloseIdleConnections()
	if got := in.totals("1"); got.status < before.status {
		t.Fatalf("after reload: %+v, before %+v", got, before)
	}
	in.send(200, "/hello")
	if got := in.totals("1"); got.status != 400 || got.latencyRequest != 400 {
		t.Fatalf("after 400 requests across a reload: %+v", got)
	}
}

// Past prometheus.max_series new label sets fold into the overflow series: sums stay
// exact and the overflow is counted.
func TestPrometheusCardinalityCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	in := newMetricsInstance(t, "  max_series: 3\n")
	in.start("--workers", "2")
	in.putPrometheusRoute("1", "/code", ln.Addr().String())
	codes := []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 226}
	for _, code := range codes {
		for range 3 {
			resp, _ := in.get(fmt.Sprintf("/code?code=%d", code))
			if resp.StatusCode != code {
				t.Fatalf("code %d answered %d", code, resp.StatusCode)
			}
		}
	}
	f := in.scrape()
	status := f["apisix_http_status"]
	if got := status.Sum("apisix_http_status", nil); got != float64(3*len(codes)) {
		t.Errorf("status sum = %g, want %d", got, 3*len(codes))
	}
	var series int
	for _, s := range status.Samples {
		if s.Labels["code"] != "" {
			series++
		}
	}
	if series != 3 {
		t.Errorf("%d label sets stored, want max_series = 3", series)
	}
	if got := status.Sum("apisix_http_status", map[string]string{"code": ""}); got != float64(3*(len(codes)-3)) {
		t.Errorf("overflow series = %g, want %d", got, 3*(len(codes)-3))
	}
	if got := f["gw_metrics_overflow_total"].Sum("gw_metrics_overflow_total", nil); got < float64(len(codes)-3) {
		t.Errorf("gw_metrics_overflow_total = %g, want at least %d", got, len(codes)-3)
	}
	if got := f["gw_metrics_label_sets"].Sum("gw_metrics_label_sets", nil); got != 3 {
		t.Errorf("gw_metrics_label_sets = %g, want 3", got)
	}
}

// Issue 17: every worker takes one of the metrics segment's 256 worker areas, and a dead
// worker's area used to be freed only by a scrape. Three hundred reloads without one left
// later workers with no area, so their requests went uncounted. The master now frees an
// area when it reaps the worker, keeping the area's counts: apisix_http_requests_total is
// exact after the reloads, counting the requests each retired worker served too.
func TestPrometheusRequestsTotalAfterManyReloadsWithoutScrape(t *testing.T) {
	const reloads = 300
	in := newMetricsInstance(t, "")
	in.start("--workers", "1")

	sent := 0
	request := func() {
		t.Helper()
		// A fresh connection each: a kept-alive one would hold a draining worker alive.
		if resp, _ := in.get("/no-route"); resp.StatusCode != 404 {
			t.Fatalf("GET /no-route = %d, want 404 (no route is configured)", resp.StatusCode)
		}
		sent++
	}
	began := time.Now()
	for i := range reloads {
		if i%50 == 0 {
			for range 3 {
				request() // counted by a worker that is retired later
			}
		}
		in.reload()
	}
	t.Logf("%d reloads in %v", reloads, time.Since(began).Round(time.Millisecond))
	for range 20 {
		request()
	}

	total := in.scrape()["apisix_http_requests_total"]
	if total == nil {
		t.Fatal("the exposition lacks apisix_http_requests_total")
	}
	if got := total.Sum("apisix_http_requests_total", nil); got != float64(sent) {
		t.Errorf("apisix_http_requests_total = %g after %d reloads, want the %d requests sent", got, reloads, sent)
	}
	if log := in.errorLog(); strings.Contains(log, "no free worker area") {
		t.Errorf("error.log reports a worker without a metrics area:\n%s", lastLines(log, 5))
	}
}

// A route with several uris and hosts counts each request under the uri and host it
// matched: t/plugin/prometheus2.t TEST 8 (route 9: uris ["/foo*", "/bar*"], hosts
// ["foo.com", "bar.com"]), TEST 12-13 (GET /foo1, Host: foo.com → matched_uri="/foo*",
// matched_host="foo.com") and TEST 14-15 (GET /bar1, Host: bar.com → "/bar*",
// "bar.com"); a wildcard host is reported as the route wrote it.
func TestPrometheusMatchedURIAndHost(t *testing.T) {
	up := startUpstream(t, "ok")
	in := newMetricsInstance(t, "")
	in.start("--workers", "2")
	in.mustPut("/apisix/admin/routes/9", fmt.Sprintf(`{"methods":["GET"],"plugins":{"prometheus":{}},
		"upstream":{"type":"roundrobin","nodes":{%q:1}},
		"hosts":["foo.com","bar.com","*.Baz.com"],"uris":["/foo*","/bar*"]}`, up.addr))

	sends := []struct {
		host, path string
		times      int
	}{
		{"foo.com", "/foo1", 1},
		{"bar.com", "/bar1", 2},
		{"BAR.com:80", "/foo/2", 3},
		{"a.b.baz.com", "/bar", 4},
	}
	for _, s := range sends {
		for range s.times {
			if resp, body := in.get(s.path, "Host", s.host); resp.StatusCode != 200 {
				t.Fatalf("GET %s with Host %s: %d %s", s.path, s.host, resp.StatusCode, body)
			}
		}
	}
	status := in.scrape()["apisix_http_status"]
	if status == nil {
		t.Fatal("no apisix_http_status family")
	}
	for _, tt := range []struct {
		uri, host string
		want      float64
	}{
		{"/foo*", "foo.com", 1},
		{"/bar*", "bar.com", 2},
		{"/foo*", "bar.com", 3},
		{"/bar*", "*.Baz.com", 4},
		{"/foo*", "", 0},
	} {
		m := map[string]string{"code": "200", "route": "9", "matched_uri": tt.uri, "matched_host": tt.host}
		if got := status.Sum("apisix_http_status", m); got != tt.want {
			t.Errorf("apisix_http_status%v = %g, want %g", m, got, tt.want)
		}
	}
	if got := status.Sum("apisix_http_status", map[string]string{"route": "9"}); got != 10 {
		t.Errorf("route 9 counted %g requests, want 10", got)
	}
}
