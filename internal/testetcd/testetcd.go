// Package testetcd runs a real etcd server for tests: one member on loopback, on free
// ports, with its data in a test's temp directory, stopped when the test ends. Tests skip
// when no etcd binary is installed (Debian's etcd-server; .ci/run installs it).
// GW_TEST_ETCD names another etcd binary to run instead (a newer release), so the same
// tests hold gw to each version.
//
// The fault helpers do to the member what production does to one: Kill is a crash (no
// shutdown, the data dir as the last fsync left it), Start after it recovers from that
// data dir, Etcdctl runs the operator's own client (compact, put), and a Proxy in front of
// the member cuts a node's connections and heals them without root.
package testetcd

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one etcd member. Stop (or Kill) and Start may be called in turn, keeping the
// data.
type Server struct {
	t          testing.TB
	dir        string
	ClientURL  string // http://127.0.0.1:port
	listenURLs []string
	clientPort int
	peerPort   int
	cmd        *exec.Cmd
	exited     chan struct{}
}

// Start starts an etcd for t, or skips t when the etcd binary is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, freePort(t), freePort(t))
}

// StartOn is Start on the given ports (a harness that hands out ports itself). The member
// listens for clients on 127.0.0.1 and on each of alsoHosts (an address of this machine,
// such as the host side of a veth pair), all on clientPort.
func StartOn(t testing.TB, clientPort, peerPort int, alsoHosts ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath(binary()); err != nil {
		t.Skipf("%s is not installed (apt-get install etcd-server etcd-client, or set GW_TEST_ETCD): skipping the etcd tests", binary())
	}
	s := &Server{t: t, dir: t.TempDir(), clientPort: clientPort, peerPort: peerPort}
	s.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", s.clientPort)
	s.listenURLs = []string{s.ClientURL}
	for _, h := range alsoHosts {
		s.listenURLs = append(s.listenURLs, s.URLOn(h))
	}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URLOn is the member's client URL on host (one of StartOn's alsoHosts).
func (s *Server) URLOn(host string) string {
	return "http://" + net.JoinHostPort(host, fmt.Sprint(s.clientPort))
}

// Start starts the member again after Stop or Kill, on the same ports and data.
func (s *Server) Start() {
	s.t.Helper()
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peerPort)
	urls := strings.Join(s.listenURLs, ",")
	s.cmd = exec.Command(binary(),
		"--name", "test", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", urls, "--advertise-client-urls", urls,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--log-level", "error")
	log, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting etcd: %v", err)
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); log.Close(); close(s.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.ClientURL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
			s.t.Fatalf("etcd did not become healthy on %s within 20s:\n%s", s.ClientURL, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the member (SIGTERM, then SIGKILL) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Kill ends the member with SIGKILL, as a crash or the OOM killer does, and waits for it
// to be gone: what it acknowledged is in its WAL, nothing else was flushed.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Etcdctl runs Debian's etcdctl (API v3) against the member and returns its output; it
// fails the test when etcdctl is missing or fails.
func (s *Server) Etcdctl(args ...string) string {
	s.t.Helper()
	if _, err := exec.LookPath("etcdctl"); err != nil {
		s.t.Fatal("etcdctl is not installed (apt-get install etcd-client)")
	}
	cmd := exec.Command("etcdctl", append([]string{"--endpoints", s.ClientURL, "--command-timeout", "10s"}, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Proxy forwards TCP connections to one member, and can cut them: a node configured with
// the proxy's URL loses etcd while every other node keeps it. Safe for concurrent use.
type Proxy struct {
	URL    string // http://127.0.0.1:port
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// NewProxy starts a proxy to s on a free loopback port, closed when the test ends.
func (s *Server) NewProxy() *Proxy {
	s.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), target: strings.TrimPrefix(s.ClientURL, "http://"), ln: ln, conns: map[net.Conn]bool{}}
	go p.serve()
	s.t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.untrack(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// track records c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Cut closes every forwarded connection and closes each new one at once, until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal forwards new connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// binary is the etcd the tests run: $GW_TEST_ETCD, else etcd on the PATH.
func binary() string {
	if b := os.Getenv("GW_TEST_ETCD"); b != "" {
		return b
	}
	return "etcd"
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
