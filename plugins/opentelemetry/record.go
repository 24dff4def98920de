package opentelemetry

import (
	"bytes"

	"gw/plugins"
	"gw/plugins/vars"
)

// spanRecord is one finished span in a worker's queue: the request's fields copied into
// text, which the slot keeps from one span to the next, so that recording allocates
// nothing once the slot's buffers have grown. The exporter turns it into OTLP.
type spanRecord struct {
	trace         plugins.TraceContext
	start, end    int64 // Unix nanoseconds
	status        int
	upstreamNanos int64 // -1 when no upstream was contacted
	https         bool
	route         *plugins.RouteInfo // the snapshot's, immutable; nil when none matched
	matchedURI    string             // the router's, immutable

	text                                          []byte
	method, host, target, userAgent, node, tstate textRef
	attrs                                         []attrRef
}

// textRef is a slice of a record's text.
type textRef struct{ from, to int32 }

// attrRef is one additional attribute: its key is a configured string, or, for a header
// matched by prefix, the header's name in text.
type attrRef struct {
	key    string
	keyRef textRef
	value  textRef
}

// maxField bounds each copied value; a longer one (a long URL) is cut, so that a queued
// span's memory stays bounded whatever the client sends.
const maxField = 2048

func (r *spanRecord) add(b []byte) textRef {
	if len(b) > maxField {
		b = b[:maxField]
	}
	from := len(r.text)
	r.text = append(r.text, b...)
	return textRef{int32(from), int32(len(r.text))}
}

func (r *spanRecord) get(t textRef) []byte { return r.text[t.from:t.to] }

// fill copies what the span needs from the request c, whose response is final.
func (r *spanRecord) fill(c *plugins.Ctx, cfg *Config) {
	r.trace = c.Trace
	r.start, r.end = c.StartNanos, c.AnsweredAt()
	r.status, r.upstreamNanos, r.https = c.Status(), c.UpstreamNanos, c.IsTLS()
	r.route, r.matchedURI = c.Route, c.MatchedURI
	r.text, r.attrs = r.text[:0], r.attrs[:0]
	r.method = r.add(c.Method())
	r.host = r.add(vars.HostName(c.Host()))
	r.target = r.add(c.RequestURI())
	r.userAgent = r.add(c.RequestHeader(userAgentHeader))
	r.node = r.add(c.Node)
	r.tstate = r.add(c.RequestHeader(tracestateHeader))
	if len(cfg.Attributes) > 0 {
		req := c.VarsRequest()
		for i := range cfg.Attributes {
			a := &cfg.Attributes[i]
			from := len(r.text)
			var ok bool
			if r.text, ok = vars.Append(r.text, &req, &a.Var); !ok || len(r.text) == from {
				r.text = r.text[:from] // APISIX adds none for a variable without a value
				continue
			}
			if len(r.text)-from > maxField {
				r.text = r.text[:from+maxField]
			}
			r.attrs = append(r.attrs, attrRef{key: a.Key, value: textRef{int32(from), int32(len(r.text))}})
		}
	}
	for i := range cfg.HeaderAttributes {
		h := &cfg.HeaderAttributes[i]
		if !h.Prefix {
			if v := c.RequestHeader(h.name); v != nil {
				r.attrs = append(r.attrs, attrRef{key: h.Key, value: r.add(v)})
			}
			continue
		}
		for name, value := range c.RequestHeaders() {
			if len(name) < len(h.name) || !bytes.EqualFold(name[:len(h.name)], h.name) {
				continue
			}
			key := r.add(name)
			lower(r.get(key))
			r.attrs = append(r.attrs, attrRef{keyRef: key, value: r.add(value)})
		}
	}
}

func lower(b []byte) {
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			b[i] = ch + ('a' - 'A')
		}
	}
}

var userAgentHeader = []byte("User-Agent")
