// Package syslog is APISIX's syslog plugin: each request's entry (logentry's default
// JSON, or a log_format) is framed as an RFC 5424 message, <46>1 (facility syslog,
// severity info), the time in UTC to the millisecond, the request's host, app name
// "apisix", the worker's pid, the JSON as the message, a line each, and goes through the
// route's batch processor (plugins/batch) to a syslog server over TCP (TLS with tls) or
// UDP: a connection or a datagram per batch of concatenated messages.
package syslog
