package proxy

import (
	"cmp"
	"fmt"
	"slices"

	"gw/conf"
	"gw/plugins/vars"
)

// Consistent hashing (type chash). Each node owns points on a 64-bit ring in proportion to
// its weight; a request's key hashes to a point and goes to the owner of the first node
// point at or after it. The ring depends only on the nodes' "host:port" and weights, never
// on process state, so every worker process sends a key to the same node, and removing a
// node moves only the keys that were on its points.

const (
	// pointsPerWeight is the ring points per unit of weight (weights are first divided by
	// their greatest common divisor, as APISIX does); 160 is resty.chash's figure.
	pointsPerWeight = 160
	// maxRingPoints bounds one priority group's ring (12 bytes a point). Beyond it the
	// points are scaled down, and a node's removal may then move a few other keys too.
	maxRingPoints = 1 << 18
)

// chashRing has one ring per node priority, highest first: a lower group is used only
// when every node of the higher ones has been tried (APISIX's priority balancer).
type chashRing struct {
	groups []ringGroup
}

type ringGroup struct {
	members []int    // the group's node indexes that own points
	hashes  []uint64 // the points, ascending
	owners  []int32  // owners[i] is the node index of hashes[i]
}

// buildRing makes the rings for nodes; nodes of weight 0 get no point.
func buildRing(nodes []node) *chashRing {
	byPriority := map[int][]int{}
	for i := range nodes {
		if nodes[i].weight > 0 {
			byPriority[nodes[i].priority] = append(byPriority[nodes[i].priority], i)
		}
	}
	priorities := make([]int, 0, len(byPriority))
	for p := range byPriority {
		priorities = append(priorities, p)
	}
	slices.Sort(priorities)
	slices.Reverse(priorities)

	r := &chashRing{}
	for _, p := range priorities {
		r.groups = append(r.groups, buildGroup(nodes, byPriority[p]))
	}
	return r
}

// buildGroup makes one priority group's ring. Weights count at most conf.MaxNodeWeight,
// the most conf and Pools.Upstream let through, so that a weight that came another way
// cannot overflow the sums here (1e17 once made total negative, and make panicked in
// every worker): a node then has at most 1.6e8 points before scaling, and with the int32
// owners holding at most 2^31 nodes, total stays below 3.5e17 and count×maxRingPoints
// below 4.2e13.
func buildGroup(nodes []node, members []int) ringGroup {
	weight := func(i int) int { return min(nodes[i].weight, conf.MaxNodeWeight) }
	divisor, total := 0, 0
	for _, i := range members {
		divisor = gcd(divisor, weight(i))
	}
	for _, i := range members {
		total += weight(i) / divisor * pointsPerWeight
	}
	type point struct {
		hash  uint64
		owner int32
	}
	points := make([]point, 0, min(total, maxRingPoints+len(members)))
	for _, i := range members {
		count := weight(i) / divisor * pointsPerWeight
		if total > maxRingPoints {
			count = max(1, int(int64(count)*maxRingPoints/int64(total)))
		}
		base := newKeyHash().add(nodes[i].addr)
		for j := range count {
			points = append(points, point{hash: mix64(uint64(base) + uint64(j+1)*0x9e3779b97f4a7c15), owner: int32(i)})
		}
	}
	slices.SortFunc(points, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	g := ringGroup{members: members, hashes: make([]uint64, len(points)), owners: make([]int32, len(points))}
	for k, p := range points {
		g.hashes[k], g.owners[k] = p.hash, p.owner
	}
	return g
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pickChash returns the owner of the first point at or after hash whose node has not been
// tried, in the highest priority group with such a node; -1 when every node was tried. A
// retry therefore goes to the next node along the ring, as APISIX's picker:next does.
func (u *Upstream) pickChash(hash uint64, tried []uint64) int {
	for gi := range u.ring.groups {
		g := &u.ring.groups[gi]
		if !g.hasUntried(tried) {
			continue
		}
		n := len(g.hashes)
		start, _ := slices.BinarySearch(g.hashes, hash)
		for k := range n {
			j := start + k
			if j >= n {
				j -= n
			}
			if owner := int(g.owners[j]); !isSet(tried, owner) {
				return owner
			}
		}
	}
	return -1
}

func (g *ringGroup) hasUntried(tried []uint64) bool {
	for _, i := range g.members {
		if !isSet(tried, i) {
			return true
		}
	}
	return false
}

// keyHash is 64-bit FNV-1a, finished by mix64. It is fixed (no per-process seed), which is
// what makes a key land on the same node in every worker.
type keyHash uint64

func newKeyHash() keyHash { return 14695981039346656037 }

func (h keyHash) add(b []byte) keyHash {
	for _, c := range b {
		h ^= keyHash(c)
		h *= 1099511628211
	}
	return h
}

func (h keyHash) addString(s string) keyHash {
	for i := 0; i < len(s); i++ {
		h ^= keyHash(s[i])
		h *= 1099511628211
	}
	return h
}

func (h keyHash) sum() uint64 { return mix64(uint64(h)) }

// mix64 is SplitMix64's finaliser: FNV's low bits are weak, and ring points built from
// consecutive integers need spreading.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hashKey says where a chash upstream's key comes from (hash_on and key, compiled).
type hashKey struct {
	source conf.HashOn
	// v is the variable for hash_on vars, header and cookie.
	v conf.Var
	// template is the key of hash_on vars_combinations.
	template conf.Template
	// names is set when the key reads the route's, service's or consumer's names, which
	// the forward then copies into the vars.Request it builds.
	names bool
}

// compileHashKey compiles hash_on and key, which conf has checked. A header or cookie
// key is its name: hash_on header with key X-User reads $http_x_user.
func compileHashKey(hashOn conf.HashOn, key string) (hashKey, error) {
	k := hashKey{source: hashOn}
	var err error
	switch hashOn {
	case conf.HashOnVars:
		k.v, err = conf.ParseVar(key)
	case conf.HashOnHeader:
		k.v, err = conf.ParseVar("http_" + key)
	case conf.HashOnCookie:
		k.v, err = conf.ParseVar("cookie_" + key)
	case conf.HashOnVarsCombinations:
		k.template, err = conf.ParseTemplate(key, conf.TemplateSyntax{})
	}
	if err != nil {
		return hashKey{}, fmt.Errorf("proxy: key: %w", err)
	}
	k.names = k.source == conf.HashOnConsumer || vars.ReadsNames(&k.v)
	for i := range k.template.Parts {
		k.names = k.names || vars.ReadsNames(&k.template.Parts[i].Var)
	}
	return k, nil
}

// keyScratch returns x.key emptied, with room for any address or port and most hosts and
// decoded arguments, which vars.Value makes there: x is the connection's or pooled, so
// the room is made once, and no buffer is zeroed per request.
func (x *exchange) keyScratch() []byte {
	if cap(x.key) < 64 {
		x.key = make([]byte, 0, 64)
	}
	return x.key[:0]
}

// hash returns the ring position of r's key. A key with no value falls
// back to the client's address, as APISIX does (and a vars_combinations key none of whose
// variables has a value, or that names none).
func (k *hashKey) hash(r *vars.Request, x *exchange) uint64 {
	switch k.source {
	case conf.HashOnConsumer:
		if r.Consumer != "" {
			return newKeyHash().addString(r.Consumer).sum()
		}
	case conf.HashOnVarsCombinations:
		// Part by part, as the key reads: no buffer for the whole.
		h, resolved := newKeyHash(), false
		for i := range k.template.Parts {
			p := &k.template.Parts[i]
			value, ok := vars.PartValue(r, p, x.keyScratch())
			h = h.add(value)
			resolved = resolved || ok && p.Kind == conf.PartVar
		}
		if resolved {
			return h.sum()
		}
	default:
		if value, ok := vars.Value(r, &k.v, x.keyScratch()); ok {
			return newKeyHash().add(value).sum()
		}
	}
	x.key = appendPeerIP(x.key[:0], r.HTTP)
	return newKeyHash().add(x.key).sum()
}
