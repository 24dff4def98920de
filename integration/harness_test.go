package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gwctl is the binary under test, built once by TestMain as `make build` builds it.
var gwctl string

// buildFlags are the `go build` flags every gwctl under test is built with: the runtime
// overlay of `make build` (tools/runtime-overlay.sh), as far as it applies to this Go.
var buildFlags []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gw-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gwctl = filepath.Join(dir, "gwctl")
	overlay := exec.Command("../tools/runtime-overlay.sh", filepath.Join(dir, "goruntime"))
	overlay.Stderr = os.Stderr
	flag, err := overlay.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools/runtime-overlay.sh:", err)
		os.Exit(1)
	}
	buildFlags = strings.Fields(string(flag))
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", gwctl, "-ldflags", "-X main.version=itest", "../cmd/gwctl")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building gwctl:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminKey = "edd1c9f034335f136f87ad84b625c8f1"

// instance is one gateway under test.
type instance struct {
	t       *testing.T
	prefix  string
	data    string // data-plane address, 127.0.0.1:port
	admin   string // admin address
	metrics string // prometheus export address
	bin     string // the gwctl this instance runs; the shared build unless a test replaces it
	// h2c, within overBothProtocols' second round, is the client get and do send with:
	// HTTP/2 in the clear, prior knowledge. nil: HTTP/1.1 on fresh connections.
	h2c *http.Client
}

// handedOut remembers every port the free-port helpers gave out in this run.
var handedOut portSet

// portSet hands out ports nobody listens on, never one twice. The kernel gives a port of
// a closed listener out again at once, and did within a few hundred listens: two addresses
// of one instance then came out equal ("admin.listen ... binds the same socket as
// node_listen[0]"), or a second instance took a port a first one still served. Holding
// the listeners open until the gateway starts would not do: it binds them itself. Safe
// for concurrent use.
type portSet struct {
	mu    sync.Mutex
	given map[int]bool
}

// claim calls pick until it finds a port that is free (pick returns 0 for none this time)
// and that s never handed out, and records it.
func (s *portSet) claim(t *testing.T, pick func() (int, error)) int {
	t.Helper()
	for range 1000 {
		port, err := pick()
		if err != nil {
			t.Fatal(err)
		}
		if port == 0 {
			continue
		}
		s.mu.Lock()
		fresh := !s.given[port]
		if fresh {
			if s.given == nil {
				s.given = map[int]bool{}
			}
			s.given[port] = true
		}
		s.mu.Unlock()
		if fresh {
			return port
		}
	}
	t.Fatalf("no free port in 1000 tries (%d handed out already)", len(s.given))
	return 0
}

// kernelPort asks the kernel for a port nobody listens on at host (of network).
func kernelPort(network, host string) (int, error) {
	ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freePort returns a port nobody listens on at 127.0.0.1, one no other call in this run
// returned.
func freePort(t *testing.T) int {
	t.Helper()
	return handedOut.claim(t, func() (int, error) { return kernelPort("tcp4", "127.0.0.1") })
}

// TestFreePortsAreNeverHandedOutTwice: the kernel alone repeated a port within a few
// hundred listens on this machine; a run hands out about as many.
func TestFreePortsAreNeverHandedOutTwice(t *testing.T) {
	var set portSet // not handedOut: this test must not use up the run's ports
	seen := map[int]int{}
	for i := range 1000 {
		port := set.claim(t, func() (int, error) { return kernelPort("tcp4", "127.0.0.1") })
		if first, dup := seen[port]; dup {
			t.Fatalf("port %d handed out by call %d and again by call %d", port, first, i)
		}
		seen[port] = i
	}
}

// newInstance lays out a prefix with a config on free ports. extra is appended to the
// config file verbatim.
func newInstance(t *testing.T, extra string) *instance {
	t.Helper()
	prefix := t.TempDir()
	in := &instance{
		t:      t,
		prefix: prefix,
		data:   fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		admin:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	in.metrics = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\n%s", in.data, in.admin, extra))
	return in
}

// writeConfig writes conf/config.yaml. Unless text configures prometheus itself, the
// metrics server goes on this instance's own free port, so instances never collide on 9091.
func (in *instance) writeConfig(text string) {
	in.t.Helper()
	if !strings.Contains(text, "prometheus:") {
		text += fmt.Sprintf("prometheus:\n  export_addr: %q\n", in.metrics)
	}
	if err := os.MkdirAll(filepath.Join(in.prefix, "conf"), 0o755); err != nil {
		in.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.prefix, "conf", "config.yaml"), []byte(text), 0o644); err != nil {
		in.t.Fatal(err)
	}
}

// gwctl runs a verb against this instance and returns its combined output.
func (in *instance) gwctl(args ...string) (string, error) {
	// Only start runs the instance's own binary (which an upgrade test replaces, maybe
	// with a broken one); the other verbs are the tester's trusted gwctl.
	bin := gwctl
	if in.bin != "" && len(args) > 0 && args[0] == "start" {
		bin = in.bin
	}
	cmd := exec.Command(bin, append(args, "--prefix", in.prefix)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs `gwctl start` and registers a stop for the test's end.
func (in *instance) start(args ...string) string {
	in.t.Helper()
	out, err := in.gwctl(append([]string{"start"}, args...)...)
	if err != nil {
		in.t.Fatalf("gwctl start: %v\n%s\nerror.log:\n%s", err, out, in.errorLog())
	}
	in.t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(in.prefix, "logs", "gwctl.pid")); err == nil {
			_, _ = in.gwctl("stop")
		}
	})
	return out
}

func (in *instance) stop() {
	in.t.Helper()
	if out, err := in.gwctl("stop"); err != nil {
		in.t.Fatalf("gwctl stop: %v\n%s", err, out)
	}
}

func (in *instance) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(in.prefix, "logs", "error.log"))
	return string(b)
}

func (in *instance) masterPID() int {
	in.t.Helper()
	b, err := os.ReadFile(filepath.Join(in.prefix, "logs", "gwctl.pid"))
	if err != nil {
		in.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		in.t.Fatal(err)
	}
	return pid
}

// children lists the pids whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces; fields resume after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[0] != "Z" && fields[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// adminCall sends one Admin API request and returns status and body.
func (in *instance) adminCall(method, path, body string, headers ...string) (int, string) {
	in.t.Helper()
	return call(in.t, method, "http://"+in.admin+path, body, append([]string{"X-API-KEY", adminKey}, headers...)...)
}

func call(t *testing.T, method, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// get sends a GET to the data plane: on a fresh HTTP/1.1 connection, or over h2c within
// overBothProtocols. A "Host" among headers sets the request's host.
func (in *instance) get(path string, headers ...string) (*http.Response, string) {
	in.t.Helper()
	return in.do("GET", path, headers...)
}

// do sends one request to the data plane, as get.
func (in *instance) do(method, path string, headers ...string) (*http.Response, string) {
	in.t.Helper()
	req, _ := http.NewRequest(method, "http://"+in.data+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	client, protocol := freshConnections, "HTTP/1.1"
	if in.h2c != nil {
		client, protocol = in.h2c, "h2c"
	}
	resp, err := client.Do(req)
	if err != nil {
		in.t.Fatalf("%s %s over %s: %v", method, path, protocol, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if in.h2c != nil && resp.ProtoMajor != 2 {
		in.t.Fatalf("%s %s over h2c: answered %s", method, path, resp.Proto)
	}
	return resp, string(b)
}

// overBothProtocols runs requests twice, its get and do calls over HTTP/1.1 and then over
// HTTP/2 in the clear (prior knowledge, one connection), so that a plugin's test shows it
// works on both, as the README says every plugin does. requests must be repeatable: what
// it sends the first time must not change what the second time sees (a count, a limit).
// A failure's message follows the log line naming the round.
func (in *instance) overBothProtocols(requests func()) {
	in.t.Helper()
	for _, protocol := range []string{"HTTP/1.1", "h2c"} {
		in.t.Logf("the requests over %s", protocol)
		if protocol == "h2c" {
			in.h2c = h2cClient()
		}
		requests()
	}
	in.h2c = nil
}

var freshConnections = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

func getOn(t *testing.T, address, path string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+address+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := freshConnections.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// upstream is a real HTTP server standing in for a backend: it answers with its body and
// reports what it received in X-Seen-* headers.
type upstream struct {
	addr string
	srv  *http.Server
}

func startUpstream(t *testing.T, body string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Path", r.URL.RequestURI())
		w.Header().Set("X-Seen-Host", r.Host)
		for _, h := range []string{"X-Real-IP", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Port"} {
			w.Header().Set("X-Seen-"+h, r.Header.Get(h))
		}
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &upstream{addr: ln.Addr().String(), srv: srv}
}

// putRoute writes route id with an inline upstream of the given nodes.
func (in *instance) putRoute(id, uri string, nodes ...string) {
	in.t.Helper()
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%q:1", n)
	}
	body := fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{%s}}}`, uri, strings.Join(parts, ","))
	status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body)
	if status != 200 && status != 201 {
		in.t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	return v
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// lastLines returns the last n lines of s, for failure messages.
func lastLines(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func startUpstreamAt(t *testing.T, address, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
