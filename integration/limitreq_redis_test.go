package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gw/internal/testredis"
)

// limit-req with policy redis and redis-cluster (issue 22): two gateways of two workers
// each take from one bucket exactly. At rate 0.1 a second and burst 9 with nodelay, 200
// requests over both pass 10 (the first, then burst); the bucket leaks one request in
// 10 s, far longer than the burst takes.
func TestLimitReqRedisExactAcrossGateways(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	cluster := testredis.StartCluster(t)
	nodes, _ := json.Marshal(cluster.Addrs())
	for _, tt := range []struct{ name, policy string }{
		{"redis", fmt.Sprintf(`"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d`, s.Port)},
		{"redis-cluster", fmt.Sprintf(`"policy": "redis-cluster", "redis_cluster_nodes": %s, "redis_cluster_name": "c1"`, nodes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			config := `{"rate": 0.1, "burst": 9, "nodelay": true, "rejected_code": 429, "key": "remote_addr", ` + tt.policy + `}`
			var gateways []*instance
			for range 2 {
				in := newInstance(t, "")
				in.start("--workers", "2")
				in.putLimitReqRoute("1", "/bucket", up.addr, config)
				gateways = append(gateways, in)
			}
			results := make(chan burst, len(gateways))
			for _, in := range gateways {
				go func() { results <- sendBurst(t, in.data, "/bucket", 100, 20) }()
			}
			passed, rejected, other := 0, 0, 0
			for range gateways {
				b := <-results
				passed += b.statuses[200]
				rejected += b.statuses[429]
				other += b.errors
				for code, n := range b.statuses {
					if code != 200 && code != 429 {
						other += n
						t.Errorf("%d answers %d", n, code)
					}
				}
			}
			if passed != 10 || rejected != 190 || other != 0 {
				t.Fatalf("passed %d, rejected %d, %d other over two gateways of two workers; want exactly 10 and 190\nerror.log:\n%s",
					passed, rejected, other, lastLines(gateways[0].errorLog(), 20))
			}
		})
	}
}

// Redis down: limit-req answers 500 {"error_msg":"failed to limit req"}, or lets requests
// through with allow_degradation; the error log says why.
func TestLimitReqRedisDown(t *testing.T) {
	up := startUpstream(t, "ok")
	s := testredis.Start(t)
	port := s.Port
	s.Stop()
	in := newInstance(t, "")
	in.start("--workers", "1")
	base := fmt.Sprintf(`"rate": 1, "burst": 1, "key": "remote_addr", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d, "redis_timeout": 300`, port)
	in.putLimitReqRoute("1", "/strict", up.addr, "{"+base+"}")
	in.putLimitReqRoute("2", "/lenient", up.addr, "{"+base+`, "allow_degradation": true}`)
	if resp, body := in.get("/strict"); resp.StatusCode != 500 || !strings.Contains(body, `"error_msg":"failed to limit req"`) {
		t.Errorf("Redis down: %d %q, want 500 failed to limit req", resp.StatusCode, body)
	}
	if resp, body := in.get("/lenient"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("Redis down with allow_degradation: %d %q, want the upstream's 200", resp.StatusCode, body)
	}
	if !waitFor(5*time.Second, func() bool {
		return strings.Contains(in.errorLog(), "limit-req: failed to limit req with redis 127.0.0.1:")
	}) {
		t.Errorf("the error log does not say why:\n%s", lastLines(in.errorLog(), 10))
	}
}
