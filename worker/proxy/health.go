package proxy

import (
	"gw/conf"
	"gw/shm"
)

// Health checks on the request path. The master probes nodes (active checks) and keeps
// each node's health in a table shared by every process; an Upstream built with
// CheckedUpstream holds one entry handle per node, resolved once per snapshot. Picking a
// node reads those entries (an atomic load or two per node) and leaves unhealthy nodes out
// of every balancer's choice, within the priority groups as usual; when no node is
// healthy, all of them are used, as APISIX does rather than failing every request. With
// passive checks, each try's outcome (the status, or a failed connection, or a timeout)
// is counted into the node's entry, so one worker's failures take the node out for all.

// CheckedUpstream is Upstream with health checks: when u has checks (conf's
// HealthChecked), its nodes' health is read from table under name, the key its health
// state is kept under (/apisix/upstreams/<id>, or the route's or service's key for an
// inline upstream). A node the table does not hold (it was full) counts as healthy. With
// a nil table, or an upstream without checks, it is Upstream.
func (p *Pools) CheckedUpstream(u *conf.Upstream, routeTimeout *conf.Timeout, table *shm.HealthTable, name string) (*Upstream, error) {
	if table == nil || !u.HealthChecked() {
		return p.Upstream(u, routeTimeout)
	}
	n, err := u.Normalize(routeTimeout)
	if err != nil {
		return nil, err
	}
	up, err := p.build(&n)
	if err != nil {
		return nil, err
	}
	up.health = make([]shm.HealthNode, len(n.Nodes))
	for i := range n.Nodes {
		up.health[i], _ = table.Lookup(shm.HealthKey(name, n.Nodes[i].Addr))
	}
	if pc := n.Checks.Passive; pc != nil {
		up.passive = compilePassive(pc)
	}
	return up, nil
}

// passiveRule is a passive check compiled for the request path: statuses as bitsets.
type passiveRule struct {
	tcpOnly      bool // type tcp: statuses are not looked at, an answer is a success
	healthy      statusSet
	unhealthy    statusSet
	successes    int
	httpFailures int
	tcpFailures  int
	timeouts     int
}

// statusSet holds HTTP statuses 0-639.
type statusSet [10]uint64

func (s *statusSet) add(code int) {
	if code >= 0 && code < 640 {
		s[code>>6] |= 1 << (uint(code) & 63)
	}
}

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < 640 && s[code>>6]&(1<<(uint(code)&63)) != 0
}

func compilePassive(pc *conf.PassiveCheck) *passiveRule {
	r := &passiveRule{
		tcpOnly:      pc.Type == "tcp",
		successes:    pc.Healthy.Successes,
		httpFailures: pc.Unhealthy.HTTPFailures,
		tcpFailures:  pc.Unhealthy.TCPFailures,
		timeouts:     pc.Unhealthy.Timeouts,
	}
	for _, code := range pc.Healthy.HTTPStatuses {
		r.healthy.add(code)
	}
	for _, code := range pc.Unhealthy.HTTPStatuses {
		r.unhealthy.add(code)
	}
	return r
}

// tryFailure is how a try failed after its connection was made, for passive checks.
type tryFailure uint8

const (
	tryAnswered tryFailure = iota // the node answered (or the outcome says otherwise)
	tryTimedOut                   // sending or reading timed out
	tryBroken                     // the connection broke or the answer was not HTTP
)

// avoidUnhealthy returns the nodes the balancer must not pick: x.tried plus, when at
// least one node that can take requests is healthy, every unhealthy node. It writes into
// x.avoid and allocates nothing once x has grown to the upstream's size.
func (u *Upstream) avoidUnhealthy(x *exchange) []uint64 {
	words := len(x.tried)
	if cap(x.avoid) < words {
		x.avoid = make([]uint64, words)
	}
	avoid := x.avoid[:words]
	copy(avoid, x.tried)
	anyHealthy := false
	for i := range u.nodes {
		if u.nodes[i].weight == 0 {
			continue
		}
		if u.health[i].Healthy() {
			anyHealthy = true
		} else {
			set(avoid, i)
		}
	}
	if !anyHealthy {
		return x.tried
	}
	return avoid
}

// reportPassive counts one try of node i into its health entry.
func (u *Upstream) reportPassive(i int, result outcome, failure tryFailure, status int) {
	r, n := u.passive, u.health[i]
	switch {
	case result == connectFailed, result == staleConn, result == tlsFailed, result == tlsUnverified, failure == tryBroken:
		n.Report(shm.HealthTCPFailure, r.tcpFailures)
	case result == connectTimedOut, failure == tryTimedOut:
		n.Report(shm.HealthTimeout, r.timeouts)
	case r.tcpOnly:
		n.Report(shm.HealthSuccess, r.successes)
	case r.healthy.has(status):
		n.Report(shm.HealthSuccess, r.successes)
	case r.unhealthy.has(status):
		n.Report(shm.HealthHTTPFailure, r.httpFailures)
	}
}
