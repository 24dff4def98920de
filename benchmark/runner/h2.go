package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The HTTP/2 comparison (run.sh --h2): issue 21's h2load -c 16 -m 10, in the clear with
// prior knowledge (h2c) and over TLS (h2 by ALPN), through gw and nginx on the same
// upstream, one worker each, paired rounds as the sweep's.
const (
	h2Clients = 16
	h2Streams = 10
	h2SNI     = "bench.test"
)

// H2 is the HTTP/2 comparison's result.
type H2 struct {
	Workers   int          `json:"workers"`
	Clients   int          `json:"clients"`
	Streams   int          `json:"streams_per_client"`
	Scenarios []H2Scenario `json:"scenarios"`
}

// H2Scenario is one protocol's rounds, gw's and nginx's taken in turn.
type H2Scenario struct {
	Name  string  `json:"name"`
	GW    []H2Run `json:"gw"`
	Nginx []H2Run `json:"nginx"`
}

// H2Run is one h2load run against one server.
type H2Run struct {
	RPS             float64 `json:"rps"`
	Succeeded       int     `json:"succeeded"`
	Failed          int     `json:"failed"`
	MeanMS          float64 `json:"mean_ms"`
	MaxMS           float64 `json:"max_ms"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

func (s *sweep) runH2() (*H2, error) {
	o := s.opts
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	res := &H2{Workers: s.workers, Clients: h2Clients, Streams: h2Streams}
	var err error
	if s.up, err = startUpstream(o.upstream, s.loadCPUs, o.bodyBytes, s.dir); err != nil {
		return nil, err
	}
	certFile, keyFile, certPEM, keyPEM, err := writeBenchCert(s.dir)
	if err != nil {
		return nil, err
	}
	gwTLS, err := freeAddr()
	if err != nil {
		return nil, err
	}
	g, err := startGWWith(o.gwctl, filepath.Join(s.dir, "gw-h2"), s.gwCPUs, s.workers, o.accessLog, "",
		fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n  fallback_sni: %s\n", gwTLS, h2SNI), nil)
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "gw", srv: g})
	if code, body, err := g.putRoute(fmt.Sprintf(`{"uri":"/*","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, s.up.addr)); err != nil || code/100 != 2 {
		return nil, fmt.Errorf("PUT route 1: %d %s %v", code, body, err)
	}
	ssl, _ := json.Marshal(map[string]any{"cert": certPEM, "key": keyPEM, "snis": []string{h2SNI}})
	if code, body, err := g.put("/apisix/admin/ssls/1", string(ssl)); err != nil || code/100 != 2 {
		return nil, fmt.Errorf("PUT ssls/1: %d %s %v", code, body, err)
	}
	nginxPlain, err := freeAddr()
	if err != nil {
		return nil, err
	}
	nginxTLS, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n, err := startNginx(o.nginx, filepath.Join(o.templates, "h2.conf.tmpl"), filepath.Join(s.dir, "nginx-h2"), s.gwCPUs, nginxConf{
		Workers: s.workers, Listen: nginxPlain, TLSListen: nginxTLS, Cert: certFile, Key: keyFile,
		Upstream: s.up.addr, Location: "/", AccessLog: o.accessLog,
	})
	if err != nil {
		return nil, err
	}
	s.targets = append(s.targets, target{name: "nginx", srv: n})
	urls := map[string]map[string]string{
		"h2c":         {"gw": "http://" + g.data + "/hello", "nginx": "http://" + nginxPlain + "/hello"},
		"h2 over TLS": {"gw": "https://" + gwTLS + "/hello", "nginx": "https://" + nginxTLS + "/hello"},
	}
	for _, name := range []string{"h2 over TLS", "h2c"} {
		sc := H2Scenario{Name: name}
		for round := -1; round < o.rounds; round++ {
			order := s.targets
			if round%2 == 1 {
				order = []target{s.targets[1], s.targets[0]} // alternate who goes first
			}
			for _, t := range order {
				duration := o.duration
				pass := fmt.Sprintf("round %d/%d", round+1, o.rounds)
				if round < 0 {
					duration, pass = o.warmup, "warm-up"
				}
				s.progress.step(fmt.Sprintf("h2 (%s, %s): h2load -c %d -m %d through %s", name, pass, h2Clients, h2Streams, t.name), 0)
				run, err := s.h2Run(t, urls[name][t.name], duration)
				if err != nil {
					return nil, fmt.Errorf("%s through %s: %w", name, t.name, err)
				}
				fmt.Printf("    %8.0f req/s  failed %d  mean %.2f ms  max %.1f ms  %.1f CPU µs/req\n",
					run.RPS, run.Failed, run.MeanMS, run.MaxMS, run.CPUPerRequestUS)
				if round < 0 {
					continue
				}
				if t.name == "gw" {
					sc.GW = append(sc.GW, run)
				} else {
					sc.Nginx = append(sc.Nginx, run)
				}
			}
		}
		res.Scenarios = append(res.Scenarios, sc)
	}
	return res, nil
}

// h2Run runs h2load for duration against url and measures the server's CPU meanwhile.
func (s *sweep) h2Run(t target, url string, duration time.Duration) (H2Run, error) {
	master, workers, err := t.srv.processes()
	if err != nil {
		return H2Run{}, err
	}
	pids := append([]int{master}, workers...)
	cpu0, err := cpuSeconds(pids)
	if err != nil {
		return H2Run{}, err
	}
	lr, err := runPinned(s.loadCPUs, s.opts.h2load, "-c", strconv.Itoa(h2Clients), "-m", strconv.Itoa(h2Streams),
		"-D", strconv.Itoa(max(1, int(duration.Seconds()))), url)
	if err != nil {
		return H2Run{}, err
	}
	cpu1, err := cpuSeconds(pids)
	if err != nil {
		return H2Run{}, err
	}
	run, err := parseH2Load(lr.output)
	if err != nil {
		return H2Run{}, err
	}
	if run.Succeeded > 0 {
		run.CPUPerRequestUS = (cpu1 - cpu0) * 1e6 / float64(run.Succeeded)
	}
	return run, nil
}

var (
	h2loadFinished = regexp.MustCompile(`finished in [0-9.]+s, ([0-9.]+) req/s`)
	h2loadRequests = regexp.MustCompile(`requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed`)
	h2loadTime     = regexp.MustCompile(`time for request:\s+(\S+)\s+(\S+)\s+(\S+)`)
)

// parseH2Load reads h2load's summary: throughput, outcomes, and the request times (min,
// max, mean; h2load gives no percentiles).
func parseH2Load(out string) (H2Run, error) {
	var run H2Run
	m := h2loadFinished.FindStringSubmatch(out)
	r := h2loadRequests.FindStringSubmatch(out)
	tm := h2loadTime.FindStringSubmatch(out)
	if m == nil || r == nil || tm == nil {
		return run, fmt.Errorf("h2load printed no summary:\n%s", tail([]byte(out), 2000))
	}
	run.RPS, _ = strconv.ParseFloat(m[1], 64)
	run.Succeeded, _ = strconv.Atoi(r[1])
	run.Failed, _ = strconv.Atoi(r[2])
	run.MaxMS, run.MeanMS = h2loadMS(tm[2]), h2loadMS(tm[3])
	return run, nil
}

// h2loadMS reads one of h2load's durations ("850us", "1.25ms", "2.01s") in milliseconds.
func h2loadMS(s string) float64 {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1e3}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f * u.ms
		}
	}
	return 0
}

// writeBenchCert makes a self-signed ECDSA P-256 certificate for h2SNI, written for nginx
// and returned as PEM for gw's Admin API.
func writeBenchCert(dir string) (certFile, keyFile, certPEM, keyPEM string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: h2SNI},
		DNSNames:     []string{h2SNI},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return
	}
	certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	certFile, keyFile = filepath.Join(dir, "bench.crt"), filepath.Join(dir, "bench.key")
	if err = os.WriteFile(certFile, []byte(certPEM), 0o644); err == nil {
		err = os.WriteFile(keyFile, []byte(keyPEM), 0o600)
	}
	return
}

func writeH2(b *strings.Builder, h *H2) {
	fmt.Fprintf(b, "\n## HTTP/2: h2load -c %d -m %d, %d worker(s)\n\n", h.Clients, h.Streams, h.Workers)
	b.WriteString("Each round runs gw and nginx in turn (alternating who goes first); figures are medians over rounds, " +
		"the ratio gw's CPU µs/req over nginx's in the same round, median [lowest, highest].\n\n")
	b.WriteString("| scenario | server | req/s | failed | mean ms | max ms | CPU µs/req |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, sc := range h.Scenarios {
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
			fmt.Fprintf(b, "| %s | %s | %.0f | %d | %.2f | %.1f | %.1f |\n", sc.Name, r.name,
				pick(func(x H2Run) float64 { return x.RPS }), failed, pick(func(x H2Run) float64 { return x.MeanMS }),
				pick(func(x H2Run) float64 { return x.MaxMS }), pick(func(x H2Run) float64 { return x.CPUPerRequestUS }))
		}
	}
	b.WriteString("\n")
	for _, sc := range h.Scenarios {
		var ratios []float64
		for i := range min(len(sc.GW), len(sc.Nginx)) {
			if sc.Nginx[i].CPUPerRequestUS > 0 {
				ratios = append(ratios, sc.GW[i].CPUPerRequestUS/sc.Nginx[i].CPUPerRequestUS)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		lo, hi := ratios[0], ratios[0]
		for _, r := range ratios {
			lo, hi = min(lo, r), max(hi, r)
		}
		fmt.Fprintf(b, "- %s: gw's CPU per request is %.2f× nginx's [%.2f, %.2f] (goal ≤ 1.0×)\n", sc.Name, median(ratios), lo, hi)
	}
}
