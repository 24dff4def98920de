package plugins

import "bytes"

// HeaderEdits is what plugins did to the request's header fields through a Ctx
// (SetRequestHeader, AddRequestHeader, DelRequestHeader), recorded beside fasthttp's parsed
// header, which gets the same edits. It lets a request whose plugins change nothing but
// header fields (HeaderEditor: opentelemetry's traceparent) still go upstream by the
// proxy's pristine path: the client's header block as it came, less the lines of the
// names replaced or removed, plus the fields set and added; serialising the parsed header
// again would cost about three times the CPU. It allocates nothing once its buffers have
// grown. The zero value records nothing yet.
type HeaderEdits struct {
	// replaced are the names whose client lines are not sent, each followed by '\n'
	// (a header name holds no '\n').
	replaced []byte
	// lines are the fields set and added, "Name: value\r\n" each, in the order made.
	lines []byte
	// unframed is set once an edit's name or value holds what would break a line
	// ('\r', '\n', or ':' in a name): the proxy then sends the request the usual way
	// (Touches), and lines is no longer read as lines.
	unframed bool
}

// Replaces reports whether the client's lines of name are not to be sent (the name was
// set or removed), comparing names case-insensitively.
func (e *HeaderEdits) Replaces(name []byte) bool {
	for rest := e.replaced; len(rest) > 0; {
		var n []byte
		n, rest, _ = bytes.Cut(rest, newline)
		if bytes.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// Lines returns the fields to send after the client's, "Name: value\r\n" each; the
// HeaderEdits owns it.
func (e *HeaderEdits) Lines() []byte { return e.lines }

// Touches reports whether any name set, added or removed is one match reports, such as a
// field the proxy sets itself.
func (e *HeaderEdits) Touches(match func(name []byte) bool) bool {
	if e.unframed {
		return true
	}
	for rest := e.replaced; len(rest) > 0; {
		var n []byte
		n, rest, _ = bytes.Cut(rest, newline)
		if match(n) {
			return true
		}
	}
	for rest := e.lines; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n') + 1
		if colon := bytes.IndexByte(rest[:end], ':'); match(rest[:colon]) {
			return true
		}
		rest = rest[end:]
	}
	return false
}

// Empty reports whether nothing was edited.
func (e *HeaderEdits) Empty() bool { return len(e.replaced) == 0 && len(e.lines) == 0 }

// set records name set to value: the client's lines and the fields set before of that
// name go, this one comes.
func (e *HeaderEdits) set(name, value []byte) {
	e.del(name)
	e.add(name, value)
}

// add records a field added after any of its name.
func (e *HeaderEdits) add(name, value []byte) {
	// IndexByte per byte rather than ContainsAny, which builds its set on every call and
	// then tests byte by byte: this runs for every header a plugin adds (opentelemetry's
	// traceparent on each request), and was most of recording one.
	if hasByte(name, ':') || hasByte(name, '\r') || hasByte(name, '\n') || hasByte(value, '\r') || hasByte(value, '\n') {
		e.unframed = true
	}
	e.lines = append(e.lines, name...)
	e.lines = append(e.lines, ": "...)
	e.lines = append(e.lines, value...)
	e.lines = append(e.lines, "\r\n"...)
}

func hasByte(b []byte, c byte) bool { return bytes.IndexByte(b, c) >= 0 }

// del records every field name removed: the client's and those set or added before.
func (e *HeaderEdits) del(name []byte) {
	if e.unframed {
		return // lines are not read again: the request goes the usual way
	}
	if !e.Replaces(name) {
		e.replaced = append(e.replaced, name...)
		e.replaced = append(e.replaced, '\n')
	}
	kept := e.lines[:0]
	for rest := e.lines; len(rest) > 0; {
		end := bytes.IndexByte(rest, '\n') + 1
		line := rest[:end]
		rest = rest[end:]
		if colon := bytes.IndexByte(line, ':'); !bytes.EqualFold(line[:colon], name) {
			kept = append(kept, line...) // copies forward within e.lines: kept never passes rest
		}
	}
	e.lines = kept
}

func (e *HeaderEdits) reset() {
	e.replaced, e.lines, e.unframed = e.replaced[:0], e.lines[:0], false
}

var newline = []byte("\n")
