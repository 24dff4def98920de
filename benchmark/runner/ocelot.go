package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Seed 001's ab run: 20000 requests, 1000 at a time, each on a new connection. With
// -tls-handshake, issue 21's "a TLS handshake per request": 4000 requests, 50 at a time,
// each on a new TLS connection (a full handshake: ab resumes no session) with an ECDSA
// P-256 certificate.
const (
	ocelotRequests = 20000
	ocelotClients  = 1000
	tlsRequests    = 4000
	tlsClients     = 50
)

// ocelotRoute asks gw to rewrite /api1/... to /api/... as seed 001's nginx does; the plain
// route is the fallback while gw has no proxy-rewrite plugin.
func ocelotRoute(upstream string, rewrite bool) string {
	pluginSet := `{}`
	if rewrite {
		pluginSet = `{"proxy-rewrite":{"regex_uri":["^/api1/(.*)","/api/$1"]}}`
	}
	return fmt.Sprintf(`{"uri":"/api1/*","plugins":%s,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, pluginSet, upstream)
}

// runOcelot reproduces seed 001 with gw in Ocelot's place: ab through gw and through
// nginx, each run once to warm up (the seed discards the first run too), then in paired
// rounds, so that gw's figures come as ratios to nginx's with intervals, as the sweep's.
//
// With tlsHandshake the same runs go over TLS (tlsRequests, tlsClients): gw on an
// ssl.listen address with the certificate as an Admin API ssl object, nginx on a
// "listen ... ssl" with it as files.
func (s *sweep) runOcelot(tlsHandshake bool) (*Ocelot, error) {
	o := s.opts
	res := &Ocelot{Workers: s.workers, Requests: ocelotRequests, Clients: ocelotClients, TLS: tlsHandshake}
	if tlsHandshake {
		res.Requests, res.Clients = tlsRequests, tlsClients
	}
	var err error
	if s.up, err = startUpstream(o.upstream, s.loadCPUs, o.bodyBytes, s.dir); err != nil {
		return nil, err
	}
	var certFile, keyFile, certPEM, keyPEM string
	if tlsHandshake {
		if certFile, keyFile, certPEM, keyPEM, err = writeBenchCert(s.dir); err != nil {
			return nil, err
		}
	}
	// startGW starts one gw for the comparison: the one measured and, with -baseline or
	// -baseline-env, the one it is measured against in the same rounds.
	startGW := func(name, bin string, env []string) error {
		var extra, tlsAddr string
		if tlsHandshake {
			if tlsAddr, err = freeAddr(); err != nil {
				return err
			}
			extra = fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n  fallback_sni: %s\n", tlsAddr, h2SNI)
		}
		dir := filepath.Join(s.dir, strings.ReplaceAll(name, " ", "-")+"-ocelot")
		g, err := startGWWith(bin, dir, s.gwCPUs, s.workers, o.accessLog, "", extra, env)
		if err != nil {
			return err
		}
		url := "http://" + g.data + "/api1/values"
		if tlsHandshake {
			url = "https://" + tlsAddr + "/api1/values"
			ssl, _ := json.Marshal(map[string]any{"cert": certPEM, "key": keyPEM, "snis": []string{h2SNI}})
			if code, body, err := g.put("/apisix/admin/ssls/1", string(ssl)); err != nil || code/100 != 2 {
				return fmt.Errorf("%s: PUT ssls/1: %d %s %v", name, code, body, err)
			}
		}
		s.targets = append(s.targets, target{name: name, url: url, srv: g})
		code, body, err := g.putRoute(ocelotRoute(s.up.addr, true))
		if err != nil {
			return err
		}
		res.Rewritten = code/100 == 2
		if !res.Rewritten {
			res.Note = "gw has no proxy-rewrite plugin yet (Admin API: " + strings.TrimSpace(body) +
				"), so gw proxies /api1/values unchanged while nginx rewrites it to /api/values; the upstream answers both alike"
			fmt.Println("NOTE:", res.Note)
			if code, body, err := g.putRoute(ocelotRoute(s.up.addr, false)); err != nil || code/100 != 2 {
				return fmt.Errorf("%s: PUT route 1: %d %s %v", name, code, body, err)
			}
		}
		return nil
	}
	if err := startGW("gw", o.gwctl, nil); err != nil {
		return nil, err
	}
	if o.baselineGwctl != "" || len(o.baselineEnv) > 0 {
		bin := o.baselineGwctl
		if bin == "" {
			bin = o.gwctl
		}
		res.Baseline = describeBaseline(o.baselineName, o.baselineEnv)
		if err := startGW(baselineTarget, bin, o.baselineEnv); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	nc := nginxConf{Workers: s.workers, Listen: addr, Upstream: s.up.addr, Location: "/api1/", UpstreamPath: "/api/", AccessLog: o.accessLog}
	nginxURL := "http://" + addr + "/api1/values"
	if tlsHandshake {
		if nc.TLSListen, err = freeAddr(); err != nil {
			return nil, err
		}
		nc.Cert, nc.Key = certFile, keyFile
		nginxURL = "https://" + nc.TLSListen + "/api1/values"
	}
	n, err := startNginx(o.nginx, filepath.Join(o.templates, "proxy.conf.tmpl"), filepath.Join(s.dir, "nginx-ocelot"), s.gwCPUs, nc)
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "nginx", url: nginxURL, srv: n})
	for _, t := range s.targets {
		if err := checkResponse(t.url, o.bodyBytes); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	args := func(url string) []string {
		// -r: count a reset connection as a failure instead of aborting the run.
		return []string{o.ab, "-r", "-n", strconv.Itoa(res.Requests), "-c", strconv.Itoa(res.Clients), url}
	}
	for _, t := range s.targets {
		s.progress.step(fmt.Sprintf("%s (warm-up): ab -n %d -c %d through %s", res.name(), res.Requests, res.Clients, t.name), 0)
		if _, err := s.measureAB(t, args(t.url)); err != nil {
			return nil, err
		}
	}
	// Paired rounds, as the sweep's: each round runs both, in an order rotated each round,
	// and a run during which other processes competed for the CPUs is taken again.
	runs := map[string][]OcelotRun{}
	for round := range o.rounds {
		for i := range s.targets {
			t := s.targets[(i+round)%len(s.targets)]
			s.progress.step(fmt.Sprintf("%s, round %d/%d: ab -n %d -c %d through %s", res.name(), round+1, o.rounds, res.Requests, res.Clients, t.name), 0)
			var run OcelotRun
			for attempt := 0; ; attempt++ {
				var err error
				if run, err = s.measureAB(t, args(t.url)); err != nil {
					return nil, fmt.Errorf("%s, round %d: %w", t.name, round+1, err)
				}
				if run.ForeignCores <= o.maxForeign || attempt == o.retries {
					break
				}
				res.Repeated++
				fmt.Printf("    other processes used %.2f CPUs during that run; running it again\n", run.ForeignCores)
				time.Sleep(time.Second)
			}
			run.Round = round + 1
			runs[t.name] = append(runs[t.name], run)
		}
	}
	res.GWRuns, res.NginxRuns = runs["gw"], runs["nginx"]
	res.GW, res.Nginx = medianOcelot(res.GWRuns), medianOcelot(res.NginxRuns)
	res.VsNginx = ratios(ocelotAsRuns(res.GWRuns), ocelotAsRuns(res.NginxRuns))
	if res.Baseline != nil {
		b := res.Baseline
		b.Runs = runs[baselineTarget]
		b.Median = medianOcelot(b.Runs)
		b.VsNginx = ratios(ocelotAsRuns(b.Runs), ocelotAsRuns(res.NginxRuns))
		b.GWOverBaseline = ratios(ocelotAsRuns(res.GWRuns), ocelotAsRuns(b.Runs))
	}
	return res, nil
}

// measureAB runs ab once against t and reads the server's CPU time, and every CPU's busy
// time to tell how much of the machine others took meanwhile, around it.
func (s *sweep) measureAB(t target, argv []string) (OcelotRun, error) {
	var run OcelotRun
	master, workers, err := t.srv.processes()
	if err != nil {
		return run, err
	}
	pids := append([]int{master}, workers...)
	upPID := s.up.cmd.Process.Pid
	cpu0, err := cpuSeconds(pids)
	if err != nil {
		return run, err
	}
	up0, _ := cpuSeconds([]int{upPID})
	cores0, err := readCoreTimes()
	if err != nil {
		return run, err
	}
	var counting *syscallCount
	if s.opts.syscalls {
		if counting, err = countSyscalls(workers); err != nil {
			return run, err
		}
	}
	start := time.Now()
	lr, err := runPinned(s.loadCPUs, argv...)
	wall := time.Since(start).Seconds()
	if counting != nil {
		if cerr := counting.stop(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return run, err
	}
	cores1, err := readCoreTimes()
	if err != nil {
		return run, err
	}
	cpu1, err := cpuSeconds(pids)
	if err != nil {
		return run, fmt.Errorf("a server process went away during the run: %w", err)
	}
	up1, _ := cpuSeconds([]int{upPID})
	ab, err := parseAB(lr.output)
	if err != nil {
		return run, err
	}
	run.abResult = ab
	for _, pid := range workers {
		if kib, err := rssKiB(pid); err == nil {
			run.WorkerRSSKiB = max(run.WorkerRSSKiB, kib)
		}
	}
	if ab.Complete > 0 {
		run.CPUPerRequestUS = (cpu1 - cpu0) * 1e6 / float64(ab.Complete)
		run.ClientCPUPerRequestUS = lr.cpuSeconds * 1e6 / float64(ab.Complete)
		if counting != nil {
			n := float64(ab.Complete)
			run.SyscallsPerRequest, run.EpollCtlPerRequest, run.EpollWaitPerRequest, run.ConnectPerRequest =
				float64(counting.all)/n, float64(counting.epollCtl)/n, float64(counting.epollWait)/n, float64(counting.connect)/n
		}
	}
	var allBusy float64
	for i := range cores0.busy {
		allBusy += float64(cores1.busy[i]-cores0.busy[i]) / clockTicks
	}
	run.ForeignCores = max(0, (allBusy-(cpu1-cpu0)-lr.cpuSeconds-(up1-up0))/wall)
	fmt.Printf("    %8.0f req/s  failed %d  non-2xx %d  p99 %.0f ms  %.1f CPU µs/req  ab %.1f CPU µs/req  others %.2f CPUs\n",
		ab.RPS, ab.Failed, ab.Non2xx, ab.P99MS, run.CPUPerRequestUS, run.ClientCPUPerRequestUS, run.ForeignCores)
	if counting != nil {
		fmt.Printf("    workers' system calls per request: %.2f (epoll_ctl %.2f, epoll_wait %.2f, connect %.3f)\n",
			run.SyscallsPerRequest, run.EpollCtlPerRequest, run.EpollWaitPerRequest, run.ConnectPerRequest)
	}
	return run, nil
}

// medianOcelot is the median of each figure over runs; the failure counts are sums, the
// RSS the largest.
func medianOcelot(runs []OcelotRun) OcelotRun {
	pick := func(f func(OcelotRun) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	var m OcelotRun
	m.RPS = pick(func(r OcelotRun) float64 { return r.RPS })
	m.Seconds = pick(func(r OcelotRun) float64 { return r.Seconds })
	m.P50MS = pick(func(r OcelotRun) float64 { return r.P50MS })
	m.P99MS = pick(func(r OcelotRun) float64 { return r.P99MS })
	m.CPUPerRequestUS = pick(func(r OcelotRun) float64 { return r.CPUPerRequestUS })
	m.ForeignCores = pick(func(r OcelotRun) float64 { return r.ForeignCores })
	m.ClientCPUPerRequestUS = pick(func(r OcelotRun) float64 { return r.ClientCPUPerRequestUS })
	m.WorkerRSSKiB = largest(runs, func(r OcelotRun) int64 { return r.WorkerRSSKiB }) // as summarize
	for _, r := range runs {
		m.Complete += r.Complete
		m.Failed += r.Failed
		m.WriteErrors += r.WriteErrors
		m.Non2xx += r.Non2xx
	}
	return m
}

// ocelotAsRuns gives ab's runs the shape ratios pairs by round.
func ocelotAsRuns(runs []OcelotRun) []Run {
	out := make([]Run, len(runs))
	for i, r := range runs {
		out[i] = Run{Round: r.Round, RPS: r.RPS, P99US: r.P99MS * 1000, CPUPerRequestUS: r.CPUPerRequestUS}
	}
	return out
}

// name is how the progress lines call the comparison.
func (o *Ocelot) name() string {
	if o.TLS {
		return "tls handshake"
	}
	return "ocelot"
}

// baselineTarget names the gw that -baseline or -baseline-env starts.
const baselineTarget = "gw baseline"

// describeBaseline says what the baseline is: name (run.sh passes the revision it built)
// and the environment it was given.
func describeBaseline(name string, env []string) *OcelotBaseline {
	what := name
	if len(env) > 0 {
		what = strings.TrimSpace(what + " with " + strings.Join(env, " "))
	}
	if what == "" {
		what = "the same binary"
	}
	return &OcelotBaseline{What: what}
}
