package logentry

import (
	"encoding/binary"
	"slices"
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

// appendStringBody appends s as the inside of a JSON string (appendString). Plain ASCII
// is checked and copied in one pass, eight bytes at a time, the last (partial) word as
// the eight bytes that end s, overlapping what was copied: a scan and then a copy of the
// run cost a quarter of an entry (BenchmarkAppendDefault). From the first word with a
// byte to escape or a multi-byte sequence, appendEscaped writes the rest.
func appendStringBody[T []byte | string](dst []byte, s T) []byte {
	n := len(dst)
	dst = slices.Grow(dst, len(s))[:n+len(s)]
	out := dst[n:]
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := load64(s[i:])
		if !plainWord(w) {
			return appendEscaped(dst[:n+i], s[i:])
		}
		binary.LittleEndian.PutUint64(out[i:], w)
	}
	if i == len(s) {
		return dst
	}
	if len(s) >= 8 {
		if w := load64(s[len(s)-8:]); plainWord(w) {
			binary.LittleEndian.PutUint64(out[len(s)-8:], w)
			return dst
		}
		return appendEscaped(dst[:n+i], s[i:])
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || !plainASCII[c] {
			return appendEscaped(dst[:n+i], s[i:])
		}
		out[i] = c
	}
	return dst
}

// appendLowerBody is appendStringBody of s in ASCII lower case (a header's name as
// ngx.req.get_headers gives it), lowering each word as it is copied. A name with a byte
// to escape or a non-ASCII byte (which fasthttp lets through) goes the long way, lowered
// into scratch first; scratch is returned for reuse.
func appendLowerBody(dst, s, scratch []byte) ([]byte, []byte) {
	n := len(dst)
	dst = slices.Grow(dst, len(s))[:n+len(s)]
	out := dst[n:]
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := load64(s[i:])
		if !plainWord(w) {
			return appendLowerEscaped(dst[:n+i], s[i:], scratch)
		}
		binary.LittleEndian.PutUint64(out[i:], lower8(w))
	}
	if i == len(s) {
		return dst, scratch
	}
	if len(s) >= 8 {
		if w := load64(s[len(s)-8:]); plainWord(w) {
			binary.LittleEndian.PutUint64(out[len(s)-8:], lower8(w))
			return dst, scratch
		}
		return appendLowerEscaped(dst[:n+i], s[i:], scratch)
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || !plainASCII[c] {
			return appendLowerEscaped(dst[:n+i], s[i:], scratch)
		}
		out[i] = toLower[c]
	}
	return dst, scratch
}

func appendLowerEscaped(dst, s, scratch []byte) ([]byte, []byte) {
	scratch = append(scratch[:0], s...)
	for i, c := range scratch {
		scratch[i] = toLower[c]
	}
	return appendEscaped(dst, scratch), scratch
}

// appendEscaped appends s as the inside of a JSON string, the long way: runs of bytes
// that need nothing (valid UTF-8 included) are appended whole, plain ASCII skipped eight
// bytes at a time, and each byte to escape or invalid sequence written as it must be.
func appendEscaped[T []byte | string](dst []byte, s T) []byte {
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

const ones, tops = 0x0101010101010101, 0x8080808080808080

// load64 reads b's first 8 bytes as a little-endian word (one load: the compiler merges
// the shifts).
func load64[T []byte | string](b T) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// plain8 reports whether all of b's 8 bytes are plain ASCII (plainASCII).
func plain8[T []byte | string](b T) bool { return plainWord(load64(b)) }

// plainWord reports whether all 8 bytes of x are plain ASCII, testing them together: none
// below 0x20, none with the top bit, none a quote, a backslash or DEL. Each test is the
// word-wide "has a zero byte" of x with the byte to exclude XORed in.
func plainWord(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - ones) &^ v }
	control := (x - 0x20*ones) &^ x
	return (control|x|zero(x^('"'*ones))|zero(x^('\\'*ones))|zero(x^(0x7f*ones)))&tops == 0
}

// lower8 lowers the ASCII capitals among x's 8 bytes, which must all be ASCII (plainWord):
// a byte's top bit, after adding 0x80-'A', says it is at least 'A', and after adding
// 0x80-'Z'-1 that it is past 'Z' (no sum carries into the next byte, each byte being
// below 0x80); a capital's bit, moved down to 0x20, lowers it.
func lower8(x uint64) uint64 {
	atLeastA := x + (0x80-'A')*ones
	pastZ := x + (0x80-'Z'-1)*ones
	return x | (atLeastA&^pastZ&tops)>>2
}
