package logentry

import (
	"bytes"
	"os"

	"gw/plugins"
	"gw/plugins/vars"
)

// Options are what a logger adds to the default entry.
type Options struct {
	// RequestBody and ResponseBody add request.body and response.body
	// (include_req_body, include_resp_body): a body the worker holds whole. A streamed
	// response body is not read for the log (the client's copy would wait on it).
	RequestBody, ResponseBody bool
	// Version is server.version: the gateway's (plugins.Shared.Version).
	Version string
}

var hostname = func() string {
	h, _ := os.Hostname()
	return h
}()

// pair is one name and value of an object being written: the name by offsets in the
// scratch buffer (lower-cased or decoded there); the value the header's own bytes, or
// (isDecoded) offsets in the buffer, or neither: true (a query argument without '=').
type pair struct {
	name      [2]int
	value     []byte
	decoded   [2]int
	isDecoded bool
}

// Scratch is the per-entry working memory (decoded query arguments, lower-cased header
// names); keep one per goroutine or pool them. The zero Scratch is ready.
type Scratch struct {
	buf, host []byte
	pairs     []pair
	// names are the offsets in the entry of the header names written so far in an
	// object (appendField).
	names [][2]int
	// second is the last start_time's second, written in secondText (appendStartTime).
	second     int64
	secondText []byte
}

// appendStartTime appends start_time, Unix milliseconds: thirteen digits, of which the
// first ten change once a second, kept in s, and the last three come from a table.
func (s *Scratch) appendStartTime(dst []byte, ms int64) []byte {
	if ms < 1000 {
		return appendInt(dst, ms)
	}
	if second := ms / 1000; second != s.second || len(s.secondText) == 0 {
		s.second, s.secondText = second, appendInt(s.secondText[:0], second)
	}
	frac := ms % 1000 % 100 * 2
	return append(append(dst, s.secondText...), byte('0'+ms%1000/100), digitPairs[frac], digitPairs[frac+1])
}

// hostName is nginx's $host: the Host without its port, lower-cased (log-util's url
// and, without a route, service_id).
func (s *Scratch) hostName(c *plugins.Ctx) []byte {
	host := vars.HostName(c.Host())
	for i, b := range host {
		if 'A' <= b && b <= 'Z' {
			s.host = append(s.host[:0], host...)
			for j, b := range s.host[i:] {
				s.host[i+j] = toLower[b]
			}
			return s.host
		}
	}
	return host
}

// Default is APISIX's default entry (log-util's get_full_log) for one logger: what is
// the same for every request, the server object, and the route's ids for the route the
// logger was built for, is written as JSON once, at build. It is immutable and safe for
// concurrent use.
type Default struct {
	opts Options
	// server is `,"server":{"hostname":...,"version":...}`.
	server []byte
	// ids is `,"route_id":...,"service_id":...` for the route of routeID and serviceID; an
	// instance that runs for other routes too (a global rule's) writes theirs each time.
	routeID, serviceID string
	ids                []byte
}

// NewDefault compiles the default entry for a logger of route (nil for none known).
func NewDefault(opts Options, route *plugins.RouteInfo) *Default {
	d := &Default{opts: opts}
	d.server = append(d.server, `,"server":{"hostname":`...)
	d.server = appendString(d.server, hostname)
	d.server = append(d.server, `,"version":`...)
	d.server = appendString(d.server, opts.Version)
	d.server = append(d.server, '}')
	if route != nil && route.ID != "" {
		d.routeID, d.serviceID = route.ID, route.ServiceID
		d.ids = appendIDs(nil, route.ID, route.ServiceID)
	}
	return d
}

func appendIDs(dst []byte, routeID, serviceID string) []byte {
	dst = append(dst, `,"route_id":`...)
	dst = appendString(dst, routeID)
	dst = append(dst, `,"service_id":`...)
	return appendString(dst, serviceID)
}

// AppendDefault appends APISIX's default entry for the request to dst, compiling it for
// this call (Default.Append is the log phase's, compiled once).
func AppendDefault(dst []byte, c *plugins.Ctx, opts Options, s *Scratch) []byte {
	return NewDefault(opts, nil).Append(dst, c, s)
}

// Append appends the request's entry to dst.
func (d *Default) Append(dst []byte, c *plugins.Ctx, s *Scratch) []byte {
	var num [64]byte

	// url is scheme://host:server_port request_uri, as log-util builds it, and uri the
	// request_uri again: escaped once, copied.
	if c.IsTLS() {
		dst = append(dst, `{"request":{"url":"https://`...)
	} else {
		dst = append(dst, `{"request":{"url":"http://`...)
	}
	host := s.hostName(c)
	dst = appendStringBody(dst, host)
	dst = append(dst, ':')
	dst = append(dst, c.ServerPort()...)
	uri := len(dst)
	dst = appendStringBody(dst, c.RequestURI())
	uriEnd := len(dst)
	dst = append(dst, `","uri":"`...)
	dst = append(dst, dst[uri:uriEnd]...)
	dst = append(dst, `","method":`...)
	dst = appendString(dst, c.Method())
	dst = append(dst, `,"headers":`...)
	dst = s.appendRequestHeaders(dst, c)
	dst = append(dst, `,"querystring":`...)
	dst = s.appendQuery(dst, c.QueryString())
	dst = append(dst, `,"size":`...)
	dst = appendInt(dst, int64(c.RequestSize()))
	if d.opts.RequestBody {
		if body, ok := c.RequestBody(); ok && len(body) > 0 {
			dst = append(dst, `,"body":`...)
			dst = appendString(dst, body)
		}
	}

	dst = append(dst, `},"response":{"status":`...)
	dst = appendInt(dst, int64(c.Status()))
	dst = append(dst, `,"headers":`...)
	dst = s.appendResponseHeaders(dst, c)
	dst = append(dst, `,"size":`...)
	dst = appendInt(dst, int64(c.ResponseSize()))
	if d.opts.ResponseBody && !c.ResponseStreamed() {
		if body, _ := c.ReadResponseBody(0); len(body) > 0 {
			dst = append(dst, `,"body":`...)
			dst = appendString(dst, body)
		}
	}
	dst = append(dst, '}')

	dst = append(dst, d.server...)
	if len(c.Node) > 0 {
		dst = append(dst, `,"upstream":`...)
		dst = appendString(dst, c.Node)
	}

	// Latencies in milliseconds, as log-util's latency_details_in_ms: upstream_latency
	// only when an upstream answered, apisix_latency the rest, never below 0. The end is
	// the worker's last clock reading when it has one (AnsweredAt), as log-util reads
	// nginx's cached time.
	latency := max(c.AnsweredAt()-c.StartNanos, 0)
	apisix := latency
	if c.UpstreamNanos >= 0 {
		apisix = max(latency-c.UpstreamNanos, 0)
		dst = append(dst, `,"upstream_latency":`...)
		dst = appendMillis(dst, c.UpstreamNanos)
	}
	dst = append(dst, `,"apisix_latency":`...)
	dst = appendMillis(dst, apisix)
	dst = append(dst, `,"latency":`...)
	dst = appendMillis(dst, latency)
	dst = append(dst, `,"start_time":`...)
	dst = s.appendStartTime(dst, c.StartNanos/1e6)

	// route_id and service_id as log-util: a matched route's (service_id "" without a
	// service), or no route_id and the host as service_id.
	switch r := c.Route; {
	case r == nil || r.ID == "":
		dst = append(dst, `,"service_id":`...)
		dst = appendString(dst, host)
	case d.ids != nil && r.ID == d.routeID && r.ServiceID == d.serviceID:
		dst = append(dst, d.ids...)
	default:
		dst = appendIDs(dst, r.ID, r.ServiceID)
	}
	if c.Consumer != "" {
		dst = append(dst, `,"consumer":{"username":`...)
		dst = appendString(dst, c.Consumer)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"client_ip":`...)
	if ip := c.RemoteIP(); ip.IsValid() {
		dst = appendString(dst, ip.AppendTo(num[:0]))
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, '}')
}

// appendMillis appends ns (at least 0) in milliseconds, as a JSON number with up to six
// decimals and no trailing zero: what strconv.AppendFloat(float64(ns)/1e6, 'f', -1)
// writes, without the shortest-float search that cost three times as much (and without
// a float subtraction's stray digits in apisix_latency).
func appendMillis(dst []byte, ns int64) []byte {
	dst = appendInt(dst, ns/1e6)
	frac := ns % 1e6
	if frac == 0 {
		return dst
	}
	hi, mid, lo := frac/10000*2, frac/100%100*2, frac%100*2
	digits := [7]byte{'.', digitPairs[hi], digitPairs[hi+1], digitPairs[mid], digitPairs[mid+1], digitPairs[lo], digitPairs[lo+1]}
	n := 7
	for digits[n-1] == '0' {
		n--
	}
	return append(dst, digits[:n]...)
}

// appendRequestHeaders and appendResponseHeaders append header fields as
// ngx.req.get_headers gives them: names lower-cased, a field sent several times as an
// array of its values in order. Each ranges over the Ctx's iterator itself, which the
// compiler then inlines: an iterator passed as a value would cost allocations per call.
// The values are the header's own bytes, unchanged while the entry is written.
//
// Each field is written into dst as it comes (appendField), the usual case; a name seen
// twice sends the object back to be written again grouped (appendPairs), which needs
// the names and values gathered first.
func (s *Scratch) appendRequestHeaders(dst []byte, c *plugins.Ctx) []byte {
	start := len(dst)
	s.names = s.names[:0]
	dst = append(dst, '{')
	repeated := false
	for name, value := range c.RequestHeaders() {
		if dst, repeated = s.appendField(dst, name, value); repeated {
			break
		}
	}
	if !repeated {
		return append(dst, '}')
	}
	s.buf, s.pairs = s.buf[:0], s.pairs[:0]
	for name, value := range c.RequestHeaders() {
		s.addHeader(name, value)
	}
	return s.appendPairs(dst[:start])
}

func (s *Scratch) appendResponseHeaders(dst []byte, c *plugins.Ctx) []byte {
	start := len(dst)
	s.names = s.names[:0]
	dst = append(dst, '{')
	repeated := false
	for name, value := range c.ResponseHeaders() {
		if dst, repeated = s.appendField(dst, name, value); repeated {
			break
		}
	}
	if !repeated {
		return append(dst, '}')
	}
	s.buf, s.pairs = s.buf[:0], s.pairs[:0]
	for name, value := range c.ResponseHeaders() {
		s.addHeader(name, value)
	}
	return s.appendPairs(dst[:start])
}

// appendField appends `"name":"value"` to an object of header fields, the name
// lower-cased, unless the object has the name already: then it reports true, and what
// it appended is to be thrown away. The names written are compared as written (quoted,
// escaped: the same name, the same bytes), by their offsets in dst (s.names).
func (s *Scratch) appendField(dst, name, value []byte) ([]byte, bool) {
	if len(s.names) > 0 {
		dst = append(dst, ',')
	}
	at := len(dst)
	dst = append(dst, '"')
	dst, s.buf = appendLowerBody(dst, name, s.buf)
	dst = append(dst, '"')
	end := len(dst)
	written := dst[at:end]
	for _, seen := range s.names {
		if seen[1]-seen[0] == len(written) && bytes.Equal(dst[seen[0]:seen[1]], written) {
			return dst, true
		}
	}
	s.names = append(s.names, [2]int{at, end})
	dst = append(dst, ':')
	return appendString(dst, value), false
}

// toLower maps each byte to its ASCII lower case.
var toLower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

func (s *Scratch) addHeader(name, value []byte) {
	start := len(s.buf)
	s.buf = append(s.buf, name...)
	lower := s.buf[start:]
	for i, b := range lower {
		lower[i] = toLower[b]
	}
	s.pairs = append(s.pairs, pair{name: [2]int{start, len(s.buf)}, value: value})
}

// appendQuery appends the query's arguments as ngx.req.get_uri_args gives them: decoded,
// an argument without '=' as true, one sent several times as an array.
func (s *Scratch) appendQuery(dst []byte, query []byte) []byte {
	s.buf, s.pairs = s.buf[:0], s.pairs[:0]
	for len(query) > 0 {
		var arg []byte
		arg, query, _ = bytes.Cut(query, []byte{'&'})
		if len(arg) == 0 {
			continue
		}
		name, value, hasValue := bytes.Cut(arg, []byte{'='})
		start := len(s.buf)
		s.buf = unescape(s.buf, name)
		mid := len(s.buf)
		if !hasValue {
			s.pairs = append(s.pairs, pair{name: [2]int{start, mid}})
			continue
		}
		s.buf = unescape(s.buf, value)
		s.pairs = append(s.pairs, pair{name: [2]int{start, mid}, decoded: [2]int{mid, len(s.buf)}, isDecoded: true})
	}
	return s.appendPairs(dst)
}

// appendValue appends p's value: true, or a JSON string.
func (s *Scratch) appendValue(dst []byte, p *pair) []byte {
	switch {
	case p.isDecoded:
		return appendString(dst, s.buf[p.decoded[0]:p.decoded[1]])
	case p.value == nil:
		return append(dst, "true"...)
	}
	return appendString(dst, p.value)
}

// appendPairs writes s.pairs as one JSON object, grouping a repeated name into an array
// at its first place, and forgets the values.
func (s *Scratch) appendPairs(dst []byte) []byte {
	dst = append(dst, '{')
	repeated := false
	for i := 1; i < len(s.pairs) && !repeated; i++ {
		name := s.buf[s.pairs[i].name[0]:s.pairs[i].name[1]]
		for j := range i {
			if bytes.Equal(s.buf[s.pairs[j].name[0]:s.pairs[j].name[1]], name) {
				repeated = true
				break
			}
		}
	}
	if !repeated {
		// Nearly always: each name once, written as it comes.
		for i := range s.pairs {
			p := &s.pairs[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s.buf[p.name[0]:p.name[1]])
			dst = append(dst, ':')
			dst = s.appendValue(dst, p)
		}
		clear(s.pairs)
		return append(dst, '}')
	}
	first := true
	for i := range s.pairs {
		name := s.buf[s.pairs[i].name[0]:s.pairs[i].name[1]]
		seen := false
		for _, q := range s.pairs[:i] {
			if bytes.Equal(s.buf[q.name[0]:q.name[1]], name) {
				seen = true
				break
			}
		}
		if seen {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, name)
		dst = append(dst, ':')
		count := 0
		for _, q := range s.pairs[i:] {
			if bytes.Equal(s.buf[q.name[0]:q.name[1]], name) {
				count++
			}
		}
		if count > 1 {
			dst = append(dst, '[')
		}
		n := 0
		for j := i; j < len(s.pairs); j++ {
			q := &s.pairs[j]
			if !bytes.Equal(s.buf[q.name[0]:q.name[1]], name) {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = s.appendValue(dst, q)
		}
		if count > 1 {
			dst = append(dst, ']')
		}
	}
	clear(s.pairs) // keep no request's bytes alive in a pooled Scratch
	return append(dst, '}')
}

// unescape appends s decoded as a query component ('+' a space, %XX a byte; a bad
// escape kept as written).
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			dst = append(dst, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
