package integration

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heldUpstream is a backend that holds every request until release is closed, and counts
// the requests it holds.
type heldUpstream struct {
	addr    string
	release chan struct{}
	holding atomic.Int64
}

func startHeldUpstream(t *testing.T) *heldUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &heldUpstream{addr: ln.Addr().String(), release: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.holding.Add(1)
		defer up.holding.Add(-1)
		select {
		case <-up.release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		select {
		case <-up.release:
		default:
			close(up.release)
		}
		srv.Close()
	})
	return up
}

func (in *instance) putLimitConnRoute(id, uri, upstream, limitConn string) {
	in.t.Helper()
	body := fmt.Sprintf(`{"uri":%q,"plugins":{"limit-conn":%s},"upstream":{"type":"roundrobin","nodes":{%q:1},"timeout":{"connect":6,"send":60,"read":60}}}`,
		uri, limitConn, upstream)
	if status, resp := in.adminCall("PUT", "/apisix/admin/routes/"+id, body); status != 200 && status != 201 {
		in.t.Fatalf("PUT route %s: %d %s", id, status, resp)
	}
}

// sendHeld starts n requests at once on their own connections and returns their
// statuses on the channel as they end (0 for a transport error).
func sendHeld(address, path string, n int) <-chan int {
	out := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 60 * time.Second}
			resp, err := client.Get("http://" + address + path)
			if err != nil {
				out <- 0
				return
			}
			resp.Body.Close()
			out <- resp.StatusCode
		}()
	}
	return out
}

// t/plugin/limit-conn.t TEST 5 and 6 (conn 2, burst 1: three of ten pass, seven get 503),
// across two workers, with requests held in flight at the upstream; once they end, their
// places are free again.
func TestLimitConnExactAcrossWorkers(t *testing.T) {
	up := startHeldUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "2")
	in.putLimitConnRoute("1", "/limit_conn", up.addr,
		`{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "rejected_code": 503, "key": "remote_addr"}`)
	statuses := sendHeld(in.data, "/limit_conn", 10)
	rejected := 0
	for rejected < 7 {
		select {
		case s := <-statuses:
			if s != 503 {
				t.Fatalf("a request ended %d while three were held, want 503", s)
			}
			rejected++
		case <-time.After(30 * time.Second):
			t.Fatalf("%d rejected after 30s, want 7", rejected)
		}
	}
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 3 }) {
		t.Fatalf("upstream holds %d, want 3", up.holding.Load())
	}
	close(up.release)
	for i := 0; i < 3; i++ {
		if s := <-statuses; s != 200 {
			t.Fatalf("held request ended %d, want 200", s)
		}
	}
	// Every place was given back: three more pass.
	got := sendBurst(t, in.data, "/limit_conn", 3, 1)
	if got.statuses[200] != 3 {
		t.Fatalf("after the held requests ended: %v, want 3 passed", got.statuses)
	}
}

// A worker killed with requests in flight: the master gives its places back as it reaps
// it, so the limit is whole again for the next worker.
func TestLimitConnKilledWorkerLeaksNothing(t *testing.T) {
	up := startHeldUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putLimitConnRoute("1", "/held", up.addr, `{"conn": 2, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	first := sendHeld(in.data, "/held", 2)
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 2 }) {
		t.Fatalf("upstream holds %d, want 2", up.holding.Load())
	}
	if resp, _ := in.get("/held"); resp.StatusCode != 503 {
		t.Fatalf("a third while two are held: %d, want 503", resp.StatusCode)
	}
	in.killWorkers()
	for i := 0; i < 2; i++ {
		if s := <-first; s == 200 {
			t.Fatalf("a request through the killed worker ended 200")
		}
	}
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 0 }) {
		t.Fatalf("upstream still holds %d after the worker died", up.holding.Load())
	}
	// Two places are free: two more are held at the upstream, not rejected.
	second := sendHeld(in.data, "/held", 2)
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 2 }) {
		select {
		case s := <-second:
			t.Fatalf("after the kill a request ended %d: the dead worker's places leaked", s)
		default:
		}
		t.Fatalf("upstream holds %d after the kill, want 2", up.holding.Load())
	}
	close(up.release)
	for i := 0; i < 2; i++ {
		if s := <-second; s != 200 {
			t.Fatalf("after the kill: %d", s)
		}
	}
	if !strings.Contains(in.errorLog(), "limit-conn: worker") {
		t.Errorf("no line about the given-back places in the error log:\n%s", lastLines(in.errorLog(), 20))
	}
}

// A client that goes away mid-request gives its place back once the worker ends the
// request; another plugin's answer before limit-conn ran gives back nothing it never took.
func TestLimitConnClientGoneAndBadConfig(t *testing.T) {
	up := startHeldUpstream(t)
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putLimitConnRoute("1", "/gone", up.addr, `{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)
	conn, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /gone HTTP/1.1\r\nHost: gw\r\n\r\n")
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 1 }) {
		t.Fatal("the request never reached the upstream")
	}
	conn.Close()
	// The worker ends the request when the upstream answers: release it, then the place is free.
	var once sync.Once
	once.Do(func() { close(up.release) })
	if !waitFor(10*time.Second, func() bool { resp, _ := in.get("/gone"); return resp.StatusCode == 200 }) {
		t.Fatal("the gone client's place was never given back")
	}
	for _, tt := range []struct{ conf, want string }{
		{`{"conn": 0, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`, "conn: "},
		{`{"conn": 1, "burst": 0, "key": "remote_addr"}`, "default_conn_delay: is required"},
		{`{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr", "policy": "redis"}`, `redis_host: is required with policy \"redis\"`},
	} {
		body := fmt.Sprintf(`{"uri":"/gone","plugins":{"limit-conn":%s},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, tt.conf, up.addr)
		status, resp := in.adminCall("PUT", "/apisix/admin/routes/1", body)
		if status != 400 || !strings.Contains(resp, "limit-conn") || !strings.Contains(resp, tt.want) {
			t.Fatalf("%s: %d %s, want 400 naming %q", tt.conf, status, resp, tt.want)
		}
	}
}

// A streamed body the client abandons halfway: the place is given back once the server
// stops sending, not held for good.
func TestLimitConnStreamedBodyAbandoned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") == "" {
			fmt.Fprint(w, "ok")
			return
		}
		chunk := strings.Repeat("x", 16<<10)
		for {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(stop); srv.Close() })
	in := newInstance(t, "")
	in.start("--workers", "1")
	in.putLimitConnRoute("1", "/stream", ln.Addr().String(), `{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}`)

	conn, err := net.Dial("tcp", in.data)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /stream?stream=1 HTTP/1.1\r\nHost: gw\r\n\r\n")
	buf := make([]byte, 64<<10)
	if _, err := conn.Read(buf); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	// The stream holds the one place.
	if resp, _ := in.get("/stream"); resp.StatusCode != 503 {
		t.Fatalf("while streaming: %d, want 503", resp.StatusCode)
	}
	conn.Close()
	if !waitFor(20*time.Second, func() bool { resp, _ := in.get("/stream"); return resp.StatusCode == 200 }) {
		t.Fatal("the abandoned stream's place was never given back")
	}
}
