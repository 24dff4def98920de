// Package opentelemetry is APISIX's opentelemetry plugin (priority 12009): each request
// of a route that configures it joins a W3C trace (the client's traceparent, else a new
// trace), gets a server span of its own whose id goes upstream in a new traceparent, and,
// when the route's sampler records it, its span is sent to an OTLP/HTTP collector
// (plugin_attr.opentelemetry) as protobuf.
//
// The request path only parses and writes a traceparent and, in the log phase, copies the
// span's fields into a slot of the worker's queue (record.go), allocating nothing. A
// goroutine per worker (export.go) empties the queue in batches, writes them as OTLP
// protobuf straight from the records (encode.go, with protowire; the tests read them back
// with the generated go.opentelemetry.io/proto/otlp) and POSTs them; a slow or dead collector delays
// only that goroutine, and a span that finds the queue full is dropped and counted
// (gw_opentelemetry_spans_total, kept in a small shared-memory segment the master
// renders). The OpenTelemetry Go SDK is not used: a server span with it (extract, start
// with APISIX's attributes, inject, end) costs 17 allocations and 4.4 KB per request
// (README.md has the figures).
package opentelemetry
