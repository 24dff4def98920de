package router

import (
	"encoding/binary"
	"strings"
)

// keySpec names one stored key of a radix tree: the key text and whether it is matched
// exactly or as a prefix. Both kinds of the same text share one tree node.
type keySpec struct {
	key    string
	prefix bool
}

// node is one node of a compressed radix tree. Its full key is the concatenation of the
// labels from the root down to it. A node carries up to two payloads: exact (for a lookup
// key equal to its full key) and prefix (for any lookup key that starts with it). Nodes are
// never changed once a Router holds them: update copies the nodes on the path it changes
// and shares every other, so a Router's tree can be changed for the next Router in time
// proportional to the key, not to the tree, while lookups on the old one go on.
type node[T any] struct {
	// label, indices, children and the flags are what a lookup reads of each node it
	// passes, so they come first: they fill the node's first 64 bytes, one cache line
	// (TestNodeLayout), and the payloads a lookup reads once are after them.
	label     string
	indices   string // indices[i] is the first byte of children[i].label
	children  []*node[T]
	hasExact  bool
	hasPrefix bool
	// keyEnd is the length of the node's full key.
	keyEnd int
	exact  T
	prefix T
}

// buildTree returns the root of a radix tree holding every key of payloads, packed.
func buildTree[T any](payloads map[keySpec]T) *node[T] {
	root := &node[T]{}
	for spec, payload := range payloads {
		n := root.insert(spec.key)
		if spec.prefix {
			n.prefix, n.hasPrefix = payload, true
		} else {
			n.exact, n.hasExact = payload, true
		}
	}
	return pack(root)
}

// smallTree is the most nodes a tree left as insert made it may have: a lookup in it
// reads a few lines wherever they are, and packing one costs three allocations (a host's
// path tree mostly holds a path or two).
const smallTree = 8

// pack returns a copy of root's tree laid out for lookups, which are bound by memory,
// not by instructions: all nodes in one array in depth-first order, so that a node's
// subtree, the part of a walk that other walks mostly do not share, lies together; every
// node's label and indices in one string in the same order, a node's label just before its
// own indices; all children lists in one array. A lookup then reads nearby lines where it
// read scattered ones. The arrays are never written again; update copies the nodes it
// changes out of them, and a tree keeps them as long as it keeps any of their nodes.
func pack[T any](root *node[T]) *node[T] {
	var count, childCount, textLen int
	var measure func(n *node[T])
	measure = func(n *node[T]) {
		count++
		childCount += len(n.children)
		textLen += len(n.label) + len(n.indices)
		for _, c := range n.children {
			measure(c)
		}
	}
	measure(root)
	if count <= smallTree {
		return root
	}
	nodes := make([]node[T], 0, count)
	children := make([]*node[T], childCount)
	text := make([]byte, 0, textLen)
	var place func(n *node[T]) *node[T]
	place = func(n *node[T]) *node[T] {
		nodes = append(nodes, *n)
		p := &nodes[len(nodes)-1] // nodes never grows past its capacity: p stays put
		text = append(append(text, n.label...), n.indices...)
		p.children, children = children[:len(n.children):len(n.children)], children[len(n.children):]
		for i, c := range n.children {
			p.children[i] = place(c)
		}
		return p
	}
	packed := place(root)
	// The nodes' strings become slices of one string, in the order their text was written.
	all, at := string(text), 0
	for i := range nodes {
		n := &nodes[i]
		labelEnd := at + len(n.label)
		at = labelEnd + len(n.indices)
		n.label, n.indices = all[at-len(n.indices)-len(n.label):labelEnd], all[labelEnd:at]
	}
	return packed
}

// insert returns the node whose full key is key, splitting edges and adding nodes as
// needed. It changes n's tree in place: only buildTree, on a tree no Router holds yet,
// may call it.
func (n *node[T]) insert(key string) *node[T] {
	for key != "" {
		i := strings.IndexByte(n.indices, key[0])
		if i < 0 {
			child := &node[T]{label: key, keyEnd: n.keyEnd + len(key)}
			n.indices += key[:1]
			n.children = append(n.children, child)
			return child
		}
		child := n.children[i]
		common := commonPrefixLen(child.label, key)
		if common < len(child.label) {
			mid := &node[T]{
				label:    child.label[:common],
				keyEnd:   n.keyEnd + common,
				indices:  child.label[common : common+1],
				children: []*node[T]{child},
			}
			child.label = child.label[common:]
			n.children[i] = mid
			child = mid
		}
		n, key = child, key[common:]
	}
	return n
}

// update returns a tree equal to n's but for the payload stored under spec, which change
// turns from what it was (has tells whether there was one) into what it returns (keep
// false removes it). n's tree is not changed: the nodes on spec's path are copied, the
// rest shared. A node left with no payload and no child is dropped.
func (n *node[T]) update(spec keySpec, change func(cur T, has bool) (next T, keep bool)) *node[T] {
	c := *n
	key := spec.key
	if key == "" {
		if spec.prefix {
			c.prefix, c.hasPrefix = change(c.prefix, c.hasPrefix)
		} else {
			c.exact, c.hasExact = change(c.exact, c.hasExact)
		}
		if !c.hasPrefix {
			var zero T
			c.prefix = zero
		}
		if !c.hasExact {
			var zero T
			c.exact = zero
		}
		return &c
	}
	i := strings.IndexByte(n.indices, key[0])
	var child *node[T]
	rest := keySpec{prefix: spec.prefix}
	switch {
	case i < 0:
		child, rest.key = &node[T]{label: key, keyEnd: n.keyEnd + len(key)}, ""
	default:
		child = n.children[i]
		common := commonPrefixLen(child.label, key)
		if common < len(child.label) {
			tail := *child
			tail.label = child.label[common:]
			child = &node[T]{label: child.label[:common], keyEnd: n.keyEnd + common, indices: tail.label[:1], children: []*node[T]{&tail}}
		}
		rest.key = key[common:]
	}
	next := child.update(rest, change)
	empty := !next.hasExact && !next.hasPrefix && len(next.children) == 0
	switch {
	case i < 0 && empty:
		return n // nothing was there and nothing is
	case i < 0:
		c.indices = n.indices + key[:1]
		c.children = append(n.children[:len(n.children):len(n.children)], next)
	case empty:
		c.indices = n.indices[:i] + n.indices[i+1:]
		c.children = append(n.children[:i:i], n.children[i+1:]...)
	default:
		c.children = append([]*node[T](nil), n.children...)
		c.children[i] = next
	}
	return &c
}

func commonPrefixLen(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// indexSmall is strings.IndexByte for the indices of a node with few children, as most
// have (a path tree forks on a digit or a letter): this loop, inlined, finds a byte among
// eight sooner than the call does. Lookups leave wider nodes to IndexByte. It is a plain
// function, not a method of node[T], so that the compiler inlines it into the lookups'
// generic code.
func indexSmall(indices string, c byte) int {
	for i := 0; i < len(indices); i++ {
		if indices[i] == c {
			return i
		}
	}
	return -1
}

// smallFanOut is the widest node whose indices indexSmall searches.
const smallFanOut = 8

// lookup walks n's tree along key. It returns the deepest node reached, whether its full
// key is all of key, and the deepest node on the way with a prefix payload (nil for
// none).
//
// A tree shares its nodes with the trees made from it (update), so a node cannot point up
// at its nearest prefix ancestor; the next shallower prefix node is found by walking
// again, over a key cut short of the last one (nextPrefix). Paths pass few prefix nodes,
// so that costs less than keeping them.
func (n *node[T]) lookup(key []byte) (deepest *node[T], whole bool, prefix *node[T]) {
	if n.hasPrefix {
		prefix = n
	}
	rest := key // the part of key not yet walked
	for len(rest) > 0 {
		var i int
		if len(n.indices) <= smallFanOut {
			i = indexSmall(n.indices, rest[0])
		} else {
			i = strings.IndexByte(n.indices, rest[0])
		}
		if i < 0 {
			break
		}
		child := n.children[i]
		if len(rest) < len(child.label) || string(rest[:len(child.label)]) != child.label {
			break
		}
		n, rest = child, rest[len(child.label):]
		if n.hasPrefix {
			prefix = n
		}
	}
	return n, len(rest) == 0, prefix
}

// nextPrefix returns the deepest prefix node on key's path in root's tree above after,
// the prefix node tried last; nil when there is none. The nodes above after are those
// whose full key is shorter than after's, the nodes a walk over key cut to one byte less
// than that passes.
func (root *node[T]) nextPrefix(key []byte, after *node[T]) *node[T] {
	if after == root || after.keyEnd == 0 {
		return nil
	}
	_, _, prefix := root.lookup(key[:after.keyEnd-1])
	return prefix
}

// lookupHost is lookup for a tree of reversed lower-case hosts (parseHost) and the name
// of a Host header: it reads name from its last byte to its first, lower-casing ASCII
// letters, so that nothing is copied.
func (n *node[T]) lookupHost(name []byte) (deepest *node[T], whole bool, prefix *node[T]) {
	if n.hasPrefix {
		prefix = n
	}
	rest := name // the part of name not yet walked: the walk eats it from the end
	for len(rest) > 0 {
		c := lowerASCII(rest[len(rest)-1])
		var i int
		if len(n.indices) <= smallFanOut {
			i = indexSmall(n.indices, c)
		} else {
			i = strings.IndexByte(n.indices, c)
		}
		if i < 0 {
			break
		}
		child := n.children[i]
		if !endsWithReversed(rest, child.label) {
			break
		}
		n, rest = child, rest[:len(rest)-len(child.label)]
		if n.hasPrefix {
			prefix = n
		}
	}
	return n, len(rest) == 0, prefix
}

// nextPrefixHost is nextPrefix for lookupHost: the name cut short keeps its end.
func (root *node[T]) nextPrefixHost(name []byte, after *node[T]) *node[T] {
	if after == root || after.keyEnd == 0 {
		return nil
	}
	_, _, prefix := root.lookupHost(name[len(name)-(after.keyEnd-1):])
	return prefix
}

// endsWithReversed reports whether s, read backwards and lower-cased, starts with label.
// It compares eight bytes at a time: host labels are long ("moc.elpmaxe." is one), and
// this is most of a host lookup.
func endsWithReversed(s []byte, label string) bool {
	if len(label) > len(s) {
		return false
	}
	tail := s[len(s)-len(label):]
	for len(label) >= 8 {
		// The last eight bytes of tail, read big-endian, are the next eight of label read
		// little-endian when they match: the first byte of one is the last of the other.
		if lower8(binary.BigEndian.Uint64(tail[len(tail)-8:])) != littleEndian64(label) {
			return false
		}
		tail, label = tail[:len(tail)-8], label[8:]
	}
	for i := 0; i < len(label); i++ {
		if lowerASCII(tail[len(tail)-1-i]) != label[i] {
			return false
		}
	}
	return true
}

// littleEndian64 is binary.LittleEndian.Uint64 for the first eight bytes of a string,
// which the compiler turns into one load.
func littleEndian64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// lower8 is lowerASCII on each byte of x at once: a byte whose low seven bits reach 'A'
// and not past 'Z', and whose high bit is clear, gets 0x20 added.
func lower8(x uint64) uint64 {
	const ones = 0x0101010101010101
	low7 := x & (0x7f * ones)
	atLeastA := low7 + (0x80-'A')*ones // a byte's high bit: its low seven bits are >= 'A'
	pastZ := low7 + (0x80-'Z'-1)*ones  // ... are > 'Z'
	upper := atLeastA &^ pastZ &^ x & (0x80 * ones)
	return x | upper>>2
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}
