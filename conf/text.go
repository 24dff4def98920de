package conf

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckText refuses JSON whose strings Go's encoding/json would silently change or that
// no field has a use for: invalid UTF-8 and lone UTF-16 surrogates (\ud800), which
// decoding replaces with U+FFFD, and NUL (\u0000), which C strings, logs and headers cut
// at. It looks at object member names as well as string values, and returns an
// *ObjectError naming the field path (array items as "uris[1]", counting from 0); the
// reason never repeats the value, which may be a private key.
//
// data must already have decoded as JSON: the scan trusts its syntax, and its nesting
// depth is bounded by encoding/json's (10000).
func CheckText(data []byte) error {
	s := textScanner{data: data}
	s.value("")
	return s.err
}

// textScanner walks one valid JSON value; err holds the first problem found.
type textScanner struct {
	data []byte
	pos  int
	err  error
}

func (s *textScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans the value at s.pos, found at path.
func (s *textScanner) value(path string) {
	s.skipSpace()
	if s.err != nil || s.pos >= len(s.data) {
		return
	}
	switch s.data[s.pos] {
	case '{':
		s.object(path)
	case '[':
		s.array(path)
	case '"':
		if reason := s.str(); reason != "" {
			s.fail(path, "the string "+reason)
		}
	default: // number, true, false, null: up to the next delimiter
		for s.pos < len(s.data) && !isDelimiter(s.data[s.pos]) {
			s.pos++
		}
	}
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (s *textScanner) object(path string) {
	s.pos++ // {
	for s.err == nil {
		s.skipSpace()
		if s.data[s.pos] == '}' {
			s.pos++
			return
		}
		if s.data[s.pos] == ',' {
			s.pos++
			s.skipSpace()
		}
		start := s.pos
		if reason := s.str(); reason != "" {
			s.fail(path, "a member name "+reason)
			return
		}
		var name string
		_ = json.Unmarshal(s.data[start:s.pos], &name) // checked above: it decodes
		s.skipSpace()
		s.pos++ // :
		s.value(memberPath(path, name))
	}
}

func (s *textScanner) array(path string) {
	s.pos++ // [
	for i := 0; s.err == nil; i++ {
		s.skipSpace()
		switch s.data[s.pos] {
		case ']':
			s.pos++
			return
		case ',':
			s.pos++
		}
		s.value(path + "[" + strconv.Itoa(i) + "]")
	}
}

// str scans the string at s.pos (its opening quote) and returns what is wrong with it,
// "" when nothing is.
func (s *textScanner) str() string {
	s.pos++ // "
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return ""
		case c == '\\':
			if reason := s.escape(); reason != "" {
				return reason
			}
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Sprintf("is not valid UTF-8 (byte 0x%02x); send text as UTF-8", c)
			}
			s.pos += size
		}
	}
	return ""
}

// escape scans one escape sequence at s.pos (its backslash).
func (s *textScanner) escape() string {
	if s.data[s.pos+1] != 'u' {
		s.pos += 2
		return ""
	}
	r := s.hex4(s.pos + 2)
	s.pos += 6
	switch {
	case r == 0:
		return `holds NUL (\u0000), which no field accepts`
	case utf16.IsSurrogate(r):
		// A high surrogate is valid only with a low one right after it.
		if r < 0xdc00 && s.pos+6 <= len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
			if low := s.hex4(s.pos + 2); low >= 0xdc00 && low <= 0xdfff {
				s.pos += 6
				return ""
			}
		}
		return fmt.Sprintf(`holds a lone UTF-16 surrogate (\u%04x), which is not a character; escape characters outside the BMP as a surrogate pair`, r)
	}
	return ""
}

// hex4 reads the four hex digits at i; valid JSON guarantees they are there.
func (s *textScanner) hex4(i int) rune {
	n, _ := strconv.ParseUint(string(s.data[i:i+4]), 16, 32)
	return rune(n)
}

func (s *textScanner) fail(path, reason string) {
	if path == "" {
		reason = "the body: " + reason
	}
	s.err = &ObjectError{Path: path, Reason: reason}
}
