package tcplogger

import (
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func build(t testing.TB, raw string) plugins.LogPhase {
	t.Helper()
	env := plugins.NewSnapshotBuild(&conf.Snapshot{}, &plugins.Shared{Version: "9.9"}).Env(&plugins.RouteInfo{ID: "1"}, "")
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		t.Fatal(err)
	}
	return instance.(plugins.LogPhase)
}

func ctx() *plugins.Ctx {
	r := &fasthttp.RequestCtx{}
	r.Request.Header.SetMethod("GET")
	r.Request.SetRequestURI("/hello?a=1")
	r.Request.Header.SetHost("gw.test")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 3), Port: 1})
	return plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "1"}, time.Now().UnixNano())
}

// Each batch is a connection: the entry itself with batch_max_size 1, else an array.
func TestSendsBatches(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			got <- string(b)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c := ctx()
	defer plugins.ReleaseCtx(c)
	build(t, `{"host":"127.0.0.1","port":`+port+`,"batch_max_size":1}`).Log(c)
	h := build(t, `{"host":"127.0.0.1","port":`+port+`,"batch_max_size":2,"log_format":{"ip":"$remote_addr"}}`)
	h.Log(c)
	h.Log(c)
	// The two loggers send on their own goroutines: their batches come in either order.
	var batches []string
	for i := range 2 {
		select {
		case s := <-got:
			batches = append(batches, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d never came", i)
		}
	}
	if batches[0][0] == '[' {
		batches[0], batches[1] = batches[1], batches[0]
	}
	var e map[string]any
	if json.Unmarshal([]byte(batches[0]), &e) != nil || e["client_ip"] != "127.0.0.3" || e["route_id"] != "1" {
		t.Errorf("batch_max_size 1: %s", batches[0])
	}
	if batches[1] != `[{"ip":"127.0.0.3","route_id":"1"},{"ip":"127.0.0.3","route_id":"1"}]` {
		t.Errorf("batch_max_size 2 with a log_format: %s", batches[1])
	}
}

func TestLogAllocatesNothing(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	h := build(t, `{"host":"127.0.0.1","port":9,"batch_max_size":100000,"inactive_timeout":3600}`)
	c := ctx()
	defer plugins.ReleaseCtx(c)
	for range 100 {
		h.Log(c)
	}
	if allocs := testing.AllocsPerRun(100, func() { h.Log(c) }); allocs != 0 {
		t.Errorf("Log: %.1f allocations", allocs)
	}
}
