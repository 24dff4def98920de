// Package trafficsplit is APISIX's traffic-split plugin (priority 966): a route's
// requests are split between upstreams by rules. A rule matches when any of its match
// items' vars expression holds (a rule without match always does), and the first rule
// that matches sends the request to one of its weighted_upstreams, chosen by smooth
// weighted round robin (nginx's): an inline upstream, a stored one by upstream_id, or the
// route's own for an entry that names none. The plugin decides only which; the host
// compiles every upstream a configuration names once per snapshot, with the route
// (plugins.UpstreamChooser), and proxies to the one the access phase names
// (plugins.Ctx.UseUpstream), so a request costs the match, one locked round-robin step and
// no allocation. The rotation is per rule and per worker, shared by every request of the
// route in that worker, and starts again with each build of the route.
package trafficsplit
