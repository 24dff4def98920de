// Package router maps a request's method, Host header and path to one route, the way
// Apache APISIX's default router (radixtree_host_uri, since 3.3) does. A Router is built
// once per config snapshot from a list of Entry values, is immutable afterwards and may be
// shared by any number of goroutines; Match allocates nothing. Routes are kept in two
// groups. Routes with hosts sit in a radix tree keyed by the reversed, lower-cased host,
// each host key owning its own path tree; a request walks that tree from the exact host to
// ever shorter wildcard suffixes ("*.example.com", then "*"), and within each host key tries
// its path tree. Only if no route with hosts matches is the path tree of routes without
// hosts tried. A path tree answers an exact path first, then stored prefixes from the
// longest to the shortest; routes under the same key are ordered by priority (highest
// first), then by the longer original path, then by their order in the Entry list, and the
// first whose method is allowed and whose request conditions pass wins. A path with
// wildcard segments ("/a/*/b") or, with Options.Parameters, parameters ("/user/:id") is
// stored under its literal prefix and its candidates also match the rest of the path
// against their pattern. The request conditions are the client address (remote_addrs)
// and a vars expression compiled by conf.ParseVars; MatchCtx evaluates them against the
// fasthttp request, reading its variables through gw/plugins/vars as every other user of
// them does, and a candidate that fails them lets the next one try.
package router
