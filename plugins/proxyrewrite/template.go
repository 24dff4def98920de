package proxyrewrite

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
)

// variable is an nginx variable a template may name.
type variable uint8

const (
	varNone variable = iota
	varURI
	varRequestURI
	varHost
	varRemoteAddr
	varArgs
	varRequestMethod
	varScheme
	varArg    // arg_<name>
	varHeader // http_<name>
	varCookie // cookie_<name>
)

var namedVariables = map[string]variable{
	"uri":            varURI,
	"request_uri":    varRequestURI,
	"host":           varHost,
	"remote_addr":    varRemoteAddr,
	"args":           varArgs,
	"query_string":   varArgs,
	"request_method": varRequestMethod,
	"scheme":         varScheme,
}

const supportedVariables = "uri, request_uri, host, remote_addr, args, query_string, request_method, scheme, arg_<name>, http_<name>, cookie_<name>"

// segment is one piece of a template: literal text, a regex capture, or a variable.
type segment struct {
	literal  []byte
	capture  int // -1 unless the segment is a capture
	variable variable
	name     []byte // the argument, header or cookie name of varArg, varHeader, varCookie
}

// template is a string with $-references, parsed once. The zero template is empty.
type template struct {
	segments []segment
	// dynamic is false when the template is one literal: resolving it copies nothing.
	dynamic bool
}

// parseTemplate parses APISIX's resolve_var syntax: $name or ${name} names a variable; in
// header values ($captures true) $1 or ${1} is a capture of regex_uri first, as in
// APISIX's resolve_var_with_captures. A '$' that starts no reference is literal, and so
// is "\$" (backslash kept, as APISIX keeps it).
func parseTemplate(s string, captures bool) (template, error) {
	var t template
	literal := []byte{}
	flush := func() {
		if len(literal) > 0 {
			t.segments = append(t.segments, segment{literal: literal, capture: -1})
			literal = []byte{}
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || (i > 0 && s[i-1] == '\\') {
			literal = append(literal, s[i])
			continue
		}
		name, end, ok := referenceAt(s, i)
		if !ok {
			literal = append(literal, '$')
			continue
		}
		seg := segment{capture: -1}
		switch {
		case isDigits(name):
			if !captures {
				return t, fmt.Errorf("$%s: captures are filled by regex_uri and usable in header values only", name)
			}
			n, err := strconv.Atoi(name)
			if err != nil || n > 99 {
				return t, fmt.Errorf("$%s: capture number out of range", name)
			}
			seg.capture = n
		default:
			v, arg, err := lookupVariable(name)
			if err != nil {
				return t, err
			}
			seg.variable, seg.name = v, arg
		}
		flush()
		t.segments = append(t.segments, seg)
		t.dynamic = true
		i = end - 1
	}
	flush()
	return t, nil
}

// referenceAt reads the reference starting with the '$' at s[i]: "${name}" or "$name" (a
// capture number alone when it starts with a digit). It returns the name and where the
// reference ends.
func referenceAt(s string, i int) (name string, end int, ok bool) {
	j := i + 1
	if j < len(s) && s[j] == '{' {
		closing := strings.IndexByte(s[j:], '}')
		if closing < 0 {
			return "", 0, false
		}
		name = strings.TrimSpace(s[j+1 : j+closing])
		return name, j + closing + 1, name != ""
	}
	k := j
	if k < len(s) && isDigit(s[k]) {
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		return s[j:k], k, true
	}
	for k < len(s) && (isWordChar(s[k]) || s[k] == '.') {
		k++
	}
	return s[j:k], k, k > j
}

func lookupVariable(name string) (variable, []byte, error) {
	if v, ok := namedVariables[name]; ok {
		return v, nil, nil
	}
	for _, p := range []struct {
		prefix string
		v      variable
	}{{"arg_", varArg}, {"http_", varHeader}, {"cookie_", varCookie}} {
		if rest, ok := strings.CutPrefix(name, p.prefix); ok && rest != "" && !strings.Contains(rest, ".") {
			if p.v == varHeader {
				rest = strings.ReplaceAll(rest, "_", "-") // nginx: $http_x_api_key is X-Api-Key
			}
			return p.v, []byte(rest), nil
		}
	}
	return varNone, nil, fmt.Errorf("$%s: variable not supported; supported: %s", name, supportedVariables)
}

// resolver is what templates are resolved against for one request. It is pooled by the
// handler with its buffers.
type resolver struct {
	ctx *fasthttp.RequestCtx
	// subject and captures are regex_uri's input and submatch indexes; captures is nil
	// when no regex matched.
	subject  []byte
	captures []int
	// escapeSeparator makes '?' in a variable's value "%3F", as APISIX does for uri: only
	// a '?' written in the template itself starts the query.
	escapeSeparator bool
	value           []byte // scratch for one variable's value
}

// resolve appends t's value for this request to dst.
func (t *template) resolve(dst []byte, r *resolver) []byte {
	for i := range t.segments {
		seg := &t.segments[i]
		switch {
		case seg.literal != nil:
			dst = append(dst, seg.literal...)
		case seg.capture >= 0:
			if 2*seg.capture+1 < len(r.captures) && r.captures[2*seg.capture] >= 0 {
				dst = append(dst, r.subject[r.captures[2*seg.capture]:r.captures[2*seg.capture+1]]...)
			}
		case r.escapeSeparator:
			r.value = appendVariable(r.value[:0], r.ctx, seg)
			for _, c := range r.value {
				if c == '?' {
					dst = append(dst, "%3F"...)
				} else {
					dst = append(dst, c)
				}
			}
		default:
			dst = appendVariable(dst, r.ctx, seg)
		}
	}
	return dst
}

func appendVariable(dst []byte, ctx *fasthttp.RequestCtx, seg *segment) []byte {
	req := &ctx.Request
	switch seg.variable {
	case varURI:
		return append(dst, ctx.Path()...)
	case varRequestURI:
		return append(dst, req.Header.RequestURI()...)
	case varHost:
		return appendHost(dst, req.Header.Host())
	case varRemoteAddr:
		return appendRemoteIP(dst, ctx)
	case varArgs:
		return append(dst, req.URI().QueryString()...)
	case varRequestMethod:
		return append(dst, req.Header.Method()...)
	case varScheme:
		if ctx.IsTLS() {
			return append(dst, "https"...)
		}
		return append(dst, "http"...)
	case varArg:
		args := fasthttp.AcquireArgs()
		args.ParseBytes(req.URI().QueryString())
		dst = append(dst, args.PeekBytes(seg.name)...)
		fasthttp.ReleaseArgs(args)
		return dst
	case varHeader:
		return append(dst, req.Header.PeekBytes(seg.name)...)
	case varCookie:
		return append(dst, req.Header.CookieBytes(seg.name)...)
	}
	return dst
}

// appendHost is nginx's $host: the Host header lower-cased, without its port.
func appendHost(dst, host []byte) []byte {
	end := len(host)
	if colon := lastIndexByte(host, ':'); colon >= 0 && lastIndexByte(host, ']') < colon {
		end = colon
	}
	for _, c := range host[:end] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func appendRemoteIP(dst []byte, ctx *fasthttp.RequestCtx) []byte {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap().AppendTo(dst)
		}
	}
	return append(dst, ctx.RemoteIP().String()...)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func isWordChar(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}
