package encoding

import "bytes"

// Types is a route's list of media types to compress, compiled. The zero Types (from
// "*") matches every type. It is immutable and safe for concurrent use.
type Types struct {
	list [][]byte // lower-case
}

// NewTypes compiles types; nil means every type.
func NewTypes(types []string) Types {
	var t Types
	for _, s := range types {
		t.list = append(t.list, bytes.ToLower([]byte(s)))
	}
	return t
}

// Match reports whether contentType, its parameters aside and in any case, is one of the
// types. An empty Content-Type matches none, as nginx compresses nothing without one.
func (t *Types) Match(contentType []byte) bool {
	if len(contentType) == 0 {
		return false
	}
	if t.list == nil {
		return true
	}
	if i := bytes.IndexByte(contentType, ';'); i >= 0 {
		contentType = contentType[:i]
	}
	contentType = bytes.TrimSpace(contentType)
	for _, want := range t.list {
		if bytes.EqualFold(contentType, want) {
			return true
		}
	}
	return false
}

// Accepts reports whether an Accept-Encoding value names coding (or *) with a q-value
// above 0.
func Accepts(acceptEncoding, coding []byte) bool {
	value := acceptEncoding
	for len(value) > 0 {
		var item []byte
		if i := bytes.IndexByte(value, ','); i >= 0 {
			item, value = value[:i], value[i+1:]
		} else {
			item, value = value, nil
		}
		name, params, _ := bytes.Cut(item, []byte(";"))
		name = bytes.TrimSpace(name)
		if bytes.EqualFold(name, coding) || bytes.Equal(name, []byte("*")) {
			return !qIsZero(params)
		}
	}
	return false
}

// qIsZero reports whether a coding's parameters hold q=0 (0, 0., 0.0, 0.00, 0.000).
func qIsZero(params []byte) bool {
	for len(params) > 0 {
		var p []byte
		p, params, _ = bytes.Cut(params, []byte(";"))
		name, value, ok := bytes.Cut(bytes.TrimSpace(p), []byte("="))
		if !ok || !bytes.EqualFold(bytes.TrimSpace(name), []byte("q")) {
			continue
		}
		value = bytes.TrimSpace(value)
		if len(value) == 0 || value[0] != '0' {
			return false
		}
		return len(bytes.Trim(value[1:], ".0")) == 0
	}
	return false
}

// AppendWeakETag appends the ETag of a compressed body to dst: a strong validator made
// weak (W/"x" for "x"), as nginx makes it; ok is false for a weak one already, which
// stays as it is.
func AppendWeakETag(dst, etag []byte) (out []byte, ok bool) {
	if len(etag) == 0 || bytes.HasPrefix(etag, []byte("W/")) {
		return dst, false
	}
	return append(append(dst, "W/"...), etag...), true
}
