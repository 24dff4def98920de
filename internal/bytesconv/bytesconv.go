// Package bytesconv views a string as bytes and bytes as a string without copying, for
// the request path, where a conversion would allocate (Go copies any conversion it cannot
// prove short-lived, and strings longer than 32 bytes always).
//
// A view shares memory with what it views, so it is only safe while nobody writes it:
// the bytes of Bytes must never be written (a string's memory may be read-only), and the
// bytes given to String must not change while the string is in use, nor be a pooled
// buffer the string could outlive. Every other use of unsafe in the module is listed, with
// the reason it stays, in unsafe_test.go.
package bytesconv

import "unsafe"

// Bytes returns s's bytes, not a copy. The caller only reads them.
func Bytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// String returns b as a string, not a copy. b must not change while the string is used.
func String(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
