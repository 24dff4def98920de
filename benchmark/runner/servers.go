package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// adminKey is gw's built-in Admin API key (APISIX 2.x's), accepted on loopback.
const adminKey = "edd1c9f034335f136f87ad84b625c8f1"

// server is one process tree under measurement: gw or nginx, a master and its workers.
type server interface {
	// processes returns the master's pid and the workers' pids.
	processes() (master int, workers []int, err error)
	stop() error
}

// freeAddr asks the kernel for a loopback port nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListening dials addr until it answers or the timeout passes.
func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %v: %w", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServing polls addr until an HTTP response comes back, whatever its status.
func waitServing(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no HTTP answer on %s after %v: %w", addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pinned runs argv on cpus (a taskset list such as "0" or "2-3"). taskset execs argv, so
// the process's pid is argv's own.
func pinned(cpus string, argv ...string) *exec.Cmd {
	return exec.Command("taskset", append([]string{"-c", cpus}, argv...)...)
}

// upstreamServer is the origin every scenario proxies to.
type upstreamServer struct {
	cmd  *exec.Cmd
	addr string
}

func startUpstream(bin, cpus string, bodyBytes int, logDir string) (*upstreamServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := pinned(cpus, bin, "-listen", addr, "-body", strconv.Itoa(bodyBytes))
	logf, err := os.Create(filepath.Join(logDir, "upstream.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the upstream: %w", err)
	}
	u := &upstreamServer{cmd: cmd, addr: addr}
	if err := waitListening(addr, 10*time.Second); err != nil {
		u.stop()
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return u, nil
}

func (u *upstreamServer) stop() {
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	_ = u.cmd.Wait()
}

// gwInstance is one gw master and its workers in their own prefix, on free ports.
type gwInstance struct {
	bin     string
	prefix  string
	data    string
	admin   string
	metrics string
	// foreground is the master's process when it was started attached (profgw); nil when
	// `gwctl start` daemonized it.
	foreground *exec.Cmd
}

// metricsURI is gw's default prometheus.export_uri, which gwConfig keeps.
const metricsURI = "/apisix/prometheus/metrics"

// gwConfig is the benchmark's conf/config.yaml: gw's defaults, written out where they
// matter to the comparison, so a change of default cannot silently change the benchmark.
const gwConfig = `worker_processes: %d
node_listen:
  - %q
admin:
  listen: %q
prometheus:
  enabled: true
  export_addr: %q
access_log:
  enabled: %t
  format: combined
  buffer: 64k
  flush_interval: 1s
worker_rlimit_nofile: 20480
`

// startGW starts gw pinned to cpus. With profileDir set it runs bin (profgw) attached,
// with its workers ready to profile themselves on SIGUSR2.
func startGW(bin, prefix, cpus string, workers int, accessLog bool, profileDir string) (*gwInstance, error) {
	return startGWWith(bin, prefix, cpus, workers, accessLog, profileDir, "", nil)
}

// startGWWith is startGW with extra appended to the config (the h2 mode's ssl section) and
// env added to gw's environment (a baseline's GOGC=25).
func startGWWith(bin, prefix, cpus string, workers int, accessLog bool, profileDir, extra string, env []string) (*gwInstance, error) {
	g := &gwInstance{bin: bin, prefix: prefix}
	var err error
	for _, p := range []*string{&g.data, &g.admin, &g.metrics} {
		if *p, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(prefix, "conf"), 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(gwConfig, workers, g.data, g.admin, g.metrics, accessLog) + extra
	if err := os.WriteFile(filepath.Join(prefix, "conf", "config.yaml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if profileDir != "" {
		cmd := pinned(cpus, bin, "start", "--foreground", "--prefix", prefix, "--workers", strconv.Itoa(workers))
		cmd.Env = append(os.Environ(), "GW_BENCH_CPUPROFILE="+profileDir)
		logf, err := os.Create(filepath.Join(prefix, "master.out"))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		g.foreground = cmd
		// Unlike `gwctl start`, nothing here waits for the workers; an Admin API write
		// before they serve can reach a worker before its setup (a master race, reported).
		if err := waitServing(g.data, 30*time.Second); err != nil {
			g.stop()
			return nil, fmt.Errorf("profgw: %w; see %s", err, logf.Name())
		}
		return g, nil
	}
	cmd := pinned(cpus, bin, "start", "--prefix", prefix, "--workers", strconv.Itoa(workers))
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		errLog, _ := os.ReadFile(filepath.Join(prefix, "logs", "error.log"))
		return nil, fmt.Errorf("gwctl start: %v\n%s\n%s", err, out, tail(errLog, 2000))
	}
	return g, nil
}

// putRoute sets route 1 through the Admin API, as the seeds do with curl. The master
// answers once every worker serves the change.
func (g *gwInstance) putRoute(body string) (int, string, error) {
	return g.put("/apisix/admin/routes/1", body)
}

// put writes one Admin API object.
func (g *gwInstance) put(path, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPut, "http://"+g.admin+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-API-KEY", adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func (g *gwInstance) processes() (int, []int, error) {
	if g.foreground != nil {
		return g.foreground.Process.Pid, childrenOf(g.foreground.Process.Pid), nil
	}
	b, err := os.ReadFile(filepath.Join(g.prefix, "logs", "gwctl.pid"))
	if err != nil {
		return 0, nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, nil, fmt.Errorf("pid file: %w", err)
	}
	return pid, childrenOf(pid), nil
}

func (g *gwInstance) stop() error {
	if g.foreground != nil {
		_ = g.foreground.Process.Signal(syscall.SIGTERM)
		return g.foreground.Wait()
	}
	out, err := exec.Command(g.bin, "stop", "--prefix", g.prefix).CombinedOutput()
	if err != nil {
		return fmt.Errorf("gwctl stop: %v: %s", err, out)
	}
	return nil
}

// nginxConf is what the nginx templates are rendered with.
type nginxConf struct {
	Root         bool // the user directive, which only root may give
	Workers      int
	Prefix       string
	Listen       string
	Upstream     string
	Location     string // proxy: the location block's prefix
	UpstreamPath string // proxy: the URI part of proxy_pass, "" to pass the URI unchanged
	Body         string // direct: the body to answer with
	AccessLog    bool
	TLSListen    string // h2: the TLS address, and its certificate and key files
	Cert, Key    string
}

// nginxInstance is nginx run attached (daemon off), so its master is our child.
type nginxInstance struct {
	pid    int
	exited chan struct{} // closed once the master has been reaped
}

func startNginx(bin, templatePath, prefix, cpus string, c nginxConf) (*nginxInstance, error) {
	tmpl, err := template.ParseFiles(templatePath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	c.Prefix = prefix
	c.Root = os.Geteuid() == 0
	var text bytes.Buffer
	if err := tmpl.Execute(&text, c); err != nil {
		return nil, fmt.Errorf("%s: %w", templatePath, err)
	}
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, text.Bytes(), 0o644); err != nil {
		return nil, err
	}
	errorLog := filepath.Join(prefix, "error.log")
	cmd := pinned(cpus, bin, "-p", prefix, "-e", errorLog, "-c", confPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	n := &nginxInstance{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(n.exited) }()
	ready := make(chan error, 1)
	go func() { ready <- waitListening(c.Listen, 10*time.Second) }()
	select {
	case <-n.exited:
		errLog, _ := os.ReadFile(errorLog)
		return nil, fmt.Errorf("nginx exited at start: %s%s", out.String(), tail(errLog, 2000))
	case err := <-ready:
		if err != nil {
			_ = n.stop()
			return nil, fmt.Errorf("nginx: %w", err)
		}
	}
	return n, nil
}

func (n *nginxInstance) processes() (int, []int, error) {
	select {
	case <-n.exited:
		return 0, nil, fmt.Errorf("nginx master %d has exited", n.pid)
	default:
	}
	return n.pid, childrenOf(n.pid), nil
}

// stop asks nginx for a fast shutdown and waits for its master to go.
func (n *nginxInstance) stop() error {
	_ = syscall.Kill(n.pid, syscall.SIGTERM)
	select {
	case <-n.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(n.pid, syscall.SIGKILL)
		return errors.New("nginx did not stop within 10s; killed")
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
