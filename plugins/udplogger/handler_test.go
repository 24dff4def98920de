package udplogger

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins"
)

// Each batch is one datagram: the entry itself with batch_max_size 1.
func TestSendsDatagrams(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	env := plugins.NewSnapshotBuild(&conf.Snapshot{}, nil).Env(&plugins.RouteInfo{ID: "7"}, "")
	instance, err := plugins.BuildInstance(Name, json.RawMessage(`{"host":"127.0.0.1","port":`+port+`,"batch_max_size":1}`), env)
	if err != nil {
		t.Fatal(err)
	}
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/u")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 4), Port: 1})
	c := plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "7"}, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	instance.(plugins.LogPhase).Log(c)
	_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 65536)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(buf[:n], &e); err != nil || e["route_id"] != "7" || e["client_ip"] != "127.0.0.4" {
		t.Errorf("datagram %s: %v", buf[:n], err)
	}
}
