// Package tcplogger is APISIX's tcp-logger: each request's entry (logentry's default
// JSON, or a log_format from the route or the plugin_metadata) goes into the route's
// batch processor (plugins/batch), whose goroutine opens a TCP connection (TLS with tls)
// per batch and writes it: the entry itself with batch_max_size 1, else a JSON array.
package tcplogger
