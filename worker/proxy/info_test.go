package proxy

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/internal/race"
	"gw/plugins"
)

func TestForwardInfoReportsNodeAndTime(t *testing.T) {
	slow := startStub(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(20 * time.Millisecond)
		ctx.WriteString("ok") //nolint:errcheck
	})
	// A port nobody listens on: connecting fails at once, so the request moves on.
	dead := freeClosedPort(t)
	tests := []struct {
		name      string
		nodes     conf.Nodes
		wantNode  string
		minNanos  int64
		wantTried bool
	}{
		{"answered", conf.Nodes{{Host: "127.0.0.1", Port: slow.port, Weight: 1}},
			"127.0.0.1:" + strconv.Itoa(slow.port), int64(20 * time.Millisecond), true},
		{"no node answered", conf.Nodes{{Host: "127.0.0.1", Port: dead, Weight: 1}},
			"127.0.0.1:" + strconv.Itoa(dead), 0, true},
		{"IPv6 node in brackets", conf.Nodes{{Host: "::1", Port: dead, Weight: 1}},
			"[::1]:" + strconv.Itoa(dead), 0, true},
		{"no node can take requests", conf.Nodes{}, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, _ := newUpstream(t, &conf.Upstream{Nodes: tt.nodes})
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI("/x")
			ctx.Init(&ctx.Request, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}, nil)
			info := Info{Node: []byte("stale"), UpstreamNanos: 12345}
			up.ForwardInfo(&ctx, &info)
			if string(info.Node) != tt.wantNode {
				t.Errorf("Node = %q, want %q", info.Node, tt.wantNode)
			}
			if !tt.wantTried {
				if info.UpstreamNanos != -1 {
					t.Errorf("UpstreamNanos = %d, want -1 when no node was tried", info.UpstreamNanos)
				}
				return
			}
			if info.UpstreamNanos < tt.minNanos {
				t.Errorf("UpstreamNanos = %v, want at least %v", time.Duration(info.UpstreamNanos), time.Duration(tt.minNanos))
			}
		})
	}
}

func freeClosedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestForwardInfoDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items, so pooled objects are allocated again")
	}
	s := startStub(t, func(ctx *fasthttp.RequestCtx) { ctx.WriteString("hello") }) //nolint:errcheck
	up, _ := newUpstream(t, &conf.Upstream{Nodes: conf.Nodes{{Host: "127.0.0.1", Port: s.port, Weight: 1}}})
	var template fasthttp.Request
	template.SetRequestURI("/small")
	template.Header.SetHost("client.example")
	var ctx fasthttp.RequestCtx
	ctx.Init(&template, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}, nil)
	run := func() {
		template.CopyTo(&ctx.Request)
		ctx.Request.URI()
		var info Info
		up.ForwardInfo(&ctx, &info)
		if ctx.Response.StatusCode() != 200 || len(info.Node) == 0 {
			t.Fatalf("status %d, node %q", ctx.Response.StatusCode(), info.Node)
		}
		ctx.Response.Reset()
	}
	for range 20 {
		run()
	}
	if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
		t.Errorf("ForwardInfo allocates %.1f times per request, want 0", allocs)
	}
}

// A chash key naming $route_id reads Info.Route: each route's requests go to the node its
// id hashes to, not, as for a key without a value, to the client address's.
func TestForwardInfoHashesOnTheRoute(t *testing.T) {
	var nodes conf.Nodes
	for range 4 {
		nodes = append(nodes, conf.Node{Host: "127.0.0.1", Port: freeClosedPort(t), Weight: 1})
	}
	noRetry := 0
	up, _ := newUpstream(t, &conf.Upstream{Type: "chash", HashOn: "vars_combinations", Key: "$route_id", Nodes: nodes, Retries: &noRetry})
	seen := map[string]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/x")
		ctx.Init(&ctx.Request, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}, nil)
		info := Info{Route: &plugins.RouteInfo{ID: id}}
		up.ForwardInfo(&ctx, &info)
		want := string(up.nodes[up.pickChash(stringHash(id), make([]uint64, 1))].addr)
		if string(info.Node) != want {
			t.Errorf("route %s went to %s, want %s", id, info.Node, want)
		}
		seen[string(info.Node)] = true
	}
	if len(seen) < 2 {
		t.Errorf("eight routes all went to %v: the key did not vary with the route", seen)
	}
}
