// Package proxy turns one compiled upstream into something that forwards a fasthttp request.
//
// Pools is the long-lived part: it owns one keep-alive connection pool per upstream node
// (host, port, scheme and keepalive_pool settings) and one resolver per host name, and it
// outlives config snapshots so that a config change keeps warm upstream connections. A
// background goroutine re-resolves names every 30 s (keeping the last good answer) and
// closes connections idle longer than their pool's idle_timeout. Upstream is the per-snapshot
// part: the node list with weights and priorities, a balancer (smooth weighted round robin,
// nginx's algorithm; chash, a consistent-hash ring identical in every worker; least_conn;
// ewma, peak-EWMA latency with two random choices), timeouts, retries and the pass_host
// rule, all resolved when the snapshot is built. Balancer state (round-robin weights,
// in-flight counts, latency averages) is per Upstream, so per snapshot and per worker
// process; WithWebsocket copies share it. Upstream.Forward rewrites the client's request in place (hop-by-hop headers out,
// X-Real-IP and X-Forwarded-* in), writes it to a node, reads the response header into the
// client's response and streams the body through without holding it whole; a connection
// failure moves on to the next untried node, anything after the request was sent does not.
// A node that breaks a body off before any of it went out gets a 502, after that a client
// connection closed on the cut, and OnStreamEnd tells the caller, once a streamed body is
// over, how much of it was sent (stream.go).
// On a route with enable_websocket an Upgrade request becomes a tunnel: a 101 from the
// node hands the client connection over (fasthttp's Hijack) and bytes flow both ways.
// Over https the node's certificate is verified (against the system's roots plus
// ssl.ssl_trusted_certificate, unless the upstream's tls.verify is false) for the name sent
// as SNI, which is the Host the node gets; idle connections are reused only for that same
// name, and a pool is never shared between upstreams that authenticate differently (client
// certificate, verify). Steady-state forwarding does not allocate: per-request state and
// body streams are pooled (over TLS, crypto/tls allocates once per record read).
// An upstream of scheme grpc or grpcs is not forwarded so: RoundTripGRPC sends the call over
// HTTP/2 (gw's own client on x/net/http2's Framer and HPACK, grpcconn.go: a kept-alive
// connection per node that multiplexes calls) and hands the response back to the worker,
// which streams it to the client's HTTP/2 stream (grpc.go). timeout.read and timeout.send
// bound each call as nginx's grpc_read_timeout and grpc_send_timeout (grpctimeout.go). A
// unary call's state is pooled, so it allocates nothing in steady state either.
package proxy
