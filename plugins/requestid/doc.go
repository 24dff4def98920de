// Package requestid is APISIX's request-id plugin (priority 12015): every request gets an
// id in header_name (X-Request-Id), the client's own when it sent one, otherwise a new
// one made by algorithm: a version 4 UUID, a version 7 UUID, a nanoid or a range_id. The
// id goes upstream as a request header, which later plugins read as a variable
// ($http_x_request_id), and, with include_in_response, back to the client unless the
// upstream's response has one. Ids are made from math/rand/v2's per-thread ChaCha8
// generator into a pooled buffer, without a lock or an allocation.
package requestid
