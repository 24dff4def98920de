package router

import "strings"

// keySpec names one stored key of a radix tree: the key text and whether it is matched
// exactly or as a prefix. Both kinds of the same text share one tree node.
type keySpec struct {
	key    string
	prefix bool
}

// node is one node of a compressed radix tree. Its full key is the concatenation of the
// labels from the root down to it. A node carries up to two payloads: exact (for a lookup
// key equal to its full key) and prefix (for any lookup key that starts with it). Nodes are
// never changed after buildTree returns.
type node[T any] struct {
	label    string
	indices  string // indices[i] is the first byte of children[i].label
	children []*node[T]
	// fallback is the nearest strict ancestor holding a prefix payload: a lookup walks
	// these links to try shorter prefixes without visiting empty nodes.
	fallback  *node[T]
	exact     T
	prefix    T
	hasExact  bool
	hasPrefix bool
}

// buildTree returns the root of a radix tree holding every key of payloads.
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
	root.linkFallbacks(nil)
	return root
}

// insert returns the node whose full key is key, splitting edges and adding nodes as needed.
func (n *node[T]) insert(key string) *node[T] {
	for key != "" {
		i := strings.IndexByte(n.indices, key[0])
		if i < 0 {
			child := &node[T]{label: key}
			n.indices += key[:1]
			n.children = append(n.children, child)
			return child
		}
		child := n.children[i]
		common := commonPrefixLen(child.label, key)
		if common < len(child.label) {
			mid := &node[T]{
				label:    child.label[:common],
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

func (n *node[T]) linkFallbacks(nearest *node[T]) {
	n.fallback = nearest
	if n.hasPrefix {
		nearest = n
	}
	for _, child := range n.children {
		child.linkFallbacks(nearest)
	}
}

func commonPrefixLen(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// walk descends as far as key allows and returns the deepest node whose full key is a
// prefix of key, and whether that full key is all of key. With hostOrder the key is read
// from its last byte to its first and ASCII letters are lower-cased, so that a tree of
// reversed lower-case hosts can be searched with the raw Host bytes, without a copy.
func (n *node[T]) walk(key []byte, hostOrder bool) (deepest *node[T], whole bool) {
	pos := 0
	for pos < len(key) {
		i := strings.IndexByte(n.indices, keyByte(key, pos, hostOrder))
		if i < 0 {
			return n, false
		}
		child := n.children[i]
		if !hasLabelAt(key, pos, child.label, hostOrder) {
			return n, false
		}
		n = child
		pos += len(child.label)
	}
	return n, true
}

// firstPrefix returns the node itself if it holds a prefix payload, else its fallback:
// the start of a longest-to-shortest prefix walk.
func (n *node[T]) firstPrefix() *node[T] {
	if n.hasPrefix {
		return n
	}
	return n.fallback
}

func keyByte(key []byte, pos int, hostOrder bool) byte {
	if !hostOrder {
		return key[pos]
	}
	return lowerASCII(key[len(key)-1-pos])
}

func hasLabelAt(key []byte, pos int, label string, hostOrder bool) bool {
	if len(key)-pos < len(label) {
		return false
	}
	if !hostOrder {
		return string(key[pos:pos+len(label)]) == label
	}
	for i := 0; i < len(label); i++ {
		if lowerASCII(key[len(key)-1-pos-i]) != label[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}
