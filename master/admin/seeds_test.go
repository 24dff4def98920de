package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"gw/master/store"
	_ "gw/plugins/all"
)

// The Admin API calls of the seed write-ups (../shared/seeds/002*, 003*, 004*), bodies
// verbatim, in the order a benchmark run sends them: every one re-PUTs route 1, so the
// first creates it and the rest replace it.
var seedCalls = []struct{ source, body string }{
	{"002 register routing", `
{
  "uri": "/anything/*",
  "upstream": {
    "type": "roundrobin",
    "nodes": {
      "httpbin.org:80": 1
    }
  }
}`},
	{"002 scenario 1 / 004 run.sh, no plugin", `
{
    "uri": "/hello",
    "plugins": {
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:1980":1
        }
    }
}`},
	{"002 scenario 2, limit-count + prometheus", `
{
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 2000000000000,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus": {}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:1980":1
        }
    }
}`},
	{"003 reverse proxy", `
{
    "methods": ["GET"],
    "uri": "/hello",
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:80": 1,
            "127.0.0.2:80": 1
        }
    }
}`},
	{"003 reverse proxy, 2 plugins", `
{
    "methods": ["GET"],
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 999999999,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus":{}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:80": 1,
            "127.0.0.2:80": 1
        }
    }
}`},
	{"004 no plugin", `
{
    "uri": "/hello",
    "plugins": {
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:80": 1
        }
    }
}`},
	{"004 limit-count + prometheus", `
{
    "uri": "/hello",
    "plugins": {
        "limit-count": {
            "count": 2000000000000,
            "time_window": 60,
            "rejected_code": 503,
            "key": "remote_addr"
        },
        "prometheus": {}
    },
    "upstream": {
        "type": "roundrobin",
        "nodes": {
            "127.0.0.1:80": 1
        }
    }
}`},
}

func TestSeedCalls(t *testing.T) {
	f := newFixture(t)
	for i, call := range seedCalls {
		// The seeds send these to the data port; the worker forwards them to Internal.
		w := f.callWith(f.h.Internal(), "PUT", "/apisix/admin/routes/1", call.body, "@",
			map[string]string{"X-API-KEY": "edd1c9f034335f136f87ad84b625c8f1"})
		want := 200
		if i == 0 {
			want = 201
		}
		if w.Code != want {
			t.Fatalf("%s: status %d, want %d: %s", call.source, w.Code, want, w.Body)
		}
		// The stored value is the client's object plus id and times.
		var sent, stored map[string]any
		if err := json.Unmarshal([]byte(call.body), &sent); err != nil {
			t.Fatal(err)
		}
		obj, _ := f.store.Get(store.Routes, "1")
		if err := json.Unmarshal(obj.Value, &stored); err != nil {
			t.Fatal(err)
		}
		sent["id"], sent["create_time"], sent["update_time"] = "1", float64(epoch), float64(epoch)
		if !jsonEqual(string(encodeJSON(sent)), string(obj.Value)) {
			t.Errorf("%s: stored %s", call.source, obj.Value)
		}
		snap := f.pub.last()
		if snap == nil || len(snap.Routes) != 1 || snap.Routes[0].URI != sent["uri"] {
			t.Fatalf("%s: published %+v", call.source, snap)
		}
		if _, limited := snap.Routes[0].Plugins["limit-count"]; limited != strings.Contains(call.body, "limit-count") {
			t.Errorf("%s: published plugins %v", call.source, snap.Routes[0].Plugins)
		}
	}
	if f.pub.count() != len(seedCalls) {
		t.Errorf("published %d times for %d calls", f.pub.count(), len(seedCalls))
	}
}
