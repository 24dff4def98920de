package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The dashboard's template variables as Grafana fills them with "All" selected (each has
// includeAll and allValue ".*"), and $__rate_interval as Grafana computes it for a 1 s
// scrape interval: at least four scrape intervals.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "4s",
	"$service", ".*", "$route", ".*", "$instance", ".*", "$consumer", ".*", "$node", ".*",
)

// dashboardExpressions lists every panel target's expression of the dashboard in
// testdata, nested rows included, with its panel's title.
func dashboardExpressions(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "apisix-grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, target := range p.Targets {
				if target.Expr != "" {
					out = append(out, [2]string{p.Title, target.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	return out
}

// startPrometheus runs Debian's prometheus scraping target's gw metrics every second,
// on a free port with its own storage, until the test ends; it returns the HTTP API's
// address.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (apt-get install prometheus); CI installs it")
	}
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gw
    metrics_path: /apisix/prometheus/metrics
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen, "--log.level=warn")
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
	if !waitFor(30*time.Second, func() bool {
		resp, err := freshConnections.Get("http://" + listen + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
		t.Fatalf("prometheus is not ready on %s:\n%s", listen, lastLines(string(log), 20))
	}
	return listen
}

// promQuery evaluates expr now and returns the result's samples' values (as Prometheus
// writes them: "NaN" included), or an error Prometheus gave.
func promQuery(t *testing.T, api, expr string) ([]string, error) {
	t.Helper()
	resp, err := freshConnections.Get("http://" + api + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, err
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s", answer.Error)
	}
	var values []string
	for _, r := range answer.Data.Result {
		values = append(values, fmt.Sprint(r.Value[1]))
	}
	return values, nil
}

// TestGrafanaDashboardOnPrometheus evaluates every panel of APISIX's published Grafana
// dashboard (testdata, unchanged) on a real Prometheus scraping gw under traffic: each
// expression but the etcd ones (this node has no etcd) returns data, and none a NaN.
func TestGrafanaDashboardOnPrometheus(t *testing.T) {
	exprs := dashboardExpressions(t)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions found in the dashboard", len(exprs))
	}
	up := startUpstream(t, "hello")
	in := newInstance(t, "")
	in.start()
	for _, w := range []struct{ path, body string }{
		{"/apisix/admin/services/s1", fmt.Sprintf(`{"upstream":{"nodes":{%q:1}}}`, up.addr)},
		{"/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`},
		{"/apisix/admin/routes/1", `{"uri":"/hello","service_id":"s1","plugins":{"prometheus":{},"key-auth":{}}}`},
	} {
		if status, body := in.adminCall("PUT", w.path, w.body); status != 200 && status != 201 {
			t.Fatalf("PUT %s: %d %s", w.path, status, body)
		}
	}
	// Traffic throughout, so every rate has increases in its window: answered requests
	// (a consumer, a node) and refused ones (401).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			key := "jack-key"
			if i%5 == 0 {
				key = "wrong"
			}
			if resp, err := freshConnections.Do(mustRequest("http://"+in.data+"/hello", "apikey", key)); err == nil {
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	api := startPrometheus(t, in.metrics)
	// Enough scrapes for a 4 s window to hold several.
	if !waitFor(40*time.Second, func() bool {
		v, err := promQuery(t, api, `count_over_time(up{job="gw"}[10s])`)
		if err != nil || len(v) != 1 {
			return false
		}
		n, _ := strconv.Atoi(v[0])
		return n >= 6
	}) {
		v, err := promQuery(t, api, `up{job="gw"}`)
		t.Fatalf("prometheus did not scrape gw six times: up = %v %v", v, err)
	}
	evaluated := 0
	for _, e := range exprs {
		title, expr := e[0], grafanaVariables.Replace(e[1])
		if strings.Contains(expr, "apisix_etcd_") {
			continue // config_provider local: no etcd metrics (etcd_test.go checks them)
		}
		evaluated++
		var values []string
		var err error
		ok := waitFor(15*time.Second, func() bool {
			values, err = promQuery(t, api, expr)
			if err != nil || len(values) == 0 {
				return false
			}
			for _, v := range values {
				if v == "NaN" {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Errorf("panel %q: %s returns %v (error %v), want data", title, expr, values, err)
		}
	}
	if evaluated != 24 {
		t.Errorf("evaluated %d expressions, want the dashboard's 24 that are not etcd's", evaluated)
	}
}

func mustRequest(target string, header ...string) *http.Request {
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		panic(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}
