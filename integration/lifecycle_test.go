package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The README's first steps: start with 2 workers, a route, a proxied request, stop.
func TestStartRouteProxyStop(t *testing.T) {
	up := startUpstream(t, "1234567890")
	in := newInstance(t, "")
	out := in.start("--workers", "2")
	if !strings.Contains(out, "pid=") || !strings.Contains(out, in.data) {
		t.Fatalf("start should print the pid and listen addresses, got %q", out)
	}
	master := in.masterPID()
	workers := children(master)
	if len(workers) != 2 {
		t.Fatalf("master %d should have exactly 2 children (its workers), has %v", master, workers)
	}

	in.putRoute("1", "/hello", up.addr)
	resp, body := in.get("/hello", "X-Forwarded-For", "10.1.1.1", "Connection", "close")
	if resp.StatusCode != 200 || body != "1234567890" {
		t.Fatalf("GET /hello: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Seen-X-Real-IP"); got != "127.0.0.1" {
		t.Errorf("X-Real-IP to upstream = %q, want 127.0.0.1", got)
	}
	if got := resp.Header.Get("X-Seen-X-Forwarded-For"); got != "10.1.1.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For to upstream = %q, want appended", got)
	}
	_, port, _ := net.SplitHostPort(in.data)
	if got := resp.Header.Get("X-Seen-X-Forwarded-Port"); got != port {
		t.Errorf("X-Forwarded-Port = %q, want %s", got, port)
	}
	if got := resp.Header.Get("X-Seen-X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto = %q", got)
	}

	resp, body = in.get("/nothing-here")
	if resp.StatusCode != 404 || strings.TrimSpace(body) != `{"error_msg":"404 Route Not Found"}` {
		t.Fatalf("unmatched: %d %q", resp.StatusCode, body)
	}

	in.stop()
	for _, pid := range append(workers, master) {
		if alive(pid) {
			t.Errorf("pid %d still alive after gwctl stop", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(in.prefix, "logs", "gwctl.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
}

// Every APISIX Admin API call of seeds 002, 003 and 004, verbatim but for the node
// addresses, which point at a local upstream; 002's calls go to the data port as APISIX 2.x did.
func TestSeedCalls(t *testing.T) {
	up := startUpstream(t, "1234567890")
	in := newInstance(t, "")
	in.start("--workers", "2")
	seeds := []struct {
		name, port, body, path string
	}{
		{"002 anything", "data", `
{
  "uri": "/anything/*",
  "upstream": {
    "type": "roundrobin",
    "nodes": {
      "UPSTREAM": 1
    }
  }
}`, "/anything/das"},
		{"002 scenario 1", "data", `
{
    "uri": "/hello",
    "plugins": {
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM":1
        }
    }
}`, "/hello"},
		{"002 scenario 2", "data", `
{
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 2000000000000,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus": {}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM":1
        }
    }
}`, "/hello"},
		{"003 proxy", "admin", `
{
    "methods": ["GET"],
    "uri": "/hello",
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM": 1,
            "UPSTREAM2": 1
        }
    }
}`, "/hello"},
		{"003 plugins", "admin", `
{
    "methods": ["GET"],
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 999999999,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus":{}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM": 1,
            "UPSTREAM2": 1
        }
    }
}`, "/hello"},
		{"004 no plugin", "data", `
{
    "uri": "/hello",
    "plugins": {
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM": 1
        }
    }
}`, "/hello"},
		{"004 plugins", "data", `
{
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 2000000000000,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus": {}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "UPSTREAM": 1
        }
    }
}`, "/hello"},
	}
	// 003's second node: the same upstream under another loopback address.
	_, upPort, _ := net.SplitHostPort(up.addr)
	up2 := startUpstreamOn(t, "127.0.0.2:"+upPort, "1234567890")
	for i, seed := range seeds {
		body := strings.ReplaceAll(seed.body, "UPSTREAM2", up2)
		body = strings.ReplaceAll(body, "UPSTREAM", up.addr)
		address := in.admin
		if seed.port == "data" {
			address = in.data
		}
		// curl -d sends application/x-www-form-urlencoded; the Admin API must read JSON anyway.
		status, resp := call(t, "PUT", "http://"+address+"/apisix/admin/routes/1", body,
			"X-API-KEY", adminKey, "Content-Type", "application/x-www-form-urlencoded")
		want := 200
		if i == 0 {
			want = 201
		}
		if status != want {
			t.Fatalf("%s: PUT via %s port: %d %s", seed.name, seed.port, status, resp)
		}
		v := decodeJSON(t, resp)
		if v["key"] != "/apisix/routes/1" {
			t.Errorf("%s: envelope key = %v", seed.name, v["key"])
		}
		r, got := in.get(seed.path)
		if r.StatusCode != 200 || got != "1234567890" {
			t.Fatalf("%s: GET %s: %d %q", seed.name, seed.path, r.StatusCode, got)
		}
	}
}

func startUpstreamOn(t *testing.T, address, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", address, err)
	}
	ln.Close()
	u := startUpstreamAt(t, address, body)
	return u
}

// Read-your-writes: once a PUT returns, every request on a new connection, whichever worker
// accepts it, is served by the new route.
func TestReadYourWrites(t *testing.T) {
	first := startUpstream(t, "first")
	second := startUpstream(t, "second")
	in := newInstance(t, "")
	in.start("--workers", "2")
	for round := 0; round < 5; round++ {
		target, want := first, "first"
		if round%2 == 1 {
			target, want = second, "second"
		}
		in.putRoute("1", "/ryw", target.addr)
		var wg sync.WaitGroup
		errs := make(chan string, 100)
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, body := in.get("/ryw")
				if r.StatusCode != 200 || body != want {
					errs <- fmt.Sprintf("%d %q", r.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("round %d: a request right after the PUT got %s, want %q", round, e, want)
		}
	}
}

// Routes survive a stop and a start.
func TestPersistenceAcrossRestart(t *testing.T) {
	up := startUpstream(t, "kept")
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putRoute("persisted", "/kept", up.addr)
	status, _ := in.adminCall("PUT", "/apisix/admin/upstreams/u1", fmt.Sprintf(`{"nodes":{%q:1}}`, up.addr))
	if status != 201 {
		t.Fatalf("PUT upstream: %d", status)
	}
	in.stop()
	in.start("--workers", "1")
	status, body := in.adminCall("GET", "/apisix/admin/routes/persisted", "")
	if status != 200 || !strings.Contains(body, `"/kept"`) {
		t.Fatalf("route after restart: %d %s", status, body)
	}
	status, body = in.adminCall("GET", "/apisix/admin/upstreams/u1", "")
	if status != 200 {
		t.Fatalf("upstream after restart: %d %s", status, body)
	}
	r, got := in.get("/kept")
	if r.StatusCode != 200 || got != "kept" {
		t.Fatalf("served after restart: %d %q", r.StatusCode, got)
	}
}

// However the master dies, its serving workers follow within a second.
func TestWorkersExitWhenMasterIsKilled(t *testing.T) {
	in := newInstance(t, "")
	in.start("--workers", "2")
	master := in.masterPID()
	workers := children(master)
	if len(workers) != 2 {
		t.Fatalf("workers of %d: %v", master, workers)
	}
	if err := syscall.Kill(master, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	gone := waitFor(3*time.Second, func() bool {
		for _, w := range workers {
			if alive(w) {
				return false
			}
		}
		return true
	})
	if !gone || time.Since(start) > time.Second {
		t.Fatalf("workers %v still alive %v after kill -9 of the master", workers, time.Since(start))
	}
}

func TestStartFailuresSayWhy(t *testing.T) {
	t.Run("port in use", func(t *testing.T) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		in := newInstance(t, "")
		in.writeConfig(fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: %q\n", busy.Addr().String(), in.admin))
		out, err := in.gwctl("start", "--workers", "1")
		if err == nil || !strings.Contains(out, "node_listen[0]: listen "+busy.Addr().String()+": address already in use") ||
			!strings.Contains(out, "change node_listen[0] in conf/config.yaml") {
			t.Fatalf("want a failure naming node_listen[0] and the address, got err=%v out=%q", err, out)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		in := newInstance(t, "")
		in.writeConfig("worker_processes: lots\n")
		out, err := in.gwctl("start")
		if err == nil || !strings.Contains(out, "worker_processes") || !strings.Contains(out, "lots") {
			t.Fatalf("want a failure naming the key and value, got err=%v out=%q", err, out)
		}
	})
	// conf no longer looks users up while parsing (internal/confio does): gwctl test and
	// start must still refuse a user this system does not have, naming it.
	t.Run("unknown user", func(t *testing.T) {
		in := newInstance(t, "user: no-such-user-gw\n")
		for _, verb := range []string{"test", "start"} {
			out, err := in.gwctl(verb)
			if err == nil || !strings.Contains(out, `user: no user "no-such-user-gw" on this system`) {
				t.Errorf("gwctl %s: err=%v out=%q, want a failure naming the user", verb, err, out)
			}
		}
	})
	t.Run("already running", func(t *testing.T) {
		in := newInstance(t, "")
		in.start("--workers", "1")
		out, err := in.gwctl("start", "--workers", "1")
		if err == nil || !strings.Contains(out, "already running") {
			t.Fatalf("second start: err=%v out=%q", err, out)
		}
		r, _ := in.get("/x")
		if r.StatusCode != 404 {
			t.Fatalf("first instance disturbed: %d", r.StatusCode)
		}
	})
	t.Run("default key off loopback", func(t *testing.T) {
		in := newInstance(t, "")
		in.writeConfig(fmt.Sprintf("node_listen: [%q]\nadmin:\n  listen: \"0.0.0.0:%d\"\n", in.data, freePort(t)))
		out, err := in.gwctl("start")
		if err == nil || !strings.Contains(out, "admin") {
			t.Fatalf("want a refusal naming admin, got err=%v out=%q", err, out)
		}
	})
	t.Run("stop when not running", func(t *testing.T) {
		in := newInstance(t, "")
		out, err := in.gwctl("stop")
		if err == nil || !strings.Contains(out, "not running") {
			t.Fatalf("err=%v out=%q", err, out)
		}
	})
}
