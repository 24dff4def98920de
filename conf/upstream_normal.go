package conf

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"time"
)

// NormalUpstream is an upstream as a worker builds it: every default applied (the worker
// invents none), every enum parsed and every duration converted, so that building it
// switches on no string and checks nothing. Normalize makes one.
type NormalUpstream struct {
	Balancer Balancer
	// HashOn and Key are chash's; Key is as written (a variable name for vars, a header
	// or cookie name, a template for vars_combinations).
	HashOn   HashOn
	Key      string
	Scheme   Scheme
	PassHost PassHost
	// UpstreamHost is the Host sent with pass_host rewrite.
	UpstreamHost string

	// Timeout is the timeout in force (the route's when it has one) in seconds, as
	// written, for the messages that name it; Connect, Send and Read are it converted.
	Timeout                Timeout
	Connect, Send, Read    time.Duration
	Retries                int           // tries after the first: retries, cut to the nodes there are
	RetryTimeout           time.Duration // 0: no deadline for starting a retry
	PoolSize, PoolRequests int
	PoolIdleTimeout        time.Duration // 0 keeps no idle connection

	Nodes []NormalNode
	// TLS is the upstream's tls (https and grpcs only), nil for none.
	TLS    *UpstreamTLS
	Checks *HealthChecks
}

// NormalNode is one node with its port filled in.
type NormalNode struct {
	// Host is an IP address (IPv6 without brackets) or a DNS name.
	Host     string
	Port     int
	Weight   int
	Priority int
	// Addr is "host:port", IPv6 in brackets: what the proxy reports and what health state
	// is keyed by (NodeAddress).
	Addr string
}

// Normalize checks u and returns it normalised for building, with routeTimeout (when not
// nil) in place of u's own timeout, as APISIX does. It checks everything the decoders do
// that a Go value can get wrong, for an upstream that did not come through them (built in
// code, or read from a snapshot with encoding/json), so that what a worker builds is
// always in range. Errors are *ObjectError naming the field and the value. u is not
// modified.
func (u *Upstream) Normalize(routeTimeout *Timeout) (NormalUpstream, error) {
	d := *u
	if d.KeepalivePool != nil {
		pool := *d.KeepalivePool
		d.KeepalivePool = &pool
	}
	if routeTimeout != nil {
		d.Timeout = routeTimeout
	}
	d.ApplyDefaults() // on the copy, which owns its pool; Timeout is only replaced
	if err := d.checkValues(); err != nil {
		return NormalUpstream{}, err
	}
	if err := d.checkAcrossFields(""); err != nil {
		return NormalUpstream{}, err
	}
	n := NormalUpstream{
		Key:          d.Key,
		UpstreamHost: d.UpstreamHost,
		Timeout:      *d.Timeout,
		PoolSize:     d.KeepalivePool.Size,
		PoolRequests: d.KeepalivePool.Requests,
		Checks:       d.Checks,
	}
	// checkValues has parsed each of these already: the errors cannot happen.
	n.Balancer, _ = balancerOf(d.Type)
	n.Scheme, _ = schemeOf(d.Scheme)
	n.PassHost, _ = passHostOf(d.PassHost)
	if d.HashOn != "" {
		n.HashOn, _ = hashOnOf(d.HashOn)
	}
	n.Connect, _ = DurationOf(d.Timeout.Connect)
	n.Send, _ = DurationOf(d.Timeout.Send)
	n.Read, _ = DurationOf(d.Timeout.Read)
	if d.KeepalivePool.IdleTimeout != 0 {
		n.PoolIdleTimeout, _ = DurationOf(d.KeepalivePool.IdleTimeout)
	}
	if d.RetryTimeout != nil && *d.RetryTimeout != 0 {
		n.RetryTimeout, _ = DurationOf(*d.RetryTimeout)
	}
	if n.Scheme.Secure() {
		n.TLS = d.TLS
	}

	n.Nodes = make([]NormalNode, len(d.Nodes))
	for i, node := range d.Nodes {
		host := trimBrackets(node.Host)
		port := node.Port
		if port == 0 {
			port = defaultPort(d.Scheme)
		}
		n.Nodes[i] = NormalNode{
			Host:     host,
			Port:     port,
			Weight:   node.Weight,
			Priority: node.Priority,
			Addr:     net.JoinHostPort(host, strconv.Itoa(port)),
		}
	}
	// APISIX returns the only node whatever its weight; with several, weight 0 is never
	// picked.
	if len(n.Nodes) == 1 && n.Nodes[0].Weight == 0 {
		n.Nodes[0].Weight = 1
	}
	n.Retries = max(len(n.Nodes)-1, 0)
	switch {
	case d.Retries != nil:
		n.Retries = min(*d.Retries, n.Retries)
	case d.RetryTimeout == nil:
		n.Retries = min(n.Retries, DefaultMaxRetries)
	}
	return n, nil
}

// fieldCheck is one field's path and what checking it found.
type fieldCheck struct {
	path string
	err  error
}

// checkValues checks each field of u, with its defaults applied, against the range its
// decoder reads it in (ranges.go, the enum readers of upstream.go, upstream_nodes.go).
func (u *Upstream) checkValues() error {
	checks := []fieldCheck{
		{"type", enumError(balancerOf(u.Type))},
		{"scheme", enumError(schemeOf(u.Scheme))},
		{"pass_host", enumError(passHostOf(u.PassHost))},
		{"timeout.connect", checkSeconds(u.Timeout.Connect)},
		{"timeout.send", checkSeconds(u.Timeout.Send)},
		{"timeout.read", checkSeconds(u.Timeout.Read)},
		{"keepalive_pool.size", checkIntIn(u.KeepalivePool.Size, 1, maxKeepaliveSize)},
		{"keepalive_pool.requests", checkIntIn(u.KeepalivePool.Requests, 1, math.MaxInt)},
		{"keepalive_pool.idle_timeout", checkSecondsOrZero(u.KeepalivePool.IdleTimeout)},
	}
	if u.HashOn != "" {
		checks = append(checks, fieldCheck{"hash_on", enumError(hashOnOf(u.HashOn))})
	}
	if u.Retries != nil {
		checks = append(checks, fieldCheck{"retries", checkIntIn(*u.Retries, 0, math.MaxInt)})
	}
	if u.RetryTimeout != nil {
		checks = append(checks, fieldCheck{"retry_timeout", checkSecondsOrZero(*u.RetryTimeout)})
	}
	for i := range u.Nodes {
		// A decoded node's host may be an IPv6 address without brackets, the form
		// decoding leaves it in; port 0 is the scheme's default.
		n, at := &u.Nodes[i], "nodes["+strconv.Itoa(i)+"]."
		checks = append(checks, fieldCheck{at + "host", checkNodeHost(n.Host)})
		if n.Port != 0 {
			checks = append(checks, fieldCheck{at + "port", checkIntIn(n.Port, 1, maxPort)})
		}
		checks = append(checks, fieldCheck{at + "weight", checkIntIn(n.Weight, 0, MaxNodeWeight)})
	}
	for _, c := range checks {
		if c.err != nil {
			return &ObjectError{Path: c.path, Reason: c.err.Error()}
		}
	}
	return nil
}

func enumError[E any](_ E, err error) error { return err }

// checkIntIn, checkSeconds and checkSecondsOrZero word their refusals as intIn, readSeconds
// and readSecondsOrZero do.
func checkIntIn(n, least, most int) error {
	if n < least || n > most {
		if most == math.MaxInt {
			return fmt.Errorf("must be >= %d, got %d", least, n)
		}
		return fmt.Errorf("must be %d-%d, got %d", least, most, n)
	}
	return nil
}

func checkSeconds(s float64) error {
	if _, ok := DurationOf(s); !ok {
		return fmt.Errorf("must be %g-%d seconds, got %g", MinSeconds, MaxSeconds, s)
	}
	return nil
}

func checkSecondsOrZero(s float64) error {
	if _, ok := DurationOf(s); !ok && s != 0 {
		return fmt.Errorf("must be 0 or %g-%d seconds, got %g", MinSeconds, MaxSeconds, s)
	}
	return nil
}
