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
// so that any header or body bytes make valid JSON.
func appendString[T []byte | string](dst []byte, s T) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// appendStringBody appends s as the inside of a JSON string (appendString). Runs of
// bytes that need nothing (valid UTF-8 included) are appended whole, and plain ASCII is
// checked eight bytes at a time: byte by byte, this was a third of an entry's cost
// (BenchmarkAppendDefault).
func appendStringBody[T []byte | string](dst []byte, s T) []byte {
	run := 0 // where the bytes not yet appended start
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plain8(s[i:i+8]) {
			i += 8
		}
		if i >= len(s) {
			break
		}
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
	return append(dst, s[run:]...)
}

// plain8 reports whether all of b's 8 bytes are plain ASCII (plainASCII), testing them
// together: none below 0x20, none with the top bit, none a quote, a backslash or DEL.
// Each test is the word-wide "has a zero byte" of x with the byte to exclude XORed in.
func plain8[T []byte | string](b T) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	zero := func(v uint64) uint64 { return (v - ones) &^ v }
	control := (x - 0x20*ones) &^ x
	return (control|x|zero(x^('"'*ones))|zero(x^('\\'*ones))|zero(x^(0x7f*ones)))&tops == 0
}
