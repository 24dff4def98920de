// Package conf holds gw's configuration and object schemas: it decodes strictly, applies
// defaults, validates and reports every problem with its path. Two kinds of input meet
// here. The static conf/config.yaml (gw's own schema, not APISIX's) is read by Load at
// start and on reload; the shipped file is embedded and is the only source of defaults,
// and a user's file, even a partial one, is merged over it key by key. The Admin API
// objects (routes, upstreams, services, in APISIX 3.x shapes) are decoded one at a time as
// the master receives them and travel to workers inside an immutable Snapshot. Nothing in
// this package does I/O beyond reading the one config file, and it imports no other gw
// package.
package conf
