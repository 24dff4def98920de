// Package logentry writes the loggers' entries as APISIX's log-util does: the default
// JSON entry (request, response, server, upstream, latencies, start_time, route_id,
// service_id, consumer, client_ip), or the object a log_format names, with variables of
// the one variable language (plugins/vars), from the route's configuration or the
// plugin's plugin_metadata. An entry is appended to a caller's buffer: the log phase
// allocates nothing for it in steady state.
//
// It also holds what the loggers share beyond the entry: Logger, the log phase, made by
// NewLogger with a batch processor of its own; PluginPart, the plugin methods they have
// in common; and for tcp-logger, udp-logger and syslog, SocketConfig (the fields they
// configure alike) and Socket (a connection per batch).
package logentry
