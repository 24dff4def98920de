package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/internal/testnet"
	"gw/internal/textparse"
	"gw/plugins"
	"gw/worker/accesslog"
)

// startCuttingNode answers every request with a 100000-byte body, too large to buffer,
// and closes the connection after 50000 bytes of it.
func startCuttingNode(t *testing.T) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("b", 50000)) //nolint:errcheck
		}
	}).String()
}

// TestCutBodyIsLoggedAsSent has a node break off a streamed body: the access log line and
// the prometheus egress count the bytes the client got, with the status it got, not the
// Content-Length the response was meant to have. A connection the edge wraps keeps the
// request's state itself while the body goes out; another gets it allocated.
func TestCutBodyIsLoggedAsSent(t *testing.T) {
	for _, edged := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "edge"}[edged], func(t *testing.T) {
			testCutBodyIsLoggedAsSent(t, edged)
		})
	}
}

func testCutBodyIsLoggedAsSent(t *testing.T, edged bool) {
	w := benchWorker(t, startCuttingNode(t), `{"prometheus":{}}`)
	logPath := filepath.Join(t.TempDir(), "cut.log")
	var err error
	if w.accessLog, err = accesslog.Open(w.cfg.AccessLog, logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.accessLog.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if edged {
		ln = newEdgeListener(ln, w.edge, 16)
	}
	srv := &fasthttp.Server{Handler: w.handle}
	go srv.Serve(ln) //nolint:errcheck // ends with the listener
	t.Cleanup(func() { ln.Close() })

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("client got %d and %d bytes (%v), want a 200 cut short", resp.StatusCode, len(got), err)
	}

	want := fmt.Sprintf(`"GET /hello HTTP/1.1" 200 %d `, len(got))
	var line string
	if !waitUntil(2*time.Second, func() bool {
		_ = w.accessLog.Flush()
		b, _ := os.ReadFile(logPath)
		line = string(b)
		return line != ""
	}) || !strings.Contains(line, want) || strings.Count(line, "\n") != 1 {
		t.Errorf("access log %q, want one line with %q", line, want)
	}

	// The page the master would serve, through the contract as the master reads it.
	p, _ := plugins.Lookup("prometheus")
	part, err := p.(plugins.MasterPart).StartMaster(&plugins.MasterEnv{Segments: w.shared.Segments})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	var b bytes.Buffer
	part.(plugins.MetricsWriter).WriteMetrics(&b, plugins.HostFacts{})
	fams, err := textparse.Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	// Egress is the status line and the header fields, well under 1 KiB, and the body.
	egress := fams["apisix_bandwidth"].Sum("apisix_bandwidth", map[string]string{"type": "egress"})
	if sent := float64(len(got)); egress < sent || egress > sent+1024 {
		t.Errorf("egress %g bytes, want the %g the client got and the header", egress, sent)
	}
}
