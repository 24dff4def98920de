package syslog

import (
	"encoding/json"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

// message is an RFC 5424 line as APISIX's rfc5424.encode writes it.
var message = regexp.MustCompile(`^<46>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z gw\.test apisix \d+ - - (\{.*\})\n$`)

func build(t testing.TB, raw string) plugins.LogPhase {
	t.Helper()
	env := plugins.NewSnapshotBuild(&conf.Snapshot{}, nil).Env(&plugins.RouteInfo{ID: "s"}, "")
	instance, err := plugins.BuildInstance(Name, json.RawMessage(raw), env)
	if err != nil {
		t.Fatal(err)
	}
	return instance.(plugins.LogPhase)
}

func ctx() *plugins.Ctx {
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/s")
	r.Request.Header.SetHost("gw.test:9080")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 5), Port: 1})
	return plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "s"}, time.Now().UnixNano())
}

func TestRFC5424OverUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	c := ctx()
	defer plugins.ReleaseCtx(c)
	build(t, `{"host":"127.0.0.1","port":`+port+`,"sock_type":"udp","batch_max_size":1}`).Log(c)
	_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 65536)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	m := message.FindSubmatch(buf[:n])
	if m == nil {
		t.Fatalf("not an RFC 5424 message: %q", buf[:n])
	}
	var e map[string]any
	if err := json.Unmarshal(m[1], &e); err != nil || e["route_id"] != "s" || e["client_ip"] != "127.0.0.5" {
		t.Errorf("message %s: %v", m[1], err)
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
