package proxy

import (
	"net"
	"testing"

	"gw/conf"
	"gw/internal/testnet"
)

// deadNodes returns n nodes that refuse connections at once: one port that refuses
// connections, at n loopback addresses (127.0.0.0/8 is all loopback), so that each is a node of
// its own. They have priority 1, so that a node of priority 0 is tried after them all.
func deadNodes(tb testing.TB, n int) conf.Nodes {
	tb.Helper()
	port := testnet.RefusedPort(tb)
	nodes := make(conf.Nodes, n)
	for i := range nodes {
		ip := net.IPv4(127, 1, byte(i/250), byte(i%250+1))
		nodes[i] = conf.Node{Host: ip.String(), Port: port, Weight: 1, Priority: 1}
	}
	return nodes
}

// Each upstream has dead nodes, all tried before its one live node (of a lower priority):
// a request gets 200 only when its retries reach the live node.
func TestRetryBounds(t *testing.T) {
	live := startStub(t, reply("live"))
	last := live.node(1)
	seconds := func(s float64) *float64 { return &s }
	cases := []struct {
		name string
		u    conf.Upstream
		want int
	}{
		{"default: one try per node, while nodes − 1 <= conf.DefaultMaxRetries", conf.Upstream{Nodes: append(deadNodes(t, conf.DefaultMaxRetries), last)}, 200},
		{"default: at most conf.DefaultMaxRetries", conf.Upstream{Nodes: append(deadNodes(t, conf.DefaultMaxRetries+1), last)}, 502},
		{"retries set: not capped", conf.Upstream{Nodes: append(deadNodes(t, 40), last), Retries: intPtr(40)}, 200},
		{"retries set: fewer than the nodes", conf.Upstream{Nodes: append(deadNodes(t, 40), last), Retries: intPtr(39)}, 502},
		{"retries set: more than the nodes", conf.Upstream{Nodes: append(deadNodes(t, 40), last), Retries: intPtr(1000)}, 200},
		{"retry_timeout set: the time is the bound", conf.Upstream{Nodes: append(deadNodes(t, 40), last), RetryTimeout: seconds(10)}, 200},
		{"retry_timeout 0: no bound, as in APISIX", conf.Upstream{Nodes: append(deadNodes(t, 40), last), RetryTimeout: seconds(0)}, 200},
		// 2000 refused connections take tens of milliseconds, far past 1 ms.
		{"retry_timeout stops the retries", conf.Upstream{Nodes: append(deadNodes(t, 2000), last), Retries: intPtr(2000), RetryTimeout: seconds(0.001)}, 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := newUpstream(t, &tc.u)
			proxy := startProxy(t, up)
			if status, body := get(t, proxy, "/"); status != tc.want {
				t.Errorf("status %d %s, want %d", status, body, tc.want)
			}
		})
	}
}

func TestRetryTimeoutRefusedWhenNegative(t *testing.T) {
	negative := -1.0
	p := NewPools()
	defer p.Close()
	_, err := p.Upstream(&conf.Upstream{Nodes: deadNodes(t, 1), RetryTimeout: &negative}, nil)
	if want := `invalid configuration: property "retry_timeout" validation failed: must be 0 or 0.001-31536000 seconds, got -1`; err == nil || err.Error() != want {
		t.Errorf("Upstream = %v, want the retry_timeout refused", err)
	}
}

// BenchmarkForwardManyDeadNodes measures one request to an upstream whose live node is
// tried last, after every dead one that the retries allow.
func BenchmarkForwardManyDeadNodes(b *testing.B) {
	live := startStub(b, reply("live"))
	last := live.node(1)
	tenMillis := 0.01
	for _, bc := range []struct {
		name string
		u    conf.Upstream
		want int
	}{
		{"2000 dead, every node tried (APISIX's default)", conf.Upstream{Nodes: append(deadNodes(b, 2000), last), Retries: intPtr(2000)}, 200},
		{"2000 dead, gw's default", conf.Upstream{Nodes: append(deadNodes(b, 2000), last)}, 502},
		{"2000 dead, retry_timeout 10ms", conf.Upstream{Nodes: append(deadNodes(b, 2000), last), Retries: intPtr(2000), RetryTimeout: &tenMillis}, 502},
		{"20 dead, gw's default", conf.Upstream{Nodes: append(deadNodes(b, 20), last)}, 200},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := NewPools()
			b.Cleanup(p.Close)
			up, err := p.Upstream(&bc.u, nil)
			if err != nil {
				b.Fatal(err)
			}
			proxy := startProxy(b, up)
			b.ResetTimer()
			for range b.N {
				if status := statusOf(b, proxy); status != bc.want {
					b.Fatalf("status %d, want %d", status, bc.want)
				}
			}
		})
	}
}

// statusOf sends GET / through proxy on a fresh connection and returns the status.
func statusOf(tb testing.TB, proxy string) int {
	tb.Helper()
	resp, err := client.Get("http://" + proxy + "/")
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
