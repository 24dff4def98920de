package proxy

import (
	"bufio"
	"bytes"

	"github.com/valyala/fasthttp"

	"gw/plugins"
)

// A pristine request is one nothing has changed since the client sent it but header
// fields a plugin set or removed through its Ctx (Info.Pristine, Info.Edits): it has no
// body, and its target is in origin form. Its header block goes upstream as the client
// wrote it, line by line, less the hop-by-hop headers, the ones the proxy sets itself and
// the ones the plugins replaced, plus those; prepareRequest and Request.Write would reach
// the same headers by deleting and setting them one by one in fasthttp's parsed header and
// serialising it again, at about three times the CPU. Names keep the client's spelling and
// duplicates their order, as nginx sends them.

// pristine reports whether ctx's request can be sent by writePristine.
func pristine(ctx *fasthttp.RequestCtx, info *Info, tunnel bool) bool {
	h := &ctx.Request.Header
	target := h.RequestURI()
	// No body: Content-Length 0, or neither it nor Transfer-Encoding (fasthttp's -2).
	length := h.ContentLength()
	return info != nil && info.Pristine && !tunnel && (length == 0 || length == -2) &&
		len(target) > 0 && target[0] == '/' && len(h.RawHeaders()) > 0 &&
		(info.Edits == nil || !info.Edits.Touches(setByTheProxy))
}

// setByTheProxy reports whether a field a plugin edited is one the proxy drops or sets
// itself, or Content-Length, which frames the message: prepareRequest then decides what
// goes, as it would have without the plugin.
func setByTheProxy(name []byte) bool {
	return droppedHeader(name) || bytes.EqualFold(name, headerContentLength)
}

// preparePristine works out what writePristine adds, leaving ctx.Request alone:
// X-Forwarded-For (x.xff), X-Real-IP (x.ip), X-Forwarded-Port (x.port), and in x.buf the
// names the client's Connection header lists.
func preparePristine(ctx *fasthttp.RequestCtx, x *exchange, info *Info) {
	x.ip = appendPeerIP(x.ip[:0], ctx)
	x.xff = x.xff[:0]
	x.buf = x.buf[:0]
	for name, value := range headerLines(ctx.Request.Header.RawHeaders()) {
		switch {
		case bytes.EqualFold(name, headerXForwardedFor):
			x.xff = append(x.xff, value...)
			x.xff = append(x.xff, ", "...)
		case bytes.EqualFold(name, headerConnection):
			x.buf = append(x.buf, value...)
			x.buf = append(x.buf, ',')
		}
	}
	x.xff = append(x.xff, x.ip...)
	x.port = plugins.AppendServerPort(x.port[:0], ctx)
	x.hostSet = len(info.Host) > 0
	x.host = info.Host
	x.edits = info.Edits
	if x.edits != nil && x.edits.Empty() {
		x.edits = nil
	}
}

// writePristine writes the request line, host as its Host, the client's other header
// lines but the dropped ones and those the plugins replaced (x.edits), the fields the
// plugins set, then X-Real-IP and X-Forwarded-*, as prepareRequest sets them.
func writePristine(bw *bufio.Writer, ctx *fasthttp.RequestCtx, x *exchange, host []byte) error {
	h := &ctx.Request.Header
	bw.Write(h.Method())
	bw.WriteByte(' ')
	bw.Write(h.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.Write(host)
	bw.WriteString("\r\n")
	for name, value := range headerLines(h.RawHeaders()) {
		if droppedHeader(name) || listedIn(x.buf, name) || x.edits != nil && x.edits.Replaces(name) {
			continue
		}
		bw.Write(name)
		bw.WriteString(": ")
		bw.Write(value)
		bw.WriteString("\r\n")
	}
	if x.edits != nil {
		writeEdits(bw, x.edits.Lines(), x.buf)
	}
	writeHeader(bw, "X-Real-IP", x.ip)
	writeHeader(bw, fasthttp.HeaderXForwardedFor, x.xff)
	writeHeader(bw, fasthttp.HeaderXForwardedProto, plugins.ForwardedProtoOf(ctx))
	writeHeader(bw, fasthttp.HeaderXForwardedHost, h.Host())
	if len(x.port) > 0 {
		writeHeader(bw, "X-Forwarded-Port", x.port)
	}
	_, err := bw.WriteString("\r\n")
	return err
}

func writeHeader(bw *bufio.Writer, name string, value []byte) {
	bw.WriteString(name)
	bw.WriteString(": ")
	bw.Write(value)
	bw.WriteString("\r\n")
}

// headerLines yields each line of a raw header block (as edge.checkHeaderBlock has
// accepted it: CRLF-ended "name: value" lines) as its name and its value without the
// white space around it, up to the blank line that ends the block.
func headerLines(raw []byte) func(yield func(name, value []byte) bool) {
	return func(yield func(name, value []byte) bool) {
		for len(raw) > 0 {
			line := raw
			if end := bytes.IndexByte(raw, '\n'); end >= 0 {
				line, raw = raw[:end], raw[end+1:]
			} else {
				raw = nil
			}
			line = bytes.TrimSuffix(line, crlfTail)
			if len(line) == 0 {
				return
			}
			colon := bytes.IndexByte(line, ':')
			if colon < 1 {
				continue
			}
			if !yield(line[:colon], trimOWS(line[colon+1:])) {
				return
			}
		}
	}
}

// trimOWS trims the spaces and tabs around a header value (RFC 9110's OWS); bytes.Trim
// would build its cutset's table on every call.
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

var (
	crlfTail            = []byte("\r")
	headerXForwardedFor = []byte(fasthttp.HeaderXForwardedFor)
	headerConnection    = []byte(fasthttp.HeaderConnection)
)

// droppedHeader reports whether a client's header is one the proxy drops: hop-by-hop
// (hopByHop), Host (written first, as chosen), and those it sets itself. It switches on the
// length first: a request's usual headers match none, at one comparison each.
func droppedHeader(name []byte) bool {
	var candidates []string
	switch len(name) {
	case 2:
		candidates = []string{fasthttp.HeaderTE}
	case 4:
		candidates = []string{fasthttp.HeaderHost}
	case 7:
		candidates = []string{fasthttp.HeaderTrailer, fasthttp.HeaderUpgrade}
	case 9:
		candidates = []string{"X-Real-IP"}
	case 10:
		candidates = []string{fasthttp.HeaderConnection, fasthttp.HeaderKeepAlive}
	case 15:
		candidates = []string{fasthttp.HeaderXForwardedFor}
	case 16:
		candidates = []string{fasthttp.HeaderXForwardedHost, "X-Forwarded-Port", fasthttp.HeaderProxyConnection}
	case 17:
		candidates = []string{fasthttp.HeaderXForwardedProto, fasthttp.HeaderTransferEncoding}
	case 18:
		candidates = []string{fasthttp.HeaderProxyAuthenticate}
	case 19:
		candidates = []string{fasthttp.HeaderProxyAuthorization}
	default:
		return false
	}
	for _, c := range candidates {
		if equalFoldString(name, c) {
			return true
		}
	}
	return false
}

// writeEdits writes the fields plugins set (HeaderEdits.Lines) but those the client's
// Connection names, which prepareRequest would have deleted with the client's.
func writeEdits(bw *bufio.Writer, lines, connection []byte) {
	if len(connection) == 0 {
		bw.Write(lines)
		return
	}
	for len(lines) > 0 {
		end := bytes.IndexByte(lines, '\n') + 1
		line := lines[:end]
		lines = lines[end:]
		if colon := bytes.IndexByte(line, ':'); !listedIn(connection, line[:colon]) {
			bw.Write(line)
		}
	}
}

// listedIn reports whether name is one of the comma-separated names in list (a Connection
// header's), except Host and Content-Length, which frame the message.
func listedIn(list, name []byte) bool {
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, comma)
		item = bytes.TrimSpace(item)
		if len(item) > 0 && bytes.EqualFold(item, name) &&
			!bytes.EqualFold(item, headerHost) && !bytes.EqualFold(item, headerContentLength) {
			return true
		}
	}
	return false
}

func equalFoldString(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if c|0x20 != d|0x20 || (c|0x20 < 'a' || c|0x20 > 'z') && c != d {
			return false
		}
	}
	return true
}
