// Command scrapecost measures what one Prometheus scrape costs the master as the series
// grow (issue 24: APISIX's exporter is a known pain at 10,000 routes, apache/apisix#10000
// and #7353): for each route count it starts gw with one worker on a fresh prefix,
// imports that many routes with the prometheus plugin, sends one request through each
// (so each route has its apisix_http_status, apisix_bandwidth and three
// apisix_http_latency histograms), then scrapes the metrics endpoint -scrapes times per
// round and reads the master's CPU time (utime+stime in /proc/<pid>/stat) around them.
//
//	go run ./benchmark/scrapecost -gwctl bin/gwctl -routes 0,1000,10000
//
// The figure is the master's CPU milliseconds per scrape, the median of -rounds rounds
// with their range; the clock-tick resolution (10 ms) is spread over a round's scrapes.
// The scrapes are sequential, as one Prometheus's are. The master's idle CPU over the
// same time (health checks, worker reports) is measured apart and not subtracted: it is
// printed beside the figure so the reader sees it is small.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on Linux.
const clockTicks = 100

func main() {
	gwctl := flag.String("gwctl", "bin/gwctl", "the gwctl to measure")
	counts := flag.String("routes", "0,1000,10000", "route counts to measure, comma-separated")
	scrapes := flag.Int("scrapes", 20, "scrapes per round")
	rounds := flag.Int("rounds", 5, "rounds at each route count")
	flag.Parse()
	bin, err := filepath.Abs(*gwctl)
	if err != nil {
		fail(err)
	}
	upstream := startUpstream()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the start: %s", load)
	fmt.Printf("| routes | exposition | lines | master CPU per scrape, median (min–max) | wall per scrape | master idle CPU |\n")
	fmt.Printf("|--:|--:|--:|--:|--:|--:|\n")
	for _, field := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			fail(fmt.Errorf("-routes: %w", err))
		}
		r := measure(bin, upstream, n, *scrapes, *rounds)
		fmt.Printf("| %d | %.1f MiB | %d | %.1f ms (%.1f–%.1f) | %.1f ms | %.1f ms/s |\n", n, float64(r.bytes)/(1<<20), r.lines,
			r.median, r.min, r.max, r.wall, r.idle)
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the end: %s", load)
}

type result struct {
	bytes, lines     int
	median, min, max float64 // master CPU ms per scrape
	wall             float64 // ms per scrape
	idle             float64 // master CPU ms per second, no scrapes
}

func measure(bin, upstream string, routes, scrapes, rounds int) result {
	prefix, err := os.MkdirTemp("", "gw-scrapecost-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(prefix)
	data, admin, metrics := freeAddr(), freeAddr(), freeAddr()
	// Room for every route's label set: one per route and status code.
	config := fmt.Sprintf("worker_processes: 1\nnode_listen: [%q]\nadmin:\n  listen: %q\nprometheus:\n  export_addr: %q\n  max_series: %d\nshm:\n  metrics: 64m\naccess_log:\n  enabled: false\n",
		data, admin, metrics, max(routes+1000, 10000))
	if err := os.MkdirAll(filepath.Join(prefix, "conf"), 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, "conf", "config.yaml"), []byte(config), 0o644); err != nil {
		fail(err)
	}
	run(bin, "start", "--prefix", prefix)
	running = func() { _ = exec.Command(bin, "stop", "--prefix", prefix).Run() }
	defer func() { running(); running = func() {} }()
	if routes > 0 {
		backup := filepath.Join(prefix, "routes.json")
		if err := os.WriteFile(backup, backupOf(routes, upstream), 0o600); err != nil {
			fail(err)
		}
		run(bin, "import", backup, "--prefix", prefix)
		hitEach(data, routes)
	}
	pid := masterPID(prefix)
	url := "http://" + metrics + "/apisix/prometheus/metrics"
	client := &http.Client{Timeout: time.Minute}
	var r result
	body := scrape(client, url)
	r.bytes, r.lines = len(body), bytes.Count(body, []byte("\n"))
	if routes > 0 && !bytes.Contains(body, []byte(fmt.Sprintf(`route="r%d"`, routes-1))) {
		fail(fmt.Errorf("%d routes: the last route's series is not in the exposition", routes))
	}

	before, start := cpuTicks(pid), time.Now()
	time.Sleep(2 * time.Second)
	r.idle = float64(cpuTicks(pid)-before) * 1000 / clockTicks / time.Since(start).Seconds()

	var perScrape []float64
	var wall time.Duration
	for range rounds {
		before, start := cpuTicks(pid), time.Now()
		for range scrapes {
			scrape(client, url)
		}
		wall += time.Since(start)
		perScrape = append(perScrape, float64(cpuTicks(pid)-before)*1000/clockTicks/float64(scrapes))
	}
	slices.Sort(perScrape)
	r.median, r.min, r.max = perScrape[len(perScrape)/2], perScrape[0], perScrape[len(perScrape)-1]
	r.wall = float64(wall.Milliseconds()) / float64(rounds*scrapes)
	return r
}

func scrape(client *http.Client, url string) []byte {
	resp, err := client.Get(url)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		fail(fmt.Errorf("scrape: %v %s", err, resp.Status))
	}
	return body
}

// hitEach sends one GET through every route, eight at a time.
func hitEach(data string, routes int) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := client.Get(fmt.Sprintf("http://%s/api/v1/svc%d/x", data, i))
				if err != nil {
					fail(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					fail(fmt.Errorf("route r%d: %s", i, resp.Status))
				}
			}
		}()
	}
	for i := range routes {
		next <- i
	}
	close(next)
	wg.Wait()
}

// backupOf is a gwctl import file of n routes, each with the prometheus plugin.
func backupOf(n int, upstream string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"gw_backup":1,"revision":0,"routes":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"r%d","uri":"/api/v1/svc%d/*","plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, i, i, upstream)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// cpuTicks is the process's utime+stime, in clock ticks.
func cpuTicks(pid int) int64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		fail(err)
	}
	// pid (comm) state ppid ...: utime and stime are fields 14 and 15, the 12th and 13th
	// after the comm's closing parenthesis.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

func masterPID(prefix string) int {
	raw, err := os.ReadFile(filepath.Join(prefix, "logs", "gwctl.pid"))
	if err != nil {
		fail(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

func startUpstream() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	return ln.Addr().String()
}

func run(bin string, args ...string) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		fail(fmt.Errorf("gwctl %s: %v\n%s", strings.Join(args, " "), err, out))
	}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// running stops the gateway being measured; fail calls it, since os.Exit runs no
// deferred stop.
var running = func() {}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scrapecost:", err)
	running()
	os.Exit(1)
}
