package accesslog

import (
	"encoding/base64"
	"net"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"gw/internal/bytesconv"
)

// Entry is what the request handler knows about one finished request. Every field is
// borrowed for the duration of Log only: Log copies what it needs before returning.
type Entry struct {
	// Ctx supplies the method, URI, protocol, Referer, User-Agent, Authorization, status
	// and response size. Log only reads it, but fasthttp's accessors are not safe for
	// concurrent use, so it must belong to the calling goroutine.
	Ctx *fasthttp.RequestCtx
	// RemoteAddr is the client IP as text, already resolved (real-ip); when empty the TCP
	// peer's address is logged.
	RemoteAddr []byte
	// StartNanos is when the request began, in Unix nanoseconds on the Logger's clock
	// (monotime.Unix); 0 logs a request time of 0.
	StartNanos int64
	// Now, when not 0, is a clock reading the caller took as the request ended (Unix
	// nanoseconds), which Log takes for the time instead of reading the clock.
	Now int64
	// UpstreamAddr is the node that answered, empty when none did.
	UpstreamAddr []byte
	// UpstreamNanos is how long the upstream took, -1 when there was no upstream.
	UpstreamNanos int64
	// RouteID is the matched route, empty when none matched.
	RouteID string
	// StreamedBody says the body was streamed and BodyBytesSent is how many of its bytes
	// went to the client, which the caller learns only once the server has sent them (and
	// then logs). Without it the body's size is taken from Ctx.
	StreamedBody  bool
	BodyBytesSent int64
	// Protocol, when set, is the protocol the client spoke (HTTP/2.0), which the request's
	// header no longer says once the proxy made it HTTP/1.1 for the upstream.
	Protocol []byte
}

// protocol is the request's protocol as the log shows it.
func (e *Entry) protocol() []byte {
	if e.Protocol != nil {
		return e.Protocol
	}
	return e.Ctx.Request.Header.Protocol()
}

// stamp is the time of one second, formatted once for every line logged in that second.
type stamp struct {
	unix    int64
	local   []byte // nginx's $time_local: 29/Nov/2026:18:40:00 +0000
	rfc3339 []byte // RFC 3339 in the same zone: 2026-11-29T18:40:00Z
	storage [64]byte
}

const timeLocalLayout = "02/Jan/2006:15:04:05 -0700"

func newStamp(t time.Time) *stamp {
	s := &stamp{unix: t.Unix()}
	b := t.AppendFormat(s.storage[:0], timeLocalLayout)
	s.local = b
	s.rfc3339 = t.AppendFormat(b[len(b):len(b):cap(b)], time.RFC3339)
	return s
}

var (
	authorizationKey = []byte(fasthttp.HeaderAuthorization)
	basicScheme      = []byte("basic ")
)

const upperHex = "0123456789ABCDEF"
const lowerHex = "0123456789abcdef"

// appendCombined appends nginx's combined line:
// $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
// "$http_referer" "$http_user_agent".
func appendCombined(b []byte, e *Entry, st *stamp) []byte {
	h := &e.Ctx.Request.Header
	b = appendRemoteAddr(b, e, appendNginx)
	b = append(b, " - "...)
	b = appendRemoteUser(b, h.PeekCanonical(authorizationKey))
	b = append(b, " ["...)
	b = append(b, st.local...)
	b = append(b, `] "`...)
	b = appendNginx(b, h.Method())
	b = append(b, ' ')
	b = appendNginx(b, h.RequestURI())
	b = append(b, ' ')
	b = appendNginx(b, e.protocol())
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(e.Ctx.Response.StatusCode()), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, bodyBytesSent(e), 10)
	b = append(b, ` "`...)
	b = appendNginxOrDash(b, h.Referer())
	b = append(b, `" "`...)
	b = appendNginxOrDash(b, h.UserAgent())
	b = append(b, "\"\n"...)
	return b
}

// appendJSON appends one JSON object and a newline. Values that do not exist (no
// upstream, no route, no header) are null rather than "" or "-".
func appendJSON(b []byte, e *Entry, now int64, st *stamp) []byte {
	h := &e.Ctx.Request.Header
	b = append(b, `{"time":"`...)
	b = append(b, st.rfc3339...)
	b = append(b, `","remote_addr":"`...)
	b = appendRemoteAddr(b, e, appendJSONEscaped)
	b = append(b, `","method":"`...)
	b = appendJSONEscaped(b, h.Method())
	b = append(b, `","uri":"`...)
	b = appendJSONEscaped(b, h.RequestURI())
	b = append(b, `","protocol":"`...)
	b = appendJSONEscaped(b, e.protocol())
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(e.Ctx.Response.StatusCode()), 10)
	b = append(b, `,"bytes_sent":`...)
	b = strconv.AppendInt(b, bodyBytesSent(e), 10)
	b = append(b, `,"request_time":`...)
	if e.StartNanos > 0 {
		b = appendSeconds(b, now-e.StartNanos)
	} else {
		b = appendSeconds(b, 0)
	}
	b = append(b, `,"upstream_addr":`...)
	b = appendJSONStringOrNull(b, e.UpstreamAddr)
	b = append(b, `,"upstream_response_time":`...)
	if e.UpstreamNanos >= 0 && len(e.UpstreamAddr) > 0 {
		b = appendSeconds(b, e.UpstreamNanos)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"route_id":`...)
	if e.RouteID == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = appendJSONEscaped(b, bytesconv.Bytes(e.RouteID))
		b = append(b, '"')
	}
	b = append(b, `,"referer":`...)
	b = appendJSONStringOrNull(b, h.Referer())
	b = append(b, `,"user_agent":`...)
	b = appendJSONStringOrNull(b, h.UserAgent())
	b = append(b, "}\n"...)
	return b
}

// bodyBytesSent is nginx's $body_bytes_sent: 0 for HEAD and for statuses that carry no
// body, what the caller says went out of a streamed body (StreamedBody), otherwise the
// size of the body fasthttp is about to write: a stream the caller said nothing about
// counts its Content-Length (0 when it is chunked, since the size is only known once the
// stream has been copied).
func bodyBytesSent(e *Entry) int64 {
	ctx := e.Ctx
	resp := &ctx.Response
	status := resp.StatusCode()
	if resp.SkipBody || ctx.Request.Header.IsHead() || status < 200 ||
		status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified {
		return 0
	}
	if e.StreamedBody {
		return e.BodyBytesSent
	}
	if resp.IsBodyStream() {
		// Body() would drain the stream into memory, so only the header can be used.
		return int64(max(resp.Header.ContentLength(), 0))
	}
	return int64(len(resp.Body()))
}

// appendRemoteAddr appends e.RemoteAddr, or the TCP peer's IP when the handler gave none.
func appendRemoteAddr(b []byte, e *Entry, escape func([]byte, []byte) []byte) []byte {
	if len(e.RemoteAddr) > 0 {
		return escape(b, e.RemoteAddr)
	}
	if tcp, ok := e.Ctx.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap().AppendTo(b)
		}
	}
	return append(b, '-')
}

// appendRemoteUser appends nginx's $remote_user: the user name of an "Authorization:
// Basic" header, or "-" when there is none. Like nginx it rejects a credential that is
// not base64, lacks the colon, or has an empty user name. The credential is decoded a
// block at a time into a stack buffer so a long header costs no allocation.
func appendRemoteUser(b, auth []byte) []byte {
	if len(auth) < len(basicScheme) || !equalFoldASCII(auth[:len(basicScheme)], basicScheme) {
		return append(b, '-')
	}
	enc := auth[len(basicScheme):]
	for len(enc) > 0 && enc[0] == ' ' {
		enc = enc[1:]
	}
	// nginx's decoder stops at the first '=' and rejects any other byte outside the
	// alphabet; Go's would skip CR and LF, so check the alphabet first.
	for i, c := range enc {
		if c == '=' {
			enc = enc[:i]
			break
		}
		if !isBase64(c) {
			return append(b, '-')
		}
	}
	if len(enc) == 0 || len(enc)%4 == 1 {
		return append(b, '-')
	}
	mark := len(b)
	var block [48]byte
	for len(enc) > 0 {
		chunk := enc[:min(len(enc), 64)]
		enc = enc[len(chunk):]
		n, err := base64.RawStdEncoding.Decode(block[:], chunk)
		if err != nil {
			return append(b[:mark], '-')
		}
		for i, c := range block[:n] {
			if c == ':' {
				b = appendNginx(b, block[:i])
				if len(b) == mark {
					return append(b, '-')
				}
				return b
			}
		}
		b = appendNginx(b, block[:n])
	}
	return append(b[:mark], '-') // no colon: not a user:password pair
}

func isBase64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// equalFoldASCII compares a to the lower-case b, ignoring the case of a.
func equalFoldASCII(a, lower []byte) bool {
	for i, c := range a {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// nginxEscapes marks the bytes nginx's log module writes as \xHH: control bytes, '"',
// '\' and everything from 0x7f up.
var nginxEscapes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x7f
	}
	return t
}()

// appendNginx appends s escaped as nginx escapes variables in access logs.
func appendNginx(b, s []byte) []byte {
	start := 0
	for i, c := range s {
		if nginxEscapes[c] {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
			start = i + 1
		}
	}
	return append(b, s[start:]...)
}

func appendNginxOrDash(b, s []byte) []byte {
	if len(s) == 0 {
		return append(b, '-')
	}
	return appendNginx(b, s)
}

// appendJSONEscaped appends s as the inside of a JSON string. Valid UTF-8 passes
// through; each byte of an invalid sequence becomes U+FFFD, as encoding/json does, so
// the line stays valid JSON whatever a client sends.
func appendJSONEscaped(b, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

func appendJSONStringOrNull(b, s []byte) []byte {
	if len(s) == 0 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = appendJSONEscaped(b, s)
	return append(b, '"')
}

// appendSeconds appends a duration as seconds with millisecond precision, truncated as
// nginx's $request_time is.
func appendSeconds(b []byte, nanos int64) []byte {
	ms := max(nanos/int64(time.Millisecond), 0)
	b = strconv.AppendInt(b, ms/1000, 10)
	frac := ms % 1000
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}
