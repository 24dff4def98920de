package opentelemetry

import (
	"bytes"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
)

// A span is written as OTLP protobuf in the log phase, straight from the request into the
// batch the worker is filling (appendSpan), with the field numbers of
// opentelemetry-proto's trace.proto and common.proto; the exporter adds the batch's
// resource and scope in front when it sends it (exporter.body). Building the generated
// structs and marshalling them cost 48 allocations and about 18 µs per span on this
// machine, more than the rest of the request. The tests decode what it writes with the
// generated package.
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

// Tags of one byte (field number < 16), written as constants on the request path.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2

	tagSpans        = fieldSpans<<3 | wireBytes
	tagTraceID      = fieldTraceID<<3 | wireBytes
	tagSpanID       = fieldSpanID<<3 | wireBytes
	tagParentSpanID = fieldParentSpanID<<3 | wireBytes
	tagName         = fieldName<<3 | wireBytes
	tagKind         = fieldKind<<3 | wireVarint
	tagStart        = fieldStart<<3 | wireFixed64
	tagEnd          = fieldEnd<<3 | wireFixed64
	tagAttribute    = fieldAttributes<<3 | wireBytes
	tagStringValue  = fieldStringValue<<3 | wireBytes
	tagBoolValue    = fieldBoolValue<<3 | wireVarint
	tagIntValue     = fieldIntValue<<3 | wireVarint
	tagDoubleValue  = fieldDoubleValue<<3 | wireFixed64
	tagKey          = fieldKey<<3 | wireBytes
	tagValue        = fieldValue<<3 | wireBytes
)

// appendMessage appends field as a length-delimited message holding body.
func appendMessage(b []byte, field protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// attrKey is the part of a KeyValue that its key fixes: the key field and the value
// field's tag, encoded once per key (the span's constant keys here, a route's configured
// ones when its configuration is parsed) instead of per span.
type attrKey []byte

func newAttrKey(key string) attrKey {
	b := protowire.AppendTag(nil, fieldKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	return protowire.AppendTag(b, fieldValue, protowire.BytesType)
}

// The span's attribute keys: APISIX's and gw's own.
var (
	keyHostName        = newAttrKey("net.host.name")
	keyMethod          = newAttrKey("http.method")
	keyScheme          = newAttrKey("http.scheme")
	keyTarget          = newAttrKey("http.target")
	keyUserAgent       = newAttrKey("http.user_agent")
	keyRouteID         = newAttrKey("apisix.route_id")
	keyRouteName       = newAttrKey("apisix.route_name")
	keyRoute           = newAttrKey("http.route")
	keyServiceID       = newAttrKey("apisix.service_id")
	keyServiceName     = newAttrKey("apisix.service_name")
	keyStatusCode      = newAttrKey("http.status_code")
	keyRespStatusCode  = newAttrKey("http.response.status_code")
	keyUpstreamAddress = newAttrKey("gw.upstream.address")
	keyUpstreamLatency = newAttrKey("gw.upstream.latency_ms")
)

// appendVarint, sizeVarint and sizeBytes are protowire's, with the one-byte case, nearly
// every length and value of a span, inlined: protowire's are calls, some 25 a span, and
// were a tenth of recording one (BenchmarkAccessAndLogNewTrace's profile).
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

func sizeVarint(v uint64) int {
	if v < 0x80 {
		return 1
	}
	return protowire.SizeVarint(v)
}

func sizeBytes(n int) int { return sizeVarint(uint64(n)) + n }

// appendStringAttr appends a Span's attributes field: a KeyValue of key and a string
// value v.
func appendStringAttr[V ~string | ~[]byte](b []byte, key attrKey, v V) []byte {
	return appendStringKV(b, tagAttribute, key, v)
}

// appendStringKV appends a KeyValue of key and a string value v as the field of tag.
func appendStringKV[V ~string | ~[]byte](b []byte, tag byte, key attrKey, v V) []byte {
	anyLen := 1 + sizeBytes(len(v))
	b = append(b, tag)
	b = appendVarint(b, uint64(len(key)+sizeBytes(anyLen)))
	b = append(b, key...)
	b = appendVarint(b, uint64(anyLen))
	b = append(b, tagStringValue)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendLowerKeyAttr appends an attributes field keyed by key in lower case (a header's
// name, for a prefix of additional_header_prefix_attributes), with a string value.
func appendLowerKeyAttr(b, key, v []byte) []byte {
	anyLen := 1 + sizeBytes(len(v))
	b = append(b, tagAttribute)
	b = appendVarint(b, uint64(1+sizeBytes(len(key))+1+sizeBytes(anyLen)))
	b = append(b, tagKey)
	b = appendVarint(b, uint64(len(key)))
	from := len(b)
	b = append(b, key...)
	lower(b[from:])
	b = append(b, tagValue)
	b = appendVarint(b, uint64(anyLen))
	b = append(b, tagStringValue)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendScalarKV appends, as the field of tag, a KeyValue whose AnyValue is one scalar
// field of valueTag and size bytes, which the caller appends next (size is at most 10, so
// every length here is one byte).
func appendScalarKV(b []byte, tag byte, key attrKey, valueTag byte, size int) []byte {
	b = append(b, tag)
	b = appendVarint(b, uint64(len(key)+2+size))
	b = append(b, key...)
	return append(b, byte(1+size), valueTag)
}

func appendIntAttr(b []byte, key attrKey, v int64) []byte {
	b = appendScalarKV(b, tagAttribute, key, tagIntValue, sizeVarint(uint64(v)))
	return appendVarint(b, uint64(v))
}

func appendDoubleKV(b []byte, tag byte, key attrKey, v float64) []byte {
	b = appendScalarKV(b, tag, key, tagDoubleValue, 8)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

func appendBoolKV(b []byte, tag byte, key attrKey, v bool) []byte {
	b = appendScalarKV(b, tag, key, tagBoolValue, 1)
	return appendVarint(b, protowire.EncodeBool(v))
}

// maxField bounds each copied value; a longer one (a long URL) is cut, so that a queued
// span's memory stays bounded whatever the client sends.
const maxField = 2048

func cut(b []byte) []byte {
	if len(b) > maxField {
		return b[:maxField]
	}
	return b
}

func lower(b []byte) {
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			b[i] = ch + ('a' - 'A')
		}
	}
}

// spanLenRoom is the room appendSpan leaves for the span's length before it knows it: a
// span is far shorter than the 2³⁵ bytes five varint bytes hold.
const spanLenRoom = 5

// appendSpan appends the span of c, whose response is final, as a ScopeSpans.spans field
// (tag, length, Span) with APISIX's name and attributes and gw's upstream ones. scratch
// is room for a variable's value; both are the caller's, kept from span to span, so that
// once they have grown it allocates nothing.
func appendSpan(b []byte, c *plugins.Ctx, cfg *Config, scratch *[]byte) []byte {
	b = append(b, tagSpans)
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0) // spanLenRoom
	tc := &c.Trace
	b = append(b, tagTraceID, byte(len(tc.TraceID)))
	b = append(b, tc.TraceID[:]...)
	b = append(b, tagSpanID, byte(len(tc.SpanID)))
	b = append(b, tc.SpanID[:]...)
	if ts := c.RequestHeader(tracestateHeader); len(ts) > 0 {
		b = protowire.AppendTag(b, fieldTraceState, protowire.BytesType)
		b = protowire.AppendBytes(b, cut(ts))
	}
	flags := uint32(flagHasIsRemote | 1)
	if tc.ParentSpanID != ([8]byte{}) {
		b = append(b, tagParentSpanID, byte(len(tc.ParentSpanID)))
		b = append(b, tc.ParentSpanID[:]...)
		flags |= flagIsRemote
	}
	method := cut(c.Method())
	route := c.Route != nil && c.Route.ID != ""
	nameLen := len(method)
	if route {
		nameLen += 1 + len(c.MatchedURI)
	}
	b = append(b, tagName)
	b = appendVarint(b, uint64(nameLen))
	b = append(b, method...)
	if route {
		b = append(append(b, ' '), c.MatchedURI...)
	}
	b = append(b, tagKind, spanKindServer)
	start, end := c.StartNanos, c.AnsweredAt()
	b = append(b, tagStart)
	b = protowire.AppendFixed64(b, uint64(start))
	b = append(b, tagEnd)
	b = protowire.AppendFixed64(b, uint64(max(end, start)))

	scheme := "http"
	if c.IsTLS() {
		scheme = "https"
	}
	b = appendStringAttr(b, keyHostName, cut(vars.HostName(c.Host())))
	b = appendStringAttr(b, keyMethod, method)
	b = appendStringAttr(b, keyScheme, scheme)
	b = appendStringAttr(b, keyTarget, cut(c.RequestURI()))
	b = appendStringAttr(b, keyUserAgent, cut(c.UserAgent()))
	if route {
		b = appendStringAttr(b, keyRouteID, c.Route.ID)
		b = appendStringAttr(b, keyRouteName, c.Route.Name)
		b = appendStringAttr(b, keyRoute, c.MatchedURI)
		if c.Route.ServiceID != "" {
			b = appendStringAttr(b, keyServiceID, c.Route.ServiceID)
			b = appendStringAttr(b, keyServiceName, c.Route.ServiceName)
		}
	}
	if len(cfg.Attributes) > 0 {
		req := c.VarsRequest()
		for i := range cfg.Attributes {
			a := &cfg.Attributes[i]
			var ok bool
			// APISIX adds none for a variable without a value.
			if *scratch, ok = vars.Append((*scratch)[:0], &req, &a.Var); ok && len(*scratch) > 0 {
				b = appendStringAttr(b, a.key, cut(*scratch))
			}
		}
	}
	for i := range cfg.HeaderAttributes {
		h := &cfg.HeaderAttributes[i]
		if !h.Prefix {
			if v := c.RequestHeader(h.name); v != nil {
				b = appendStringAttr(b, h.key, cut(v))
			}
			continue
		}
		for name, value := range c.RequestHeaders() {
			if len(name) >= len(h.name) && bytes.EqualFold(name[:len(h.name)], h.name) {
				b = appendLowerKeyAttr(b, cut(name), cut(value))
			}
		}
	}
	status := c.Status()
	b = appendIntAttr(b, keyStatusCode, int64(status))
	b = appendIntAttr(b, keyRespStatusCode, int64(status))
	if c.UpstreamNanos >= 0 {
		b = appendStringAttr(b, keyUpstreamAddress, cut(c.Node))
		b = appendDoubleKV(b, tagAttribute, keyUpstreamLatency, float64(c.UpstreamNanos)/1e6)
		if status >= 500 {
			var digits [20]byte
			code := strconv.AppendInt(digits[:0], int64(status), 10)
			msgLen := len(upstreamStatusMessage) + len(code)
			statusLen := 1 + protowire.SizeBytes(msgLen) + 1 + protowire.SizeVarint(statusCodeError)
			b = protowire.AppendTag(b, fieldStatus, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(statusLen))
			b = protowire.AppendTag(b, fieldStatusMessage, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(msgLen))
			b = append(append(b, upstreamStatusMessage...), code...)
			b = protowire.AppendTag(b, fieldStatusCode, protowire.VarintType)
			b = protowire.AppendVarint(b, statusCodeError)
		}
	}
	b = protowire.AppendTag(b, fieldFlags, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, flags)

	// The span's length into its room, and the span moved up over what it did not take.
	n := len(b) - at - spanLenRoom
	size := protowire.SizeVarint(uint64(n))
	protowire.AppendVarint(b[at:at], uint64(n))
	if size < spanLenRoom {
		copy(b[at+size:], b[at+spanLenRoom:])
		b = b[:len(b)-(spanLenRoom-size)]
	}
	return b
}

const upstreamStatusMessage = "upstream response status: "

// appendResource appends a Resource message's body: APISIX's hostname, service.name
// "APISIX" unless configured, then the configured attributes.
func appendResource(b []byte, host string, attrs []conf.KeyValue) []byte {
	const tag = fieldResourceAttributes<<3 | wireBytes
	b = appendStringKV(b, tag, newAttrKey("hostname"), host)
	named := false
	for _, a := range attrs {
		named = named || a.Key == "service.name"
	}
	if !named {
		b = appendStringKV(b, tag, newAttrKey("service.name"), "APISIX")
	}
	for _, a := range attrs {
		key := newAttrKey(a.Key)
		switch v := a.Value.(type) {
		case string:
			b = appendStringKV(b, tag, key, v)
		case float64:
			b = appendDoubleKV(b, tag, key, v)
		case bool:
			b = appendBoolKV(b, tag, key, v)
		}
	}
	return b
}
