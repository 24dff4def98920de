package router

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestNodeLayout pins what lookups rely on for their speed: everything a walk reads of a
// node it passes (label, indices, children and the payload flags) lies in the node's first
// 64 bytes, so that passing a node costs one cache line.
func TestNodeLayout(t *testing.T) {
	var n node[[]candidate]
	for name, end := range map[string]uintptr{
		"label":     unsafe.Offsetof(n.label) + unsafe.Sizeof(n.label),
		"indices":   unsafe.Offsetof(n.indices) + unsafe.Sizeof(n.indices),
		"children":  unsafe.Offsetof(n.children) + unsafe.Sizeof(n.children),
		"hasExact":  unsafe.Offsetof(n.hasExact) + unsafe.Sizeof(n.hasExact),
		"hasPrefix": unsafe.Offsetof(n.hasPrefix) + unsafe.Sizeof(n.hasPrefix),
	} {
		if end > 64 {
			t.Errorf("node.%s ends at byte %d, past the first cache line", name, end)
		}
	}
}

// TestPackedTreeIsContiguous: a built tree's nodes lie in one array in depth-first order
// and their labels and indices in one string, so that a walk reads neighbouring memory
// (pack). A tree changed by update still finds everything; its new nodes are its own.
func TestPackedTreeIsContiguous(t *testing.T) {
	r := build10k(t)
	var nodes []*node[[]candidate]
	var walk func(n *node[[]candidate])
	walk = func(n *node[[]candidate]) {
		nodes = append(nodes, n)
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(r.withoutHosts)
	size := unsafe.Sizeof(node[[]candidate]{})
	// Addresses as numbers: a pointer one past a string's end is what the checks compare
	// with, and -race's checkptr refuses such a pointer.
	addr := func(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }
	var text uintptr
	for i, n := range nodes {
		if i > 0 && uintptr(unsafe.Pointer(n))-uintptr(unsafe.Pointer(nodes[i-1])) != size {
			t.Fatalf("node %d (%q) is not next to node %d in memory: the tree is not packed", i, n.label, i-1)
		}
		if len(n.label) > 0 && len(n.indices) > 0 && addr(n.indices) != addr(n.label)+uintptr(len(n.label)) {
			t.Fatalf("node %d (%q): its indices do not follow its label", i, n.label)
		}
		if len(n.label) > 0 {
			if text != 0 && addr(n.label) != text {
				t.Fatalf("node %d (%q): its label does not follow the text of the node before", i, n.label)
			}
			text = addr(n.label) + uintptr(len(n.label)+len(n.indices))
		}
	}
}

// TestEndsWithReversed compares the eight-bytes-at-a-time comparison with a byte loop on
// every length up to 20 and bytes of every kind: letters of both cases, the bytes around
// 'A' and 'Z', and bytes with the high bit set, which lower-casing must leave alone.
func TestEndsWithReversed(t *testing.T) {
	alphabet := []byte("aAzZ@[`{.-09\x80\xc1\xda\xe1\xfa\xff")
	rng := rand.New(rand.NewPCG(1, 2))
	want := func(s []byte, label string) bool {
		if len(label) > len(s) {
			return false
		}
		for i := range len(label) {
			if lowerASCII(s[len(s)-1-i]) != label[i] {
				return false
			}
		}
		return true
	}
	for range 200000 {
		s := make([]byte, rng.IntN(21))
		for i := range s {
			s[i] = alphabet[rng.IntN(len(alphabet))]
		}
		// A label that matches, or nearly: the lower-cased reversal of a tail of s with
		// one byte perhaps changed.
		label := make([]byte, rng.IntN(len(s)+2))
		for i := range label {
			if i < len(s) {
				label[i] = lowerASCII(s[len(s)-1-i])
			} else {
				label[i] = 'x'
			}
		}
		if len(label) > 0 && rng.IntN(2) == 0 {
			label[rng.IntN(len(label))] = alphabet[rng.IntN(len(alphabet))]
		}
		if got := endsWithReversed(s, string(label)); got != want(s, string(label)) {
			t.Fatalf("endsWithReversed(%q, %q) = %v, want %v", s, label, got, !got)
		}
	}
	for c := range 256 {
		x := uint64(c) * 0x0101010101010101
		if got, want := lower8(x), uint64(lowerASCII(byte(c)))*0x0101010101010101; got != want {
			t.Errorf("lower8 of eight %#x = %#x, want %#x", c, got, want)
		}
	}
}
