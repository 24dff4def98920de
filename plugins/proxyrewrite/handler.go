package proxyrewrite

import (
	"bytes"
	"encoding/json"
	"sync"

	"gw/plugins"
	"gw/plugins/vars"
)

// Build compiles a route's configuration; the compiled Config is the instance.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	return Parse(raw)
}

var _ plugins.AccessPhase = (*Config)(nil)

// state is one request's scratch space, pooled so that Access does not allocate.
type state struct {
	// out is a header value or the escaped path being written; subject is regex_uri's
	// input; the others are named after what they hold.
	uri, out, query, args, subject []byte
	// match is regex_uri's match, which header values' captures read; captures holds its
	// indexes when a literal prefix found it (regexRewrite.find).
	match    vars.Match
	captures [4]int
}

var statePool = sync.Pool{New: func() any { return new(state) }}

// Access rewrites the request in APISIX's order: host, uri, headers, method. It never
// answers the request itself.
func (c *Config) Access(pc *plugins.Ctx) error {
	st := statePool.Get().(*state)
	r := c.requestOf(pc)

	if c.Host != nil {
		pc.UpstreamHost = c.Host
	}
	switch {
	case c.RealRequestURI:
		c.realRequestURI(pc, st, &r)
	case c.URI != nil:
		st.uri = expandURI(st.uri[:0], &r, c.URI)
		c.setURI(pc, st, true)
	case c.RegexURI != nil:
		// nginx's $uri: decoded and normalised. A copy: setting the path reuses the
		// storage Path returns, and header values may still need the captures.
		st.subject = append(st.subject[:0], pc.Path()...)
		for i := range c.RegexURI {
			rw := &c.RegexURI[i]
			match := rw.find(st.subject, &st.captures)
			if match == nil {
				continue
			}
			st.match = vars.Match{Subject: st.subject, Captures: match}
			r.Match = &st.match
			st.uri = append(st.uri[:0], st.subject[:match[0]]...)
			st.uri, _ = vars.Expand(st.uri, &r, &rw.replacement)
			st.uri = append(st.uri, st.subject[match[1]:]...)
			// A '?' in the decoded path was %3F: it stays in the path. Otherwise a '?' the
			// replacement wrote starts a query.
			c.setURI(pc, st, bytes.IndexByte(st.subject, '?') < 0)
			break
		}
	}
	if c.forwarded != 0 {
		pc.TakeForwarded(c.forwarded) // the proxy's values first, the plugin's on top
	}
	// A value that expands to nothing is no header, as in APISIX (nginx drops a header
	// set to ""): add adds none, set removes the client's.
	for i := range c.Add {
		h := &c.Add[i]
		for j := range h.values {
			if st.out, _ = vars.Expand(st.out[:0], &r, &h.values[j]); len(st.out) > 0 {
				pc.AddRequestHeader(h.name, st.out)
			}
		}
	}
	for i := range c.Set {
		h := &c.Set[i]
		set := false
		for j := range h.values {
			if st.out, _ = vars.Expand(st.out[:0], &r, &h.values[j]); len(st.out) == 0 {
				continue
			}
			if set {
				pc.AddRequestHeader(h.name, st.out)
			} else {
				pc.SetRequestHeader(h.name, st.out)
				set = true
			}
		}
		if !set {
			pc.DelRequestHeader(h.name)
		}
	}
	for _, name := range c.Remove {
		pc.DelRequestHeader(name)
	}
	if c.Method != nil {
		pc.SetMethod(c.Method)
	}
	st.match = vars.Match{} // drop the match's indexes, which regexp made for this request
	statePool.Put(st)
	return nil
}

// setURI sends st.uri (decoded) as the request's path, percent-encoded as nginx's
// ngx_escape_uri does. When splitQuery is set, a '?' in it starts a query that goes
// before the client's own arguments, joined with '&'; otherwise the client's query
// string is kept as it is.
func (c *Config) setURI(pc *plugins.Ctx, st *state, splitQuery bool) {
	path, query, hasQuery := st.uri, []byte(nil), false
	if splitQuery {
		if q := bytes.IndexByte(st.uri, '?'); q >= 0 {
			path, query, hasQuery = st.uri[:q], st.uri[q+1:], true
		}
	}
	st.out = appendEscapedPath(st.out[:0], path)
	if hasQuery {
		// The client's arguments as they are now: an earlier plugin (key-auth hiding its
		// key) may have changed them.
		st.args = pc.AppendQueryArgs(st.args[:0])
		st.query = appendControlEscaped(st.query[:0], query)
		if len(st.args) > 0 {
			st.query = append(st.query, '&')
			st.query = append(st.query, st.args...)
		}
		pc.SetQueryString(st.query)
	}
	pc.SetPath(st.out)
}

// realRequestURI is use_real_request_uri_unsafe, as APISIX's proxy-rewrite: the target
// sent upstream starts from the client's, as sent (nginx's $request_uri, no decoding or
// normalising). With uri, it is uri's expansion, with the client's query after it (joined
// by '&' when uri has a query of its own); with regex_uri, the first match in the whole
// target (query included) is substituted; with neither, it is the client's target. Nothing
// is percent-encoded but the bytes that would break the request line (controls and space,
// which only a template can bring), so the client's bytes go through as they are, an
// empty query's '?' too. An argument an earlier plugin removed (key-auth's
// hide_credentials) stays removed, where APISIX would send it again.
func (c *Config) realRequestURI(pc *plugins.Ctx, st *state, r *vars.Request) {
	st.subject = append(st.subject[:0], pc.RequestURI()...)
	if len(st.subject) > 0 && st.subject[0] != '/' {
		// absolute form, "http://host/path": $request_uri is from the path on
		if i := bytes.Index(st.subject, schemeEnd); i >= 0 {
			if j := bytes.IndexByte(st.subject[i+len(schemeEnd):], '/'); j >= 0 {
				st.subject = append(st.subject[:0], st.subject[i+len(schemeEnd)+j:]...)
			}
		}
	}
	if pc.ArgsChanged() {
		if q := bytes.IndexByte(st.subject, '?'); q >= 0 {
			st.subject = st.subject[:q]
		}
		if st.args = pc.AppendQueryArgs(st.args[:0]); len(st.args) > 0 {
			st.subject = append(st.subject, '?')
			st.subject = append(st.subject, st.args...)
		}
	}
	switch {
	case c.URI != nil:
		st.uri = expandURI(st.uri[:0], r, c.URI)
		if q := bytes.IndexByte(st.subject, '?'); q >= 0 {
			if bytes.IndexByte(st.uri, '?') >= 0 {
				st.uri = append(st.uri, '&')
				q++
			}
			st.uri = append(st.uri, st.subject[q:]...)
		}
	case c.RegexURI != nil:
		st.uri = append(st.uri[:0], st.subject...)
		for i := range c.RegexURI {
			rw := &c.RegexURI[i]
			match := rw.find(st.subject, &st.captures)
			if match == nil {
				continue
			}
			st.match = vars.Match{Subject: st.subject, Captures: match}
			r.Match = &st.match
			st.uri = append(st.uri[:0], st.subject[:match[0]]...)
			st.uri, _ = vars.Expand(st.uri, r, &rw.replacement)
			st.uri = append(st.uri, st.subject[match[1]:]...)
			break
		}
	default:
		st.uri = append(st.uri[:0], st.subject...)
	}
	st.out = appendLineSafe(st.out[:0], st.uri)
	// The request line is the path as given (the proxy sends it unnormalised) and the
	// query after it. A '?' with nothing after it stays with the path: fasthttp writes no
	// empty query.
	path, query := st.out, st.out[len(st.out):]
	if q := bytes.IndexByte(st.out, '?'); q >= 0 && q+1 < len(st.out) {
		path, query = st.out[:q], st.out[q+1:]
	}
	pc.SetQueryString(query)
	pc.SetPath(path)
}

var schemeEnd = []byte("://")

// appendLineSafe escapes the bytes a request target must not hold (controls, space and
// DEL) and keeps every other byte as it is.
func appendLineSafe(dst, target []byte) []byte {
	for _, c := range target {
		if c <= 0x20 || c == 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// unsafeInPath marks the bytes ngx_escape_uri(NGX_ESCAPE_URI) escapes: space, '#', '%',
// '?', controls and every byte from 0x7f up.
var unsafeInPath = func() (table [256]bool) {
	for c := 0; c < 256; c++ {
		table[c] = c <= 0x20 || c >= 0x7f || c == '#' || c == '%' || c == '?'
	}
	return table
}()

const upperHex = "0123456789ABCDEF"

func appendEscapedPath(dst, path []byte) []byte {
	for _, c := range path {
		if unsafeInPath[c] {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// appendControlEscaped escapes only control characters, as APISIX does for the query part
// it writes, so no CR or LF reaches the request line.
func appendControlEscaped(dst, query []byte) []byte {
	for _, c := range query {
		if c < 0x20 || c == 0x7f {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}
