package logentry

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// plainASCII marks the ASCII bytes a JSON string holds as they are: not a control
// character, DEL, a quote or a backslash.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != 0x7f
	}
	return t
}()

// appendString appends s as a JSON string: quotes, escapes, and invalid UTF-8 as U+FFFD,
// so that any header or body bytes make valid JSON. Runs of bytes that need nothing
// (valid UTF-8 included) are appended whole: byte by byte, this was a third of an
// entry's cost (BenchmarkAppendDefault).
func appendString[T []byte | string](dst []byte, s T) []byte {
	dst = append(dst, '"')
	run := 0 // where the bytes not yet appended start
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[run:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			run = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[run:i]...)
			dst = append(dst, `\ufffd`...)
			run = i + 1
		}
		i += size
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}
