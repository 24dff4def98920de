// Package opentelemetry is APISIX's opentelemetry plugin (priority 12009): each request
// of a route that configures it joins a W3C trace (the client's traceparent, else a new
// trace), gets a server span of its own whose id goes upstream in a new traceparent, and,
// when the route's sampler records it, its span is sent to an OTLP/HTTP collector
// (plugin_attr.opentelemetry) as protobuf.
//
// The request path only parses and writes a traceparent and, in the log phase, encodes
// the span as OTLP protobuf straight into the batch the worker is filling (encode.go, with
// protowire and attribute keys encoded once; the tests read it back with the generated
// go.opentelemetry.io/proto/otlp), allocating nothing. A goroutine per worker (export.go)
// takes the full batches, puts the resource and scope in front, and POSTs them on a
// kept-alive fasthttp connection; a slow or dead collector delays only that goroutine,
// and a span that finds the queue full is dropped and counted
// (gw_opentelemetry_spans_total, kept in a small shared-memory segment the master
// renders). The OpenTelemetry Go SDK is not used: a server span with it (extract, start
// with APISIX's attributes, inject, end) costs 17 allocations and 4.4 KB per request
// (README.md has the figures).
package opentelemetry
