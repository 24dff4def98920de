// Package forwardauth is APISIX's forward-auth plugin (priority 2002): before a request
// is proxied, gw asks an authorization service (uri) whether to let it through. The
// service gets the request's method, scheme, host, target and client address as
// X-Forwarded-* headers, the client headers request_headers names, extra_headers (with
// variables) and, for request_method POST, the request's body. A 2xx answer lets the
// request through with the answer's upstream_headers copied onto it; any other answer is
// the client's, its status and body, with the answer's client_headers. A service that
// cannot be reached within timeout answers status_on_error (403), or lets the request
// through with allow_degradation. Each route's instance holds one pooled HTTP client
// (client.go), whose every call is bounded by timeout, dial and queue included, so a slow
// service holds a worker's request no longer than that.
package forwardauth
