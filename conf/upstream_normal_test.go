package conf

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func threeNodes() Nodes {
	return Nodes{{Host: "a.example", Port: 80, Weight: 1}, {Host: "b.example", Port: 81, Weight: 2}, {Host: "c.example", Port: 82, Weight: 3}}
}

func manyNodes(count int) Nodes {
	nodes := make(Nodes, count)
	for i := range nodes {
		nodes[i] = Node{Host: "a.example", Port: i + 1, Weight: 1}
	}
	return nodes
}

func TestNormalizeDefaults(t *testing.T) {
	u := &Upstream{Nodes: Nodes{{Host: "a.example", Weight: 1}, {Host: "::1", Port: 8080, Weight: 0}, {Host: "[::2]", Weight: 1}}}
	before := *u
	n, err := u.Normalize(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := NormalUpstream{
		Balancer: BalanceRoundRobin, HashOn: HashOnVars, Scheme: SchemeHTTP, PassHost: PassHostPass,
		Timeout: Timeout{Connect: 60, Send: 60, Read: 60}, Connect: time.Minute, Send: time.Minute, Read: time.Minute,
		Retries: 2, PoolSize: 320, PoolRequests: 1000, PoolIdleTimeout: time.Minute,
		Nodes: []NormalNode{
			{Host: "a.example", Port: 80, Weight: 1, Addr: "a.example:80"},
			{Host: "::1", Port: 8080, Weight: 0, Addr: "[::1]:8080"},
			{Host: "::2", Port: 80, Weight: 1, Addr: "[::2]:80"},
		},
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("Normalize = %+v\nwant        %+v", n, want)
	}
	if !reflect.DeepEqual(*u, before) {
		t.Errorf("Normalize changed its upstream to %+v", *u)
	}
}

func TestNormalizeValues(t *testing.T) {
	secs := func(f float64) *float64 { return &f }
	ints := func(i int) *int { return &i }
	tests := []struct {
		name  string
		u     Upstream
		route *Timeout
		check func(t *testing.T, n *NormalUpstream)
	}{
		{"explicit", Upstream{Type: "chash", HashOn: "header", Key: "X-User", Scheme: "https", PassHost: "rewrite", UpstreamHost: "example.com",
			Retries: ints(1), RetryTimeout: secs(0.25), Timeout: &Timeout{Connect: 1, Send: 2, Read: 3.5},
			KeepalivePool: &KeepalivePool{Size: 5, IdleTimeout: 0.5, Requests: 7}, TLS: &UpstreamTLS{}, Nodes: threeNodes()},
			nil, func(t *testing.T, n *NormalUpstream) {
				if n.Balancer != BalanceChash || n.HashOn != HashOnHeader || n.Key != "X-User" || n.Scheme != SchemeHTTPS ||
					n.PassHost != PassHostRewrite || n.UpstreamHost != "example.com" || n.TLS == nil {
					t.Errorf("enums and texts: %+v", n)
				}
				if n.Retries != 1 || n.RetryTimeout != 250*time.Millisecond || n.Connect != time.Second || n.Send != 2*time.Second ||
					n.Read != 3500*time.Millisecond || n.Timeout.Read != 3.5 {
					t.Errorf("retries and durations: %+v", n)
				}
				if n.PoolSize != 5 || n.PoolRequests != 7 || n.PoolIdleTimeout != 500*time.Millisecond {
					t.Errorf("pool: %d %d %v", n.PoolSize, n.PoolRequests, n.PoolIdleTimeout)
				}
			}},
		{"https default port", Upstream{Scheme: "https", Nodes: Nodes{{Host: "a.example", Weight: 1}}}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.Nodes[0].Port != 443 || n.Nodes[0].Addr != "a.example:443" {
				t.Errorf("node %+v, want port 443", n.Nodes[0])
			}
		}},
		{"route timeout replaces the upstream's", Upstream{Timeout: &Timeout{Connect: 1, Send: 1, Read: 1}, Nodes: threeNodes()},
			&Timeout{Connect: 4, Send: 5, Read: 6}, func(t *testing.T, n *NormalUpstream) {
				if n.Connect != 4*time.Second || n.Send != 5*time.Second || n.Read != 6*time.Second {
					t.Errorf("timeouts %v/%v/%v, want the route's 4s/5s/6s", n.Connect, n.Send, n.Read)
				}
			}},
		{"retries cut to the nodes there are", Upstream{Retries: ints(10), Nodes: threeNodes()}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.Retries != 2 {
				t.Errorf("retries = %d, want 2", n.Retries)
			}
		}},
		{"default retries capped", Upstream{Nodes: manyNodes(100)}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.Retries != DefaultMaxRetries {
				t.Errorf("retries = %d, want %d", n.Retries, DefaultMaxRetries)
			}
		}},
		{"retry_timeout lifts the cap", Upstream{RetryTimeout: secs(0), Nodes: manyNodes(100)}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.Retries != 99 || n.RetryTimeout != 0 {
				t.Errorf("retries %d, retry timeout %v, want 99 and none", n.Retries, n.RetryTimeout)
			}
		}},
		{"the only node is used whatever its weight", Upstream{Nodes: Nodes{{Host: "a.example", Weight: 0}}}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.Nodes[0].Weight != 1 || n.Retries != 0 {
				t.Errorf("node %+v, retries %d", n.Nodes[0], n.Retries)
			}
		}},
		{"no nodes", Upstream{}, nil, func(t *testing.T, n *NormalUpstream) {
			if len(n.Nodes) != 0 || n.Retries != 0 {
				t.Errorf("nodes %v, retries %d", n.Nodes, n.Retries)
			}
		}},
		{"idle_timeout 0 keeps nothing", Upstream{KeepalivePool: &KeepalivePool{Size: 1, Requests: 1}, Nodes: threeNodes()}, nil, func(t *testing.T, n *NormalUpstream) {
			if n.PoolIdleTimeout != 0 {
				t.Errorf("idle timeout %v, want 0", n.PoolIdleTimeout)
			}
		}},
		{"durations at the edges", Upstream{Timeout: &Timeout{Connect: MinSeconds, Send: MaxSeconds, Read: 1.001},
			KeepalivePool: &KeepalivePool{Size: 1, Requests: 1, IdleTimeout: MaxSeconds}, Nodes: threeNodes()}, nil, func(t *testing.T, n *NormalUpstream) {
			const year = 365 * 24 * time.Hour
			if n.Connect != time.Millisecond || n.Send != year || n.Read != 1001*time.Millisecond || n.PoolIdleTimeout != year {
				t.Errorf("durations %v/%v/%v/%v", n.Connect, n.Send, n.Read, n.PoolIdleTimeout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.u.Normalize(tt.route)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, &n)
		})
	}
}

// TestNormalizeRejects covers what only an upstream that bypassed the decoders can hold
// (built in code, or decoded with plain encoding/json): refused, with the field and the
// value, not converted into something else.
func TestNormalizeRejects(t *testing.T) {
	ok := func(f func(u *Upstream)) Upstream {
		u := Upstream{Nodes: threeNodes()}
		f(&u)
		return u
	}
	tests := []struct {
		name  string
		u     Upstream
		route *Timeout
		want  string
	}{
		{"unknown balancer", ok(func(u *Upstream) { u.Type = "random" }), nil, `"type" validation failed: unknown balancer type "random"`},
		{"chash without key", ok(func(u *Upstream) { u.Type = "chash" }), nil, `"key" validation failed: missing key: required when type is "chash" and hash_on is "vars"`},
		{"chash bad var", ok(func(u *Upstream) { u.Type, u.Key = "chash", "http_x" }), nil, `"key" validation failed: must be one of uri,`},
		{"chash unknown variable", ok(func(u *Upstream) { u.Type, u.HashOn, u.Key = "chash", "vars_combinations", "$remote_addr-$nope" }), nil,
			`"key" validation failed: unknown variable "nope"`},
		{"chash bad hash_on", ok(func(u *Upstream) { u.Type, u.HashOn, u.Key = "chash", "ip", "x" }), nil, `"hash_on" validation failed: matches none of the enum values (vars, header, cookie, consumer, vars_combinations), got "ip"`},
		{"udp", ok(func(u *Upstream) { u.Scheme = "udp" }), nil, `"scheme" validation failed: "udp" is not supported yet`},
		{"tls over http", ok(func(u *Upstream) { u.TLS = &UpstreamTLS{} }), nil, `"tls" validation failed: applies only to schemes "https" and "grpcs"`},
		{"rewrite without host", ok(func(u *Upstream) { u.PassHost = "rewrite" }), nil, `"upstream_host" validation failed: is required when pass_host is "rewrite"`},
		{"bad pass_host", ok(func(u *Upstream) { u.PassHost = "keep" }), nil, `"pass_host" validation failed: matches none of the enum values (pass, node, rewrite), got "keep"`},
		{"zero timeout", ok(func(u *Upstream) { u.Timeout = &Timeout{Connect: 1, Send: 0, Read: 1} }), nil, `"timeout.send" validation failed: must be 0.001-31536000 seconds, got 0`},
		{"zero route timeout", ok(func(*Upstream) {}), &Timeout{Connect: 1, Send: 1}, `"timeout.read" validation failed: must be 0.001-31536000 seconds, got 0`},
		{"negative connect", ok(func(u *Upstream) { u.Timeout = &Timeout{Connect: -1, Send: 1, Read: 1} }), nil, `"timeout.connect" validation failed: must be 0.001-31536000 seconds, got -1`},
		{"timeout past time.Duration", ok(func(u *Upstream) { u.Timeout = &Timeout{Connect: 1e300, Send: 1, Read: 1} }), nil, `"timeout.connect" validation failed: must be 0.001-31536000 seconds, got 1e+300`},
		{"timeout rounding to 0", ok(func(u *Upstream) { u.Timeout = &Timeout{Connect: 1, Send: 1, Read: 1e-300} }), nil, `"timeout.read" validation failed: must be 0.001-31536000 seconds, got 1e-300`},
		{"NaN timeout", ok(func(u *Upstream) { u.Timeout = &Timeout{Connect: 1, Send: math.NaN(), Read: 1} }), nil, `"timeout.send" validation failed: must be 0.001-31536000 seconds, got NaN`},
		{"negative retries", ok(func(u *Upstream) { u.Retries = new(-1) }), nil, `"retries" validation failed: must be >= 0, got -1`},
		{"negative retry_timeout", ok(func(u *Upstream) { u.RetryTimeout = new(-1.0) }), nil, `"retry_timeout" validation failed: must be 0 or 0.001-31536000 seconds, got -1`},
		{"pool size negative", ok(func(u *Upstream) { u.KeepalivePool = &KeepalivePool{Size: -1, Requests: 1} }), nil, `"keepalive_pool.size" validation failed: must be 1-`},
		{"pool requests negative", ok(func(u *Upstream) { u.KeepalivePool = &KeepalivePool{Size: 1, Requests: -1} }), nil, `"keepalive_pool.requests" validation failed: must be >= 1, got -1`},
		{"idle_timeout past time.Duration", ok(func(u *Upstream) { u.KeepalivePool = &KeepalivePool{Size: 1, Requests: 1, IdleTimeout: 1e300} }), nil,
			`"keepalive_pool.idle_timeout" validation failed: must be 0 or 0.001-31536000 seconds, got 1e+300`},
		{"empty host", Upstream{Nodes: Nodes{{Host: "", Port: 80, Weight: 1}}}, nil, `"nodes[0].host" validation failed: host "" is neither an IP address nor a valid DNS name`},
		{"bad port", Upstream{Nodes: Nodes{{Host: "a", Port: 1, Weight: 1}, {Host: "a", Port: 70000, Weight: 1}}}, nil, `"nodes[1].port" validation failed: must be 1-65535, got 70000`},
		{"negative weight", Upstream{Nodes: Nodes{{Host: "a", Port: 1, Weight: -1}}}, nil, `"nodes[0].weight" validation failed: must be 0-1000000, got -1`},
		{"weight past the maximum", Upstream{Type: "chash", Key: "remote_addr", Nodes: Nodes{{Host: "a", Port: 1, Weight: 1e17}, {Host: "b", Port: 1, Weight: 1}}}, nil,
			`"nodes[0].weight" validation failed: must be 0-1000000, got 100000000000000000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.u.Normalize(tt.route)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if _, ok := err.(*ObjectError); !ok {
				t.Errorf("err is a %T, want an *ObjectError", err)
			}
		})
	}
}

// TestNormalizeAcceptsWhatDecodes: every upstream the decoder accepts normalises, and its
// node addresses are those health state is keyed by (NodeAddress).
func TestNormalizeAcceptsWhatDecodes(t *testing.T) {
	for _, tc := range upstreamAccepts {
		u, err := DecodeUpstream([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		n, err := u.Normalize(nil)
		if err != nil {
			t.Errorf("%s decodes but does not normalise: %v", tc.body, err)
			continue
		}
		for i := range u.Nodes {
			if got, want := n.Nodes[i].Addr, u.NodeAddress(&u.Nodes[i]); got != want {
				t.Errorf("%s: node %d address %q, NodeAddress %q", tc.body, i, got, want)
			}
		}
	}
}
