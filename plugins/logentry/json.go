package logentry

import (
	"encoding/binary"
	"math/bits"
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

// digitPairs is "00" to "99", for writing numbers two digits at a time.
const digitPairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" +
	"60616263646566676869" + "70717273747576777879" + "80818283848586878889" + "90919293949596979899"

// appendInt appends v in decimal, as strconv.AppendInt(dst, v, 10) does, but straight
// into dst, its length known first, two digits at a time: strconv's, through a buffer of
// its own and a copy, was a quarter of the default entry once strings were cheaper (its
// six numbers, start_time's thirteen digits among them).
func appendInt(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = -u
	}
	n := decimalDigits(u)
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	out := dst[at:]
	i := n
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		out[i], out[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		out[0], out[1] = digitPairs[u*2], digitPairs[u*2+1]
	} else {
		out[0] = byte('0' + u)
	}
	return dst
}

// decimalDigits is how many digits u has in decimal (1 for 0): from its bit length, t
// is log10(2^bits) rounded down, and the digits are t+1 when u reaches 10^t, else t.
func decimalDigits(u uint64) int {
	t := bits.Len64(u) * 1233 >> 12 // 1233/4096 is log10(2), a hair under
	if u >= pow10[t] {
		return t + 1
	}
	return max(t, 1)
}

// pow10 are the powers of ten a uint64 holds.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()
