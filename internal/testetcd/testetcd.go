// Package testetcd runs a real etcd server for tests: one member on loopback, on free
// ports, with its data in a test's temp directory, stopped when the test ends. Tests skip
// when no etcd binary is installed (Debian's etcd-server; .ci/run installs it).
package testetcd

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Server is one etcd member. Stop and Start may be called in turn, keeping the data.
type Server struct {
	t          testing.TB
	dir        string
	ClientURL  string // http://127.0.0.1:port
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

// StartOn is Start on the given ports (a harness that hands out ports itself).
func StartOn(t testing.TB, clientPort, peerPort int) *Server {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd is not installed (apt-get install etcd-server etcd-client): skipping the etcd tests")
	}
	s := &Server{t: t, dir: t.TempDir(), clientPort: clientPort, peerPort: peerPort}
	s.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", s.clientPort)
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the member again after Stop, on the same ports and data.
func (s *Server) Start() {
	s.t.Helper()
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peerPort)
	s.cmd = exec.Command("etcd",
		"--name", "test", "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", s.ClientURL, "--advertise-client-urls", s.ClientURL,
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

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
