// Command configscale measures what a config write costs as the config grows (issue 18):
// for each route count it starts gw on a fresh prefix, imports that many routes with
// `gwctl import`, then times route PUTs through the Admin API and reads the resident
// memory of the master and of the largest worker.
//
//	go run ./benchmark/configscale -gwctl bin/gwctl -routes 0,10000,100000
//
// Each route is shaped as the issue states, {"uri":"/api/v1/svcN/*","upstream":{...}},
// with its own inline one-node upstream. A PUT's time is from the request's first byte to
// the answer's last, so it includes the store's fsync and every worker's acknowledgement:
// what an Admin API client waits for. The figure is the median of -puts PUTs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const adminKey = "edd1c9f034335f136f87ad84b625c8f1"

func main() {
	gwctl := flag.String("gwctl", "bin/gwctl", "the gwctl to measure")
	counts := flag.String("routes", "0,1000,10000,100000", "route counts to measure, comma-separated")
	puts := flag.Int("puts", 11, "route PUTs timed at each count")
	workers := flag.Int("workers", 1, "gw workers")
	settle := flag.Duration("settle", 3*time.Second, "wait after the import before reading memory")
	kind := flag.String("kind", "routes", "what the timed PUTs write: routes, upstreams or services (each a new object no route uses)")
	flag.Parse()
	probe, ok := probes[*kind]
	if !ok {
		fail(fmt.Errorf("-kind %q: routes, upstreams or services", *kind))
	}
	bin, err := filepath.Abs(*gwctl)
	if err != nil {
		fail(err)
	}
	fmt.Printf("| routes | import | %s PUT median (min–max) | × none | largest worker RSS | master RSS |\n", strings.TrimSuffix(*kind, "s"))
	fmt.Printf("|--:|--:|--:|--:|--:|--:|\n")
	var base time.Duration
	for _, field := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			fail(fmt.Errorf("-routes: %w", err))
		}
		r := measure(bin, n, *puts, *workers, *settle, *kind, probe)
		if base == 0 {
			base = r.median
		}
		fmt.Printf("| %d | %s | %s (%s–%s) | %.2f | %.1f MiB | %.1f MiB |\n", n, r.imported.Round(time.Millisecond),
			r.median.Round(10*time.Microsecond), r.min.Round(10*time.Microsecond), r.max.Round(10*time.Microsecond),
			float64(r.median)/float64(base), r.workerRSS, r.masterRSS)
	}
}

type result struct {
	imported             time.Duration
	median, min, max     time.Duration
	workerRSS, masterRSS float64 // MiB
}

// probes are the bodies of the timed PUTs, by kind; %d is the PUT's number.
var probes = map[string]string{
	"routes":    `{"uri":"/probe/%d/*","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
	"upstreams": `{"type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`,
	"services":  `{"hosts":["probe%d.example"],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
}

func measure(bin string, routes, puts, workers int, settle time.Duration, kind, probe string) result {
	prefix, err := os.MkdirTemp("", "gw-configscale-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(prefix)
	data, admin, metrics := freeAddr(), freeAddr(), freeAddr()
	config := fmt.Sprintf("worker_processes: %d\nnode_listen: [%q]\nadmin:\n  listen: %q\nprometheus:\n  export_addr: %q\naccess_log:\n  enabled: false\n",
		workers, data, admin, metrics)
	if err := os.MkdirAll(filepath.Join(prefix, "conf"), 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, "conf", "config.yaml"), []byte(config), 0o644); err != nil {
		fail(err)
	}
	run(bin, "start", "--prefix", prefix)
	running = func() { _ = exec.Command(bin, "stop", "--prefix", prefix).Run() }
	defer func() { running(); running = func() {} }()

	var r result
	if routes > 0 {
		backup := filepath.Join(prefix, "routes.json")
		if err := os.WriteFile(backup, backupOf(routes), 0o600); err != nil {
			fail(err)
		}
		start := time.Now()
		run(bin, "import", backup, "--prefix", prefix)
		r.imported = time.Since(start)
	}
	time.Sleep(settle)
	r.masterRSS, r.workerRSS = memory(prefix)

	client := &http.Client{Timeout: time.Minute}
	var times []time.Duration
	for i := range puts {
		body := fmt.Sprintf(probe, 1000+i)
		req, _ := http.NewRequest("PUT", "http://"+admin+"/apisix/admin/"+kind+"/probe", strings.NewReader(body))
		req.Header.Set("X-API-KEY", adminKey)
		start := time.Now()
		resp, err := client.Do(req)
		elapsed := time.Since(start)
		if err != nil {
			fail(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 201 {
			fail(fmt.Errorf("PUT with %d routes: %s", routes, resp.Status))
		}
		times = append(times, elapsed)
	}
	slices.Sort(times)
	r.median, r.min, r.max = times[len(times)/2], times[0], times[len(times)-1]
	return r
}

// backupOf is a gwctl import file of n routes.
func backupOf(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"gw_backup":1,"revision":0,"routes":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"r%d","uri":"/api/v1/svc%d/*","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// memory reads the master's and the largest worker's resident set, in MiB.
func memory(prefix string) (master, worker float64) {
	raw, err := os.ReadFile(filepath.Join(prefix, "logs", "gwctl.pid"))
	if err != nil {
		fail(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	master = rss(pid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			worker = max(worker, rss(child))
		}
	}
	return master, worker
}

func rss(pid int) float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
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
// deferred stop (a failed 100,000-route import left a 630 MB gateway running).
var running = func() {}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "configscale:", err)
	running()
	os.Exit(1)
}
