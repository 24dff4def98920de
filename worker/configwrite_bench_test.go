package worker

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkRoutePut is one route PUT through the Admin API handler with the master's
// whole path to a served change: validation, the workers' build checked in the master,
// the snapshot published, decoded and compiled by a worker. Sub-benchmarks store 0,
// 1,000 and 10,000 routes first, each with its own inline upstream (issue 18's shape):
// a write should cost the same whatever the config holds. Without the fsync and the IPC,
// which BenchmarkConfigScale in benchmark/configscale adds.
func BenchmarkRoutePut(b *testing.B) {
	benchmarkPut(b, "routes", `{"uri":"/probe/%d/*","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`)
}

// BenchmarkUpstreamPut is BenchmarkRoutePut for a stored upstream that no route uses.
func BenchmarkUpstreamPut(b *testing.B) {
	benchmarkPut(b, "upstreams", `{"type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`)
}

// benchmarkPut times PUTs of kind/probe, body formatted with the PUT's number mod 7.
func benchmarkPut(b *testing.B, kind, probe string) {
	for _, routes := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			fx := newInvariantFixture(b)
			var backup bytes.Buffer
			backup.WriteString(`{"gw_backup":1,"revision":0,"routes":[`)
			for i := range routes {
				if i > 0 {
					backup.WriteByte(',')
				}
				fmt.Fprintf(&backup, `{"id":"r%d","uri":"/api/v1/svc%d/*","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i)
			}
			backup.WriteString(`]}`)
			if routes > 0 {
				if _, err := fx.h.Import(b.Context(), backup.Bytes(), "bench", "test"); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				body := fmt.Sprintf(probe, 1980+i%7)
				if w := fx.send("PUT", "/apisix/admin/"+kind+"/probe", []byte(body)); w.Code >= 300 {
					b.Fatalf("PUT: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
