package main

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Report is everything one run of the benchmark measured; it is the JSON file's schema
// and what the Markdown and charts are drawn from.
type Report struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	Rows     []Row    `json:"rows,omitempty"`
	Ocelot   *Ocelot  `json:"ocelot,omitempty"`
	H2       *H2      `json:"h2,omitempty"`
	GRPC     *GRPC    `json:"grpc,omitempty"`
	// LoadAverage is the 1-minute load average before the first run and the highest seen
	// before any run: other work on the machine skews every figure.
	LoadAverage LoadAverage `json:"load_average"`
	Notes       []string    `json:"notes,omitempty"`
}

// Machine identifies where and with what the figures were taken.
type Machine struct {
	Date      time.Time `json:"date"`
	Cores     int       `json:"cores"`
	Model     string    `json:"model"`
	Kernel    string    `json:"kernel"`
	GoVersion string    `json:"go_version"`
	Commit    string    `json:"commit"`
	// PollerOrder and MonitorPace are what the gwctl under test's --version measures of
	// the runtime changes `make build` makes (tools/runtime-overlay.sh): "readiness order"
	// and "keeps its pace" when it has them.
	PollerOrder string `json:"poller_order"`
	MonitorPace string `json:"monitor_pace,omitempty"`
	Nginx       string `json:"nginx"`
	Wrk         string `json:"wrk"`
}

// Settings are the run's parameters.
type Settings struct {
	Workers     []int  `json:"workers"`
	Duration    string `json:"duration"`
	Warmup      string `json:"warmup"`
	Rounds      int    `json:"rounds"`
	Connections int    `json:"connections"`
	BodyBytes   int    `json:"body_bytes"`
	AccessLog   bool   `json:"access_log"`
	// Chain: gwChain was measured, and every scenario's requests carried chainHeaders.
	Chain bool `json:"chain,omitempty"`
}

type LoadAverage struct {
	Start float64 `json:"start"`
	Max   float64 `json:"max"`
}

// Row is one worker count: its four scenarios, or why it was not measured.
type Row struct {
	Workers int `json:"workers"`
	// Skipped says why the row has no figures (too few cores), empty when measured.
	Skipped     string     `json:"skipped,omitempty"`
	GatewayCPUs string     `json:"gateway_cpus,omitempty"`
	LoadCPUs    string     `json:"load_cpus,omitempty"`
	Scenarios   []Scenario `json:"scenarios,omitempty"`
}

// Scenario names, in the order the tables list them. The first two are gw; ratios are
// to nginxProxy.
const (
	gwPlain   = "gw"
	gwPlugins = "gw limit-count+prometheus"
	// gwScraped is gwPlugins' very server with its metrics scraped every second during the
	// run, as Prometheus would: issue 5 bounds what scraping may add to p99.
	gwScraped = "gw limit-count+prometheus, scraped 1/s"
	// gwChain is issue 22's realistic chain (run.sh --chain); its CPU per request is
	// compared with gwPlain's, the same requests through no plugin.
	gwChain     = "gw key-auth+limit-req+cors+request-id+prometheus"
	nginxProxy  = "nginx proxy"
	nginxDirect = "nginx direct"
)

var scenarioOrder = []string{gwPlain, gwPlugins, gwScraped, nginxProxy, nginxDirect}

// sweepBaselineName names the keep-alive sweep's baseline scenario (-baseline,
// -baseline-env): a second gw with no plugin, the route of gwPlain, from another build or
// with another environment, so that gwPlain's figures, its RSS among them, can be
// compared with it in the same rounds.
func sweepBaselineName(o *options) string {
	return baselineTarget + " (" + describeBaseline(o.baselineName, o.baselineEnv).What + ")"
}

// isSweepBaseline tells the baseline's scenario by its name, which the JSON report keeps.
func isSweepBaseline(name string) bool { return strings.HasPrefix(name, baselineTarget+" (") }

// Scenario is one server setup measured over several rounds.
type Scenario struct {
	Name   string  `json:"name"`
	Runs   []Run   `json:"runs"`
	Median Summary `json:"median"`
	// Repeated counts runs discarded and taken again because other processes used the
	// CPUs meanwhile.
	Repeated int `json:"repeated,omitempty"`
	// VsNginx is the median over rounds of this scenario's figure divided by nginx
	// proxy's in the same round; nil for the nginx scenarios.
	VsNginx *Ratios `json:"vs_nginx_proxy,omitempty"`
	// VsUnscraped is gwScraped's figures over gwPlugins' in the same round; nil for the others.
	VsUnscraped *Ratios `json:"vs_unscraped,omitempty"`
	// VsPlain is gwChain's figures over gwPlain's in the same round; nil for the others.
	VsPlain *Ratios `json:"vs_no_plugin,omitempty"`
	// VsBaseline is gwPlain's figures over the baseline's (-baseline, a second gw with no
	// plugin) in the same round; nil for the others and without a baseline.
	VsBaseline *Ratios `json:"vs_baseline,omitempty"`
}

// Run is one measured wrk run against one scenario.
type Run struct {
	Round    int     `json:"round"`
	Requests int64   `json:"requests"`
	Seconds  float64 `json:"seconds"`
	RPS      float64 `json:"rps"`
	P50US    float64 `json:"p50_us"`
	P99US    float64 `json:"p99_us"`
	Errors   int64   `json:"errors"`
	// CPUSeconds is the server's own CPU time (master and workers, user and system)
	// during the run; CPUPerRequestUS divides it by the requests served.
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	// GatewayBusy is CPUSeconds over wall time over the server's cores: 1 means its cores
	// were all it had. LoadBusy is the same for wrk plus the upstream on theirs.
	GatewayBusy float64 `json:"gateway_busy"`
	LoadBusy    float64 `json:"load_busy"`
	// CoreBusy is each CPU's busy fraction during the run, whoever used it.
	CoreBusy []float64 `json:"core_busy"`
	// ForeignCores is CPU time used by processes outside the benchmark, in cores.
	ForeignCores float64 `json:"foreign_cores"`
	WorkerRSSKiB int64   `json:"worker_rss_kib"` // the largest worker's
	MasterRSSKiB int64   `json:"master_rss_kib"`
	Affinity     string  `json:"affinity"` // the server master's CPU list, as checked
	LoadAverage  float64 `json:"load_average"`
	// Scrapes and ScrapeMaxMS describe the metrics scrapes taken during a gwScraped run.
	Scrapes     int     `json:"scrapes,omitempty"`
	ScrapeMaxMS float64 `json:"scrape_max_ms,omitempty"`
}

// Summary is the median of each figure over a scenario's rounds, the RSS excepted
// (summarize).
type Summary struct {
	RPS             float64 `json:"rps"`
	P50US           float64 `json:"p50_us"`
	P99US           float64 `json:"p99_us"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	GatewayBusy     float64 `json:"gateway_busy"`
	LoadBusy        float64 `json:"load_busy"`
	ForeignCores    float64 `json:"foreign_cores"`
	WorkerRSSKiB    int64   `json:"worker_rss_kib"`
	MasterRSSKiB    int64   `json:"master_rss_kib"`
	Errors          int64   `json:"errors"` // the sum over rounds, not a median
}

// Ratios are a gw scenario's figures over nginx proxy's.
type Ratios struct {
	RPS           float64 `json:"rps"`
	P99           float64 `json:"p99"`
	CPUPerRequest float64 `json:"cpu_per_request"`
	// Interval bounds each median with at least 95% confidence; nil with fewer than six
	// rounds, too few for any such bound.
	Interval *RatioInterval `json:"interval_95,omitempty"`
}

// RatioInterval is, for each ratio, a range that holds the median of its per-round
// quotients with at least 95% confidence. It makes no assumption about how the quotients
// are distributed, only that rounds are independent: it is the pair of order statistics
// that the binomial distribution places around the median (as a sign test does).
type RatioInterval struct {
	RPS           [2]float64 `json:"rps"`
	P99           [2]float64 `json:"p99"`
	CPUPerRequest [2]float64 `json:"cpu_per_request"`
}

// medianInterval returns the 95% interval of the median of xs (see RatioInterval), and
// false for fewer than six values.
func medianInterval(xs []float64) ([2]float64, bool) {
	n := len(xs)
	// The largest k with P(Binomial(n, 1/2) < k) <= 2.5%: the median lies between the
	// k-th smallest and the k-th largest value with probability at least 95%.
	k, tail, term := 0, 0.0, math.Pow(0.5, float64(n)) // term is P(X = k)
	for k < n && tail+term <= 0.025 {
		tail += term
		term *= float64(n-k) / float64(k+1)
		k++
	}
	if k == 0 {
		return [2]float64{}, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return [2]float64{s[k-1], s[n-k]}, true
}

// Ocelot is seed 001's comparison: ab -n 20000 -c 1000 through gw and nginx, or with TLS
// set issue 21's TLS handshake per request, ab -n 4000 -c 50 https://.
type Ocelot struct {
	Workers   int    `json:"workers"`
	Requests  int    `json:"requests"`
	Clients   int    `json:"concurrency"`
	Rewritten bool   `json:"rewritten"`     // whether gw rewrote /api1/ to /api/ as nginx does
	TLS       bool   `json:"tls,omitempty"` // -tls-handshake: every connection is a new TLS one
	Note      string `json:"note,omitempty"`
	// GW and Nginx are the medians over rounds (failures summed); VsNginx pairs the rounds'
	// runs as the sweep's ratios do. ab's p99 is whole milliseconds, so its ratio is coarse.
	GW        OcelotRun   `json:"gw"`
	Nginx     OcelotRun   `json:"nginx"`
	VsNginx   *Ratios     `json:"vs_nginx,omitempty"`
	GWRuns    []OcelotRun `json:"gw_runs,omitempty"`
	NginxRuns []OcelotRun `json:"nginx_runs,omitempty"`
	Repeated  int         `json:"repeated,omitempty"` // runs taken again for others' load
	// Baseline is a second gw measured in the same rounds (-baseline, -baseline-env): an
	// earlier build, or the same one in another environment.
	Baseline *OcelotBaseline `json:"baseline,omitempty"`
}

// OcelotBaseline is the baseline gw's runs, their medians, its ratios to nginx, and gw's
// ratios to it, each paired by round.
type OcelotBaseline struct {
	What           string      `json:"what"`
	Median         OcelotRun   `json:"median"`
	Runs           []OcelotRun `json:"runs,omitempty"`
	VsNginx        *Ratios     `json:"vs_nginx,omitempty"`
	GWOverBaseline *Ratios     `json:"gw_over_baseline,omitempty"`
}

type OcelotRun struct {
	abResult
	Round           int     `json:"round,omitempty"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	ForeignCores    float64 `json:"foreign_cores"`
	WorkerRSSKiB    int64   `json:"worker_rss_kib,omitempty"` // the largest worker's, after the run
	// ClientCPUPerRequestUS is ab's own CPU time per request: with TLS, the client's side
	// of each handshake, which bounds req/s and latency when ab's CPU is the busier one.
	ClientCPUPerRequestUS float64 `json:"client_cpu_per_request_us,omitempty"`
	// The workers' system calls per request, counted with perf stat over the run
	// (GW_BENCH_SYSCALLS=1): all of them, and epoll_ctl(2), epoll_wait(2) and connect(2)
	// (the dials to the upstream) among them.
	SyscallsPerRequest  float64 `json:"syscalls_per_request,omitempty"`
	EpollCtlPerRequest  float64 `json:"epoll_ctl_per_request,omitempty"`
	EpollWaitPerRequest float64 `json:"epoll_wait_per_request,omitempty"`
	ConnectPerRequest   float64 `json:"connect_per_request,omitempty"`
}

// largest is the greatest of f over runs, 0 for none.
func largest[R any](runs []R, f func(R) int64) int64 {
	var m int64
	for _, r := range runs {
		m = max(m, f(r))
	}
	return m
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize takes the median of every figure over runs, but the largest RSS: a worker's
// memory can grow with the requests it served, round after round, which a median hides.
func summarize(runs []Run) Summary {
	pick := func(f func(Run) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	s := Summary{
		RPS:             pick(func(r Run) float64 { return r.RPS }),
		P50US:           pick(func(r Run) float64 { return r.P50US }),
		P99US:           pick(func(r Run) float64 { return r.P99US }),
		CPUPerRequestUS: pick(func(r Run) float64 { return r.CPUPerRequestUS }),
		GatewayBusy:     pick(func(r Run) float64 { return r.GatewayBusy }),
		LoadBusy:        pick(func(r Run) float64 { return r.LoadBusy }),
		ForeignCores:    pick(func(r Run) float64 { return r.ForeignCores }),
		WorkerRSSKiB:    largest(runs, func(r Run) int64 { return r.WorkerRSSKiB }),
		MasterRSSKiB:    largest(runs, func(r Run) int64 { return r.MasterRSSKiB }),
	}
	for _, r := range runs {
		s.Errors += r.Errors
	}
	return s
}

// ratios pairs each of gw's runs with nginx proxy's run of the same round and takes the
// median of the quotients, so that drift between rounds cancels out.
func ratios(gw, nginx []Run) *Ratios {
	byRound := map[int]Run{}
	for _, r := range nginx {
		byRound[r.Round] = r
	}
	var rps, p99, cpu []float64
	for _, g := range gw {
		n, ok := byRound[g.Round]
		if !ok || n.RPS == 0 || n.P99US == 0 || n.CPUPerRequestUS == 0 {
			continue
		}
		rps = append(rps, g.RPS/n.RPS)
		p99 = append(p99, g.P99US/n.P99US)
		cpu = append(cpu, g.CPUPerRequestUS/n.CPUPerRequestUS)
	}
	if len(rps) == 0 {
		return nil
	}
	r := &Ratios{RPS: median(rps), P99: median(p99), CPUPerRequest: median(cpu)}
	if rpsRange, ok := medianInterval(rps); ok {
		p99Range, _ := medianInterval(p99)
		cpuRange, _ := medianInterval(cpu)
		r.Interval = &RatioInterval{RPS: rpsRange, P99: p99Range, CPUPerRequest: cpuRange}
	}
	return r
}

// finish fills the medians and ratios of a measured row.
func (row *Row) finish() {
	var nginx, unscraped, plain, baseline []Run
	for _, sc := range row.Scenarios {
		switch {
		case sc.Name == nginxProxy:
			nginx = sc.Runs
		case sc.Name == gwPlugins:
			unscraped = sc.Runs
		case sc.Name == gwPlain:
			plain = sc.Runs
		case isSweepBaseline(sc.Name):
			baseline = sc.Runs
		}
	}
	for i := range row.Scenarios {
		sc := &row.Scenarios[i]
		sc.Median = summarize(sc.Runs)
		if isSweepBaseline(sc.Name) {
			sc.VsNginx = ratios(sc.Runs, nginx)
		}
		switch sc.Name {
		case gwPlain:
			sc.VsNginx = ratios(sc.Runs, nginx)
			if baseline != nil {
				sc.VsBaseline = ratios(sc.Runs, baseline)
			}
		case gwPlugins:
			sc.VsNginx = ratios(sc.Runs, nginx)
		case gwScraped:
			sc.VsNginx = ratios(sc.Runs, nginx)
			sc.VsUnscraped = ratios(sc.Runs, unscraped)
		case gwChain:
			sc.VsNginx = ratios(sc.Runs, nginx)
			sc.VsPlain = ratios(sc.Runs, plain)
		}
	}
}

// scenario returns the row's scenario called name, or nil.
func (row *Row) scenario(name string) *Scenario {
	for i := range row.Scenarios {
		if row.Scenarios[i].Name == name {
			return &row.Scenarios[i]
		}
	}
	return nil
}
