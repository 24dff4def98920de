package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// goal is one of gw's performance targets for one worker on this machine's class of hardware.
type goal struct {
	scenario string
	what     string
	// ok says what was measured and whether the goal was met; verdict words it.
	ok func(sc *Scenario) (measured, verdict string)
}

var goals = []goal{
	{gwPlain, "CPU µs per request ≤ nginx proxy's", vsNginx(cpuPerRequest, atMost(1.0))},
	{gwPlain, "requests/s ≥ 1.0× nginx proxy's", vsNginx(requestsPerSecond, atLeast(1.0))},
	{gwPlain, "p99 ≤ nginx proxy's", vsNginx(p99, atMost(1.0))},
	{gwPlugins, "CPU µs per request ≤ 1.05× nginx proxy's", vsNginx(cpuPerRequest, atMost(1.05))},
	{gwPlugins, "requests/s ≥ 0.95× nginx proxy's", vsNginx(requestsPerSecond, atLeast(0.95))},
	{gwPlugins, "p99 ≤ nginx proxy's", vsNginx(p99, atMost(1.0))},
	{gwPlugins, "worker RSS < 30 MiB", memBelow(func(s *Summary) int64 { return s.WorkerRSSKiB }, 30<<10)},
	{gwPlugins, "master RSS < 50 MiB", memBelow(func(s *Summary) int64 { return s.MasterRSSKiB }, 50<<10)},
	{gwScraped, "p99 < 1.05× unscraped (issue 5)", func(sc *Scenario) (string, string) {
		return judge(sc.VsUnscraped, p99, below(1.05))
	}},
	{gwChain, "CPU µs per request ≤ 1.10× gw's with no plugin (issue 22)", func(sc *Scenario) (string, string) {
		return judge(sc.VsPlain, cpuPerRequest, atMost(1.10))
	}},
}

// figure picks one ratio, and its interval, out of a Ratios.
type figure func(r *Ratios) (median float64, interval *[2]float64)

func cpuPerRequest(r *Ratios) (float64, *[2]float64) {
	if r.Interval == nil {
		return r.CPUPerRequest, nil
	}
	return r.CPUPerRequest, &r.Interval.CPUPerRequest
}

func requestsPerSecond(r *Ratios) (float64, *[2]float64) {
	if r.Interval == nil {
		return r.RPS, nil
	}
	return r.RPS, &r.Interval.RPS
}

func p99(r *Ratios) (float64, *[2]float64) {
	if r.Interval == nil {
		return r.P99, nil
	}
	return r.P99, &r.Interval.P99
}

// A bound says whether a ratio meets a goal.
type bound func(v float64) bool

func atMost(limit float64) bound  { return func(v float64) bool { return v <= limit } }
func below(limit float64) bound   { return func(v float64) bool { return v < limit } }
func atLeast(limit float64) bound { return func(v float64) bool { return v >= limit } }

func vsNginx(f figure, ok bound) func(*Scenario) (string, string) {
	return func(sc *Scenario) (string, string) { return judge(sc.VsNginx, f, ok) }
}

// judge words a ratio against its goal. With enough rounds for a 95% interval, the goal is
// met or missed only when the whole interval says so; an interval on both sides of the
// line is "within noise", whatever side the median fell on. With fewer rounds the median
// alone decides.
func judge(r *Ratios, f figure, ok bound) (measured, verdict string) {
	if r == nil {
		return "no ratio", "missed"
	}
	median, interval := f(r)
	measured = fmt.Sprintf("%.2f×", median)
	if interval == nil {
		if ok(median) {
			return measured, "met"
		}
		return measured, "missed"
	}
	measured += fmt.Sprintf(", 95%% interval %.2f–%.2f", interval[0], interval[1])
	switch low, high := ok(interval[0]), ok(interval[1]); {
	case low && high:
		return measured, "met"
	case !low && !high:
		return measured, "missed"
	}
	return measured, "within noise"
}

func memBelow(f func(*Summary) int64, kib int64) func(*Scenario) (string, string) {
	return func(sc *Scenario) (string, string) {
		v := f(&sc.Median)
		if v < kib {
			return mib(v), "met"
		}
		return mib(v), "missed"
	}
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func ratioCell(r *Ratios, f func(*Ratios) float64) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%.2f×", f(r))
}

// markdown renders the report; chart names the PNG files, relative to the Markdown file.
func markdown(r *Report, charts []string) string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "# gw against nginx, %s\n\n", m.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d CPUs, %s, Linux %s; load average %.2f at the start, %.2f at most before a run.\n",
		m.Cores, m.Model, m.Kernel, r.LoadAverage.Start, r.LoadAverage.Max)
	runtimeChanges := "poller in " + m.PollerOrder
	if m.MonitorPace != "" {
		runtimeChanges += ", monitor " + m.MonitorPace + " after a system call"
	}
	fmt.Fprintf(&b, "- Software: gw %s built with %s, %s; %s; %s.\n", m.Commit, m.GoVersion, runtimeChanges, m.Nginx, m.Wrk)
	st := r.Settings
	accessLog := "off in gw and nginx"
	if st.AccessLog {
		accessLog = "on in gw and nginx (combined format, 64k buffer, 1s flush)"
	}
	switch {
	case r.GRPC != nil:
		fmt.Fprintf(&b, "- Load: benchmark/grpcload, %d unary calls in flight on one h2c connection, one warm-up run of %s each, then %d rounds of %s; response message %d bytes; access log %s.\n",
			r.GRPC.Streams, st.Warmup, st.Rounds, st.Duration, st.BodyBytes, accessLog)
	case r.H2 != nil:
		fmt.Fprintf(&b, "- Load: h2load -c %d -m %d, one warm-up run of %s each, then %d rounds of %s; body %d bytes; access log %s.\n",
			r.H2.Clients, r.H2.Streams, st.Warmup, st.Rounds, st.Duration, st.BodyBytes, accessLog)
	case r.Ocelot == nil:
		fmt.Fprintf(&b, "- Load: wrk -c %d, one thread per load CPU, %s warm-up then %d rounds of %s, scenarios alternating; body %d bytes; access log %s.\n",
			st.Connections, st.Warmup, st.Rounds, st.Duration, st.BodyBytes, accessLog)
		if st.Chain {
			b.WriteString("- Every scenario's requests carry `apikey` (the chain's consumer's key) and `Origin`, so that the chain does its work and the others see the same requests.\n")
		}
	case r.Ocelot.TLS:
		fmt.Fprintf(&b, "- Load: ab -n %d -c %d https:// (a new connection and a full TLS handshake per request, ECDSA P-256 certificate), one warm-up run each, then %d rounds, the two alternating; body %d bytes; access log %s.\n",
			r.Ocelot.Requests, r.Ocelot.Clients, st.Rounds, st.BodyBytes, accessLog)
	default:
		fmt.Fprintf(&b, "- Load: seed 001's ab -n %d -c %d (new connection per request), one warm-up run each, then %d rounds, the two alternating; body %d bytes; access log %s.\n",
			r.Ocelot.Requests, r.Ocelot.Clients, st.Rounds, st.BodyBytes, accessLog)
	}
	b.WriteString("\nFigures are medians over rounds. A ratio (×) is gw's figure over nginx proxy's in the same round, " +
		"median over rounds: compare ratios, not absolute figures, which belong to this machine and its load. " +
		"CPU µs/req is the server's own CPU time (master and workers) per request, the sharpest figure when the load generator shares the machine.\n")
	for i := range r.Rows {
		writeRow(&b, &r.Rows[i])
	}
	if len(charts) > 0 {
		b.WriteString("\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(filepath.Base(c), ".png"), c)
		}
	}
	if r.Ocelot != nil {
		writeOcelot(&b, r.Ocelot)
	}
	if r.H2 != nil {
		writeH2(&b, r.H2)
	}
	if r.GRPC != nil {
		writeGRPC(&b, r.GRPC)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n> %s\n", n)
	}
	return b.String()
}

func writeRow(b *strings.Builder, row *Row) {
	plural := "s"
	if row.Workers == 1 {
		plural = ""
	}
	fmt.Fprintf(b, "\n## %d worker%s\n\n", row.Workers, plural)
	if row.Skipped != "" {
		fmt.Fprintf(b, "Not measured: %s\n", row.Skipped)
		return
	}
	fmt.Fprintf(b, "Servers on CPU %s, wrk and the upstream on CPU %s.\n\n", row.GatewayCPUs, row.LoadCPUs)
	b.WriteString("| scenario | CPU µs/req | × | req/s | × | p50 µs | p99 µs | × | server CPU busy | load CPU busy | worker RSS | master RSS | errors |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i := range row.Scenarios {
		sc := &row.Scenarios[i]
		s := sc.Median
		fmt.Fprintf(b, "| %s | %.1f | %s | %.0f | %s | %.0f | %.0f | %s | %.0f%% | %.0f%% | %s | %s | %d |\n",
			sc.Name, s.CPUPerRequestUS, ratioCell(sc.VsNginx, func(r *Ratios) float64 { return r.CPUPerRequest }),
			s.RPS, ratioCell(sc.VsNginx, func(r *Ratios) float64 { return r.RPS }),
			s.P50US, s.P99US, ratioCell(sc.VsNginx, func(r *Ratios) float64 { return r.P99 }),
			100*s.GatewayBusy, 100*s.LoadBusy, mib(s.WorkerRSSKiB), mib(s.MasterRSSKiB), s.Errors)
	}
	for i := range row.Scenarios {
		sc := &row.Scenarios[i]
		if sc.Median.LoadBusy >= 0.95 && sc.Median.GatewayBusy < 0.9 {
			fmt.Fprintf(b, "\n%s: the load CPU was saturated (%.0f%%) while the server's was %.0f%% busy, so its req/s is wrk's limit, not the server's; CPU µs/req still holds.\n",
				sc.Name, 100*sc.Median.LoadBusy, 100*sc.Median.GatewayBusy)
		}
		if sc.Repeated > 0 {
			fmt.Fprintf(b, "\n%s: %d run(s) were disturbed by other processes and taken again.\n", sc.Name, sc.Repeated)
		}
		if r := sc.VsBaseline; r != nil {
			cpu, _ := judge(r, cpuPerRequest, atLeast(0))
			p, _ := judge(r, p99, atLeast(0))
			fmt.Fprintf(b, "\n%s over the baseline in the same round (median): CPU µs/req %s; p99 %s.\n", sc.Name, cpu, p)
		}
		if sc.VsPlain != nil {
			fmt.Fprintf(b, "\n%s: CPU µs/req %.2f× and p99 %.2f× gw's with no plugin in the same round (median).\n",
				sc.Name, sc.VsPlain.CPUPerRequest, sc.VsPlain.P99)
		}
		if sc.VsUnscraped != nil {
			fmt.Fprintf(b, "\n%s: p99 %.2f× and CPU µs/req %.2f× the unscraped run's in the same round (median).\n",
				sc.Name, sc.VsUnscraped.P99, sc.VsUnscraped.CPUPerRequest)
		}
		if sc.Median.ForeignCores > 0.1 {
			fmt.Fprintf(b, "\n%s: other processes used %.2f CPUs during its runs; re-run on a quiet machine.\n", sc.Name, sc.Median.ForeignCores)
		}
	}
	if row.Workers == 1 {
		b.WriteString("\nIssue 7's goals for one worker. With six rounds or more a ratio comes with the 95% interval " +
			"of its median over rounds; a goal is met or missed only when the whole interval says so, " +
			"and is within noise when the interval lies on both sides of its line:\n\n")
		for _, g := range goals {
			sc := row.scenario(g.scenario)
			if sc == nil {
				continue
			}
			measured, verdict := g.ok(sc)
			fmt.Fprintf(b, "- %s: %s — %s (%s)\n", g.scenario, g.what, measured, verdict)
		}
	}
}

func writeOcelot(b *strings.Builder, o *Ocelot) {
	cpuGoal, cpuBound := "CPU µs per request ≤ nginx's (issue 21)", atMost(1.0)
	if o.TLS {
		fmt.Fprintf(b, "\n## A TLS handshake per request: ab -n %d -c %d https://, %d worker(s)\n\n", o.Requests, o.Clients, o.Workers)
		cpuGoal, cpuBound = "CPU µs per request ≤ 0.8× nginx's (issue 21: keep it there)", atMost(0.8)
	} else {
		fmt.Fprintf(b, "\n## Seed 001: ab -n %d -c %d, %d worker(s)\n\n", o.Requests, o.Clients, o.Workers)
	}
	if o.Note != "" {
		fmt.Fprintf(b, "Note: %s.\n\n", o.Note)
	} else if o.Rewritten {
		b.WriteString("gw rewrites /api1/values to /api/values with proxy-rewrite, as nginx does with proxy_pass.\n\n")
	}
	b.WriteString("| server | req/s | failed | non-2xx | write errors | p50 ms | p99 ms | CPU µs/req | ab's CPU µs/req | worker RSS |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	type server struct {
		name string
		run  OcelotRun
	}
	servers := []server{{"gw", o.GW}, {"nginx proxy", o.Nginx}}
	if o.Baseline != nil {
		servers = slices.Insert(servers, 1, server{"gw baseline (" + o.Baseline.What + ")", o.Baseline.Median})
	}
	for _, r := range servers {
		fmt.Fprintf(b, "| %s | %.0f | %d | %d | %d | %.0f | %.0f | %.1f | %.1f | %s |\n",
			r.name, r.run.RPS, r.run.Failed, r.run.Non2xx, r.run.WriteErrors, r.run.P50MS, r.run.P99MS, r.run.CPUPerRequestUS,
			r.run.ClientCPUPerRequestUS, mib(r.run.WorkerRSSKiB))
	}
	if o.VsNginx == nil {
		return
	}
	fmt.Fprintf(b, "\nRatios to nginx, paired by round over %d rounds (%d runs taken again for others' load):\n\n", len(o.GWRuns), o.Repeated)
	for _, g := range []struct {
		what string
		f    figure
		ok   bound
	}{
		{cpuGoal, cpuPerRequest, cpuBound},
		{"p99 ≤ nginx's (issue 21; ab's p99 is whole milliseconds)", p99, atMost(1.0)},
		{"requests/s", requestsPerSecond, nil},
	} {
		if g.ok == nil {
			measured, _ := judge(o.VsNginx, g.f, atLeast(0))
			fmt.Fprintf(b, "- %s: %s\n", g.what, measured)
			continue
		}
		measured, verdict := judge(o.VsNginx, g.f, g.ok)
		fmt.Fprintf(b, "- %s: %s (%s)\n", g.what, measured, verdict)
	}
	if bl := o.Baseline; bl != nil {
		fmt.Fprintf(b, "\nThe baseline (%s), measured in the same rounds:\n\n", bl.What)
		for _, r := range []struct {
			what string
			r    *Ratios
		}{{"baseline over nginx", bl.VsNginx}, {"gw over the baseline", bl.GWOverBaseline}} {
			cpu, _ := judge(r.r, cpuPerRequest, atLeast(0))
			p, _ := judge(r.r, p99, atLeast(0))
			rps, _ := judge(r.r, requestsPerSecond, atLeast(0))
			fmt.Fprintf(b, "- %s: CPU µs/req %s; p99 %s; requests/s %s\n", r.what, cpu, p, rps)
		}
	}
}

// writeOutputs writes the dated Markdown and JSON, the charts, and the latest copies.
func writeOutputs(r *Report, dir, base, latest string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var charts, written []string
	names := []string{base, latest}
	if base == latest {
		names = names[:1]
	}
	if r.Ocelot == nil && r.H2 == nil && r.GRPC == nil {
		for _, c := range []chartSpec{rpsChart, p99Chart} {
			for _, name := range names {
				path := filepath.Join(dir, name+"-"+c.suffix+".png")
				if err := drawChart(r, c, path); err != nil {
					return written, fmt.Errorf("chart %s: %w", path, err)
				}
				written = append(written, path)
			}
		}
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return written, err
	}
	for _, name := range names {
		charts = charts[:0]
		if r.Ocelot == nil && r.H2 == nil && r.GRPC == nil {
			charts = append(charts, name+"-"+rpsChart.suffix+".png", name+"-"+p99Chart.suffix+".png")
		}
		md := filepath.Join(dir, name+".md")
		if err := os.WriteFile(md, []byte(markdown(r, charts)), 0o644); err != nil {
			return written, err
		}
		jf := filepath.Join(dir, name+".json")
		if err := os.WriteFile(jf, append(js, '\n'), 0o644); err != nil {
			return written, err
		}
		written = append(written, md, jf)
	}
	return written, nil
}
