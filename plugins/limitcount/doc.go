// Package limitcount is APISIX's limit-count plugin (priority 1002): at most count requests
// per key in each time_window seconds, the rest answered with rejected_code. For now it
// holds the schema only: Parse decodes a route's configuration strictly, applies APISIX's
// defaults and validates it, and the package registers that check with the plugin registry
// so the Admin API refuses bad configurations. Enforcement (the counters in shared memory,
// the X-RateLimit-* headers) lands with its own issue. Only the local policy will be
// supported at first; the redis policies are refused by name.
package limitcount
