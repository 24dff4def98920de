package opentelemetry

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"gw/conf"
)

// The batch is written as OTLP protobuf straight from the span records, with the field
// numbers of opentelemetry-proto's trace.proto and common.proto, into buffers the
// exporter keeps: building the generated structs and marshalling them cost 48
// allocations and about 18 µs per span on this machine, more than the rest of the request
// (BenchmarkEncodeBatch). The tests decode what it writes with the generated package.
const (
	// TracesData (the body of ExportTraceServiceRequest, which has the same field 1).
	fieldResourceSpans = 1
	// ResourceSpans.
	fieldResource = 1
	// Resource.
	fieldResourceAttributes = 1
	fieldScopeSpans         = 2
	// ScopeSpans.
	fieldScope = 1
	fieldSpans = 2
	// InstrumentationScope.
	fieldScopeName = 1
	// Span.
	fieldTraceID      = 1
	fieldSpanID       = 2
	fieldTraceState   = 3
	fieldParentSpanID = 4
	fieldName         = 5
	fieldKind         = 6
	fieldStart        = 7
	fieldEnd          = 8
	fieldAttributes   = 9
	fieldStatus       = 15
	fieldFlags        = 16
	// Status.
	fieldStatusMessage = 2
	fieldStatusCode    = 3
	// KeyValue and AnyValue.
	fieldKey         = 1
	fieldValue       = 2
	fieldStringValue = 1
	fieldBoolValue   = 2
	fieldIntValue    = 3
	fieldDoubleValue = 4

	spanKindServer  = 2
	statusCodeError = 2
	// Span flags: the low byte is the W3C trace flags; 0x100 says whether the parent is
	// remote is known, 0x200 that it is.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// appendMessage appends field as a length-delimited message holding body.
func appendMessage(b []byte, field protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, field protowire.Number, s []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, s)
}

// appendStringAttr appends a KeyValue with a string value as field; the key is key or,
// when that is empty, keyBytes.
func appendStringAttr(b []byte, field protowire.Number, key string, keyBytes, value []byte) []byte {
	keyLen := len(key)
	if key == "" {
		keyLen = len(keyBytes)
	}
	anyLen := protowire.SizeTag(fieldStringValue) + protowire.SizeBytes(len(value))
	kvLen := protowire.SizeTag(fieldKey) + protowire.SizeBytes(keyLen) + protowire.SizeTag(fieldValue) + protowire.SizeBytes(anyLen)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvLen))
	if key != "" {
		b = appendString(b, fieldKey, key)
	} else {
		b = appendBytes(b, fieldKey, keyBytes)
	}
	b = protowire.AppendTag(b, fieldValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anyLen))
	return appendBytes(b, fieldStringValue, value)
}

// appendScalarAttr appends a KeyValue whose AnyValue is one scalar field (int, bool,
// double), already encoded as tag and value in scalar.
func appendScalarAttr(b []byte, field protowire.Number, key string, scalar []byte) []byte {
	kvLen := protowire.SizeTag(fieldKey) + protowire.SizeBytes(len(key)) + protowire.SizeTag(fieldValue) + protowire.SizeBytes(len(scalar))
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvLen))
	b = appendString(b, fieldKey, key)
	return appendBytes(b, fieldValue, scalar)
}

func appendIntAttr(b []byte, field protowire.Number, key string, v int64) []byte {
	var scratch [16]byte
	s := protowire.AppendTag(scratch[:0], fieldIntValue, protowire.VarintType)
	s = protowire.AppendVarint(s, uint64(v))
	return appendScalarAttr(b, field, key, s)
}

func appendDoubleAttr(b []byte, field protowire.Number, key string, v float64) []byte {
	var scratch [16]byte
	s := protowire.AppendTag(scratch[:0], fieldDoubleValue, protowire.Fixed64Type)
	s = protowire.AppendFixed64(s, math.Float64bits(v))
	return appendScalarAttr(b, field, key, s)
}

func appendBoolAttr(b []byte, field protowire.Number, key string, v bool) []byte {
	var scratch [4]byte
	s := protowire.AppendTag(scratch[:0], fieldBoolValue, protowire.VarintType)
	s = protowire.AppendVarint(s, protowire.EncodeBool(v))
	return appendScalarAttr(b, field, key, s)
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// appendSpan appends the record as one Span message (without its tag and length), with
// APISIX's name and attributes and gw's upstream ones. scratch is room for the name.
func (r *spanRecord) appendSpan(b, scratch []byte) ([]byte, []byte) {
	b = appendBytes(b, fieldTraceID, r.trace.TraceID[:])
	b = appendBytes(b, fieldSpanID, r.trace.SpanID[:])
	if ts := r.get(r.tstate); len(ts) > 0 {
		b = appendBytes(b, fieldTraceState, ts)
	}
	flags := uint32(flagHasIsRemote | 1)
	if r.trace.ParentSpanID != ([8]byte{}) {
		b = appendBytes(b, fieldParentSpanID, r.trace.ParentSpanID[:])
		flags |= flagIsRemote
	}
	route := r.route != nil && r.route.ID != ""
	name := append(scratch[:0], r.get(r.method)...)
	if route {
		name = append(append(name, ' '), r.matchedURI...)
	}
	b = appendBytes(b, fieldName, name)
	b = protowire.AppendTag(b, fieldKind, protowire.VarintType)
	b = protowire.AppendVarint(b, spanKindServer)
	b = protowire.AppendTag(b, fieldStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(r.start))
	b = protowire.AppendTag(b, fieldEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(max(r.end, r.start)))

	scheme := schemeHTTP
	if r.https {
		scheme = schemeHTTPS
	}
	b = appendStringAttr(b, fieldAttributes, "net.host.name", nil, r.get(r.host))
	b = appendStringAttr(b, fieldAttributes, "http.method", nil, r.get(r.method))
	b = appendStringAttr(b, fieldAttributes, "http.scheme", nil, scheme)
	b = appendStringAttr(b, fieldAttributes, "http.target", nil, r.get(r.target))
	b = appendStringAttr(b, fieldAttributes, "http.user_agent", nil, r.get(r.userAgent))
	if route {
		b = appendStringAttr(b, fieldAttributes, "apisix.route_id", nil, []byte(r.route.ID))
		b = appendStringAttr(b, fieldAttributes, "apisix.route_name", nil, []byte(r.route.Name))
		b = appendStringAttr(b, fieldAttributes, "http.route", nil, []byte(r.matchedURI))
		if r.route.ServiceID != "" {
			b = appendStringAttr(b, fieldAttributes, "apisix.service_id", nil, []byte(r.route.ServiceID))
			b = appendStringAttr(b, fieldAttributes, "apisix.service_name", nil, []byte(r.route.ServiceName))
		}
	}
	for _, a := range r.attrs {
		b = appendStringAttr(b, fieldAttributes, a.key, r.get(a.keyRef), r.get(a.value))
	}
	b = appendIntAttr(b, fieldAttributes, "http.status_code", int64(r.status))
	b = appendIntAttr(b, fieldAttributes, "http.response.status_code", int64(r.status))
	if r.upstreamNanos >= 0 {
		b = appendStringAttr(b, fieldAttributes, "gw.upstream.address", nil, r.get(r.node))
		b = appendDoubleAttr(b, fieldAttributes, "gw.upstream.latency_ms", float64(r.upstreamNanos)/1e6)
		if r.status >= 500 {
			msg := strconv.AppendInt(append(name[:0], "upstream response status: "...), int64(r.status), 10)
			statusLen := protowire.SizeTag(fieldStatusMessage) + protowire.SizeBytes(len(msg)) +
				protowire.SizeTag(fieldStatusCode) + protowire.SizeVarint(statusCodeError)
			b = protowire.AppendTag(b, fieldStatus, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(statusLen))
			b = appendBytes(b, fieldStatusMessage, msg)
			b = protowire.AppendTag(b, fieldStatusCode, protowire.VarintType)
			b = protowire.AppendVarint(b, statusCodeError)
		}
	}
	b = protowire.AppendTag(b, fieldFlags, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, flags)
	return b, name
}

// appendResource appends a Resource message's body: APISIX's hostname, service.name
// "APISIX" unless configured, then the configured attributes.
func appendResource(b []byte, host string, attrs []conf.KeyValue) []byte {
	const f = fieldResourceAttributes
	b = appendStringAttr(b, f, "hostname", nil, []byte(host))
	named := false
	for _, a := range attrs {
		named = named || a.Key == "service.name"
	}
	if !named {
		b = appendStringAttr(b, f, "service.name", nil, []byte("APISIX"))
	}
	for _, a := range attrs {
		switch v := a.Value.(type) {
		case string:
			b = appendStringAttr(b, f, a.Key, nil, []byte(v))
		case float64:
			b = appendDoubleAttr(b, f, a.Key, v)
		case bool:
			b = appendBoolAttr(b, f, a.Key, v)
		}
	}
	return b
}
