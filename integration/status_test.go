package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The status API, as APISIX's: /status while the master runs, /status/ready only while
// every worker serves the latest configuration. A stopped worker cannot acknowledge an
// Admin API write, so the gateway is not ready until it catches up.
func TestStatusAPI(t *testing.T) {
	status := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("status:\n  enabled: true\n  listen: %q\n", status))
	in.start("--workers", "2")
	get := func(path string) (int, string) {
		t.Helper()
		return call(t, "GET", "http://"+status+path, "")
	}
	if code, body := get("/status"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("GET /status: %d %q", code, body)
	}
	if code, body := get("/status/ready"); code != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("GET /status/ready with both workers serving: %d %q", code, body)
	}
	if code, _ := call(t, "POST", "http://"+status+"/status", ""); code != 405 {
		t.Errorf("POST /status: %d, want 405", code)
	}

	workers := children(in.masterPID())
	if len(workers) != 2 {
		t.Fatalf("workers %v, want 2", workers)
	}
	stopped := workers[0]
	if err := syscall.Kill(stopped, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(stopped, syscall.SIGCONT)
	// The write is kept but answered 503 after the master's wait for the stopped worker.
	in.adminCall("PUT", "/apisix/admin/upstreams/1", `{"nodes":{"127.0.0.1:1980":1}}`)
	code, body := get("/status/ready")
	if code != 503 || !strings.Contains(body, `"status":"error"`) || !strings.Contains(body, "has not received configuration") {
		t.Errorf("GET /status/ready with a stopped worker: %d %q, want 503 naming the worker", code, body)
	}
	if code, _ := get("/status"); code != 200 {
		t.Errorf("GET /status with a stopped worker: %d, want 200 (the master runs)", code)
	}
	if err := syscall.Kill(stopped, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { code, _ := get("/status/ready"); return code == 200 }) {
		code, body := get("/status/ready")
		t.Errorf("GET /status/ready after the worker resumed: %d %q", code, body)
	}

	// Fixed at start, as the metrics server: a reload that changes it fails and says so.
	in.writeConfig(fmt.Sprintf("node_listen:\n  - %q\nadmin:\n  listen: %q\n", in.data, in.admin))
	if out, err := in.gwctl("reload"); err == nil || !strings.Contains(out, "status settings are fixed at start") {
		t.Errorf("reload turning the status API off: %v %s", err, out)
	}
}
