package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the runner's flags.
type options struct {
	workers     []int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	connections int
	bodyBytes   int
	accessLog   bool
	ocelot      bool
	h2          bool
	chain       bool // also measure issue 22's plugin chain (gwChain)
	grpc        bool
	grpcload    string
	// tlsHandshake runs ab over TLS, a new handshake per request (runOcelot).
	tlsHandshake bool
	h2load       string

	gwctl, upstream, profgw string
	nginx, wrk, ab          string
	templates               string // directory of the nginx templates
	out                     string // results directory
	work                    string // scratch directory for prefixes, logs and profiles
	profile                 bool   // also profile a gw worker under load (GW_BENCH_PROFILE=1)
	syscalls                bool   // count the workers' system calls over each ab run (GW_BENCH_SYSCALLS=1)
	maxForeign              float64
	retries                 int
	// A second gw measured in the same rounds as gw (only --ocelot and --tls-handshake):
	// another build, named baselineName, and/or baselineEnv added to its environment.
	baselineGwctl, baselineName string
	baselineEnv                 []string
}

// cpuList writes CPUs first..last as taskset wants them.
func cpuList(first, last int) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}

// pinning splits the machine for n gateway workers: the gateway gets CPUs 0..n-1, wrk and
// the upstream the rest. ok is false when nothing would be left for the load.
func pinning(n, cores int) (gateway, load string, loadCores int, ok bool) {
	if n < 1 || n >= cores {
		return "", "", 0, false
	}
	return cpuList(0, n-1), cpuList(n, cores-1), cores - n, true
}

// target is one scenario's server and the URL wrk drives.
type target struct {
	name string
	url  string
	srv  server
	// alias marks a target that shares another's server, which that one stops.
	alias bool
	// scrapeURL, when set, is scraped every second during each measured run.
	scrapeURL string
}

// chainPlugins is issue 22's realistic chain: key-auth, limit-req with a rate the
// benchmark never reaches (one worker serves far fewer than 10,000,000 a second, and
// nodelay never sleeps), cors, request-id and prometheus, all with APISIX's defaults
// otherwise. chainConsumer holds the key chainHeaders send.
const (
	chainPlugins = `{"key-auth":{},"limit-req":{"rate":10000000,"burst":1000000,"nodelay":true,"key":"consumer_name"},` +
		`"cors":{},"request-id":{},"prometheus":{}}`
	chainConsumer = `{"username":"bench","plugins":{"key-auth":{"key":"bench-key"}}}`
)

// headers are the header fields every scenario's requests carry: with -chain, the
// chain's consumer key and an Origin (for cors), sent to all so that they see the same
// requests.
func (o *options) headers() []string {
	if !o.chain {
		return nil
	}
	return []string{"apikey: bench-key", "Origin: http://bench.test"}
}

// routeBody is the seeds' route 1, with or without their two plugins.
func routeBody(uri, upstream string, withPlugins bool) string {
	pluginSet := `{}`
	if withPlugins {
		pluginSet = `{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}}`
	}
	return fmt.Sprintf(`{"uri":%q,"plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, pluginSet, upstream)
}

// sweep measures one worker count.
type sweep struct {
	opts      *options
	cores     int
	workers   int
	gwCPUs    string
	loadCPUs  string
	loadCores int
	dir       string
	up        *upstreamServer
	targets   []target
	progress  *progress
	report    *Report
}

func (s *sweep) cleanup() {
	for _, t := range s.targets {
		if t.alias {
			continue
		}
		if err := t.srv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping %s: %v\n", t.name, err)
		}
	}
	s.targets = nil
	if s.up != nil {
		s.up.stop()
		s.up = nil
	}
}

// start brings up the upstream and the four scenarios' servers, all pinned.
func (s *sweep) start() error {
	o := s.opts
	var err error
	if s.up, err = startUpstream(o.upstream, s.loadCPUs, o.bodyBytes, s.dir); err != nil {
		return err
	}
	for _, withPlugins := range []bool{false, true} {
		name := gwPlain
		if withPlugins {
			name = gwPlugins
		}
		g, err := startGW(o.gwctl, filepath.Join(s.dir, strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), "+", "-")), s.gwCPUs, s.workers, o.accessLog, "")
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.targets = append(s.targets, target{name: name, url: "http://" + g.data + "/hello", srv: g})
		if code, body, err := g.putRoute(routeBody("/hello", s.up.addr, withPlugins)); err != nil || code/100 != 2 {
			return fmt.Errorf("%s: PUT route 1: %d %s %v", name, code, body, err)
		}
		if withPlugins {
			s.targets = append(s.targets, target{name: gwScraped, url: "http://" + g.data + "/hello", srv: g,
				alias: true, scrapeURL: "http://" + g.metrics + metricsURI})
		}
	}
	if o.baselineGwctl != "" || o.baselineEnv != nil {
		bin := o.baselineGwctl
		if bin == "" {
			bin = o.gwctl
		}
		name := sweepBaselineName(o)
		g, err := startGWWith(bin, filepath.Join(s.dir, "gw-baseline"), s.gwCPUs, s.workers, o.accessLog, "", "", o.baselineEnv)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.targets = append(s.targets, target{name: name, url: "http://" + g.data + "/hello", srv: g})
		if code, body, err := g.putRoute(routeBody("/hello", s.up.addr, false)); err != nil || code/100 != 2 {
			return fmt.Errorf("%s: PUT route 1: %d %s %v", name, code, body, err)
		}
	}
	if o.chain {
		g, err := startGW(o.gwctl, filepath.Join(s.dir, "gw-chain"), s.gwCPUs, s.workers, o.accessLog, "")
		if err != nil {
			return fmt.Errorf("%s: %w", gwChain, err)
		}
		s.targets = append(s.targets, target{name: gwChain, url: "http://" + g.data + "/hello", srv: g})
		if code, body, err := g.put("/apisix/admin/consumers", chainConsumer); err != nil || code/100 != 2 {
			return fmt.Errorf("%s: PUT consumer: %d %s %v", gwChain, code, body, err)
		}
		route := fmt.Sprintf(`{"uri":"/hello","plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, chainPlugins, s.up.addr)
		if code, body, err := g.putRoute(route); err != nil || code/100 != 2 {
			return fmt.Errorf("%s: PUT route 1: %d %s %v", gwChain, code, body, err)
		}
	}
	for _, direct := range []bool{false, true} {
		name, tmpl := nginxProxy, "proxy.conf.tmpl"
		if direct {
			name, tmpl = nginxDirect, "direct.conf.tmpl"
		}
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		n, err := startNginx(o.nginx, filepath.Join(o.templates, tmpl), filepath.Join(s.dir, strings.ReplaceAll(name, " ", "-")), s.gwCPUs, nginxConf{
			Workers: s.workers, Listen: addr, Upstream: s.up.addr, Location: "/",
			Body: string(makeBody(o.bodyBytes)), AccessLog: o.accessLog,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.targets = append(s.targets, target{name: name, url: "http://" + addr + "/hello", srv: n})
	}
	for _, t := range s.targets {
		if err := checkResponse(t.url, o.bodyBytes, o.headers()...); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return nil
}

// makeBody is the upstream's body: APISIX's 1234567890, repeated to n bytes.
func makeBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "1234567890"[i%10]
	}
	return b
}

// checkResponse makes sure a scenario answers 200 with the upstream's body, so that every
// scenario does the same work; headers are sent with the request ("Name: value").
func checkResponse(url string, bodyBytes int, headers ...string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(name, strings.TrimSpace(value))
	}
	// The https targets (-tls-handshake) serve a self-signed certificate made for the run.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != string(makeBody(bodyBytes)) {
		return fmt.Errorf("GET %s: %d with %d bytes, want 200 with the upstream's %d", url, resp.StatusCode, len(body), bodyBytes)
	}
	return nil
}

// run warms every scenario up, then measures them round by round, rotating the order so
// that no scenario always follows the same one.
func (s *sweep) run() (Row, error) {
	o := s.opts
	row := Row{Workers: s.workers, GatewayCPUs: s.gwCPUs, LoadCPUs: s.loadCPUs}
	script := filepath.Join(s.dir, "report.lua")
	if err := os.WriteFile(script, wrkScript, 0o644); err != nil {
		return row, err
	}
	for _, t := range s.targets {
		s.progress.step(fmt.Sprintf("%d worker(s): warming up %s", s.workers, t.name), o.warmup)
		if _, err := runPinned(s.loadCPUs, wrkArgs(o.wrk, script, t.url, s.loadCores, o.connections, o.warmup, o.headers()...)...); err != nil {
			return row, fmt.Errorf("warming up %s: %w", t.name, err)
		}
	}
	runs := map[string][]Run{}
	repeated := map[string]int{}
	for round := range o.rounds {
		for i := range s.targets {
			t := s.targets[(i+round)%len(s.targets)]
			s.progress.step(fmt.Sprintf("%d worker(s), round %d/%d: %s", s.workers, round+1, o.rounds, t.name), o.duration)
			var r Run
			for attempt := 0; ; attempt++ {
				var err error
				if r, err = s.measure(t, script); err != nil {
					return row, fmt.Errorf("%s, round %d: %w", t.name, round+1, err)
				}
				s.progress.result(r)
				if r.ForeignCores <= o.maxForeign || attempt == o.retries {
					break
				}
				// The machine may be shared (CI, other builds): a run that competed for
				// the CPUs says little, so it is taken again, a bounded number of times.
				repeated[t.name]++
				fmt.Printf("    other processes used %.2f CPUs during that run; running it again\n", r.ForeignCores)
				time.Sleep(time.Second)
			}
			r.Round = round + 1
			runs[t.name] = append(runs[t.name], r)
		}
	}
	for _, name := range scenarioOrder {
		row.Scenarios = append(row.Scenarios, Scenario{Name: name, Runs: runs[name], Repeated: repeated[name]})
	}
	row.finish()
	return row, nil
}

// measure runs wrk once against t and reads the server's CPU time and memory around it.
func (s *sweep) measure(t target, script string) (Run, error) {
	o := s.opts
	var r Run
	master, workers, err := t.srv.processes()
	if err != nil {
		return r, err
	}
	if len(workers) != s.workers {
		return r, fmt.Errorf("%d worker processes, want %d", len(workers), s.workers)
	}
	pids := append([]int{master}, workers...)
	r.Affinity = cpusAllowed(master)
	r.LoadAverage = loadAverage()
	s.report.LoadAverage.Max = max(s.report.LoadAverage.Max, r.LoadAverage)
	upPID := s.up.cmd.Process.Pid

	cpu0, err := cpuSeconds(pids)
	if err != nil {
		return r, err
	}
	up0, _ := cpuSeconds([]int{upPID})
	cores0, err := readCoreTimes()
	if err != nil {
		return r, err
	}
	var scr *scraper
	if t.scrapeURL != "" {
		if scr, err = startScraper(s.loadCPUs, t.scrapeURL); err != nil {
			return r, err
		}
	}
	start := time.Now()
	lr, err := runPinned(s.loadCPUs, wrkArgs(o.wrk, script, t.url, s.loadCores, o.connections, o.duration, o.headers()...)...)
	wall := time.Since(start).Seconds()
	if scr != nil {
		sum, serr := scr.stop()
		if err == nil && serr != nil {
			err = fmt.Errorf("scraper: %w", serr)
		}
		r.Scrapes, r.ScrapeMaxMS = sum.Scrapes, sum.MaxMS
	}
	if err != nil {
		return r, err
	}
	cores1, err := readCoreTimes()
	if err != nil {
		return r, err
	}
	cpu1, err := cpuSeconds(pids)
	if err != nil {
		return r, fmt.Errorf("a server process went away during the run: %w", err)
	}
	up1, _ := cpuSeconds([]int{upPID})
	w, err := parseWrk(lr.output)
	if err != nil {
		return r, err
	}
	for _, pid := range workers {
		if kib, err := rssKiB(pid); err == nil {
			r.WorkerRSSKiB = max(r.WorkerRSSKiB, kib)
		}
	}
	r.MasterRSSKiB, _ = rssKiB(master)

	r.Requests, r.Seconds = w.Requests, w.DurationUS/1e6
	r.RPS = float64(w.Requests) / r.Seconds
	r.P50US, r.P99US, r.Errors = w.P50US, w.P99US, w.errors()
	r.CPUSeconds = cpu1 - cpu0
	if w.Requests > 0 {
		r.CPUPerRequestUS = r.CPUSeconds * 1e6 / float64(w.Requests)
	}
	r.GatewayBusy = r.CPUSeconds / wall / float64(s.workers)
	loadCPU := lr.cpuSeconds + (up1 - up0)
	r.LoadBusy = loadCPU / wall / float64(s.loadCores)
	r.CoreBusy = busyFraction(cores0, cores1)
	var allBusy float64
	for i := range cores0.busy {
		allBusy += float64(cores1.busy[i]-cores0.busy[i]) / clockTicks
	}
	r.ForeignCores = max(0, (allBusy-r.CPUSeconds-loadCPU)/wall)
	return r, nil
}

// profileWorker runs one scenario (gwPlain, gwPlugins or gwChain) once more on profgw,
// with its workers' CPU profiler on for exactly the wrk run, and returns the profile
// paths.
func (s *sweep) profileWorker(scenario string) ([]string, error) {
	o := s.opts
	dir := filepath.Join(s.dir, "profile")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A short prefix: the control socket's path must fit a sockaddr_un (108 bytes).
	prefix := "gw-profiled"
	if scenario == gwChain {
		prefix = "gw-profiled-chain"
	}
	g, err := startGW(o.profgw, filepath.Join(s.dir, prefix), s.gwCPUs, s.workers, o.accessLog, dir)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	route := routeBody("/hello", s.up.addr, scenario == gwPlugins)
	if scenario == gwChain {
		route = fmt.Sprintf(`{"uri":"/hello","plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, chainPlugins, s.up.addr)
		if code, body, err := g.put("/apisix/admin/consumers", chainConsumer); err != nil || code/100 != 2 {
			return nil, fmt.Errorf("PUT consumer: %d %s %v", code, body, err)
		}
	}
	if code, body, err := g.putRoute(route); err != nil || code/100 != 2 {
		return nil, fmt.Errorf("PUT route 1: %d %s %v", code, body, err)
	}
	url := "http://" + g.data + "/hello"
	if err := waitListening(g.data, 30*time.Second); err != nil {
		return nil, err
	}
	if err := checkResponse(url, o.bodyBytes, o.headers()...); err != nil {
		return nil, err
	}
	script := filepath.Join(s.dir, "report.lua")
	s.progress.step(fmt.Sprintf("%d worker(s): profiling %s (warm-up)", s.workers, scenario), o.warmup)
	if _, err := runPinned(s.loadCPUs, wrkArgs(o.wrk, script, url, s.loadCores, o.connections, o.warmup, o.headers()...)...); err != nil {
		return nil, err
	}
	_, workers, err := g.processes()
	if err != nil {
		return nil, err
	}
	signalAll(workers)
	s.progress.step(fmt.Sprintf("%d worker(s): profiling %s", s.workers, scenario), o.duration)
	lr, err := runPinned(s.loadCPUs, wrkArgs(o.wrk, script, url, s.loadCores, o.connections, o.duration, o.headers()...)...)
	signalAll(workers)
	if err != nil {
		return nil, err
	}
	if w, err := parseWrk(lr.output); err == nil {
		fmt.Printf("    profiled run: %.0f req/s (the profiler's own cost is in this figure)\n", float64(w.Requests)/(w.DurationUS/1e6))
	}
	time.Sleep(500 * time.Millisecond) // let the workers write their profiles
	var paths []string
	for _, pid := range workers {
		p := filepath.Join(dir, fmt.Sprintf("worker-%d.pprof", pid))
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

func signalAll(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGUSR2)
	}
}

// progress prints which run is on and roughly how long the whole benchmark has left.
type progress struct {
	left  time.Duration // of planned run time, not counting start-ups
	steps int
}

func (p *progress) step(what string, d time.Duration) {
	p.steps++
	fmt.Printf("[%s left] %s (%v)\n", p.left.Round(time.Second), what, d)
	p.left = max(0, p.left-d)
}

func (p *progress) result(r Run) {
	fmt.Printf("    %8.0f req/s  p99 %6.0f µs  %5.1f CPU µs/req  server cores %3.0f%% busy  load cores %3.0f%%  errors %d\n",
		r.RPS, r.P99US, r.CPUPerRequestUS, 100*r.GatewayBusy, 100*r.LoadBusy, r.Errors)
}
