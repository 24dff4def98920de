package conf

import (
	"math"
	"strings"
	"testing"
	"time"
)

// upstreamWith is an upstream of two nodes with the members in fields added.
func upstreamWith(fields string) string {
	return `{"nodes":{"a:1":1,"b:1":1},` + fields + `}`
}

// Each bounded number of an upstream: its edges accepted (and decoded to the value
// written), one step past each edge refused with the field and the range.
func TestUpstreamNumberRanges(t *testing.T) {
	const seconds = "0.001-31536000 seconds"
	tests := []struct {
		name, body string
		// path and reason say why the body is refused; empty when it is accepted and got
		// returns want.
		path, reason string
		got          func(*Upstream) any
		want         any
	}{
		// Node weights, both forms.
		{name: "map weight 0", body: `{"nodes":{"a:1":0}}`, got: firstWeight, want: 0},
		{name: "map weight at the maximum", body: `{"nodes":{"a:1":1000000}}`, got: firstWeight, want: 1000000},
		{name: "map weight past the maximum", body: `{"nodes":{"a:1":1000001}}`, path: "nodes", reason: `node "a:1": weight must be 0-1000000, got 1000001`},
		{name: "map weight -1", body: `{"nodes":{"a:1":-1}}`, path: "nodes", reason: `node "a:1": weight must be 0-1000000, got -1`},
		{name: "chash weight that overflowed the ring", body: `{"type":"chash","key":"remote_addr","nodes":{"127.0.0.1:1980":100000000000000000,"127.0.0.1:1981":1}}`,
			path: "nodes", reason: `node "127.0.0.1:1980": weight must be 0-1000000, got 100000000000000000`},
		{name: "map weight past int64", body: `{"nodes":{"a:1":9223372036854775808}}`, path: "nodes", reason: `node "a:1": weight must be 0-1000000, got 9223372036854775808`},
		{name: "map weight with an exponent", body: `{"nodes":{"a:1":1e17}}`, path: "nodes", reason: `node "a:1": weight must be 0-1000000, got 1e17`},
		{name: "map weight past float64", body: `{"nodes":{"a:1":1e400}}`, path: "nodes", reason: `node "a:1": weight must be 0-1000000, got 1e400`},
		{name: "map weight written 1e6", body: `{"nodes":{"a:1":1e6}}`, got: firstWeight, want: 1000000},
		{name: "list weight 0", body: `{"nodes":[{"host":"a","weight":0}]}`, got: firstWeight, want: 0},
		{name: "list weight at the maximum", body: `{"nodes":[{"host":"a","weight":1000000}]}`, got: firstWeight, want: 1000000},
		{name: "list weight past the maximum", body: `{"nodes":[{"host":"a","weight":1000001}]}`, path: "nodes[0].weight", reason: "must be 0-1000000, got 1000001"},
		{name: "list weight -1", body: `{"nodes":[{"host":"a","weight":-1}]}`, path: "nodes[0].weight", reason: "must be 0-1000000, got -1"},
		{name: "list weight a fraction", body: `{"nodes":[{"host":"a","weight":1.5}]}`, path: "nodes[0].weight", reason: "wrong type: expected integer, got number 1.5"},

		// timeout: each of the three.
		{name: "connect at the minimum", body: upstreamWith(`"timeout":{"connect":0.001,"send":1,"read":1}`), got: func(u *Upstream) any { return u.Timeout.Connect }, want: 0.001},
		{name: "connect under the minimum", body: upstreamWith(`"timeout":{"connect":0.00099,"send":1,"read":1}`), path: "timeout.connect", reason: "must be " + seconds + ", got 0.00099"},
		{name: "connect 0", body: upstreamWith(`"timeout":{"connect":0,"send":1,"read":1}`), path: "timeout.connect", reason: "must be " + seconds + ", got 0"},
		{name: "send at the maximum", body: upstreamWith(`"timeout":{"connect":1,"send":31536000,"read":1}`), got: func(u *Upstream) any { return u.Timeout.Send }, want: 31536000.0},
		{name: "send past the maximum", body: upstreamWith(`"timeout":{"connect":1,"send":31536000.001,"read":1}`), path: "timeout.send", reason: "must be " + seconds + ", got 31536000.001"},
		{name: "connect that overflowed time.Duration", body: upstreamWith(`"timeout":{"connect":1e300,"send":1,"read":1}`), path: "timeout.connect", reason: "must be " + seconds + ", got 1e300"},
		{name: "read past float64", body: upstreamWith(`"timeout":{"connect":1,"send":1,"read":1e400}`), path: "timeout.read", reason: "must be " + seconds + ", got 1e400"},
		{name: "read negative", body: upstreamWith(`"timeout":{"connect":1,"send":1,"read":-1}`), path: "timeout.read", reason: "must be " + seconds + ", got -1"},
		{name: "read a string", body: upstreamWith(`"timeout":{"connect":1,"send":1,"read":"1"}`), path: "timeout.read", reason: `wrong type: expected number, got string "1"`},

		// retry_timeout: 0 or a duration.
		{name: "retry_timeout 0", body: upstreamWith(`"retry_timeout":0`), got: func(u *Upstream) any { return *u.RetryTimeout }, want: 0.0},
		{name: "retry_timeout at the minimum", body: upstreamWith(`"retry_timeout":0.001`), got: func(u *Upstream) any { return *u.RetryTimeout }, want: 0.001},
		{name: "retry_timeout under the minimum", body: upstreamWith(`"retry_timeout":0.0005`), path: "retry_timeout", reason: "must be 0 or " + seconds + ", got 0.0005"},
		{name: "retry_timeout at the maximum", body: upstreamWith(`"retry_timeout":31536000`), got: func(u *Upstream) any { return *u.RetryTimeout }, want: 31536000.0},
		{name: "retry_timeout past the maximum", body: upstreamWith(`"retry_timeout":31536001`), path: "retry_timeout", reason: "must be 0 or " + seconds + ", got 31536001"},

		// retries: any int64 from 0 works (the balancer stops at the nodes there are).
		{name: "retries 0", body: upstreamWith(`"retries":0`), got: func(u *Upstream) any { return *u.Retries }, want: 0},
		{name: "retries at int64's maximum", body: upstreamWith(`"retries":9223372036854775807`), got: func(u *Upstream) any { return *u.Retries }, want: math.MaxInt64},
		{name: "retries -1", body: upstreamWith(`"retries":-1`), path: "retries", reason: "must be >= 0, got -1"},

		// keepalive_pool.
		{name: "size 1", body: upstreamWith(`"keepalive_pool":{"size":1}`), got: func(u *Upstream) any { return u.KeepalivePool.Size }, want: 1},
		{name: "size 0", body: upstreamWith(`"keepalive_pool":{"size":0}`), path: "keepalive_pool.size", reason: "must be 1-1048576, got 0"},
		{name: "size at the maximum", body: upstreamWith(`"keepalive_pool":{"size":1048576}`), got: func(u *Upstream) any { return u.KeepalivePool.Size }, want: 1048576},
		{name: "size past the maximum", body: upstreamWith(`"keepalive_pool":{"size":1048577}`), path: "keepalive_pool.size", reason: "must be 1-1048576, got 1048577"},
		{name: "idle_timeout 0", body: upstreamWith(`"keepalive_pool":{"idle_timeout":0}`), got: func(u *Upstream) any { return u.KeepalivePool.IdleTimeout }, want: 0.0},
		{name: "idle_timeout at the minimum", body: upstreamWith(`"keepalive_pool":{"idle_timeout":0.001}`), got: func(u *Upstream) any { return u.KeepalivePool.IdleTimeout }, want: 0.001},
		{name: "idle_timeout under the minimum", body: upstreamWith(`"keepalive_pool":{"idle_timeout":1e-300}`), path: "keepalive_pool.idle_timeout", reason: "must be 0 or " + seconds + ", got 1e-300"},
		{name: "idle_timeout at the maximum", body: upstreamWith(`"keepalive_pool":{"idle_timeout":31536000}`), got: func(u *Upstream) any { return u.KeepalivePool.IdleTimeout }, want: 31536000.0},
		{name: "idle_timeout past the maximum", body: upstreamWith(`"keepalive_pool":{"idle_timeout":31536000.5}`), path: "keepalive_pool.idle_timeout", reason: "must be 0 or " + seconds + ", got 31536000.5"},
		{name: "requests at int64's maximum", body: upstreamWith(`"keepalive_pool":{"requests":9223372036854775807}`), got: func(u *Upstream) any { return u.KeepalivePool.Requests }, want: math.MaxInt64},
		{name: "requests 0", body: upstreamWith(`"keepalive_pool":{"requests":0}`), path: "keepalive_pool.requests", reason: "must be >= 1, got 0"},

		// checks.active: timeout and the two intervals.
		{name: "check timeout at the minimum", body: upstreamWith(`"checks":{"active":{"timeout":0.001}}`), got: func(u *Upstream) any { return u.Checks.Active.Timeout }, want: 0.001},
		{name: "check timeout under the minimum", body: upstreamWith(`"checks":{"active":{"timeout":0.0009}}`), path: "checks.active.timeout", reason: "must be " + seconds + ", got 0.0009"},
		{name: "check timeout at the maximum", body: upstreamWith(`"checks":{"active":{"timeout":31536000}}`), got: func(u *Upstream) any { return u.Checks.Active.Timeout }, want: 31536000.0},
		{name: "check timeout past the maximum", body: upstreamWith(`"checks":{"active":{"timeout":31536000.01}}`), path: "checks.active.timeout", reason: "must be " + seconds + ", got 31536000.01"},
		{name: "healthy interval 1", body: upstreamWith(`"checks":{"active":{"healthy":{"interval":1}}}`), got: func(u *Upstream) any { return u.Checks.Active.Healthy.Interval }, want: 1},
		{name: "healthy interval at the maximum", body: upstreamWith(`"checks":{"active":{"healthy":{"interval":31536000}}}`), got: func(u *Upstream) any { return u.Checks.Active.Healthy.Interval }, want: 31536000},
		{name: "healthy interval past the maximum", body: upstreamWith(`"checks":{"active":{"healthy":{"interval":31536001}}}`), path: "checks.active.healthy.interval", reason: "must be 1-31536000, got 31536001"},
		{name: "unhealthy interval at the maximum", body: upstreamWith(`"checks":{"active":{"unhealthy":{"interval":31536000}}}`), got: func(u *Upstream) any { return u.Checks.Active.Unhealthy.Interval }, want: 31536000},
		{name: "unhealthy interval that overflowed the ticker", body: upstreamWith(`"checks":{"active":{"unhealthy":{"interval":9223372037}}}`), path: "checks.active.unhealthy.interval", reason: "must be 1-31536000, got 9223372037"},
		{name: "unhealthy interval 0", body: upstreamWith(`"checks":{"active":{"unhealthy":{"interval":0}}}`), path: "checks.active.unhealthy.interval", reason: "must be 1-31536000, got 0"},
		{name: "healthy successes at the maximum", body: upstreamWith(`"checks":{"active":{"healthy":{"successes":254}}}`), got: func(u *Upstream) any { return u.Checks.Active.Healthy.Successes }, want: 254},
		{name: "passive timeouts 0", body: upstreamWith(`"checks":{"active":{},"passive":{"unhealthy":{"timeouts":0}}}`), got: func(u *Upstream) any { return u.Checks.Passive.Unhealthy.Timeouts }, want: 0},
		{name: "status 599", body: upstreamWith(`"checks":{"active":{"healthy":{"http_statuses":[200,599]}}}`), got: func(u *Upstream) any { return u.Checks.Active.Healthy.HTTPStatuses[1] }, want: 599},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := DecodeUpstream([]byte(tc.body))
			if tc.reason != "" {
				want := &ObjectError{Path: tc.path, Reason: tc.reason}
				if err == nil || err.Error() != want.Error() {
					t.Errorf("error\n got %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(u); got != tc.want {
				t.Errorf("decoded %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

func firstWeight(u *Upstream) any { return u.Nodes[0].Weight }

// A route's own timeout has the upstream's range, and an inline upstream's fields keep
// their paths.
func TestRouteNumberRanges(t *testing.T) {
	const seconds = "0.001-31536000 seconds"
	tests := []struct {
		name, body, path, reason string
	}{
		{"timeout at the edges", `{"uri":"/a","service_id":1,"timeout":{"connect":0.001,"send":31536000,"read":1}}`, "", ""},
		{"timeout past the maximum", `{"uri":"/a","service_id":1,"timeout":{"connect":1e300,"send":1,"read":1}}`, "timeout.connect", "must be " + seconds + ", got 1e300"},
		{"timeout under the minimum", `{"uri":"/a","service_id":1,"timeout":{"connect":1,"send":1,"read":0.0001}}`, "timeout.read", "must be " + seconds + ", got 0.0001"},
		{"inline weight past the maximum", `{"uri":"/a","upstream":{"nodes":[{"host":"a","weight":1000001}]}}`, "upstream.nodes[0].weight", "must be 0-1000000, got 1000001"},
		{"inline interval past the maximum", `{"uri":"/a","upstream":{"nodes":{"a:1":1,"b:1":1},"checks":{"active":{"healthy":{"interval":31536001}}}}}`,
			"upstream.checks.active.healthy.interval", "must be 1-31536000, got 31536001"},
		{"priority at int64's edges", `{"uri":"/a","service_id":1,"priority":-9223372036854775808}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRoute([]byte(tc.body))
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := &ObjectError{Path: tc.path, Reason: tc.reason}
			if err == nil || err.Error() != want.Error() {
				t.Errorf("error\n got %v\nwant %s", err, want)
			}
		})
	}
}

func TestDurationOf(t *testing.T) {
	tests := []struct {
		seconds float64
		want    time.Duration
		ok      bool
	}{
		{0.001, time.Millisecond, true},
		{1.001, 1001 * time.Millisecond, true}, // rounded: truncated, it would be 1.000999999 s
		{1.1, 1100 * time.Millisecond, true},
		{60, time.Minute, true},
		{MaxSeconds, 365 * 24 * time.Hour, true},
		// Out of range: the nearest bound, never a duration of 0 or below.
		{MaxSeconds + 1, 365 * 24 * time.Hour, false},
		{1e300, 365 * 24 * time.Hour, false},
		{math.Inf(1), 365 * 24 * time.Hour, false},
		{0.0009, time.Millisecond, false},
		{0, time.Millisecond, false},
		{-1, time.Millisecond, false},
		{math.Inf(-1), time.Millisecond, false},
		{math.NaN(), time.Millisecond, false},
	}
	for _, tc := range tests {
		got, ok := DurationOf(tc.seconds)
		if got != tc.want || ok != tc.ok {
			t.Errorf("DurationOf(%g) = %v, %v; want %v, %v", tc.seconds, got, ok, tc.want, tc.ok)
		}
	}
}

// Every duration an object accepts converts exactly: the bounds of the readers and of
// DurationOf are the same.
func TestSecondsReadersAgreeWithDurationOf(t *testing.T) {
	for _, text := range []string{"0.001", "0.5", "31536000"} {
		f, err := readSeconds([]byte(text))
		if err != nil {
			t.Fatalf("readSeconds(%s): %v", text, err)
		}
		if _, ok := DurationOf(f); !ok {
			t.Errorf("readSeconds accepts %s, DurationOf refuses it", text)
		}
	}
	for _, text := range []string{"0.00099", "31536000.001"} {
		if _, err := readSeconds([]byte(text)); err == nil || !strings.Contains(err.Error(), "0.001-31536000 seconds") {
			t.Errorf("readSeconds(%s) = %v, want the range", text, err)
		}
		if _, err := readSecondsOrZero([]byte(text)); err == nil {
			t.Errorf("readSecondsOrZero(%s) accepted", text)
		}
	}
}
