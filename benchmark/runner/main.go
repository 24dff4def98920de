package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == scrapeFlag {
		if err := runScraper(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "runner -scrape:", err)
			os.Exit(1)
		}
		return
	}
	o, render, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(2)
	}
	if render != "" {
		err = rerender(render)
	} else {
		err = benchmark(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, string, error) {
	o := &options{}
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	workers := fs.String("workers", "1,2,4", "comma-separated worker counts")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured wrk run")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "length of each scenario's warm-up run")
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds per scenario (medians are taken over them)")
	fs.IntVar(&o.connections, "connections", 16, "wrk connections (APISIX's benchmark uses 16)")
	body := fs.String("body", "10", "upstream body size: bytes, or with a k suffix (APISIX's script: 10, its docs: 1k)")
	fs.Float64Var(&o.maxForeign, "max-foreign", 0.2, "CPUs other processes may use during a run before it is taken again")
	fs.IntVar(&o.retries, "retries", 2, "how many times a disturbed run is taken again before its figures are kept anyway")
	fs.BoolVar(&o.accessLog, "access-log", true, "access log on in both gw and nginx (buffered 64k, flushed every 1s)")
	fs.BoolVar(&o.ocelot, "ocelot", false, "run Ocelot's published test (ab -n 20000 -c 1000, gw against nginx) instead of the sweep")
	fs.BoolVar(&o.chain, "chain", false, "also measure gw with issue 22's chain (key-auth, limit-req, cors, request-id, prometheus); every scenario's requests then carry the consumer's key and an Origin")
	fs.BoolVar(&o.tlsHandshake, "tls-handshake", false, "run issue 21's TLS handshake per request, ab -n 4000 -c 50 https://, instead of the sweep")
	fs.BoolVar(&o.h2, "h2", false, "run the HTTP/2 comparison (h2load -c 16 -m 10, h2c and h2 over TLS) instead of the sweep")
	fs.StringVar(&o.h2load, "h2load", "h2load", "h2load binary (nghttp2-client)")
	fs.BoolVar(&o.grpc, "grpc", false, "run the gRPC unary comparison (gw's scheme grpc against nginx's grpc_pass) instead of the sweep")
	fs.StringVar(&o.grpcload, "grpcload", "benchmark/results/tmp/bin/grpcload", "the gRPC node and load client (benchmark/grpcload)")
	fs.StringVar(&o.gwctl, "gwctl", "bin/gwctl", "gwctl binary")
	fs.StringVar(&o.upstream, "upstream", "benchmark/results/tmp/bin/upstream", "benchmark upstream binary")
	fs.StringVar(&o.profgw, "profgw", "benchmark/results/tmp/bin/profgw", "profiling build of gw, used when GW_BENCH_PROFILE=1")
	fs.StringVar(&o.nginx, "nginx", "nginx", "nginx binary")
	fs.StringVar(&o.wrk, "wrk", "wrk", "wrk binary")
	fs.StringVar(&o.ab, "ab", "ab", "ApacheBench binary")
	fs.StringVar(&o.templates, "templates", "benchmark/nginx", "directory of the nginx config templates")
	fs.StringVar(&o.out, "out", "benchmark/results", "results directory")
	fs.StringVar(&o.work, "work", "benchmark/results/tmp", "scratch directory (prefixes, logs, profiles)")
	fs.StringVar(&o.baselineGwctl, "baseline", "", "also measure this gwctl (an earlier build) in the same rounds, and gw over it: in the keep-alive sweep as a second gw with no plugin; not with -h2 or -grpc")
	fs.StringVar(&o.baselineName, "baseline-name", "", "what -baseline is (run.sh passes the revision it built)")
	baselineEnv := fs.String("baseline-env", "", "also measure a gw with these NAME=VALUE settings (space-separated) added to its environment, e.g. GOGC=25, as -baseline does")
	render := fs.String("render", "", "only redraw the Markdown and charts of this JSON report")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	var err error
	if *baselineEnv != "" {
		o.baselineEnv = strings.Fields(*baselineEnv)
		for _, kv := range o.baselineEnv {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, "", fmt.Errorf("-baseline-env: %q is not NAME=VALUE", kv)
			}
		}
	}
	if (o.baselineGwctl != "" || o.baselineEnv != nil) && (o.h2 || o.grpc) {
		return nil, "", fmt.Errorf("-baseline and -baseline-env work with the keep-alive sweep, -ocelot and -tls-handshake, not with -h2 or -grpc")
	}
	if o.workers, err = parseWorkers(*workers); err != nil {
		return nil, "", fmt.Errorf("-workers: %w", err)
	}
	if o.bodyBytes, err = parseSize(*body); err != nil {
		return nil, "", fmt.Errorf("-body: %w", err)
	}
	if o.rounds < 1 || o.connections < 1 || o.duration < time.Second || o.warmup < 0 {
		return nil, "", fmt.Errorf("-rounds and -connections must be ≥ 1 and -duration ≥ 1s")
	}
	// A hidden switch for benchmark work, not a user feature: the profile adds a run.
	o.profile = os.Getenv("GW_BENCH_PROFILE") == "1"
	// Another: count the workers' system calls over each ab run (perf stat; it slows the
	// workers a little, so not for the CPU figures).
	o.syscalls = os.Getenv("GW_BENCH_SYSCALLS") == "1"
	return o, *render, nil
}

// parseWorkers reads "1,2,4".
func parseWorkers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("%q is not a worker count between 1 and 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSize reads 10, 1k or 16K as bytes.
func parseSize(s string) (int, error) {
	mult, digits := 1, s
	if strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K") {
		mult, digits = 1024, s[:len(s)-1]
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n*mult > 16<<20 {
		return 0, fmt.Errorf("%q is not a size between 0 and 16384k", s)
	}
	return n * mult, nil
}

func describeMachine() Machine {
	m := Machine{Date: time.Now(), Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var sb strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			sb.WriteByte(byte(c))
		}
		m.Kernel = sb.String()
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	} else {
		m.Commit = "unknown"
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.GoVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	return m
}

// versionSays is what `gwctl --version` says after label ("poller order: "), up to the
// end of the line or an opening parenthesis; "unknown" when it says nothing.
func versionSays(version, label string) string {
	_, said, found := strings.Cut(version, label)
	if !found {
		return "unknown"
	}
	said, _, _ = strings.Cut(said, "\n")
	said, _, _ = strings.Cut(said, " (")
	return said
}

// toolVersion is the first line a tool prints about itself.
func toolVersion(argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

func benchmark(o *options) error {
	report := &Report{
		Machine: describeMachine(),
		Settings: Settings{
			Workers: o.workers, Duration: o.duration.String(), Warmup: o.warmup.String(), Rounds: o.rounds,
			Connections: o.connections, BodyBytes: o.bodyBytes, AccessLog: o.accessLog, Chain: o.chain,
		},
	}
	m := &report.Machine
	m.Nginx = strings.TrimPrefix(toolVersion(o.nginx, "-v"), "nginx version: ")
	m.Wrk, _, _ = strings.Cut(toolVersion(o.wrk, "-v"), " Copyright")
	version, _ := exec.Command(o.gwctl, "--version").CombinedOutput()
	m.PollerOrder = versionSays(string(version), "poller order: ")
	m.MonitorPace = versionSays(string(version), "monitor after a system call: ")
	report.LoadAverage.Start = loadAverage()
	report.LoadAverage.Max = report.LoadAverage.Start
	fmt.Printf("machine: %d CPUs, %s, Linux %s, %s, gw %s (poller: %s; monitor: %s); load average %.2f\n",
		m.Cores, m.Model, m.Kernel, m.GoVersion, m.Commit, m.PollerOrder, m.MonitorPace, report.LoadAverage.Start)
	if report.LoadAverage.Start > 0.5*float64(m.Cores) {
		fmt.Printf("WARNING: the machine is busy (load average %.2f on %d CPUs); figures will be noisy\n", report.LoadAverage.Start, m.Cores)
	}

	stamp := m.Date.Format("20060102-150405")
	work, err := filepath.Abs(filepath.Join(o.work, stamp))
	if err != nil {
		return err
	}
	if o.templates, err = filepath.Abs(o.templates); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}

	// Ctrl-C stops whatever is running before the runner exits.
	var current *sweep
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		fmt.Println("\ninterrupted: stopping the servers")
		if current != nil {
			current.cleanup()
		}
		os.Exit(130)
	}()

	var runnable []int
	for _, n := range o.workers {
		if _, _, _, ok := pinning(n, m.Cores); ok {
			runnable = append(runnable, n)
		}
	}
	if o.chain {
		scenarioOrder = slices.Insert(scenarioOrder, 2, gwChain)
	}
	if o.baselineGwctl != "" || o.baselineEnv != nil {
		scenarioOrder = slices.Insert(scenarioOrder, 1, sweepBaselineName(o))
	}
	perSweep := time.Duration(len(scenarioOrder))*o.warmup + time.Duration(o.rounds*len(scenarioOrder))*o.duration
	if o.profile {
		perSweep += o.warmup + o.duration
	}
	prog := &progress{left: time.Duration(len(runnable)) * perSweep}

	if o.ocelot || o.h2 || o.grpc || o.tlsHandshake {
		n := 1
		if len(runnable) > 0 {
			n = runnable[0]
		}
		gwCPUs, loadCPUs, loadCores, ok := pinning(n, m.Cores)
		if !ok {
			return fmt.Errorf("--ocelot needs at least 2 CPUs: one for the server, one for ab")
		}
		s := &sweep{opts: o, cores: m.Cores, workers: n, gwCPUs: gwCPUs, loadCPUs: loadCPUs, loadCores: loadCores,
			dir: filepath.Join(work, "ocelot"), progress: &progress{}, report: report}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
		current = s
		if o.grpc {
			s.dir = filepath.Join(work, "grpc")
			res, err := s.runGRPC()
			s.cleanup()
			if err != nil {
				return err
			}
			report.GRPC = res
			return finish(report, o.out, "grpc-"+stamp, "grpc-latest")
		}
		if o.h2 {
			s.dir = filepath.Join(work, "h2")
			res, err := s.runH2()
			s.cleanup()
			if err != nil {
				return err
			}
			report.H2 = res
			return finish(report, o.out, "h2-"+stamp, "h2-latest")
		}
		name := "ocelot"
		if o.tlsHandshake {
			name = "tls"
			s.dir = filepath.Join(work, "tls")
			if err := os.MkdirAll(s.dir, 0o755); err != nil {
				return err
			}
		}
		res, err := s.runOcelot(o.tlsHandshake)
		s.cleanup()
		if err != nil {
			return err
		}
		report.Ocelot = res
		return finish(report, o.out, name+"-"+stamp, name+"-latest")
	}

	for _, n := range o.workers {
		gwCPUs, loadCPUs, loadCores, ok := pinning(n, m.Cores)
		if !ok {
			reason := fmt.Sprintf("too few CPUs: %d worker(s) need %d CPUs (%d for the server, at least 1 for wrk and the upstream); this machine has %d.",
				n, n+1, n, m.Cores)
			fmt.Printf("%d worker(s): %s\n", n, reason)
			report.Rows = append(report.Rows, Row{Workers: n, Skipped: reason})
			continue
		}
		s := &sweep{opts: o, cores: m.Cores, workers: n, gwCPUs: gwCPUs, loadCPUs: loadCPUs, loadCores: loadCores,
			dir: filepath.Join(work, fmt.Sprintf("w%d", n)), progress: prog, report: report}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
		current = s
		fmt.Printf("%d worker(s): servers on CPU %s, wrk and upstream on CPU %s\n", n, gwCPUs, loadCPUs)
		err := s.start()
		var row Row
		if err == nil {
			row, err = s.run()
		}
		if err == nil && o.profile {
			// The profile is an extra: its failure must not cost the measured row. With
			// -chain, plain gw and the chain are profiled alike, so that pprof's
			// -diff_base shows what the chain adds.
			scenarios := []string{gwPlugins}
			if o.chain {
				scenarios = []string{gwPlain, gwChain}
			}
			var profiles []string
			for _, scenario := range scenarios {
				paths, perr := s.profileWorker(scenario)
				if perr != nil {
					fmt.Fprintf(os.Stderr, "profiling %s failed: %v\n", scenario, perr)
				}
				for _, p := range paths {
					fmt.Printf("    CPU profile of %s: go tool pprof -top %s %s\n", scenario, o.profgw, p)
				}
				profiles = append(profiles, paths...)
			}
			if o.chain && len(profiles) == 2 {
				fmt.Printf("    what the chain adds: go tool pprof -top -diff_base %s %s %s\n", profiles[0], o.profgw, profiles[1])
			}
		}
		s.cleanup()
		if err != nil {
			return fmt.Errorf("%d worker(s): %w (logs under %s)", n, err, s.dir)
		}
		report.Rows = append(report.Rows, row)
	}
	if report.LoadAverage.Max > 0.5*float64(m.Cores) {
		report.Notes = append(report.Notes, fmt.Sprintf("The load average reached %.2f on %d CPUs during the run: other work shared the machine, so re-run before trusting small differences.",
			report.LoadAverage.Max, m.Cores))
	}
	return finish(report, o.out, stamp, "latest")
}

func finish(report *Report, dir, base, latest string) error {
	written, err := writeOutputs(report, dir, base, latest)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(markdown(report, nil))
	fmt.Println()
	for _, p := range written {
		fmt.Println("wrote", p)
	}
	return nil
}

// rerender redraws the Markdown and charts of a saved report beside it. Medians and
// ratios are taken again from the runs it keeps, so that a report from an older runner
// gets what this one computes (the ratios' intervals, say).
func rerender(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i := range r.Rows {
		r.Rows[i].finish()
	}
	base := strings.TrimSuffix(filepath.Base(path), ".json")
	written, err := writeOutputs(&r, filepath.Dir(path), base, base)
	for _, p := range written {
		fmt.Println("wrote", p)
	}
	return err
}
