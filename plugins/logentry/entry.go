package logentry

import (
	"bytes"
	"net"
	"os"
	"strconv"

	"gw/internal/monotime"
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

// pair is one name and value in a scratch buffer, by offsets.
type pair struct{ name, value [2]int }

// Scratch is the per-entry working memory (decoded query arguments, lower-cased header
// names); keep one per goroutine or pool them. The zero Scratch is ready.
type Scratch struct {
	buf   []byte
	pairs []pair
}

// AppendDefault appends APISIX's default entry (log-util's get_full_log) for the request
// to dst.
func AppendDefault(dst []byte, c *plugins.Ctx, opts Options, s *Scratch) []byte {
	r := c.VarsRequest()
	var num [64]byte

	dst = append(dst, `{"request":{"url":`...)
	// scheme://host:server_port request_uri, as log-util builds it.
	url := s.buf[:0]
	if c.IsTLS() {
		url = append(url, "https://"...)
	} else {
		url = append(url, "http://"...)
	}
	url = append(url, vars.HostName(c.Host())...)
	url = append(url, ':')
	if tcp, ok := c.LocalAddr().(*net.TCPAddr); ok {
		url = strconv.AppendInt(url, int64(tcp.Port), 10)
	}
	url = append(url, c.RequestURI()...)
	s.buf = url
	dst = appendString(dst, url)
	dst = append(dst, `,"uri":`...)
	dst = appendString(dst, c.RequestURI())
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, c.Method())
	dst = append(dst, `,"headers":`...)
	dst = s.appendRequestHeaders(dst, c)
	dst = append(dst, `,"querystring":`...)
	dst = s.appendQuery(dst, c.QueryString())
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, int64(c.RequestSize()), 10)
	if opts.RequestBody {
		if body, ok := c.RequestBody(); ok && len(body) > 0 {
			dst = append(dst, `,"body":`...)
			dst = appendString(dst, body)
		}
	}

	dst = append(dst, `},"response":{"status":`...)
	dst = strconv.AppendInt(dst, int64(c.Status()), 10)
	dst = append(dst, `,"headers":`...)
	dst = s.appendResponseHeaders(dst, c)
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, int64(c.ResponseSize()), 10)
	if opts.ResponseBody && !c.ResponseStreamed() {
		if body, _ := c.ReadResponseBody(0); len(body) > 0 {
			dst = append(dst, `,"body":`...)
			dst = appendString(dst, body)
		}
	}

	dst = append(dst, `},"server":{"hostname":`...)
	dst = appendString(dst, hostname)
	dst = append(dst, `,"version":`...)
	dst = appendString(dst, opts.Version)
	dst = append(dst, '}')
	if len(c.Node) > 0 {
		dst = append(dst, `,"upstream":`...)
		dst = appendString(dst, c.Node)
	}

	// Latencies in milliseconds, as log-util's latency_details_in_ms: upstream_latency
	// only when an upstream answered, apisix_latency the rest, never below 0.
	latency := max(monotime.Unix(monotime.Now())-c.StartNanos, 0)
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
	dst = strconv.AppendInt(dst, c.StartNanos/1e6, 10)

	// route_id and service_id as log-util: a matched route's (service_id "" without a
	// service), or no route_id and the host as service_id.
	if r.RouteID != "" {
		dst = append(dst, `,"route_id":`...)
		dst = appendString(dst, r.RouteID)
		dst = append(dst, `,"service_id":`...)
		dst = appendString(dst, r.ServiceID)
	} else {
		dst = append(dst, `,"service_id":`...)
		dst = appendString(dst, vars.HostName(c.Host()))
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
	dst = strconv.AppendInt(dst, ns/1e6, 10)
	frac := ns % 1e6
	if frac == 0 {
		return dst
	}
	var digits [7]byte
	for i := 6; i > 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	digits[0] = '.'
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
func (s *Scratch) appendRequestHeaders(dst []byte, c *plugins.Ctx) []byte {
	s.buf, s.pairs = s.buf[:0], s.pairs[:0]
	for name, value := range c.RequestHeaders() {
		s.addHeader(name, value)
	}
	return s.appendPairs(dst)
}

func (s *Scratch) appendResponseHeaders(dst []byte, c *plugins.Ctx) []byte {
	s.buf, s.pairs = s.buf[:0], s.pairs[:0]
	for name, value := range c.ResponseHeaders() {
		s.addHeader(name, value)
	}
	return s.appendPairs(dst)
}

func (s *Scratch) addHeader(name, value []byte) {
	start := len(s.buf)
	for _, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		s.buf = append(s.buf, b)
	}
	mid := len(s.buf)
	s.buf = append(s.buf, value...)
	s.pairs = append(s.pairs, pair{[2]int{start, mid}, [2]int{mid, len(s.buf)}})
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
			s.pairs = append(s.pairs, pair{[2]int{start, mid}, [2]int{-1, -1}})
			continue
		}
		s.buf = unescape(s.buf, value)
		s.pairs = append(s.pairs, pair{[2]int{start, mid}, [2]int{mid, len(s.buf)}})
	}
	return s.appendPairs(dst)
}

// appendPairs writes s.pairs as one JSON object, grouping a repeated name into an array
// at its first place. value[0] == -1 is true (an argument without '=').
func (s *Scratch) appendPairs(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	for i, p := range s.pairs {
		name := s.buf[p.name[0]:p.name[1]]
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
		for _, q := range s.pairs[i:] {
			if !bytes.Equal(s.buf[q.name[0]:q.name[1]], name) {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			if q.value[0] < 0 {
				dst = append(dst, "true"...)
			} else {
				dst = appendString(dst, s.buf[q.value[0]:q.value[1]])
			}
		}
		if count > 1 {
			dst = append(dst, ']')
		}
	}
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
