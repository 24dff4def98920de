package master

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"gw/conf"
)

// The two ends of the daemon handshake must agree on the line: what the master writes is
// what Daemonize parses.
func TestDaemonHandshakeReadyLine(t *testing.T) {
	f := func(cfg *conf.Config, leftOut int, wantSummary string) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		m := &Master{opts: Options{Notify: w}}
		snap := &conf.Snapshot{LeftOut: make([]conf.LeftOut, leftOut)}
		m.notifyReady(&generation{workers: 2}, cfg, snap)
		m.notifyFailed(errors.New("too late")) // the pipe is closed: nothing more is written
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			t.Fatalf("reading the ready line: %v", err)
		}
		if rest, _ := bufio.NewReader(r).ReadString('\n'); rest != "" {
			t.Errorf("more after the ready line: %q", rest)
		}
		started := parseReady(strings.TrimSpace(line))
		wantSummary = strings.ReplaceAll(wantSummary, "PID", strconv.Itoa(os.Getpid()))
		if started.Summary != wantSummary || started.LeftOut != leftOut {
			t.Errorf("parsed %+v, want summary %q and %d left out", started, wantSummary, leftOut)
		}
	}
	plain := &conf.Config{NodeListen: []string{"0.0.0.0:9080", "[::]:9080"}, Admin: conf.Admin{Listen: "127.0.0.1:9180"}}
	// Without TLS and with nothing left out, the line names neither.
	f(plain, 0, "pid=PID workers=2 listen=0.0.0.0:9080,[::]:9080 admin=127.0.0.1:9180")
	// Left-out objects are counted at the end.
	f(plain, 3, "pid=PID workers=2 listen=0.0.0.0:9080,[::]:9080 admin=127.0.0.1:9180 left_out=3")
	// TLS addresses are named apart from the plain ones.
	withTLS := *plain
	withTLS.SSL.Enabled, withTLS.SSL.Listen = true, []string{"0.0.0.0:9443"}
	f(&withTLS, 0, "pid=PID workers=2 listen=0.0.0.0:9080,[::]:9080 tls=0.0.0.0:9443 admin=127.0.0.1:9180")
}

func TestDaemonHandshakeErrorLine(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := &Master{opts: Options{Notify: w}}
	m.notifyFailed(errors.New("listen 127.0.0.1:9080: address already in use"))
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "error: listen 127.0.0.1:9080: address already in use\n" {
		t.Fatalf("read %q, %v; want the error line", line, err)
	}
	if m.opts.Notify != nil {
		t.Error("the pipe is still held after the verdict")
	}
}
