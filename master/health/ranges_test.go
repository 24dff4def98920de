package health

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"gw/conf"
	"gw/shm"
)

// An interval out of conf's range (only an object that bypassed it can hold one) is
// clamped into it: unclamped, these overflowed or were not positive, and NewTicker
// panics on a period that is not positive.
func TestSecondsOfClampsToConfRange(t *testing.T) {
	longest := conf.MaxSeconds * intervalUnit
	tests := []struct {
		n    int
		want int // units
	}{
		{1, 1},
		{conf.MaxSeconds, conf.MaxSeconds},
		{conf.MaxSeconds + 1, conf.MaxSeconds},
		{9223372037, conf.MaxSeconds},
		{math.MaxInt, conf.MaxSeconds},
		{0, 1},
		{-1, 1},
		{math.MinInt, 1},
	}
	for _, tc := range tests {
		got := secondsOf(tc.n)
		if want := intervalUnit * time.Duration(tc.want); got != want || got <= 0 || got > longest {
			t.Errorf("secondsOf(%d) = %v, want %v", tc.n, got, want)
		}
	}
}

// A probe timeout past time.Duration's range probes as a long timeout does: it used to
// become a negative one, and every TCP probe failed at once.
func TestProbeTimeoutPastDurationStillProbes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, timeout := range []float64{1e300, math.Inf(1)} {
		probe := newProbeFunc(&conf.ActiveCheck{Type: "tcp", Timeout: timeout})
		event, ok := probe(context.Background(), &probedNode{probe: ln.Addr().String()})
		if !ok || event != shm.HealthSuccess {
			t.Errorf("timeout %g: probe gave event %d (ok %v), want a success", timeout, event, ok)
		}
	}
}
