package filelogger

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins"
)

// Entries land in the file under the prefix, a line each, within a second or so; a file
// renamed away is created again by the next batch.
func TestAppendsLinesAndFollowsRotation(t *testing.T) {
	prefix := t.TempDir()
	env := plugins.NewSnapshotBuild(&conf.Snapshot{}, &plugins.Shared{Prefix: prefix}).Env(&plugins.RouteInfo{ID: "f"}, "")
	instance, err := plugins.BuildInstance(Name, json.RawMessage(`{"path":"access.json","log_format":{"uri":"$uri"}}`), env)
	if err != nil {
		t.Fatal(err)
	}
	h := instance.(plugins.LogPhase)
	r := &fasthttp.RequestCtx{}
	r.Request.SetRequestURI("/one")
	r.SetRemoteAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	c := plugins.AcquireCtx(r, &plugins.RouteInfo{ID: "f"}, time.Now().UnixNano())
	defer plugins.ReleaseCtx(c)
	h.Log(c)
	h.Log(c)
	path := filepath.Join(prefix, "access.json")
	want := `{"uri":"/one","route_id":"f"}` + "\n"
	wait := func(p, content string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(p); string(b) == content {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		b, _ := os.ReadFile(p)
		t.Fatalf("%s = %q, want %q", p, b, content)
	}
	wait(path, want+want)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	r.Request.SetRequestURI("/two")
	h.Log(c)
	wait(path, strings.ReplaceAll(want, "/one", "/two"))
	wait(path+".1", want+want)
}
