package opentelemetry

import (
	"encoding/binary"
	"math/rand/v2"

	"gw/plugins"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/): the traceparent header is
// version "-" trace-id "-" parent-id "-" trace-flags, in lower-case hex.
//
//	00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01

// traceparentLen is the length of a version 00 traceparent.
const traceparentLen = 55

var (
	traceparentHeader = []byte("traceparent")
	tracestateHeader  = []byte("tracestate")
	requestIDHeader   = []byte("X-Request-Id")
)

// Parent is what a valid traceparent says: the trace, the sender's span, its flags.
type Parent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// Sampled reports the sampled flag.
func (p Parent) Sampled() bool { return p.Flags&1 != 0 }

// ParseTraceparent reads a traceparent header value as the specification's section 3.2
// and its processing model say: lower-case hex only; version ff is invalid; a version 00
// value is exactly 55 characters; a later version may carry more after a '-', which is
// ignored; an all-zero trace-id or parent-id is invalid. ok is false for anything else,
// and the request then starts a new trace. It allocates nothing.
func ParseTraceparent(v []byte) (p Parent, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Parent{}, false
	}
	var version [1]byte
	if !decodeHex(version[:], v[0:2]) || version[0] == 0xff {
		return Parent{}, false
	}
	if version[0] == 0 && len(v) != traceparentLen || len(v) > traceparentLen && v[traceparentLen] != '-' {
		return Parent{}, false
	}
	var flags [1]byte
	if !decodeHex(p.TraceID[:], v[3:35]) || !decodeHex(p.SpanID[:], v[36:52]) || !decodeHex(flags[:], v[53:55]) {
		return Parent{}, false
	}
	if p.TraceID == ([16]byte{}) || p.SpanID == ([8]byte{}) {
		return Parent{}, false
	}
	p.Flags = flags[0]
	return p, true
}

// decodeHex decodes src, lower-case hex of twice dst's length, into dst. A table marks
// the digits' values and every other byte 0xff: or-ing the looked-up values shows any
// bad byte in the high nibble, with no branch per byte (BenchmarkParseTraceparent).
func decodeHex(dst, src []byte) bool {
	var bad byte
	for i := range dst {
		hi, lo := hexValues[src[2*i]], hexValues[src[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo
	}
	return bad < 0x10
}

// hexValues maps a lower-case hex digit to its value, any other byte to 0xff.
var hexValues = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, ch := range []byte("0123456789abcdef") {
		t[ch] = byte(i)
	}
	return t
}()

const hexDigits = "0123456789abcdef"

func appendHex(dst, src []byte) []byte {
	for _, b := range src {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}

// appendTraceparent appends the version 00 traceparent that names tc's span.
func appendTraceparent(dst []byte, tc *plugins.TraceContext) []byte {
	dst = append(dst, "00-"...)
	dst = appendHex(dst, tc.TraceID[:])
	dst = append(dst, '-')
	dst = appendHex(dst, tc.SpanID[:])
	if tc.Sampled {
		return append(dst, "-01"...)
	}
	return append(dst, "-00"...)
}

// traceIDFromRequestID reads X-Request-Id as a trace id (trace_id_source x-request-id):
// 32 hex digits, either case, or a UUID's 36 with its four dashes. ok is false for any
// other value or an all-zero id.
func traceIDFromRequestID(v []byte) (id [16]byte, ok bool) {
	var digits [32]byte
	switch len(v) {
	case 32:
		copy(digits[:], v)
	case 36:
		if v[8] != '-' || v[13] != '-' || v[18] != '-' || v[23] != '-' {
			return id, false
		}
		n := copy(digits[:], v[:8])
		n += copy(digits[n:], v[9:13])
		n += copy(digits[n:], v[14:18])
		n += copy(digits[n:], v[19:23])
		copy(digits[n:], v[24:])
	default:
		return id, false
	}
	for i, ch := range digits {
		if ch >= 'A' && ch <= 'F' {
			digits[i] = ch + ('a' - 'A')
		}
	}
	if !decodeHex(id[:], digits[:]) || id == ([16]byte{}) {
		return [16]byte{}, false
	}
	return id, true
}

// newTraceID and newSpanID draw from math/rand/v2's per-thread ChaCha8 generator, seeded
// by the operating system: unpredictable, lock-free, allocation-free. Never all zero.
func newTraceID() (id [16]byte) {
	for id == ([16]byte{}) {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id [8]byte) {
	for id == ([8]byte{}) {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// sample decides whether the request's span is recorded, as opentelemetry-lua's samplers
// (which follow the OpenTelemetry specification's) do. parent is the client's context,
// valid or not.
func (s *Sampler) sample(traceID [16]byte, parent Parent, hasParent bool) bool {
	switch s.Kind {
	case AlwaysOn:
		return true
	case TraceIDRatio:
		return ratioSample(s.Fraction, traceID)
	case ParentBase:
		if hasParent {
			return parent.Sampled()
		}
		if s.Root == nil {
			return false
		}
		return s.Root.sample(traceID, parent, false)
	}
	return false
}

// ratioSample is opentelemetry-lua's trace_id_ratio, which APISIX runs: a trace is
// recorded when its id's first 4 bytes, read as a big-endian number, are below
// fraction·(2³²-1); a fraction of 1 records every trace. gw and APISIX gateways sampling
// by one fraction so agree on every trace. (The OpenTelemetry specification's SDKs read
// the last 8 bytes instead.)
func ratioSample(fraction float64, traceID [16]byte) bool {
	if fraction >= 1 {
		return true
	}
	return float64(binary.BigEndian.Uint32(traceID[:4])) < fraction*0xffffffff
}
