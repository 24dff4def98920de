package worker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/internal/errlog"
	"gw/worker/proxy"
)

// A plugin's fault (an error from its access phase) becomes a 500 in one place, the
// worker's: the fault's own words as error_msg, nothing proxied, and one line in the
// error log per second, naming the route and the plugin, however many requests fail.
func TestAPluginFaultIsAnswered500(t *testing.T) {
	// Two routes of one limit-count group that disagree: limit-count fails both, as
	// counting either way would break the other's limit.
	snap := decodeSnapshot(t, `{"version": 1, "routes": [
		{"id": "1", "uri": "/one", "upstream": {"type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": 1, "weight": 1}]},
		 "plugins": {"limit-count": {"count": 1, "time_window": 60, "group": "g"}}},
		{"id": "2", "uri": "/two", "upstream": {"type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": 1, "weight": 1}]},
		 "plugins": {"limit-count": {"count": 5, "time_window": 60, "group": "g"}}}
	]}`)
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	table, leftOut, err := compile(snap, pools, testShared(t))
	if err != nil || leftOut != nil {
		t.Fatal(err, leftOut)
	}
	var log bytes.Buffer
	w := &Worker{log: errlog.New(&log, "test"), conns: newConnTracker()}
	w.table.Store(table)
	for range 3 {
		status, body := serve(w, "/one")
		if status != fasthttp.StatusInternalServerError || body != `{"error_msg":"failed to limit count: group conf mismatched"}`+"\n" {
			t.Fatalf("GET /one: %d %q, want 500 in APISIX's words", status, body)
		}
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `route "1": plugin limit-count: failed to limit count: group conf mismatched`) {
		t.Fatalf("error log:\n%s\nwant one line naming the route and the plugin", log.String())
	}
}

// The auth plugins' index of credentials is built once per snapshot from the consumers
// served: a consumer left out (one of its plugins fails to build: a configuration the
// Admin API refuses, in a hand-edited store) names no request, even
// when a service's key-auth had the plugin build before the consumers were sorted out.
func TestALeftOutConsumersKeyIsRefused(t *testing.T) {
	snap := decodeSnapshot(t, `{"version": 1,
		"services": [{"id": "s", "plugins": {"key-auth": {}}}],
		"routes": [{"id": "r", "uri": "/r", "service_id": "s",
			"upstream": {"type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": 1, "weight": 1}]}}],
		"consumers": [
			{"username": "good", "plugins": {"key-auth": {"key": "good-key"}}},
			{"username": "bad", "plugins": {"key-auth": {"key": "bad-key"}, "limit-count": {"count": 0}}}
		]}`)
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	table, leftOut, err := compile(snap, pools, testShared(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := leftOutKeys(leftOut); len(got) != 1 || !strings.Contains(got["consumers/bad"], "limit-count") {
		t.Fatalf("left out %v, want the consumer bad", got)
	}
	w := &Worker{log: errlog.New(&bytes.Buffer{}, "test"), conns: newConnTracker()}
	w.table.Store(table)
	for _, tc := range []struct {
		key    string
		status int
	}{
		{"good-key", fasthttp.StatusBadGateway}, // let in: port 1 refuses, so the proxy's 502 proves it
		{"bad-key", fasthttp.StatusUnauthorized},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/r")
		ctx.Request.Header.SetHost("gw.test")
		ctx.Request.Header.Set("apikey", tc.key)
		w.handle(&ctx)
		if got := ctx.Response.StatusCode(); got != tc.status {
			t.Errorf("apikey %s: %d %q, want %d", tc.key, got, ctx.Response.Body(), tc.status)
		}
	}
}
