package vars

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// Query arguments and cookies are scanned where they lie. fasthttp's QueryArgs would
// mark the URI's arguments parsed, and the proxy then sends the query string re-encoded
// from them instead of as the client wrote it; its cookie parser moves the Cookie headers
// into one it writes itself.

// queryArg finds the first argument called name in query, decoding names and values as
// APISIX's get_uri_args does (%XX, '+' for a space). A value without escapes is returned
// from query as it is; one with escapes is decoded into buf. "?name" and "?name=" give
// the empty value.
func queryArg(query []byte, name string, buf []byte) (value []byte, appended, ok bool) {
	for len(query) > 0 {
		key, value, rest, keyEscaped, valueEscaped := nextArg(query)
		query = rest
		if !argNameIs(key, keyEscaped, name) {
			continue
		}
		if !valueEscaped {
			return value, false, true
		}
		return fasthttp.AppendUnquotedArg(buf, value), true, true
	}
	return nil, false, false
}

// argBytes marks the bytes a scan of a query string stops at: the separators, and '%'
// and '+', after which a name or value needs decoding.
var argBytes = [256]byte{'&': '&', '=': '=', '%': '%', '+': '%'}

// nextArg splits the first "key=value" pair, still encoded, off a query string, and says
// whether key and value hold escapes. One pass over the bytes: most pairs are a few bytes
// long, too short for bytes.IndexByte to pay for its calls.
func nextArg(query []byte) (key, value, rest []byte, keyEscaped, valueEscaped bool) {
	eq, end, escaped := -1, len(query), false
	for i := 0; i < len(query); i++ {
		switch argBytes[query[i]] {
		case 0:
		case '%':
			escaped = true
		case '=':
			if eq < 0 {
				eq, keyEscaped, escaped = i, escaped, false
			}
		default: // '&'
			end, rest = i, query[i+1:]
			i = len(query)
		}
	}
	if eq < 0 {
		return query[:end], nil, rest, escaped, false
	}
	return query[:eq], query[eq+1 : end], rest, keyEscaped, escaped
}

// argNameIs reports whether the encoded key decodes to name.
func argNameIs(key []byte, escaped bool, name string) bool {
	if !escaped {
		return string(key) == name
	}
	return decodedEquals(key, name)
}

// decodedEquals compares encoded, decoded on the fly as fasthttp.AppendUnquotedArg
// decodes it (a '%' without two hex digits stays as it is), with want.
func decodedEquals(encoded []byte, want string) bool {
	n := 0
	for i := 0; i < len(encoded); i++ {
		c := encoded[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 < len(encoded) {
				hi, lo := unhex(encoded[i+1]), unhex(encoded[i+2])
				if hi < 16 && lo < 16 {
					c = hi<<4 | lo
					i += 2
				}
			}
		}
		if n >= len(want) || want[n] != c {
			return false
		}
		n++
	}
	return n == len(want)
}

// unhex is a hex digit's value, 16 for any other byte.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 16
}

// cookie finds the first cookie called name in the Cookie headers.
func cookie(req *fasthttp.RequestCtx, name string) ([]byte, bool) {
	for _, header := range req.Request.Header.PeekAll(fasthttp.HeaderCookie) {
		for rest := header; len(rest) > 0; {
			var k, v []byte
			k, v, rest = nextCookie(rest)
			if string(k) == name {
				return v, true
			}
		}
	}
	return nil, false
}

// nextCookie splits the first "name=value" pair off a Cookie header, trimming the spaces
// around the ';' separators.
func nextCookie(header []byte) (name, value, rest []byte) {
	pair := header
	if i := bytes.IndexByte(header, ';'); i >= 0 {
		pair, rest = header[:i], header[i+1:]
	}
	pair = bytes.TrimSpace(pair)
	if i := bytes.IndexByte(pair, '='); i >= 0 {
		return bytes.TrimSpace(pair[:i]), bytes.TrimSpace(pair[i+1:]), rest
	}
	return nil, pair, rest
}
