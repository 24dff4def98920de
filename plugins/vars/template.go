package vars

import "gw/conf"

// Expand appends t's value for r to dst, as APISIX's resolve_var does: a variable without
// a value and without a fallback adds nothing, a capture that did not match adds nothing.
// resolved counts the variables that had a value or a fallback, which chash and
// limit-count use to fall back to the client's address when a key resolved to nothing.
func Expand(dst []byte, r *Request, t *conf.Template) (out []byte, resolved int) {
	for i := range t.Parts {
		// Text and captures here, not through AppendPart: a template is mostly text, and
		// a call per part took regex_uri's "/api/$1" from 125 instructions to 185.
		switch p := &t.Parts[i]; p.Kind {
		case conf.PartText:
			dst = append(dst, p.Text...)
		case conf.PartCapture:
			capture, _ := r.capture(p.Capture)
			dst = append(dst, capture...)
		default:
			var ok bool
			if dst, ok = appendVar(dst, r, p); ok {
				resolved++
			}
		}
	}
	return dst, resolved
}

// AppendPart appends one part of a template to dst; ok is false for a variable without a
// value or fallback and a capture that did not match. A caller that treats variables'
// values apart (proxy-rewrite escapes a '?' in them) expands a template part by part.
func AppendPart(dst []byte, r *Request, p *conf.TemplatePart) (out []byte, ok bool) {
	switch p.Kind {
	case conf.PartText:
		return append(dst, p.Text...), true
	case conf.PartCapture:
		capture, ok := r.capture(p.Capture)
		return append(dst, capture...), ok
	}
	return appendVar(dst, r, p)
}

// appendVar appends a variable part's value, or else its fallback.
func appendVar(dst []byte, r *Request, p *conf.TemplatePart) ([]byte, bool) {
	dst, ok := Append(dst, r, &p.Var)
	if ok {
		return dst, true
	}
	if p.HasFallback {
		return append(dst, p.Fallback...), true
	}
	return dst, false
}

// PartValue returns one part of a template for r without copying what it can point at,
// as Value does for a variable: a text part's text, a variable's value or else its
// fallback, a capture's text. ok is as for AppendPart. A caller that hashes a template
// (a chash key) reads it part by part, with no buffer for the whole.
func PartValue(r *Request, p *conf.TemplatePart, buf []byte) (value []byte, ok bool) {
	return partValue(r, p, buf, false)
}

// PartHashValue is PartValue in HashValue's form.
func PartHashValue(r *Request, p *conf.TemplatePart, buf []byte) (value []byte, ok bool) {
	return partValue(r, p, buf, true)
}

// partValue is PartValue, or with hashing set PartHashValue. (A bool, not the function
// to call: through a function value buf would escape to the heap.)
func partValue(r *Request, p *conf.TemplatePart, buf []byte, hashing bool) (value []byte, ok bool) {
	switch p.Kind {
	case conf.PartText:
		value, _, _ = text(p.Text)
		return value, true
	case conf.PartCapture:
		return r.capture(p.Capture)
	}
	if hashing {
		value, ok = HashValue(r, &p.Var, buf)
	} else {
		value, ok = Value(r, &p.Var, buf)
	}
	if ok {
		return value, true
	}
	if p.HasFallback {
		value, _, _ = text(p.Fallback)
		return value, true
	}
	return nil, false
}
