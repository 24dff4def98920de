package responserewrite

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"sync"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/vars"
)

// rewrite is one route's response-rewrite. It is immutable and safe for concurrent use.
type rewrite struct {
	status   int
	body     []byte
	hasBody  bool
	add, set []headerOp
	remove   [][]byte
	filters  []Filter
	maxBody  int
	when     *conf.Expr // vars: nil rewrites every response
}

// headerOp is one header operation with its name as bytes.
type headerOp struct {
	name []byte
	Header
}

var (
	_ plugins.ResponsePhase = (*rewrite)(nil)
	_ plugins.RequestKeeper = plugin{}
)

// KeepsRequest: response-rewrite changes only the response.
func (plugin) KeepsRequest() bool { return true }

// Build compiles a route's response-rewrite.
func (plugin) Build(raw json.RawMessage, _ *plugins.Env) (any, error) {
	cfg, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	r := &rewrite{
		status: cfg.StatusCode, body: cfg.Body, hasBody: cfg.HasBody,
		filters: cfg.Filters, maxBody: cfg.MaxBodySize, when: cfg.Vars,
	}
	for _, h := range cfg.Add {
		r.add = append(r.add, headerOp{[]byte(h.Name), h})
	}
	for _, h := range cfg.Set {
		r.set = append(r.set, headerOp{[]byte(h.Name), h})
	}
	for _, name := range cfg.Remove {
		r.remove = append(r.remove, []byte(name))
	}
	return r, nil
}

var (
	headerContentLength   = []byte("Content-Length")
	headerContentEncoding = []byte("Content-Encoding")
	headerETag            = []byte("ETag")
	headerLastModified    = []byte("Last-Modified")
	encodingGzip          = []byte("gzip")
)

// scratch holds one request's expanded header value and unzipped body.
type scratch struct{ value, body []byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Response rewrites the final response when vars holds for it: status, header fields,
// then the body, as APISIX's header_filter and body_filter do.
func (r *rewrite) Response(c *plugins.Ctx) {
	if r.when != nil {
		req := c.VarsRequest()
		if !vars.Eval(r.when, &req) {
			return // APISIX's vars: the response goes as it is
		}
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	if r.status != 0 {
		c.SetStatus(r.status)
	}
	if r.hasBody || r.filters != nil {
		r.rewriteBody(c, s)
	}
	for i := range r.add {
		h := &r.add[i]
		s.value = c.ExpandTemplate(s.value[:0], &h.Value)
		c.AddResponseField(h.name, s.value)
	}
	for i := range r.set {
		h := &r.set[i]
		if s.value = c.ExpandTemplate(s.value[:0], &h.Value); len(s.value) == 0 {
			c.DelResponseHeader(h.name) // nginx: an empty value clears the field
		} else {
			c.SetResponseHeader(h.name, s.value)
		}
	}
	for _, name := range r.remove {
		c.DelResponseHeader(name)
	}
}

// rewriteBody replaces the body, or runs the filters over it, and clears what described
// the old body (APISIX's clear_header_as_body_modified). A body in an encoding other
// than gzip is left as it is: a filter would run over compressed bytes.
func (r *rewrite) rewriteBody(c *plugins.Ctx, s *scratch) {
	if r.hasBody {
		c.DelResponseHeader(headerContentEncoding)
		c.SetResponseBody(r.body)
		clearValidators(c)
		return
	}
	encoding := c.ResponseHeader(headerContentEncoding)
	if len(encoding) > 0 && !bytes.EqualFold(encoding, encodingGzip) {
		return
	}
	body, _ := c.ReadResponseBody(r.maxBody) // a body broken off is filtered as it came
	if len(encoding) > 0 {
		plain, ok := gunzip(body, r.maxBody, s.body[:0])
		if !ok {
			return
		}
		body = plain
		c.DelResponseHeader(headerContentEncoding)
	}
	for i := range r.filters {
		f := &r.filters[i]
		body = substitute(f, body)
	}
	c.SetResponseBody(body)
	clearValidators(c)
}

func clearValidators(c *plugins.Ctx) {
	c.DelResponseHeader(headerETag)
	c.DelResponseHeader(headerLastModified)
}

// substitute runs one filter: the first match replaced (scope once, ngx.re.sub) or every
// one (global, ngx.re.gsub).
func substitute(f *Filter, body []byte) []byte {
	if f.Global {
		return f.Regex.ReplaceAll(body, []byte(f.Replace))
	}
	m := f.Regex.FindSubmatchIndex(body)
	if m == nil {
		return body
	}
	out := make([]byte, 0, len(body)+len(f.Replace))
	out = append(out, body[:m[0]]...)
	out = f.Regex.Expand(out, []byte(f.Replace), body, m)
	return append(out, body[m[1]:]...)
}

// gunzip appends body decompressed to dst, at most max bytes of it.
func gunzip(body []byte, max int, dst []byte) ([]byte, bool) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	buf := bytes.NewBuffer(dst)
	_, err = io.Copy(buf, io.LimitReader(zr, int64(max)))
	return buf.Bytes(), err == nil
}
