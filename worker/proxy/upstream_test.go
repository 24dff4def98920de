package proxy

import (
	"strings"
	"testing"
	"time"

	"gw/conf"
)

func intPtr(i int) *int { return &i }

func nodes(weights ...int) conf.Nodes {
	ns := make(conf.Nodes, len(weights))
	for i, w := range weights {
		ns[i] = conf.Node{Host: "127.0.0.1", Port: 10001 + i, Weight: w}
	}
	return ns
}

func build(t *testing.T, u *conf.Upstream, routeTimeout *conf.Timeout) *Upstream {
	t.Helper()
	p := NewPools()
	t.Cleanup(p.Close)
	up, err := p.Upstream(u, routeTimeout)
	if err != nil {
		t.Fatalf("Upstream: %v", err)
	}
	return up
}

// picks returns the node indexes of n successive picks, as letters (A is node 0).
func picks(up *Upstream, n int) string {
	var b strings.Builder
	tried := make([]uint64, 1)
	for range n {
		i := up.pick(tried)
		if i < 0 {
			b.WriteByte('-')
			continue
		}
		b.WriteByte(byte('A' + i))
	}
	return b.String()
}

func TestPickOrder(t *testing.T) {
	tests := []struct {
		name  string
		nodes conf.Nodes
		want  string
	}{
		{"smooth 5/1/1", nodes(5, 1, 1), "AABACAAAABACAA"},
		{"equal", nodes(1, 1, 1), "ABCABC"},
		{"2/1", nodes(2, 1), "ABAABA"},
		{"weight 0 never picked", nodes(0, 1, 2), "CBCCBC"},
		{"only node, weight 0", nodes(0), "AAA"},
		{"all weight 0", nodes(0, 0), "--"},
		{"higher priority first", conf.Nodes{
			{Host: "127.0.0.1", Port: 1, Weight: 1, Priority: 0},
			{Host: "127.0.0.1", Port: 2, Weight: 1, Priority: 5},
			{Host: "127.0.0.1", Port: 3, Weight: 1, Priority: 5},
		}, "BCBC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := build(t, &conf.Upstream{Nodes: tt.nodes}, nil)
			if got := picks(up, len(tt.want)); got != tt.want {
				t.Errorf("picks = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPickProportions(t *testing.T) {
	up := build(t, &conf.Upstream{Nodes: nodes(5, 1, 1)}, nil)
	counts := map[rune]int{}
	for _, c := range picks(up, 700) {
		counts[c]++
	}
	if counts['A'] != 500 || counts['B'] != 100 || counts['C'] != 100 {
		t.Errorf("700 picks of 5/1/1 gave %v, want A:500 B:100 C:100", counts)
	}
}

func TestPickSkipsTried(t *testing.T) {
	up := build(t, &conf.Upstream{Nodes: conf.Nodes{
		{Host: "127.0.0.1", Port: 1, Weight: 1, Priority: 1},
		{Host: "127.0.0.1", Port: 2, Weight: 1, Priority: 1},
		{Host: "127.0.0.1", Port: 3, Weight: 9, Priority: 0},
	}}, nil)
	tried := make([]uint64, 1)
	var order []int
	for {
		i := up.pick(tried)
		if i < 0 {
			break
		}
		set(tried, i)
		order = append(order, i)
	}
	// Both priority-1 nodes before the priority-0 one, each once.
	if len(order) != 3 || order[2] != 2 || order[0] == order[1] {
		t.Errorf("pick order with tried nodes skipped = %v, want the two priority-1 nodes then 2", order)
	}
}

func TestPickManyNodes(t *testing.T) {
	weights := make([]int, 130)
	for i := range weights {
		weights[i] = 1
	}
	up := build(t, &conf.Upstream{Nodes: nodes(weights...)}, nil)
	tried := make([]uint64, 3)
	seen := map[int]bool{}
	for i := up.pick(tried); i >= 0; i = up.pick(tried) {
		if seen[i] {
			t.Fatalf("node %d picked twice although marked tried", i)
		}
		seen[i] = true
		set(tried, i)
	}
	if len(seen) != 130 {
		t.Errorf("picked %d distinct nodes of 130 before running out", len(seen))
	}
}

func TestUpstreamBuild(t *testing.T) {
	ok := func(f func(u *conf.Upstream)) *conf.Upstream {
		u := &conf.Upstream{Nodes: nodes(1, 1, 1)}
		f(u)
		return u
	}
	tests := []struct {
		name    string
		u       *conf.Upstream
		route   *conf.Timeout
		wantErr string
		check   func(t *testing.T, up *Upstream)
	}{
		{name: "defaults", u: ok(func(*conf.Upstream) {}), check: func(t *testing.T, up *Upstream) {
			if up.retries != 2 || up.connectTimeout != 60*time.Second || up.readTimeout != 60*time.Second ||
				up.sendTimeout != 60*time.Second || up.passHost != conf.PassHostPass {
				t.Errorf("defaults: retries %d, timeouts %v/%v/%v, pass_host %d", up.retries,
					up.connectTimeout, up.sendTimeout, up.readTimeout, up.passHost)
			}
			k := up.nodes[0].pool.key
			if k.size != 320 || k.requests != 1000 || k.idleTimeout != 60*time.Second || k.secure {
				t.Errorf("default pool settings %+v", k.poolSettings)
			}
		}},
		{name: "explicit", u: ok(func(u *conf.Upstream) {
			u.Type, u.Scheme, u.PassHost, u.UpstreamHost = "roundrobin", "https", "rewrite", "example.com"
			u.Retries = intPtr(1)
			u.Timeout = &conf.Timeout{Connect: 1, Send: 2, Read: 3.5}
			u.KeepalivePool = &conf.KeepalivePool{Size: 5, IdleTimeout: 0.5, Requests: 7}
		}), check: func(t *testing.T, up *Upstream) {
			if up.retries != 1 || up.connectTimeout != time.Second || up.sendTimeout != 2*time.Second ||
				up.readTimeout != 3500*time.Millisecond || string(up.upstreamHost) != "example.com" {
				t.Errorf("got retries %d, timeouts %v/%v/%v, upstream_host %q", up.retries,
					up.connectTimeout, up.sendTimeout, up.readTimeout, up.upstreamHost)
			}
			if !strings.Contains(string(up.msgReadTimeout), "within 3.5s") {
				t.Errorf("504 body %s does not name the read timeout", up.msgReadTimeout)
			}
			k := up.nodes[0].pool.key
			if k.size != 5 || k.requests != 7 || k.idleTimeout != 500*time.Millisecond || !k.secure {
				t.Errorf("pool settings %+v", k.poolSettings)
			}
		}},
		{name: "partial pool", u: ok(func(u *conf.Upstream) {
			u.KeepalivePool = &conf.KeepalivePool{IdleTimeout: 5}
		}), check: func(t *testing.T, up *Upstream) {
			k := up.nodes[0].pool.key
			if k.size != 320 || k.requests != 1000 || k.idleTimeout != 5*time.Second {
				t.Errorf("pool settings %+v, want 320/1000/5s", k.poolSettings)
			}
		}},
		{name: "route timeout overrides", u: ok(func(u *conf.Upstream) {
			u.Timeout = &conf.Timeout{Connect: 1, Send: 1, Read: 1}
		}), route: &conf.Timeout{Connect: 4, Send: 5, Read: 6}, check: func(t *testing.T, up *Upstream) {
			if up.connectTimeout != 4*time.Second || up.sendTimeout != 5*time.Second || up.readTimeout != 6*time.Second {
				t.Errorf("timeouts %v/%v/%v, want the route's 4s/5s/6s", up.connectTimeout, up.sendTimeout, up.readTimeout)
			}
		}},
		{name: "retries capped at nodes-1", u: ok(func(u *conf.Upstream) { u.Retries = intPtr(10) }),
			check: func(t *testing.T, up *Upstream) {
				if up.retries != 2 {
					t.Errorf("retries = %d, want 2", up.retries)
				}
			}},
		{name: "host headers", u: &conf.Upstream{Nodes: conf.Nodes{
			{Host: "a.example", Port: 80, Weight: 1},
			{Host: "a.example", Port: 8080, Weight: 1},
			{Host: "[::1]", Port: 80, Weight: 1},
			{Host: "::1", Port: 81, Weight: 1},
			{Host: "b.example", Weight: 1},
		}}, check: func(t *testing.T, up *Upstream) {
			want := []string{"a.example", "a.example:8080", "[::1]", "[::1]:81", "b.example"}
			for i, w := range want {
				if got := string(up.nodes[i].hostHeader); got != w {
					t.Errorf("node %d Host = %q, want %q", i, got, w)
				}
			}
			if up.nodes[4].pool.key.port != 80 {
				t.Errorf("a node without port got port %d, want 80", up.nodes[4].pool.key.port)
			}
		}},
		{name: "no nodes", u: &conf.Upstream{}, check: func(t *testing.T, up *Upstream) {
			if len(up.nodes) != 0 {
				t.Errorf("nodes = %d", len(up.nodes))
			}
		}},
		{name: "nil upstream", u: nil, wantErr: "upstream is missing"},
		// conf's Normalize checks every value (conf/upstream_normal_test.go has the
		// cases); Upstream returns its error, which names the field and the value.
		{name: "unknown balancer", u: ok(func(u *conf.Upstream) { u.Type = "random" }),
			wantErr: `invalid configuration: property "type" validation failed: unknown balancer type "random"`},
		{name: "weight past the maximum", u: &conf.Upstream{Type: "chash", Key: "remote_addr", Nodes: conf.Nodes{{Host: "a", Port: 1, Weight: 1e17}, {Host: "b", Port: 1, Weight: 1}}},
			wantErr: `property "nodes[0].weight" validation failed: must be 0-1000000, got 100000000000000000`},
		{name: "chash consumer", u: ok(func(u *conf.Upstream) { u.Type, u.HashOn = "chash", "consumer" }), check: func(t *testing.T, up *Upstream) {
			if up.balancer != conf.BalanceChash || up.hashKey.source != conf.HashOnConsumer || len(up.ring.groups) != 1 {
				t.Errorf("balancer %d, source %d, %d ring groups", up.balancer, up.hashKey.source, len(up.ring.groups))
			}
		}},
		{name: "least_conn", u: ok(func(u *conf.Upstream) { u.Type = "least_conn" }), check: func(t *testing.T, up *Upstream) {
			if up.balancer != conf.BalanceLeastConn || len(up.state.inflight) != 3 {
				t.Errorf("balancer %d with %d counters", up.balancer, len(up.state.inflight))
			}
		}},
		{name: "ewma", u: ok(func(u *conf.Upstream) { u.Type = "ewma" }), check: func(t *testing.T, up *Upstream) {
			if up.balancer != conf.BalanceEWMA || len(up.state.ewma) != 3 {
				t.Errorf("balancer %d with %d averages", up.balancer, len(up.state.ewma))
			}
		}},
		{name: "idle_timeout 0 keeps nothing", u: ok(func(u *conf.Upstream) { u.KeepalivePool = &conf.KeepalivePool{Size: 1, Requests: 1} }),
			check: func(t *testing.T, up *Upstream) {
				if k := up.nodes[0].pool.key; k.idleTimeout != 0 {
					t.Errorf("idle timeout %v, want 0", k.idleTimeout)
				}
			}},
		{name: "timeouts at the edges", u: ok(func(u *conf.Upstream) {
			u.Timeout = &conf.Timeout{Connect: conf.MinSeconds, Send: conf.MaxSeconds, Read: 1.001}
			u.KeepalivePool = &conf.KeepalivePool{Size: 1, Requests: 1, IdleTimeout: conf.MaxSeconds}
		}), check: func(t *testing.T, up *Upstream) {
			const year = 365 * 24 * time.Hour
			if up.connectTimeout != time.Millisecond || up.sendTimeout != year || up.readTimeout != 1001*time.Millisecond {
				t.Errorf("timeouts %v/%v/%v, want 1ms/%v/1.001s", up.connectTimeout, up.sendTimeout, up.readTimeout, year)
			}
			if k := up.nodes[0].pool.key; k.idleTimeout != year {
				t.Errorf("idle timeout %v, want %v", k.idleTimeout, year)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPools()
			defer p.Close()
			var before conf.Upstream
			var beforePool conf.KeepalivePool
			if tt.u != nil {
				before = *tt.u
				if tt.u.KeepalivePool != nil {
					beforePool = *tt.u.KeepalivePool
				}
			}
			up, err := p.Upstream(tt.u, tt.route)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.u.Type != before.Type || tt.u.KeepalivePool != before.KeepalivePool || tt.u.Timeout != before.Timeout {
				t.Errorf("Upstream modified its argument")
			}
			if kp := tt.u.KeepalivePool; kp != nil && *kp != beforePool {
				t.Errorf("Upstream changed the caller's keepalive_pool to %+v", *kp)
			}
			tt.check(t, up)
		})
	}
}

func TestPoolsShareAndRetain(t *testing.T) {
	p := NewPools()
	defer p.Close()
	a, _ := p.Upstream(&conf.Upstream{Nodes: nodes(1, 1)}, nil)
	b, _ := p.Upstream(&conf.Upstream{Nodes: nodes(1)}, &conf.Timeout{Connect: 1, Send: 1, Read: 1})
	c, _ := p.Upstream(&conf.Upstream{Nodes: nodes(1), KeepalivePool: &conf.KeepalivePool{Size: 1, IdleTimeout: 1, Requests: 1}}, nil)
	if a.nodes[0].pool != b.nodes[0].pool {
		t.Errorf("same node and pool settings got two pools")
	}
	if a.nodes[0].pool == c.nodes[0].pool {
		t.Errorf("different keepalive_pool settings share a pool")
	}
	p.Retain([]*Upstream{b})
	if !a.nodes[1].pool.closed || !c.nodes[0].pool.closed || a.nodes[0].pool.closed {
		t.Errorf("Retain(b) closed the wrong pools")
	}
	again, _ := p.Upstream(&conf.Upstream{Nodes: nodes(1, 1)}, nil)
	if again.nodes[0].pool != a.nodes[0].pool || again.nodes[1].pool == a.nodes[1].pool {
		t.Errorf("after Retain, a kept pool was not reused or a dropped one was")
	}
}
