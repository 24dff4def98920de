// Package testredis runs Debian's redis-server for tests: one instance or a three-node
// cluster on free loopback ports in the test's temporary directory, stopped when the
// test ends. A test skips, saying so, only when redis-server is not installed (CI
// installs it: .ci/run).
package testredis

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	Port int
	// tls is set for a server that speaks only TLS (StartTLS).
	tls  bool
	dir  string
	args []string
	cmd  *exec.Cmd
	t    testing.TB
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Start runs a redis-server on a free loopback port until t ends; extra are more
// command-line options ("--requirepass", "x").
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, freePort, extra)
}

// StartTLS runs a redis-server that speaks only TLS, with the certificate and key in
// PEM, and asks no client for a certificate.
func StartTLS(t testing.TB, certPEM, keyPEM string) *Server {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, []byte(certPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	return startAs(t, freePort, true, []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
		"--tls-auth-clients", "no"})
}

func start(t testing.TB, pick func(testing.TB) int, extra []string) *Server {
	return startAs(t, pick, false, extra)
}

// startAs starts a server on a port pick chooses. A port is free when picked but may be
// taken before redis-server binds it (by another test's server, or as the local port of
// any connection: a cluster node's bus port is in the ephemeral range), so a server that
// finds its port taken is started again on another, a few times.
func startAs(t testing.TB, pick func(testing.TB) int, useTLS bool, extra []string) *Server {
	t.Helper()
	bin := binary(t)
	if useTLS {
		extra = append([]string{"--port", "0"}, extra...)
	}
	for attempt := 1; ; attempt++ {
		s := &Server{Port: pick(t), tls: useTLS, dir: t.TempDir(), t: t}
		portFlag := "--port"
		if useTLS {
			portFlag = "--tls-port"
		}
		s.args = append([]string{portFlag, strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", s.dir, "--daemonize", "no", "--protected-mode", "no"}, extra...)
		err := s.start(bin)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		s.Stop()
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("testredis: %v; trying another port", err)
	}
}

// errPortTaken is a server that could not bind one of its ports.
var errPortTaken = errors.New("a port was taken before redis-server bound it")

func binary(t testing.TB) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server); CI installs it")
	}
	return bin
}

// start runs the server and returns once it answers PING; errPortTaken when it could
// not bind a port.
func (s *Server) start(bin string) error {
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Dir = s.dir
	log, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("redis-%d.log", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A server with a password answers NOAUTH, which is as alive.
		if reply, err := s.do(500*time.Millisecond, "PING"); err == nil && reply == "PONG" || err != nil && strings.HasPrefix(err.Error(), "NOAUTH") {
			return nil
		}
		out, _ := os.ReadFile(log.Name())
		if strings.Contains(string(out), "Address already in use") {
			return fmt.Errorf("redis-server on port %d: %w:\n%s", s.Port, errPortTaken, out)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s:\n%s", s.Port, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it; it is safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies as well, but reap it awake
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP): its connections stay open and nothing
// answers, as a server that hangs. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		s.t.Fatal("testredis: the server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the server again on the same port, after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(binary(s.t)); err != nil {
		s.t.Fatal(err)
	}
}

// Do sends one command and returns its reply as text: a status, an integer, a bulk
// string, or an array's elements joined by newlines; an error reply is an error.
func (s *Server) Do(args ...string) (string, error) { return s.do(10*time.Second, args...) }

// do is Do with a deadline: a starting server's PING must not wait long on a port that
// another program took and does not answer on.
func (s *Server) do(timeout time.Duration, args ...string) (string, error) {
	var c net.Conn
	var err error
	if s.tls {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.Addr(), &tls.Config{InsecureSkipVerify: true})
	} else {
		c, err = net.DialTimeout("tcp", s.Addr(), time.Second)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Cluster is three redis-server masters with every slot assigned.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// StartCluster runs three cluster-enabled redis-servers and joins them with
// `redis-cli --cluster create --cluster-replicas 0`, returning once the cluster is ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (apt-get install redis-server); CI installs it")
	}
	c := &Cluster{}
	for range 3 {
		c.Nodes = append(c.Nodes, start(t, clusterPort, []string{"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster is not ok within 10s: %s %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// clusterPort is a free loopback port whose cluster bus port, 10000 above it, is free too.
// Both are below Linux's ephemeral range (32768 and up by default), where no connection's
// local port and no other test's freePort can take them between this check and the bind.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 10000 + int(time.Now().UnixNano()%12000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}
