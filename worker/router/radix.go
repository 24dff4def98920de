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
// never changed once a Router holds them: update copies the nodes on the path it changes
// and shares every other, so a Router's tree can be changed for the next Router in time
// proportional to the key, not to the tree, while lookups on the old one go on.
type node[T any] struct {
	label string
	// keyEnd is the length of the node's full key.
	keyEnd    int
	indices   string // indices[i] is the first byte of children[i].label
	children  []*node[T]
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
	return root
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

// descend walks n's tree along key, visiting only nodes whose full key ends before limit
// (len(key)+1 for all). It returns the deepest node reached, whether its full key is all
// of key, and the deepest node on the way with a prefix payload (nil for none). With
// hostOrder the key is read from its last byte to its first and ASCII letters are
// lower-cased, so that a tree of reversed lower-case hosts can be searched with the raw
// Host bytes, without a copy.
//
// A tree shares its nodes with the trees made from it (update), so a node cannot point up
// at its nearest prefix ancestor; the next shallower prefix node is found by descending
// again with limit set to the last one's keyEnd (nextPrefix). Paths pass few prefix
// nodes, so that costs less than keeping them.
func (n *node[T]) descend(key []byte, hostOrder bool, limit int) (deepest *node[T], whole bool, prefix *node[T]) {
	pos := 0
	if n.hasPrefix {
		prefix = n
	}
	for pos < len(key) {
		i := strings.IndexByte(n.indices, keyByte(key, pos, hostOrder))
		if i < 0 {
			break
		}
		child := n.children[i]
		if pos+len(child.label) >= limit || !hasLabelAt(key, pos, child.label, hostOrder) {
			break
		}
		n = child
		pos += len(child.label)
		if n.hasPrefix {
			prefix = n
		}
	}
	return n, pos == len(key), prefix
}

// lookup is descend over all of key: the first walk of a match, without the limit's
// compare on every level.
func (n *node[T]) lookup(key []byte, hostOrder bool) (deepest *node[T], whole bool, prefix *node[T]) {
	pos := 0
	if n.hasPrefix {
		prefix = n
	}
	for pos < len(key) {
		i := strings.IndexByte(n.indices, keyByte(key, pos, hostOrder))
		if i < 0 {
			break
		}
		child := n.children[i]
		if !hasLabelAt(key, pos, child.label, hostOrder) {
			break
		}
		n = child
		pos += len(child.label)
		if n.hasPrefix {
			prefix = n
		}
	}
	return n, pos == len(key), prefix
}

// nextPrefix returns the deepest prefix node on key's path in root's tree above after,
// the prefix node tried last; nil when there is none.
func (root *node[T]) nextPrefix(key []byte, hostOrder bool, after *node[T]) *node[T] {
	if after == root || after.keyEnd == 0 {
		return nil
	}
	_, _, prefix := root.descend(key, hostOrder, after.keyEnd)
	return prefix
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
