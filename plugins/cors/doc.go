// Package cors is APISIX's cors plugin: it answers a browser's preflight (any OPTIONS
// request, as APISIX does) itself, and adds the Access-Control-* headers to every answer
// of its route, whoever writes it (the upstream, a later plugin's 401, the preflight).
// What an origin may see is decided once per request from the Origin the client sent,
// before any later plugin could change it: against the exact list of allow_origins or
// against allow_origins_by_regex, compiled once per snapshot.
package cors
