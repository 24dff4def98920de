// Package limitcount is APISIX's limit-count plugin (priority 1002): at most count requests
// per key in each time_window seconds, the rest answered with rejected_code. Parse decodes
// a route's configuration strictly with APISIX's defaults; the registry's Validate uses it
// so the Admin API refuses bad configurations. Build turns a configuration into a route's
// limiter once per snapshot: the key is parsed by conf (a variable gw cannot read is
// refused) and read per request by gw/plugins/vars, the counter key's
// prefix (route and configuration, or group) is hashed, headers and bodies are formatted.
// The counters live in one shared-memory window table (WindowTable) that the master
// creates at start and every worker maps, so a count is exact across workers and survives
// worker crashes, reloads and binary upgrades; a request costs one hash and one
// compare-and-swap and allocates nothing. The redis and redis-cluster policies
// (redis.go) count in Redis instead, with APISIX's script and key, so that every
// gateway on one Redis counts a route's requests together; a worker's concurrent
// requests for one key are counted by one call of their total cost (coalesce.go); each
// worker keeps one auto-pipelining client per Redis configuration (redisclient.go),
// dialled by the first request that needs it, and with sync_interval counts in the
// worker between reconciliations (sync.go). redis-sentinel is refused by name.
package limitcount
