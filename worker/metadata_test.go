package worker

import (
	"testing"

	"gw/worker/proxy"
)

// Stored plugin_metadata the plugin refuses (written to etcd by hand) is left out, named,
// and the routes that configure the plugin build without it; good metadata is served.
func TestPluginMetadataLeftOutWhenRefused(t *testing.T) {
	snap := decodeSnapshot(t, `{"version": 1, "routes": [
		{"id": "1", "uri": "/one", "upstream": {"type": "roundrobin", "nodes": [{"host": "127.0.0.1", "port": 1, "weight": 1}]},
		 "plugins": {"http-logger": {"uri": "http://127.0.0.1:1/log"}, "tcp-logger": {"host": "127.0.0.1", "port": 1}}}
	], "plugin_metadata": [
		{"name": "http-logger", "value": {"log_format": {"a": "$no_such_variable"}}},
		{"name": "tcp-logger", "value": {"log_format": {"a": "$host"}}}
	]}`)
	pools := proxy.NewPools()
	t.Cleanup(pools.Close)
	table, leftOut, err := compile(snap, pools, testShared(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(leftOut) != 1 || leftOut[0].Key() != "plugin_metadata/http-logger" {
		t.Fatalf("left out %v, want plugin_metadata/http-logger alone", leftOut)
	}
	if len(table.routes) != 1 || table.routes[0] == nil {
		t.Fatalf("route 1 not built: %v", table.routes)
	}
	if got := snap.MetadataOf("tcp-logger"); got == nil {
		t.Error("tcp-logger's metadata is not served")
	}
	if got := snap.MetadataOf("http-logger"); got != nil {
		t.Errorf("http-logger's refused metadata is still served: %s", got)
	}
}
