package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The gRPC comparison (run.sh --grpc): issue 21's gRPC unary scenario, a Go client
// (benchmark/grpcload) keeping 16 calls in flight on one h2c connection, through gw (a
// route with upstream scheme grpc) and nginx (grpc_pass) to the same grpc-go node, one
// worker each, paired rounds as the others.
const grpcStreams = 16

// GRPC is the gRPC comparison's result; its runs are H2Runs (MeanMS holds p50, MaxMS p99).
type GRPC struct {
	Workers int        `json:"workers"`
	Streams int        `json:"streams"`
	Unary   H2Scenario `json:"unary"`
}

func startGRPCNode(bin, cpus string, bodyBytes int, logDir string) (*upstreamServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := pinned(cpus, bin, "serve", "-listen", addr, "-body", strconv.Itoa(bodyBytes))
	logf, err := os.Create(filepath.Join(logDir, "grpc-node.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the gRPC node: %w", err)
	}
	u := &upstreamServer{cmd: cmd, addr: addr}
	if err := waitListening(addr, 10*time.Second); err != nil {
		u.stop()
		return nil, fmt.Errorf("gRPC node: %w", err)
	}
	return u, nil
}

func (s *sweep) runGRPC() (*GRPC, error) {
	o := s.opts
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	res := &GRPC{Workers: s.workers, Streams: grpcStreams, Unary: H2Scenario{Name: "gRPC unary"}}
	var err error
	if s.up, err = startGRPCNode(o.grpcload, s.loadCPUs, o.bodyBytes, s.dir); err != nil {
		return nil, err
	}
	g, err := startGWWith(o.gwctl, filepath.Join(s.dir, "gw-grpc"), s.gwCPUs, s.workers, o.accessLog, "", "", nil)
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "gw", srv: g})
	if code, body, err := g.putRoute(fmt.Sprintf(`{"uri":"/*","upstream":{"scheme":"grpc","type":"roundrobin","nodes":{%q:1}}}`, s.up.addr)); err != nil || code/100 != 2 {
		return nil, fmt.Errorf("PUT route 1: %d %s %v", code, body, err)
	}
	nginxPlain, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n, err := startNginx(o.nginx, filepath.Join(o.templates, "grpc.conf.tmpl"), filepath.Join(s.dir, "nginx-grpc"), s.gwCPUs, nginxConf{
		Workers: s.workers, Listen: nginxPlain, Upstream: s.up.addr, AccessLog: o.accessLog,
	})
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "nginx", srv: n})
	addrs := map[string]string{"gw": g.data, "nginx": nginxPlain}
	for round := -1; round < o.rounds; round++ {
		order := s.targets
		if round%2 == 1 {
			order = []target{s.targets[1], s.targets[0]}
		}
		for _, t := range order {
			duration := o.duration
			pass := fmt.Sprintf("round %d/%d", round+1, o.rounds)
			if round < 0 {
				duration, pass = o.warmup, "warm-up"
			}
			s.progress.step(fmt.Sprintf("gRPC unary (%s): %d calls in flight through %s", pass, grpcStreams, t.name), 0)
			run, err := s.grpcRun(t, addrs[t.name], duration)
			if err != nil {
				return nil, fmt.Errorf("gRPC through %s: %w", t.name, err)
			}
			fmt.Printf("    %8.0f calls/s  failed %d  p50 %.3f ms  p99 %.3f ms  %.1f CPU µs/call\n",
				run.RPS, run.Failed, run.MeanMS, run.MaxMS, run.CPUPerRequestUS)
			if round < 0 {
				continue
			}
			if t.name == "gw" {
				res.Unary.GW = append(res.Unary.GW, run)
			} else {
				res.Unary.Nginx = append(res.Unary.Nginx, run)
			}
		}
	}
	return res, nil
}

var grpcloadLine = regexp.MustCompile(`calls (\d+) failed (\d+) rps ([0-9.]+) p50_ms ([0-9.]+) p99_ms ([0-9.]+)`)

// grpcRun runs the load client for duration against addr and measures the server's CPU
// meanwhile.
func (s *sweep) grpcRun(t target, addr string, duration time.Duration) (H2Run, error) {
	master, workers, err := t.srv.processes()
	if err != nil {
		return H2Run{}, err
	}
	pids := append([]int{master}, workers...)
	cpu0, err := cpuSeconds(pids)
	if err != nil {
		return H2Run{}, err
	}
	lr, err := runPinned(s.loadCPUs, s.opts.grpcload, "load", "-target", addr, "-streams", strconv.Itoa(grpcStreams),
		"-duration", duration.String())
	if err != nil {
		return H2Run{}, err
	}
	cpu1, err := cpuSeconds(pids)
	if err != nil {
		return H2Run{}, err
	}
	m := grpcloadLine.FindStringSubmatch(lr.output)
	if m == nil {
		return H2Run{}, fmt.Errorf("grpcload printed no summary:\n%s", tail([]byte(lr.output), 2000))
	}
	var run H2Run
	run.Succeeded, _ = strconv.Atoi(m[1])
	run.Failed, _ = strconv.Atoi(m[2])
	run.RPS, _ = strconv.ParseFloat(m[3], 64)
	run.MeanMS, _ = strconv.ParseFloat(m[4], 64)
	run.MaxMS, _ = strconv.ParseFloat(m[5], 64)
	if run.Succeeded > 0 {
		run.CPUPerRequestUS = (cpu1 - cpu0) * 1e6 / float64(run.Succeeded)
	}
	return run, nil
}

func writeGRPC(b *strings.Builder, g *GRPC) {
	fmt.Fprintf(b, "\n## gRPC unary: %d calls in flight on one h2c connection, %d worker(s)\n\n", g.Streams, g.Workers)
	b.WriteString("Each round runs gw (upstream scheme grpc) and nginx (grpc_pass) in turn, alternating who goes first; " +
		"figures are medians over rounds, the ratio gw's CPU µs/call over nginx's in the same round, median [lowest, highest].\n\n")
	b.WriteString("| server | calls/s | failed | p50 ms | p99 ms | CPU µs/call |\n|---|--:|--:|--:|--:|--:|\n")
	sc := g.Unary
	for _, r := range []struct {
		name string
		runs []H2Run
	}{{"gw", sc.GW}, {"nginx", sc.Nginx}} {
		pick := func(f func(H2Run) float64) float64 {
			xs := make([]float64, len(r.runs))
			for i, run := range r.runs {
				xs[i] = f(run)
			}
			return median(xs)
		}
		failed := 0
		for _, run := range r.runs {
			failed += run.Failed
		}
		fmt.Fprintf(b, "| %s | %.0f | %d | %.3f | %.3f | %.1f |\n", r.name,
			pick(func(x H2Run) float64 { return x.RPS }), failed, pick(func(x H2Run) float64 { return x.MeanMS }),
			pick(func(x H2Run) float64 { return x.MaxMS }), pick(func(x H2Run) float64 { return x.CPUPerRequestUS }))
	}
	var ratios []float64
	for i := range min(len(sc.GW), len(sc.Nginx)) {
		if sc.Nginx[i].CPUPerRequestUS > 0 {
			ratios = append(ratios, sc.GW[i].CPUPerRequestUS/sc.Nginx[i].CPUPerRequestUS)
		}
	}
	if len(ratios) > 0 {
		lo, hi := ratios[0], ratios[0]
		for _, r := range ratios {
			lo, hi = min(lo, r), max(hi, r)
		}
		fmt.Fprintf(b, "\n- gRPC unary: gw's CPU per call is %.2f× nginx's [%.2f, %.2f] (goal ≤ 1.0×)\n", median(ratios), lo, hi)
	}
}
