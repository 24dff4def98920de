// Package proxy turns one compiled upstream into something that forwards a fasthttp request.
//
// Pools is the long-lived part: it owns one keep-alive connection pool per upstream node
// (host, port, scheme and keepalive_pool settings) and one resolver per host name, and it
// outlives config snapshots so that a config change keeps warm upstream connections. A
// background goroutine re-resolves names every 30 s (keeping the last good answer) and
// closes connections idle longer than their pool's idle_timeout. Upstream is the per-snapshot
// part: the node list with weights, a smooth weighted round-robin balancer (nginx's
// algorithm), timeouts, retries and the pass_host rule, all resolved when the snapshot is
// built. Upstream.Forward rewrites the client's request in place (hop-by-hop headers out,
// X-Real-IP and X-Forwarded-* in), writes it to a node, reads the response header into the
// client's response and streams the body through without holding it whole; a connection
// failure moves on to the next untried node, anything after the request was sent does not.
// Steady-state forwarding does not allocate: per-request state and body streams are pooled.
package proxy
