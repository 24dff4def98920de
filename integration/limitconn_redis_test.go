package integration

import (
	"fmt"
	"testing"
	"time"

	"gw/internal/testredis"
)

// limit-conn with policy redis (issue 22): two gateways of two workers each count a key's
// requests in flight together. conn 2 and burst 1 with requests held at the upstream:
// of 12 sent over both gateways, 3 are held and 9 get 503; once the held ones end, their
// places are free again on either gateway.
func TestLimitConnRedisExactAcrossGateways(t *testing.T) {
	up := startHeldUpstream(t)
	s := testredis.Start(t)
	config := fmt.Sprintf(`{"conn": 2, "burst": 1, "default_conn_delay": 0.1, "rejected_code": 503, "key": "remote_addr", `+
		`"policy": "redis", "redis_host": "127.0.0.1", "redis_port": %d}`, s.Port)
	var gateways []*instance
	for range 2 {
		in := newInstance(t, "")
		in.start("--workers", "2")
		in.putLimitConnRoute("1", "/limit_conn", up.addr, config)
		gateways = append(gateways, in)
	}
	a, b := sendHeld(gateways[0].data, "/limit_conn", 6), sendHeld(gateways[1].data, "/limit_conn", 6)
	rejected := 0
	for rejected < 9 {
		select {
		case s := <-a:
			if s != 503 {
				t.Fatalf("a request ended %d while three were held, want 503", s)
			}
			rejected++
		case s := <-b:
			if s != 503 {
				t.Fatalf("a request ended %d while three were held, want 503", s)
			}
			rejected++
		case <-time.After(30 * time.Second):
			t.Fatalf("%d rejected after 30s, want 9", rejected)
		}
	}
	if !waitFor(10*time.Second, func() bool { return up.holding.Load() == 3 }) {
		t.Fatalf("upstream holds %d, want 3", up.holding.Load())
	}
	close(up.release)
	for ended := 0; ended < 3; {
		select {
		case s := <-a:
			if s != 200 {
				t.Fatalf("held request ended %d, want 200", s)
			}
			ended++
		case s := <-b:
			if s != 200 {
				t.Fatalf("held request ended %d, want 200", s)
			}
			ended++
		case <-time.After(30 * time.Second):
			t.Fatal("the held requests did not end within 30s of their release")
		}
	}
	// Every place was given back: three more pass, one after another, on each gateway.
	for i, in := range gateways {
		if got := sendBurst(t, in.data, "/limit_conn", 3, 1); got.statuses[200] != 3 {
			t.Fatalf("gateway %d after the held requests ended: %v, want 3 passed", i+1, got.statuses)
		}
	}
	if n, _ := s.Do("EVAL", "local n = 0 for _, k in ipairs(redis.call('KEYS', 'limit_conn:*')) do n = n + redis.call('ZCARD', k) end return n", "0"); n != "0" {
		t.Errorf("%s requests still counted in Redis after every request ended", n)
	}
}
