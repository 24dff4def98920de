package integration

import (
	"bytes"
	"context"
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
	"testing"
	"time"
)

// Debian's docker.io: the engine and the client of the same release. /usr/local/bin/docker
// on these machines is a newer client alone, which would need BuildKit to build.
const (
	dockerClient = "/usr/bin/docker"
	dockerEngine = "/usr/sbin/dockerd"
)

// TestDockerImage builds the image with `make docker`, as a user without an image registry
// would, runs it with --network host on free ports set through its environment variables,
// drives the Admin API and the proxy through it, and stops it with `docker stop`: the
// request in flight finishes and the container exits 0. It also checks that the image
// refuses to start without GW_ADMIN_KEY, or with APISIX's well-known key.
func TestDockerImage(t *testing.T) {
	for _, bin := range []string{dockerClient, dockerEngine} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("no %s: apt-get install docker.io", bin)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("starting dockerd needs root")
	}
	d := dockerEngineFor(t)

	// Build with the version the image is tagged with, so the test finds its own build.
	build := exec.Command("make", "-C", "..", "docker", "DOCKER="+dockerClient, "VERSION=itest")
	build.Env = d.env
	out, err := runWithin(build, 15*time.Minute)
	if err != nil {
		t.Fatalf("make docker: %v\n%s", err, lastLines(out, 30))
	}
	for _, tag := range []string{"gw:itest", "gw:latest"} {
		if _, err := d.run(time.Minute, "image", "inspect", tag); err != nil {
			t.Fatalf("make docker made no %s: %v", tag, err)
		}
	}
	user, _ := d.run(time.Minute, "image", "inspect", "-f", "{{.Config.User}} {{.Config.StopSignal}}", "gw:itest")
	if strings.TrimSpace(user) != "10001:10001 SIGQUIT" {
		t.Errorf("image user and stop signal %q, want 10001:10001 SIGQUIT", user)
	}

	// Without a key, and with the key everyone knows, gw refuses to start.
	out, err = d.run(time.Minute, "run", "--rm", "--network", "host", "gw:itest")
	if err == nil || !strings.Contains(out, "environment variable GW_ADMIN_KEY is not set") || !strings.Contains(out, "admin.keys[0].key") {
		t.Errorf("without GW_ADMIN_KEY the image ran or said otherwise: %v\n%s", err, out)
	}
	out, err = d.run(time.Minute, "run", "--rm", "--network", "host", "-e", "GW_ADMIN_KEY="+adminKey, "gw:itest")
	if err == nil || !strings.Contains(out, "admin.keys[0].key") || !strings.Contains(out, "0.0.0.0:9180") {
		t.Errorf("with APISIX's well-known key the image ran or said otherwise: %v\n%s", err, out)
	}

	data, admin, metrics, status := freePort(t), freePort(t), freePort(t), freePort(t)
	const key = "7b1f0c4e9a2d8f3e6c5b4a3928170f6e"
	id, err := d.run(time.Minute, "run", "-d", "--network", "host",
		"-e", "GW_ADMIN_KEY="+key, "-e", "GW_WORKERS=2", "-e", "GW_NODE_PORT="+strconv.Itoa(data),
		"-e", "GW_ADMIN_PORT="+strconv.Itoa(admin), "-e", "GW_PROMETHEUS_PORT="+strconv.Itoa(metrics),
		"-e", "GW_STATUS_PORT="+strconv.Itoa(status), "gw:itest")
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, id)
	}
	id = strings.TrimSpace(id)
	t.Cleanup(func() { d.run(time.Minute, "rm", "-f", "-v", id) })
	ready := fmt.Sprintf("http://127.0.0.1:%d/status/ready", status)
	if !waitFor(90*time.Second, func() bool { return httpStatus(ready) == 200 }) {
		logs, _ := d.run(time.Minute, "logs", id)
		t.Fatalf("the container was not ready on %s within 90s; its output:\n%s", ready, lastLines(logs, 30))
	}

	// The master runs as the image's user, not root.
	pid, _ := d.run(time.Minute, "inspect", "-f", "{{.State.Pid}}", id)
	if uid := processUID(t, strings.TrimSpace(pid)); uid != "10001" {
		t.Errorf("the container's gwctl runs as uid %s, want 10001", uid)
	}

	// Routes go in through the Admin API on 0.0.0.0 with the key from the environment.
	slow := startSlowUpstream(t, 2*time.Second)
	adminURL := fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/routes/1", admin)
	route := fmt.Sprintf(`{"uri":"/slow","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, slow.addr)
	if code, body := call(t, "PUT", adminURL, route); code != 401 {
		t.Errorf("PUT without a key: %d %s, want 401", code, body)
	}
	if code, body := call(t, "PUT", adminURL, route, "X-API-KEY", adminKey); code != 401 {
		t.Errorf("PUT with APISIX's well-known key: %d %s, want 401", code, body)
	}
	if code, body := call(t, "PUT", adminURL, route, "X-API-KEY", key); code != 201 && code != 200 {
		t.Fatalf("PUT with GW_ADMIN_KEY: %d %s", code, body)
	}

	// docker stop sends SIGQUIT: the request in flight is answered, then the master exits 0.
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/slow", data))
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	if !waitFor(10*time.Second, func() bool { return slow.inFlight() > 0 }) {
		t.Fatal("the proxied request never reached the upstream")
	}
	if out, err := d.run(time.Minute, "stop", "-t", "30", id); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
	if got := <-answered; got != "200 slow" {
		t.Errorf("the request in flight during docker stop got %q, want 200 slow", got)
	}
	state, _ := d.run(time.Minute, "inspect", "-f", "{{.State.ExitCode}} {{.State.OOMKilled}}", id)
	if strings.TrimSpace(state) != "0 false" {
		logs, _ := d.run(time.Minute, "logs", id)
		t.Errorf("after docker stop: exit code and OOM %q, want 0 false; output:\n%s", state, lastLines(logs, 20))
	}
	// It says where it listens, and nothing at warn level in a plain start.
	logs, _ := d.run(time.Minute, "logs", id)
	wantLine := fmt.Sprintf("gw started: pid=1 workers=2 listen=0.0.0.0:%d admin=0.0.0.0:%d", data, admin)
	if !strings.Contains(logs, wantLine) || strings.Contains(logs, "data_dir") {
		t.Errorf("the container's output lacks %q, or warns about data_dir:\n%s", wantLine, lastLines(logs, 20))
	}
}

// docker is an engine the test talks to: env holds DOCKER_HOST for it.
type docker struct {
	env []string
}

func (d docker) run(within time.Duration, args ...string) (string, error) {
	cmd := exec.Command(dockerClient, args...)
	cmd.Env = d.env
	return runWithin(cmd, within)
}

// dockerEngineFor returns the engine already running, or starts a private dockerd (its
// own socket, data and state directories, no bridge or iptables rules, so it touches
// nothing of the machine's networking) and stops it when the test ends.
func dockerEngineFor(t *testing.T) docker {
	t.Helper()
	existing := docker{env: os.Environ()}
	if _, err := existing.run(20*time.Second, "info"); err == nil {
		return existing
	}
	dir, err := os.MkdirTemp("", "gw-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	logFile, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	engine := exec.Command(dockerEngine, "--host", "unix://"+sock, "--data-root", filepath.Join(dir, "root"),
		"--exec-root", filepath.Join(dir, "exec"), "--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--iptables=false", "--ip6tables=false", "--bridge=none")
	engine.Stdout, engine.Stderr = logFile, logFile
	// Its own process group, so that the containerd it starts is not signalled by a ^C
	// meant for the test before dockerd has stopped its containers.
	engine.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := engine.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		engine.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { engine.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("dockerd did not stop within 60s of SIGTERM; killing it")
			engine.Process.Kill()
			<-done
		}
		logFile.Close()
		// dockerd leaves its default network namespace bind-mounted at exit; the directory
		// cannot go while it is.
		for _, m := range mountsUnder(dir) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing dockerd's directory: %v", err)
		}
	})
	d := docker{env: append(os.Environ(), "DOCKER_HOST=unix://"+sock)}
	if !waitFor(60*time.Second, func() bool { _, err := d.run(20*time.Second, "info"); return err == nil }) {
		b, _ := os.ReadFile(logFile.Name())
		t.Fatalf("dockerd did not answer within 60s:\n%s", lastLines(string(b), 20))
	}
	return d
}

// runWithin runs cmd, killing it past the deadline, and returns its combined output.
func runWithin(cmd *exec.Cmd, within time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(within, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.String(), err
}

func httpStatus(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// processUID reads the real uid of a host pid from /proc.
func processUID(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("reading the container's process: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	return ""
}

// slowUpstream answers "slow" after a delay, counting the requests it holds.
type slowUpstream struct {
	addr    string
	holding chan struct{}
}

func (s *slowUpstream) inFlight() int { return len(s.holding) }

func startSlowUpstream(t *testing.T, delay time.Duration) *slowUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowUpstream{addr: ln.Addr().String(), holding: make(chan struct{}, 100)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.holding <- struct{}{}
		defer func() { <-s.holding }()
		time.Sleep(delay)
		io.WriteString(w, "slow")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// mountsUnder lists the mount points below dir, deepest first, from /proc/self/mounts.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mounts")
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append([]string{f[1]}, points...)
		}
	}
	return points
}
