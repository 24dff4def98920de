package proxy

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"gw/conf"
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
	source hashSource
	// v is the variable for hash_on vars, header and cookie.
	v variable
	// parts is the template for hash_on vars_combinations.
	parts []keyPart
}

type hashSource uint8

const (
	hashOnVars hashSource = iota
	hashOnHeader
	hashOnCookie
	hashOnConsumer
	hashOnVarsCombinations
)

// keyPart is a literal run of a vars_combinations template or one of its $variables.
type keyPart struct {
	literal []byte
	isVar   bool
	v       variable
	// fallback is the value after "??" in ${name ?? fallback}, used when name has none.
	fallback    []byte
	hasFallback bool
}

// variable is one of nginx's request variables, as ctx.var reads it in APISIX.
type variable struct {
	kind varKind
	name []byte // the header, cookie or query argument name
}

type varKind uint8

const (
	varUnknown varKind = iota // never has a value
	varURI
	varRequestURI
	varServerName
	varServerAddr
	varServerPort
	varRemoteAddr
	varRemotePort
	varQueryString
	varHost
	varHostname
	varRequestMethod
	varScheme
	varConsumerName
	varHeader
	varCookie
	varArg
)

var namedVars = map[string]varKind{
	"uri":            varURI,
	"request_uri":    varRequestURI,
	"server_name":    varServerName,
	"server_addr":    varServerAddr,
	"server_port":    varServerPort,
	"remote_addr":    varRemoteAddr,
	"remote_port":    varRemotePort,
	"query_string":   varQueryString,
	"args":           varQueryString,
	"host":           varHost,
	"hostname":       varHostname,
	"request_method": varRequestMethod,
	"scheme":         varScheme,
	"consumer_name":  varConsumerName,
	// mqtt_client_id is a stream-proxy variable: over HTTP it has no value.
	"mqtt_client_id": varUnknown,
}

// parseVariable maps an nginx variable name to what reads it. Names gw does not know
// read as having no value, as an unset variable does in APISIX.
func parseVariable(name string) variable {
	if kind, ok := namedVars[name]; ok {
		return variable{kind: kind}
	}
	switch {
	case strings.HasPrefix(name, "http_") && len(name) > len("http_"):
		return headerVariable(name[len("http_"):])
	case strings.HasPrefix(name, "cookie_") && len(name) > len("cookie_"):
		return variable{kind: varCookie, name: []byte(name[len("cookie_"):])}
	case strings.HasPrefix(name, "arg_") && len(name) > len("arg_"):
		return variable{kind: varArg, name: []byte(name[len("arg_"):])}
	}
	return variable{}
}

// headerVariable reads header name. nginx's $http_x_y reads header X-Y: APISIX lower-cases
// the name and turns '-' into '_', so both spellings of a key name the same header.
func headerVariable(name string) variable {
	return variable{kind: varHeader, name: []byte(strings.ReplaceAll(name, "_", "-"))}
}

// compileHashKey compiles hash_on and key ("" hash_on is the default, vars).
func compileHashKey(hashOn, key string) (hashKey, error) {
	if hashOn == "" {
		hashOn = conf.DefaultHashOn
	}
	if key == "" && hashOn != "consumer" {
		return hashKey{}, fmt.Errorf("proxy: key: required when type is chash and hash_on is %s", hashOn)
	}
	switch hashOn {
	case "vars":
		if !conf.IsHashVar(key) {
			return hashKey{}, fmt.Errorf("proxy: key: %q is not a variable chash can hash on", key)
		}
		return hashKey{source: hashOnVars, v: parseVariable(key)}, nil
	case "header":
		return hashKey{source: hashOnHeader, v: headerVariable(key)}, nil
	case "cookie":
		return hashKey{source: hashOnCookie, v: variable{kind: varCookie, name: []byte(key)}}, nil
	case "consumer":
		return hashKey{source: hashOnConsumer}, nil
	case "vars_combinations":
		return hashKey{source: hashOnVarsCombinations, parts: parseTemplate(key)}, nil
	}
	return hashKey{}, fmt.Errorf("proxy: hash_on: %q is not one of vars, header, cookie, consumer, vars_combinations", hashOn)
}

// parseTemplate splits a vars_combinations key the way APISIX's resolve_var reads it:
// $name (letters, digits, '_' and '.') or ${name} or ${name ?? fallback}; a '$' after a
// backslash, or one that starts neither form, is literal text.
func parseTemplate(tpl string) []keyPart {
	var parts []keyPart
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			parts = append(parts, keyPart{literal: lit})
			lit = nil
		}
	}
	for i := 0; i < len(tpl); i++ {
		c := tpl[i]
		if c != '$' || (i > 0 && tpl[i-1] == '\\') {
			lit = append(lit, c)
			continue
		}
		rest := tpl[i+1:]
		if strings.HasPrefix(rest, "{") {
			end := strings.IndexByte(rest, '}')
			inner := ""
			if end > 0 {
				inner = strings.TrimSpace(rest[1:end])
			}
			if inner != "" {
				flush()
				part := keyPart{isVar: true}
				name, fallback, hasFallback := cutFallback(inner)
				part.v = parseVariable(name)
				if hasFallback {
					part.fallback, part.hasFallback = []byte(fallback), true
				}
				parts = append(parts, part)
				i += 1 + end
				continue
			}
		}
		n := 0
		for n < len(rest) && isVarNameChar(rest[n]) {
			n++
		}
		if n == 0 {
			lit = append(lit, c)
			continue
		}
		flush()
		parts = append(parts, keyPart{isVar: true, v: parseVariable(rest[:n])})
		i += n
	}
	flush()
	return parts
}

// cutFallback splits "name ?? fallback" (spaces around ?? optional).
func cutFallback(inner string) (name, fallback string, ok bool) {
	name, fallback, ok = strings.Cut(inner, "??")
	if !ok {
		return inner, "", false
	}
	fallback = strings.TrimSpace(fallback)
	if more, _, found := strings.Cut(fallback, "??"); found {
		fallback = strings.TrimSpace(more)
	}
	return strings.TrimSpace(name), fallback, true
}

func isVarNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
}

// hash returns the ring position of ctx's key. A key with no value falls back to the
// client's address, as APISIX does (and a vars_combinations key none of whose variables
// has a value, or that names none).
func (k *hashKey) hash(ctx *fasthttp.RequestCtx, consumer string, x *exchange) uint64 {
	h := newKeyHash()
	switch k.source {
	case hashOnConsumer:
		if consumer != "" {
			return h.addString(consumer).sum()
		}
	case hashOnVarsCombinations:
		resolved := 0
		for i := range k.parts {
			p := &k.parts[i]
			if !p.isVar {
				h = h.add(p.literal)
				continue
			}
			if value, ok := p.v.read(ctx, consumer, x); ok {
				h = h.add(value)
				resolved++
			} else if p.hasFallback {
				h = h.add(p.fallback)
				resolved++
			}
		}
		if resolved > 0 {
			return h.sum()
		}
	default:
		if value, ok := k.v.read(ctx, consumer, x); ok {
			return h.add(value).sum()
		}
	}
	x.key = appendPeerIP(x.key[:0], ctx)
	return newKeyHash().add(x.key).sum()
}

var (
	serverName = []byte("_") // APISIX's nginx.conf serves HTTP in `server_name _;`
	hostname   = func() []byte {
		name, _ := os.Hostname()
		return []byte(name)
	}()
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// read returns the variable's value for ctx and whether it has one. The value may point
// into ctx or into x.key; it is valid until the next read.
func (v *variable) read(ctx *fasthttp.RequestCtx, consumer string, x *exchange) ([]byte, bool) {
	switch v.kind {
	case varURI:
		return ctx.Path(), true
	case varRequestURI:
		return ctx.Request.Header.RequestURI(), true
	case varServerName:
		return serverName, true
	case varServerAddr, varServerPort:
		a, ok := ctx.LocalAddr().(*net.TCPAddr)
		if !ok {
			return nil, false
		}
		if v.kind == varServerPort {
			x.key = strconv.AppendInt(x.key[:0], int64(a.Port), 10)
		} else {
			ip, _ := netip.AddrFromSlice(a.IP)
			x.key = ip.Unmap().AppendTo(x.key[:0])
		}
		return x.key, true
	case varRemoteAddr:
		x.key = appendPeerIP(x.key[:0], ctx)
		return x.key, true
	case varRemotePort:
		a, ok := ctx.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return nil, false
		}
		x.key = strconv.AppendInt(x.key[:0], int64(a.Port), 10)
		return x.key, true
	case varQueryString:
		// nginx's $args has no value without a query; an empty one reads the same here.
		q := ctx.URI().QueryString()
		return q, len(q) > 0
	case varHost:
		x.key = appendHost(x.key[:0], ctx.Host())
		return x.key, true
	case varHostname:
		return hostname, true
	case varRequestMethod:
		return ctx.Method(), true
	case varScheme:
		if ctx.IsTLS() {
			return schemeHTTPS, true
		}
		return schemeHTTP, true
	case varConsumerName:
		if consumer == "" {
			return nil, false
		}
		x.key = append(x.key[:0], consumer...)
		return x.key, true
	case varHeader:
		value := ctx.Request.Header.PeekBytes(v.name)
		return value, len(value) > 0
	case varCookie:
		value := ctx.Request.Header.CookieBytes(v.name)
		return value, len(value) > 0
	case varArg:
		args := ctx.QueryArgs()
		value := args.PeekBytes(v.name)
		return value, len(value) > 0 || args.HasBytes(v.name)
	}
	return nil, false
}

// appendHost appends nginx's $host for a Host value: lower case, without the port.
func appendHost(dst, host []byte) []byte {
	if len(host) > 0 && host[0] == '[' {
		if end := bytes.IndexByte(host, ']'); end > 0 {
			host = host[:end+1]
		}
	} else if colon := bytes.IndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	for _, c := range host {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
