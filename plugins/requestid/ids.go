package requestid

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// The generators append one id to dst and allocate nothing. Their randomness is
// math/rand/v2's: the runtime's ChaCha8 generator, seeded by the operating system, one
// per thread, so unpredictable and lock-free (APISIX's uuid takes LuaJIT's math.random,
// its nanoid the OS's CSPRNG).

const hexDigits = "0123456789abcdef"

// appendUUID appends a version 4 UUID, 8-4-4-4-12 lower-case hex.
func appendUUID(dst []byte) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return appendUUIDText(dst, &b)
}

// lastV7 is the last version 7 UUID's 48-bit millisecond and 12-bit sequence, as ms<<12 |
// seq: ids of one process are strictly increasing, the clock going back included (APISIX's
// t/plugin/request-id.t TEST 22 and 27).
var lastV7 atomic.Uint64

// appendUUIDv7 appends a version 7 UUID: the Unix time in milliseconds, then a sequence
// within the millisecond (RFC 9562's method 3, 12 bits), then 62 random bits.
func appendUUIDv7(dst []byte) []byte {
	now := uint64(time.Now().UnixMilli()) << 12
	var next uint64
	for {
		last := lastV7.Load()
		next = max(now, last+1)
		if lastV7.CompareAndSwap(last, next) {
			break
		}
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], next<<4&^0xffff|0x7000|next&0x0fff)
	binary.BigEndian.PutUint64(b[8:], rand.Uint64()&^(3<<62)|2<<62) // variant 10
	return appendUUIDText(dst, &b)
}

func appendUUIDText(dst []byte, b *[16]byte) []byte {
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[x>>4], hexDigits[x&15])
	}
	return dst
}

// nanoidAlphabet is nanoid's 64 characters: 6 random bits pick one without bias.
const nanoidAlphabet = "-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

const nanoidSize = 21

// appendNanoID appends 21 characters of nanoidAlphabet, as APISIX's get_nanoid.
func appendNanoID(dst []byte) []byte {
	bits, left := rand.Uint64(), 10 // 10 characters of 6 bits in each draw
	for range nanoidSize {
		if left == 0 {
			bits, left = rand.Uint64(), 10
		}
		dst = append(dst, nanoidAlphabet[bits&63])
		bits >>= 6
		left--
	}
	return dst
}

// appendRangeID appends length characters drawn uniformly from charSet, as APISIX's
// get_range_id.
func appendRangeID(dst []byte, length int, charSet []byte) []byte {
	n := uint32(len(charSet))
	for range length {
		dst = append(dst, charSet[rand.Uint32N(n)])
	}
	return dst
}
