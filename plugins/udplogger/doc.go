// Package udplogger is APISIX's udp-logger: each request's entry (logentry's default
// JSON, or a log_format from the route or the plugin_metadata) goes into the route's
// batch processor (plugins/batch), whose goroutine sends each batch as one UDP datagram:
// the entry itself with batch_max_size 1, else a JSON array. A batch past what one
// datagram holds (65,507 bytes over IPv4) fails, and is dropped once retried.
package udplogger
