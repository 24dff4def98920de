package shm

import (
	"encoding/binary"
	"math/bits"

	"gw/internal/bytesconv"
)

// KeyHash computes a key's 64-bit fingerprint from bytes written in pieces, without
// allocating, for tables in shared memory that find keys by fingerprint (limit-count's
// window table). It is keyed by a seed the table keeps in its segment, so every process
// that maps the table computes the same fingerprints and outsiders, without the seed,
// cannot aim two keys at one. It is not a cryptographic hash. The zero KeyHash is not
// usable: start from NewKeyHash. A KeyHash is a value: copy one that has been fed a
// common prefix to hash many keys after it.
type KeyHash struct {
	h    uint64
	tail uint64 // bytes not yet mixed, little-endian
	n    uint64 // bytes written in all
}

// NewKeyHash returns a hash keyed by seed (a random word kept in the table's header).
func NewKeyHash(seed uint64) KeyHash { return KeyHash{h: seed} }

// Write adds b.
func (k *KeyHash) Write(b []byte) {
	for len(b) > 0 && k.n%8 != 0 {
		k.WriteByte(b[0])
		b = b[1:]
	}
	for len(b) >= 8 {
		k.h = mix(k.h, binary.LittleEndian.Uint64(b))
		k.n += 8
		b = b[8:]
	}
	for _, c := range b {
		k.WriteByte(c)
	}
}

// WriteString adds s.
func (k *KeyHash) WriteString(s string) {
	k.Write(bytesconv.Bytes(s)) // read only, so no copy is needed
}

// WriteByte adds c. It never fails; the error is for io.ByteWriter.
func (k *KeyHash) WriteByte(c byte) error {
	k.tail |= uint64(c) << (8 * (k.n % 8))
	k.n++
	if k.n%8 == 0 {
		k.h = mix(k.h, k.tail)
		k.tail = 0
	}
	return nil
}

// Sum is the fingerprint of everything written so far.
func (k *KeyHash) Sum() uint64 {
	h := k.h
	if k.n%8 != 0 {
		h = mix(h, k.tail)
	}
	h = mix(h, k.n)
	// murmur3's finalizer: every input bit reaches every output bit.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// mix folds one word into the state with a 128-bit multiply (as wyhash does).
func mix(h, w uint64) uint64 {
	hi, lo := bits.Mul64(h^w^0xa0761d6478bd642f, 0xe7037ed1a0b428db)
	return hi ^ lo
}
