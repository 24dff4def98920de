// Package redispolicy is what the traffic-control plugins' redis and redis-cluster
// policies share (limit-count, limit-req): APISIX's Redis settings
// (apisix/utils/redis-schema.lua), parsed and checked alike for each plugin (Config), and
// the process's Redis clients, one per distinct server configuration, shared by every
// route and plugin that uses it (Client). Each plugin keeps its own script and keys.
package redispolicy
