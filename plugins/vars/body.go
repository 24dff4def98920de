package vars

import (
	"bytes"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"gw/conf"
)

// The request body is read for post_arg.<path> and post_arg_<name> only, the first time
// one of them is read in a request, and parsed then, once: a JSON body by fastjson, whose
// Parser keeps its buffers from one parse to the next (encoding/json would reflect and
// allocate per value), a form into a list of its fields. The parsed body is a RequestCtx
// user value, so that every reader (the router, a chash key, a template) shares it without
// a Request field to carry it, and fasthttp closes it, putting it back in its pool, when
// it resets the request.
//
// gw streams request bodies (fasthttp's StreamRequestBody): the body is read whole from
// the stream, within client_max_body_size (the edge's limitedBody refuses a chunked body
// past it; admit, a declared one), and becomes the request's body, which the proxy sends
// upstream as it was read. A body the reading could not finish is not parsed, and the
// proxy gets the stream back in a state that sends the same bytes (past maxBodyRead) or
// fails the same way (a broken or oversized body, which the edge then answers).

// maxBodyRead is the largest body post_arg variables read, APISIX's default
// max_post_args_readable_size (64 MiB): a larger body has no post_arg values and streams
// upstream unread but for its first maxBodyRead bytes. A variable for tests.
var maxBodyRead = 64 << 20

// maxKeptBody is the largest buffer a parsed body keeps when it goes back to the pool: a
// worker keeps the buffers of its usual bodies, not of the largest it ever saw.
const maxKeptBody = 1 << 20

// bodyKind is how a body is parsed, from its Content-Type.
type bodyKind uint8

const (
	bodyUnsupported bodyKind = iota
	bodyJSON
	bodyForm
	bodyMultipart
)

var (
	mediaJSON      = []byte("application/json")
	mediaForm      = []byte("application/x-www-form-urlencoded")
	mediaMultipart = []byte("multipart/form-data")
	jsonTrue       = []byte("true")
	jsonFalse      = []byte("false")
)

// body is one request's body, read and parsed. It is for the request's goroutine alone.
type body struct {
	kind bodyKind
	// raw is the body as read, in buf; nil when it was not read.
	raw []byte
	buf []byte
	// json is the parser of a JSON body and root its value, nil when the body is not
	// JSON or does not parse.
	json fastjson.Parser
	root *fastjson.Value
	// fields are a form's fields in the order sent.
	fields []formField
	// delim is the multipart delimiter, "\r\n--" and the boundary.
	delim []byte
	// text holds the values made from JSON (numbers, objects, arrays), each appended
	// and kept for the rest of the request. Not the caller's buffer: fastjson's
	// MarshalTo would make every caller's buffer escape, the router's for all variables.
	text []byte
	// failed and rest are what the request streams when reading stopped short.
	failed failedBody
	rest   restOfBody
	// read and whole say whether the body was read (load, or Body for a kind load does
	// not read) and read to its end.
	read, whole bool
}

// formField is one field of a form: an urlencoded one still encoded (escaped says whether
// it needs decoding), a multipart one as sent.
type formField struct {
	name, value               []byte
	nameEscaped, valueEscaped bool
}

// bodyKey is the user value key of a request's body.
type bodyKey struct{}

var bodyPool = sync.Pool{New: func() any { return new(body) }}

// bodyOf returns req's body, read and parsed on the first call of the request.
func bodyOf(req *fasthttp.RequestCtx) *body {
	if b, ok := req.UserValue(bodyKey{}).(*body); ok {
		return b
	}
	b := bodyPool.Get().(*body)
	req.SetUserValue(bodyKey{}, b)
	b.load(&req.Request)
	return b
}

// Close puts b back in the pool; fasthttp calls it as it resets the request.
func (b *body) Close() error {
	if cap(b.buf) > maxKeptBody {
		b.buf = nil
		b.json = fastjson.Parser{}
	}
	if cap(b.fields) > maxKeptBody/64 {
		b.fields = nil
	}
	if cap(b.text) > maxKeptBody {
		b.text = nil
	}
	*b = body{buf: b.buf[:0], json: b.json, fields: b.fields[:0], delim: b.delim[:0], text: b.text[:0]}
	bodyPool.Put(b)
	return nil
}

func (b *body) load(r *fasthttp.Request) {
	contentType := r.Header.ContentType()
	switch {
	case containsFold(contentType, mediaJSON):
		b.kind = bodyJSON
	case containsFold(contentType, mediaForm):
		b.kind = bodyForm
	case containsFold(contentType, mediaMultipart):
		b.kind = bodyMultipart
	default:
		return // APISIX reads no other body for post_arg
	}
	if !b.readWhole(r) {
		return
	}
	switch b.kind {
	case bodyJSON:
		if root, err := b.json.ParseBytes(b.raw); err == nil {
			b.root = root
		}
	case bodyForm:
		b.parseForm()
	case bodyMultipart:
		b.parseMultipart(r.Header.MultipartFormBoundary())
	}
}

// readWhole reads r's body once, as read does, and reports whether it was read whole.
func (b *body) readWhole(r *fasthttp.Request) bool {
	if !b.read {
		b.read, b.whole = true, b.readBody(r)
	}
	return b.whole
}

// Body returns the request's body read whole, as post_arg reads it (within the same
// limit, maxBodyRead), and makes it the request's body, which the proxy then sends as
// read; whatever its Content-Type. ok is false for a body larger than the limit or whose
// stream broke: the proxy then sends, or fails, as it would have unread. forward-auth's
// POST reads it to send it to the auth service. It allocates only to grow the pooled
// buffer.
func Body(r *Request) (raw []byte, ok bool) {
	b := bodyOf(r.HTTP)
	if !b.readWhole(&r.HTTP.Request) {
		return nil, false
	}
	return b.raw, true
}

// readBody reads r's body whole into b.raw and makes it r's body, reporting whether it
// did.
func (b *body) readBody(r *fasthttp.Request) bool {
	stream := r.BodyStream()
	if stream == nil {
		b.raw = r.Body() // a body set whole (tests; a request built in memory)
		return true
	}
	length := r.Header.ContentLength()
	if length > maxBodyRead {
		return false // not read: it streams as it came
	}
	buf := b.buf[:0]
	if length > cap(buf) {
		buf = make([]byte, 0, length)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := stream.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		b.buf = buf
		if len(buf) > maxBodyRead {
			// Too large to parse: the proxy sends what was read, then the rest.
			b.rest = restOfBody{read: buf, stream: stream}
			r.SetBodyStream(&b.rest, length)
			return false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			// The stream broke (the client went, or the edge's limitedBody stopped it):
			// the proxy's read of it fails as it would have, and the edge answers.
			b.failed.err = err
			r.SetBodyStream(&b.failed, length)
			return false
		}
	}
	b.raw = buf
	r.SetBodyRaw(buf)
	return true
}

// failedBody is a stream that failed: every Read returns its error.
type failedBody struct{ err error }

func (f *failedBody) Read([]byte) (int, error) { return 0, f.err }

// restOfBody is a stream with its first bytes read: it returns them, then the rest.
type restOfBody struct {
	read   []byte
	stream io.Reader
}

func (s *restOfBody) Read(p []byte) (int, error) {
	if len(s.read) > 0 {
		n := copy(p, s.read)
		s.read = s.read[n:]
		return n, nil
	}
	return s.stream.Read(p)
}

// parseForm lists the fields of an urlencoded body, as nextArg splits a query string.
func (b *body) parseForm() {
	for rest := b.raw; len(rest) > 0; {
		var f formField
		f.name, f.value, rest, f.nameEscaped, f.valueEscaped = nextArg(rest)
		if len(f.name) == 0 && len(f.value) == 0 {
			continue // "&&"
		}
		b.fields = append(b.fields, f)
	}
}

var (
	crlf   = []byte("\r\n")
	crlf2  = []byte("\r\n\r\n")
	dashes = []byte("--")
)

// parseMultipart lists the fields of a multipart/form-data body: each part's name (from
// its Content-Disposition) and content, a file's too. A body that breaks off keeps the
// parts before the break.
func (b *body) parseMultipart(boundary []byte) {
	if len(boundary) == 0 {
		return
	}
	b.delim = append(append(b.delim[:0], "\r\n--"...), boundary...)
	// The first delimiter may open the body, without the CRLF before it.
	start := bytes.Index(b.raw, b.delim[2:])
	if start < 0 {
		return
	}
	rest := b.raw[start+len(b.delim)-2:]
	for !bytes.HasPrefix(rest, dashes) {
		lineEnd := bytes.Index(rest, crlf)
		if lineEnd < 0 {
			return
		}
		rest = rest[lineEnd+2:]
		headerEnd := bytes.Index(rest, crlf2)
		if headerEnd < 0 {
			return
		}
		header, content := rest[:headerEnd+2], rest[headerEnd+4:]
		end := bytes.Index(content, b.delim)
		if end < 0 {
			return
		}
		if name, ok := partName(header); ok {
			b.fields = append(b.fields, formField{name: name, value: content[:end]})
		}
		rest = content[end+len(b.delim):]
	}
}

var contentDisposition = []byte("content-disposition:")

// partName finds the name parameter of a part's Content-Disposition header.
func partName(header []byte) ([]byte, bool) {
	for len(header) > 0 {
		line := header
		if i := bytes.Index(header, crlf); i >= 0 {
			line, header = header[:i], header[i+2:]
		} else {
			header = nil
		}
		if len(line) < len(contentDisposition) || !bytes.EqualFold(line[:len(contentDisposition)], contentDisposition) {
			continue
		}
		params := line[len(contentDisposition):]
		for len(params) > 0 {
			param := params
			if i := bytes.IndexByte(params, ';'); i >= 0 {
				param, params = params[:i], params[i+1:]
			} else {
				params = nil
			}
			key, value, found := bytes.Cut(bytes.TrimSpace(param), []byte("="))
			if !found || !bytes.EqualFold(bytes.TrimSpace(key), []byte("name")) {
				continue
			}
			value = bytes.TrimSpace(value)
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = value[1 : len(value)-1]
			}
			return value, true
		}
	}
	return nil, false
}

// containsFold reports whether s holds sub, ASCII case folded; sub is lower case.
func containsFold(s, sub []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) && lower(s[i+j]) == sub[j] {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// bodyMatch is what a walk of a post_arg path looks for: the first value it reaches
// (first), or, with contains set, whether any value is want.
type bodyMatch struct {
	body     *body
	contains bool
	want     string
	first    *fastjson.Value
	field    *formField
	found    bool
}

// postArg reads v (VarPostArg or VarPostArgForm) from r's body into m.
func postArg(r *Request, v *conf.Var, m *bodyMatch) {
	b := bodyOf(r.HTTP)
	m.body = b
	if v.Kind == conf.VarPostArgForm {
		// APISIX's post_arg_<name> reads urlencoded forms alone.
		if b.kind == bodyForm {
			b.walkForm(conf.PathStep{Kind: conf.StepName, Name: v.Name}, "", m)
		}
		return
	}
	step, rest, _ := conf.NextPathStep(v.Name)
	switch {
	case b.root != nil:
		walkJSON(b.root, v.Name, m)
	case b.kind == bodyForm || b.kind == bodyMultipart:
		b.walkForm(step, rest, m)
	}
}

// walkForm finds a form's fields: the first step names the field (or * every one), a
// second may pick among the values of a field sent several times ([0], [*]), as APISIX's
// JSONPath sees a repeated field as an array of its values. A form has nothing deeper.
func (b *body) walkForm(step conf.PathStep, rest string, m *bodyMatch) {
	pick, rest, picks := conf.NextPathStep(rest)
	if _, _, deeper := conf.NextPathStep(rest); deeper || (picks && pick.Kind == conf.StepName) {
		return
	}
	if step.Kind != conf.StepName && step.Kind != conf.StepAll {
		return
	}
	count := 0
	if picks && pick.Kind == conf.StepIndex && pick.Index < 0 {
		for i := range b.fields {
			if step.Kind == conf.StepAll || argNameIs(b.fields[i].name, b.fields[i].nameEscaped, step.Name) {
				count++
			}
		}
		pick.Index += count
		if pick.Index < 0 {
			return
		}
	}
	n := 0
	for i := range b.fields {
		f := &b.fields[i]
		if step.Kind == conf.StepName && !argNameIs(f.name, f.nameEscaped, step.Name) {
			continue
		}
		if picks && pick.Kind == conf.StepIndex && n != pick.Index {
			n++
			continue
		}
		n++
		if m.visitField(f) {
			return
		}
	}
}

// visitField takes one field's value; true ends the walk.
func (m *bodyMatch) visitField(f *formField) bool {
	if !m.contains {
		m.field, m.found = f, true
		return true
	}
	m.found = argNameIs(f.value, f.valueEscaped, m.want)
	return m.found
}

// walkJSON follows path from v; true ends the walk.
func walkJSON(v *fastjson.Value, path string, m *bodyMatch) bool {
	step, rest, ok := conf.NextPathStep(path)
	if !ok {
		return m.visitJSON(v)
	}
	switch step.Kind {
	case conf.StepName:
		if v.Type() != fastjson.TypeObject {
			return false
		}
		o, _ := v.Object()
		if child := o.Get(step.Name); child != nil {
			return walkJSON(child, rest, m)
		}
	case conf.StepIndex:
		if v.Type() != fastjson.TypeArray {
			return false
		}
		items, _ := v.Array()
		i := step.Index
		if i < 0 {
			i += len(items)
		}
		if 0 <= i && i < len(items) {
			return walkJSON(items[i], rest, m)
		}
	case conf.StepAll:
		switch v.Type() {
		case fastjson.TypeArray:
			items, _ := v.Array()
			for _, item := range items {
				if walkJSON(item, rest, m) {
					return true
				}
			}
		case fastjson.TypeObject:
			o, _ := v.Object()
			stop := false
			o.Visit(func(_ []byte, child *fastjson.Value) {
				if !stop {
					stop = walkJSON(child, rest, m)
				}
			})
			return stop
		}
	}
	return false
}

// visitJSON takes one value the path reached; true ends the walk. "has" compares the
// items of an array, as lua-resty-expr's has_element does.
func (m *bodyMatch) visitJSON(v *fastjson.Value) bool {
	if !m.contains {
		m.first, m.found = v, true
		return true
	}
	if v.Type() == fastjson.TypeArray {
		items, _ := v.Array()
		for _, item := range items {
			if m.body.jsonEquals(item, m.want) {
				m.found = true
				return true
			}
		}
		return false
	}
	m.found = m.body.jsonEquals(v, m.want)
	return m.found
}

// jsonEquals reports whether v's text is want; the text it makes is not kept.
func (b *body) jsonEquals(v *fastjson.Value, want string) bool {
	mark := len(b.text)
	text, ok := b.jsonText(v)
	b.text = b.text[:mark]
	return ok && string(text) == want
}

// jsonText is a JSON value as a variable's text: a string decoded (pointing into the
// parser's copy of the body), a number as written, true and false, an object or array
// as compact JSON (in b.text); null has none.
func (b *body) jsonText(v *fastjson.Value) ([]byte, bool) {
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return s, true
	case fastjson.TypeTrue:
		return jsonTrue, true
	case fastjson.TypeFalse:
		return jsonFalse, true
	case fastjson.TypeNull:
		return nil, false
	}
	start := len(b.text)
	b.text = v.MarshalTo(b.text)
	return b.text[start:len(b.text):len(b.text)], true
}

// readPostArg is read for the post_arg variables.
func readPostArg(r *Request, v *conf.Var, buf []byte) (value []byte, appended, ok bool) {
	var m bodyMatch
	postArg(r, v, &m)
	switch {
	case !m.found:
		return nil, false, false
	case m.first != nil:
		text, ok := m.body.jsonText(m.first)
		return text, false, ok
	case !m.field.valueEscaped:
		return m.field.value, false, true
	}
	return fasthttp.AppendUnquotedArg(buf, m.field.value), true, true
}

// containsPostArg is Contains for the post_arg variables.
func containsPostArg(r *Request, v *conf.Var, want string) bool {
	m := bodyMatch{contains: true, want: want}
	postArg(r, v, &m)
	return m.found
}
