package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseWorkers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"1,2,4", []int{1, 2, 4}, true},
		{" 1 , 8", []int{1, 8}, true},
		{"3", []int{3}, true},
		{"", nil, false},
		{"0", nil, false},
		{"1,,2", nil, false},
		{"-1", nil, false},
		{"two", nil, false},
		{"2000", nil, false},
	} {
		got, err := parseWorkers(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !slices.Equal(got, tc.want)) {
			t.Errorf("parseWorkers(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"10", 10, true},
		{"0", 0, true},
		{"1k", 1024, true},
		{"16K", 16384, true},
		{"k", 0, false},
		{"1m", 0, false},
		{"-1", 0, false},
		{"20000k", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestPinning(t *testing.T) {
	for _, tc := range []struct {
		n, cores      int
		gateway, load string
		loadCores     int
		ok            bool
	}{
		{1, 2, "0", "1", 1, true},
		{2, 2, "", "", 0, false},
		{4, 2, "", "", 0, false},
		{2, 8, "0-1", "2-7", 6, true},
		{4, 8, "0-3", "4-7", 4, true},
		{7, 8, "0-6", "7", 1, true},
		{0, 8, "", "", 0, false},
	} {
		g, l, lc, ok := pinning(tc.n, tc.cores)
		if g != tc.gateway || l != tc.load || lc != tc.loadCores || ok != tc.ok {
			t.Errorf("pinning(%d, %d) = %q %q %d %v; want %q %q %d %v", tc.n, tc.cores, g, l, lc, ok, tc.gateway, tc.load, tc.loadCores, tc.ok)
		}
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 10s test @ http://127.0.0.1:9080/hello\n  1 threads and 16 connections\n" +
		`GWBENCH {"requests":123456,"duration_us":10000000,"bytes":9,"connect_errors":1,"read_errors":2,"write_errors":3,"status_errors":4,"timeouts":5,"p50_us":640,"p90_us":800,"p99_us":1500,"max_us":9000}` + "\n"
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 123456 || r.P50US != 640 || r.P99US != 1500 || r.errors() != 15 || r.DurationUS != 1e7 {
		t.Errorf("parsed %+v", r)
	}
	for _, bad := range []string{
		"Running 10s test\n",
		"GWBENCH {not json}\n",
		`GWBENCH {"requests":1,"duration_us":0}` + "\n",
	} {
		if _, err := parseWrk(bad); err == nil {
			t.Errorf("parseWrk(%q) accepted", bad)
		}
	}
}

const abOutput = `Server Software:        nginx/1.22.1
Concurrency Level:      1000
Time taken for tests:   3.339 seconds
Complete requests:      20000
Failed requests:        7
Write errors:           0
Non-2xx responses:      3
Requests per second:    5989.33 [#/sec] (mean)
Percentage of the requests served within a certain time (ms)
  50%     30
  66%     35
  99%   1154
 100%   1200 (longest request)
`

func TestParseAB(t *testing.T) {
	r, err := parseAB(abOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := abResult{Complete: 20000, Failed: 7, Non2xx: 3, RPS: 5989.33, Seconds: 3.339, P50MS: 30, P99MS: 1154}
	if r != want {
		t.Errorf("parseAB = %+v, want %+v", r, want)
	}
	if _, err := parseAB("apr_socket_recv: Connection reset by peer (104)\n"); err == nil {
		t.Error("parseAB accepted output without a summary")
	}
}

func TestProcParsers(t *testing.T) {
	stat := []byte("4242 (gw: worker (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 70 0 0 20 0 3 0 100 0 0")
	ticks, err := parseProcessTicks(stat)
	if err != nil || ticks != 320 {
		t.Errorf("parseProcessTicks = %d, %v; want 320", ticks, err)
	}
	if _, err := parseProcessTicks([]byte("4242 gw S 1")); err == nil {
		t.Error("parseProcessTicks accepted a line without a command name")
	}
	kib, err := parseStatusKiB([]byte("Name:\tgw\nVmPeak:\t 900 kB\nVmRSS:\t   15468 kB\n"), "VmRSS:")
	if err != nil || kib != 15468 {
		t.Errorf("parseStatusKiB = %d, %v", kib, err)
	}
	if _, err := parseStatusKiB([]byte("Name:\tgw\n"), "VmRSS:"); err == nil {
		t.Error("parseStatusKiB found a missing key")
	}
	before, err := parseCoreTimes([]byte("cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 0 0 0 50 0 0 0 0 0 0\nintr 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseCoreTimes([]byte("cpu0 95 0 5 40 0 0 0 0 0 0\ncpu1 10 0 0 140 0 0 0 0 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	busy := busyFraction(before, after)
	if len(busy) != 2 || busy[0] != 1 || busy[1] != 0.1 {
		t.Errorf("busyFraction = %v, want [1 0.1]", busy)
	}
	if _, err := parseCoreTimes([]byte("cpu 1 2 3 4\n")); err == nil {
		t.Error("parseCoreTimes accepted a stat without per-CPU lines")
	}
}

func TestMedianAndRatios(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
	if m := median(nil); m != 0 {
		t.Errorf("median empty = %v", m)
	}
	// Round 2 drifted for everyone; pairing by round keeps the ratio at 1.1 and 0.5.
	nginx := []Run{{Round: 1, RPS: 100, P99US: 10, CPUPerRequestUS: 20}, {Round: 2, RPS: 50, P99US: 20, CPUPerRequestUS: 40}, {Round: 3, RPS: 100, P99US: 10, CPUPerRequestUS: 20}}
	gw := []Run{{Round: 1, RPS: 110, P99US: 5, CPUPerRequestUS: 10}, {Round: 2, RPS: 55, P99US: 10, CPUPerRequestUS: 20}, {Round: 3, RPS: 110, P99US: 5, CPUPerRequestUS: 10}}
	r := ratios(gw, nginx)
	if r == nil || r.RPS < 1.0999 || r.RPS > 1.1001 || r.P99 != 0.5 || r.CPUPerRequest != 0.5 {
		t.Errorf("ratios = %+v", r)
	}
	if ratios(gw, nil) != nil {
		t.Error("ratios without nginx runs")
	}
}

func TestMarkdownGoalsAndSkips(t *testing.T) {
	run := func(round int, rps, cpu float64) Run {
		return Run{Round: round, RPS: rps, P99US: 1000, CPUPerRequestUS: cpu, WorkerRSSKiB: 12 << 10, MasterRSSKiB: 60 << 10, GatewayBusy: 1, LoadBusy: 0.8}
	}
	row := Row{Workers: 1, GatewayCPUs: "0", LoadCPUs: "1", Scenarios: []Scenario{
		{Name: gwPlain, Runs: []Run{run(1, 100, 40)}},
		{Name: gwPlugins, Runs: []Run{run(1, 90, 44)}},
		{Name: gwScraped, Runs: []Run{{Round: 1, RPS: 88, P99US: 1100, CPUPerRequestUS: 44}}},
		{Name: nginxProxy, Runs: []Run{run(1, 100, 40)}},
		{Name: nginxDirect, Runs: []Run{run(1, 200, 20)}},
	}}
	row.finish()
	md := markdown(&Report{Rows: []Row{row, {Workers: 2, Skipped: "too few CPUs"}}}, nil)
	for _, want := range []string{
		"gw: CPU µs per request ≤ nginx proxy's — 1.00× (met)",
		"gw limit-count+prometheus: CPU µs per request ≤ 1.05× nginx proxy's — 1.10× (missed)",
		"gw limit-count+prometheus: requests/s ≥ 0.95× nginx proxy's — 0.90× (missed)",
		"worker RSS < 30 MiB — 12.0 MiB (met)",
		"master RSS < 50 MiB — 60.0 MiB (missed)",
		"gw limit-count+prometheus, scraped 1/s: p99 < 1.05× unscraped (issue 5) — 1.10× (missed)",
		"## 2 workers\n\nNot measured: too few CPUs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestRouteBodies(t *testing.T) {
	if b := routeBody("/hello", "127.0.0.1:1980", true); !strings.Contains(b, `"count":2000000000000`) || !strings.Contains(b, `"prometheus":{}`) {
		t.Errorf("plugin route %s", b)
	}
	if b := routeBody("/hello", "127.0.0.1:1980", false); !strings.Contains(b, `"plugins":{}`) {
		t.Errorf("plain route %s", b)
	}
	if b := ocelotRoute("127.0.0.1:1980", true); !strings.Contains(b, `"regex_uri":["^/api1/(.*)","/api/$1"]`) {
		t.Errorf("ocelot route %s", b)
	}
	if string(makeBody(23)) != "12345678901234567890123" {
		t.Errorf("makeBody(23) = %q", makeBody(23))
	}
}

func TestMedianInterval(t *testing.T) {
	values := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending, so that sorting matters
		}
		return xs
	}
	if _, ok := medianInterval(values(5)); ok {
		t.Error("5 rounds: no interval holds the median with 95% confidence, yet one was given")
	}
	for _, c := range []struct {
		n        int
		low, top float64
	}{
		{6, 1, 6},   // P(all six on one side) = 1/64 each way
		{7, 1, 7},   // 1/128
		{21, 6, 16}, // P(X <= 5) = 1.3%, P(X <= 6) = 3.9%
	} {
		got, ok := medianInterval(values(c.n))
		if !ok || got != [2]float64{c.low, c.top} {
			t.Errorf("%d rounds: interval %v %v, want [%v %v]", c.n, got, ok, c.low, c.top)
		}
	}
}

func TestGoalsAreJudgedOnTheInterval(t *testing.T) {
	for _, c := range []struct {
		quotients []float64 // gw's CPU per request over nginx's, one per round
		want      string
	}{
		{[]float64{0.95, 0.96, 0.97, 0.98, 0.99, 1.00, 0.94}, "0.97×, 95% interval 0.94–1.00 (met)"},
		{[]float64{0.95, 0.96, 0.97, 0.98, 0.99, 1.01, 0.94}, "0.97×, 95% interval 0.94–1.01 (within noise)"},
		{[]float64{1.03, 0.99, 1.01, 1.02, 1.01, 1.04, 1.02}, "1.02×, 95% interval 0.99–1.04 (within noise)"},
		{[]float64{1.03, 1.02, 1.01, 1.02, 1.01, 1.04, 1.02}, "1.02×, 95% interval 1.01–1.04 (missed)"},
		{[]float64{0.90, 1.10}, "1.00× (met)"}, // too few rounds: the median decides
	} {
		var gw, nginx []Run
		for i, q := range c.quotients {
			gw = append(gw, Run{Round: i + 1, RPS: 100, P99US: 1000, CPUPerRequestUS: 40 * q})
			nginx = append(nginx, Run{Round: i + 1, RPS: 100, P99US: 1000, CPUPerRequestUS: 40})
		}
		measured, verdict := goals[0].ok(&Scenario{Name: gwPlain, VsNginx: ratios(gw, nginx)})
		if got := measured + " (" + verdict + ")"; got != c.want {
			t.Errorf("%v: %q, want %q", c.quotients, got, c.want)
		}
	}
}

func TestVersionSays(t *testing.T) {
	version := "gwctl version x\nbuilt with go1.26.8 linux/amd64\npoller order: readiness order\nmonitor after a system call: keeps its pace (4 wake-ups in 30ms)\n"
	if got := versionSays(version, "poller order: "); got != "readiness order" {
		t.Errorf("poller order %q", got)
	}
	if got := versionSays(version, "monitor after a system call: "); got != "keeps its pace" {
		t.Errorf("monitor %q", got)
	}
	if got := versionSays("gwctl version 1\n", "poller order: "); got != "unknown" {
		t.Errorf("older gwctl: %q", got)
	}
}

func TestOcelotRounds(t *testing.T) {
	var gw, nginx []OcelotRun
	for round := 1; round <= 7; round++ {
		g := OcelotRun{Round: round, CPUPerRequestUS: 40 + float64(round), ForeignCores: 0.1}
		g.RPS, g.P99MS, g.Failed = 1000, 20, 1
		n := OcelotRun{Round: round, CPUPerRequestUS: 50}
		n.RPS, n.P99MS = 900, 25
		gw, nginx = append(gw, g), append(nginx, n)
	}
	m := medianOcelot(gw)
	if m.CPUPerRequestUS != 44 || m.Failed != 7 || m.P99MS != 20 {
		t.Errorf("median of gw's runs: %+v, want 44 CPU µs/req, 7 failures summed, p99 20 ms", m)
	}
	o := &Ocelot{Requests: 20000, Clients: 1000, Workers: 1, GW: m, Nginx: medianOcelot(nginx),
		GWRuns: gw, NginxRuns: nginx, VsNginx: ratios(ocelotAsRuns(gw), ocelotAsRuns(nginx))}
	if o.VsNginx == nil || o.VsNginx.CPUPerRequest != 44.0/50 || o.VsNginx.P99 != 0.8 || o.VsNginx.Interval == nil {
		t.Fatalf("ratios %+v, want CPU 0.88×, p99 0.8× with an interval over 7 rounds", o.VsNginx)
	}
	var b strings.Builder
	writeOcelot(&b, o)
	for _, want := range []string{"CPU µs per request ≤ nginx's (issue 21): 0.88×, 95% interval 0.82–0.94 (met)", "over 7 rounds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestOcelotBaseline(t *testing.T) {
	var gw, base, nginx []OcelotRun
	for round := 1; round <= 7; round++ {
		g := OcelotRun{Round: round, CPUPerRequestUS: 40, WorkerRSSKiB: 30 << 10}
		g.RPS, g.P99MS = 1000, 20
		bl := OcelotRun{Round: round, CPUPerRequestUS: 50, WorkerRSSKiB: 25 << 10}
		bl.RPS, bl.P99MS = 900, 20
		n := OcelotRun{Round: round, CPUPerRequestUS: 50}
		n.RPS, n.P99MS = 900, 25
		gw, base, nginx = append(gw, g), append(base, bl), append(nginx, n)
	}
	o := &Ocelot{Requests: 20000, Clients: 1000, Workers: 1, GW: medianOcelot(gw), Nginx: medianOcelot(nginx),
		GWRuns: gw, NginxRuns: nginx, VsNginx: ratios(ocelotAsRuns(gw), ocelotAsRuns(nginx)),
		Baseline: &OcelotBaseline{What: describeBaseline("a5ab319", []string{"GOGC=25"}).What, Median: medianOcelot(base), Runs: base,
			VsNginx: ratios(ocelotAsRuns(base), ocelotAsRuns(nginx)), GWOverBaseline: ratios(ocelotAsRuns(gw), ocelotAsRuns(base))}}
	var b strings.Builder
	writeOcelot(&b, o)
	for _, want := range []string{
		"| gw baseline (a5ab319 with GOGC=25) | 900 |",
		"| 40.0 | 0.0 | 30.0 MiB |",
		"- baseline over nginx: CPU µs/req 1.00×, 95% interval 1.00–1.00; p99 0.80×",
		"- gw over the baseline: CPU µs/req 0.80×, 95% interval 0.80–0.80; p99 1.00×",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if got := describeBaseline("", []string{"GOGC=25"}).What; got != "with GOGC=25" {
		t.Errorf("an environment alone: %q", got)
	}
	if _, _, err := parseFlags([]string{"-ocelot", "-baseline-env", "GOGC"}); err == nil {
		t.Error("-baseline-env GOGC: want an error naming NAME=VALUE")
	}
	if _, _, err := parseFlags([]string{"-h2", "-baseline-env", "GOGC=25"}); err == nil {
		t.Error("-baseline-env with -h2: want an error")
	}
	if _, _, err := parseFlags([]string{"-baseline-env", "GOGC=25"}); err != nil {
		t.Errorf("-baseline-env with the keep-alive sweep: %v", err)
	}
}

// TestSweepBaseline is the keep-alive sweep with -baseline: the baseline is a scenario of
// its own, with its RSS in the table, and gw with no plugin is compared with it round by
// round.
func TestSweepBaseline(t *testing.T) {
	o := &options{baselineGwctl: "bin/gwctl-baseline", baselineName: "b1768f1"}
	name := sweepBaselineName(o)
	if name != "gw baseline (b1768f1)" || !isSweepBaseline(name) || isSweepBaseline(gwPlain) {
		t.Fatalf("the baseline's scenario is %q", name)
	}
	var gw, base, nginx []Run
	for round := 1; round <= 7; round++ {
		gw = append(gw, Run{Round: round, RPS: 100, P99US: 1000, CPUPerRequestUS: 20, WorkerRSSKiB: 26 << 10})
		base = append(base, Run{Round: round, RPS: 100, P99US: 1000, CPUPerRequestUS: 25, WorkerRSSKiB: 31 << 10})
		nginx = append(nginx, Run{Round: round, RPS: 100, P99US: 1000, CPUPerRequestUS: 20})
	}
	// The baseline's heap grows over the rounds: the table shows where it ended, not the
	// median.
	base[len(base)-1].WorkerRSSKiB = 34 << 10
	row := Row{Workers: 1, GatewayCPUs: "0", LoadCPUs: "1", Scenarios: []Scenario{
		{Name: gwPlain, Runs: gw}, {Name: name, Runs: base}, {Name: nginxProxy, Runs: nginx},
	}}
	row.finish()
	if r := row.scenario(gwPlain).VsBaseline; r == nil || r.CPUPerRequest != 0.8 {
		t.Fatalf("gw over the baseline: %+v", r)
	}
	if r := row.scenario(name).VsNginx; r == nil || r.CPUPerRequest != 1.25 {
		t.Fatalf("the baseline over nginx: %+v", r)
	}
	md := markdown(&Report{Rows: []Row{row}}, nil)
	for _, want := range []string{
		"| gw baseline (b1768f1) | 25.0 | 1.25× |",
		"| 34.0 MiB |",
		"gw over the baseline in the same round (median): CPU µs/req 0.80×, 95% interval 0.80–0.80; p99 1.00×",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestParseH2Load(t *testing.T) {
	out := `finished in 5.00s, 8337.20 req/s, 1.21MB/s
requests: 41686 total, 41846 started, 41686 done, 41680 succeeded, 6 failed, 0 errored, 0 timeout
status codes: 41680 2xx, 0 3xx, 0 4xx, 0 5xx
                     min         max         mean         sd        +/- sd
time for request:      850us     58.40ms     18.80ms      5.20ms    80.00%
`
	run, err := parseH2Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if run.RPS != 8337.2 || run.Succeeded != 41680 || run.Failed != 6 || run.MaxMS != 58.4 || run.MeanMS != 18.8 {
		t.Fatalf("parsed %+v", run)
	}
	if _, err := parseH2Load("h2load: connection refused\n"); err == nil {
		t.Fatal("no summary: want an error")
	}
}
