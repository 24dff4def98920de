package integration

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// resumeGet opens a new TLS connection with client (its ClientSessionCache holds the
// session), sends GET path, reads the whole response (a TLS 1.3 ticket arrives with it)
// and reports whether the session resumed.
func resumeGet(t *testing.T, address, sni, path string, client *tls.Config) bool {
	t.Helper()
	cfg := client.Clone()
	cfg.InsecureSkipVerify, cfg.ServerName = true, sni
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", address, cfg)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", address, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, sni)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "resumed" {
		t.Fatalf("GET %s over TLS: %d %q, want the upstream's 200", path, resp.StatusCode, body)
	}
	return conn.ConnectionState().DidResume
}

// everyReadyWorkerServed waits for the workers' stats (sent about once a second) to show
// that every ready worker of generation gen served a request, and fails otherwise: the
// resumptions checked before it then crossed workers.
func (in *instance) everyReadyWorkerServed(step string, gen uint64, workers int) {
	in.t.Helper()
	var last statusReport
	ok := waitFor(5*time.Second, func() bool {
		last = in.status()
		served := 0
		for _, w := range last.Workers {
			if w.State == "ready" && w.Generation == gen && w.Requests > 0 {
				served++
			}
		}
		return served == workers
	})
	if !ok {
		in.t.Fatalf("%s: not every one of the %d workers of generation %d served a connection: %+v", step, workers, gen, last.Workers)
	}
}

// TestTLSSessionsResumeOnEveryWorker: with two workers, a client's fresh connections
// resume whichever worker the kernel hands them to, with TLS 1.2 tickets and TLS 1.3
// PSKs, and go on resuming across a reload and a binary upgrade.
func TestTLSSessionsResumeOnEveryWorker(t *testing.T) {
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	in := newInstance(t, fmt.Sprintf("ssl:\n  enabled: true\n  listen: [%q]\n", tlsAddr))
	in.bin = filepath.Join(in.prefix, "bin", "gwctl") // its own copy, for the upgrade
	if err := os.MkdirAll(filepath.Dir(in.bin), 0o755); err != nil {
		t.Fatal(err)
	}
	in.installBinary(gwctl)
	in.start("--workers", "2")
	up := startUpstream(t, "resumed")
	in.putRoute("1", "/hello", up.addr)
	cert := newTLSTestCert(t, "resume.test")
	if status, body := in.adminCall("PUT", "/apisix/admin/ssls/1", cert.sslBody("resume.test")); status != 201 {
		t.Fatalf("PUT ssls/1: %d %s", status, body)
	}

	clients := []struct {
		name   string
		config *tls.Config
	}{
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13, ClientSessionCache: tls.NewLRUClientSessionCache(4)}},
		{"TLS 1.2", &tls.Config{MaxVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(4)}},
	}
	// connect makes n fresh connections per client; each must resume, but for a client's
	// very first one, which has no session yet.
	connect := func(step string, n int) {
		t.Helper()
		for _, c := range clients {
			for i := range n {
				resumed := resumeGet(t, tlsAddr, "resume.test", "/hello", c.config)
				first := step == "start" && i == 0
				if resumed == first {
					t.Fatalf("%s, %s, connection %d of %d: resumed %t, want %t\n%s", step, c.name, i+1, n, resumed, !first,
						lastLines(in.errorLog(), 10))
				}
			}
		}
	}

	connect("start", 20)
	in.everyReadyWorkerServed("start", 1, 2)

	// A reload's new workers get the same keys: sessions from the old ones resume.
	in.reload()
	connect("after a reload", 20)
	in.everyReadyWorkerServed("after a reload", 2, 2)

	// An upgrade hands the keys to the new master, whose workers resume them too.
	oldMaster := in.masterPID()
	if out, err := in.gwctl("upgrade"); err != nil {
		t.Fatalf("gwctl upgrade: %v\n%s\n%s", err, out, lastLines(in.errorLog(), 15))
	}
	if in.masterPID() == oldMaster {
		t.Fatal("the upgrade left the same master")
	}
	connect("after an upgrade", 20)
	in.everyReadyWorkerServed("after an upgrade", 1, 2)
}
