package router

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins/vars"
)

// Entry is one route as the router sees it.
type Entry struct {
	// Paths are "/hello" for an exact match or "/api/*" for a prefix match (the prefix is
	// everything before the '*'). A segment starting with '*' before the end ("/a/*/b",
	// "/files/*name") matches any text there, slashes included. A segment starting with
	// ':' ("/user/:id") is one path segment when Options.Parameters is set, and literal
	// text otherwise (APISIX's default routers).
	Paths []string
	// Methods are compared exactly and case-sensitively; empty allows any method.
	Methods []string
	// Hosts are "api.example.com" (exact), "*.example.com" (any host ending in
	// ".example.com") or "*" (any host), compared in ASCII lower case; empty puts the
	// route in the group that is tried only when no route with hosts matches.
	Hosts []string
	// Priority orders routes stored under the same path key: higher first.
	Priority int
	// RemoteAddrs, when not empty, admit only clients whose TCP peer address is inside
	// one of them (APISIX's remote_addrs).
	RemoteAddrs []netip.Prefix
	// Vars, when not nil, must hold for the request (APISIX's vars), checked last.
	Vars *conf.Expr
	// Value is opaque to the router: the caller's index of the route, returned by Match.
	Value int
}

// Router finds the route for a request. It is immutable once Build returns it and is
// safe for concurrent use by any number of goroutines.
type Router struct {
	// withHosts is keyed by reversed lower-case host; each host key owns a path tree.
	// It is nil when no entry has hosts.
	withHosts *node[*node[[]candidate]]
	// withoutHosts holds the entries without hosts.
	withoutHosts *node[[]candidate]
	entries      int
	opts         Options
}

// Options change how Build reads paths.
type Options struct {
	// Parameters makes a path segment starting with ':' match any one segment ("/user/:id"
	// matches "/user/john"), as APISIX's radixtree_uri_with_parameter router does.
	Parameters bool
	// HostsAsCondition puts every entry into one path tree and checks its hosts like its
	// other conditions, as APISIX's radixtree_uri and radixtree_uri_with_parameter routers
	// do: a route with hosts then has no precedence over one without. By default routes
	// with hosts are tried first (radixtree_host_uri, APISIX's default since 3.3).
	HostsAsCondition bool
}

// candidate is one entry stored under one path key of one path tree.
type candidate struct {
	methods []string // empty: any method
	value   int
	// pattern, when set, must match the request path after the stored key, whole.
	pattern []token
	keyLen  int
	cond    *conditions // nil: no condition on the request
	// hosts, with Options.HostsAsCondition, are the entry's hosts as parseHost keys, and
	// hostNames the same hosts as the entry gave them.
	hosts     []keySpec
	hostNames []string
	// path is the entry's path this candidate is stored for, and host the entry's host
	// whose path tree holds it ("" in the tree of entries without hosts): what Matched
	// reports.
	path, host string

	// Build-time ordering only.
	priority int
	pathLen  int
	order    int
}

func (c *candidate) allows(method []byte) bool {
	if len(c.methods) == 0 {
		return true
	}
	for _, m := range c.methods {
		if string(method) == m {
			return true
		}
	}
	return false
}

// matches checks the candidate's pattern, then its request conditions: APISIX checks the
// method, client address, host and vars, and only then the parameters, but the order is
// not visible because a candidate either passes all or is skipped.
func (c *candidate) matches(method, host, path []byte, req *fasthttp.RequestCtx) bool {
	return c.allows(method) &&
		(c.hosts == nil || matchHosts(c.hosts, host) >= 0) &&
		(c.pattern == nil || matchTokens(c.pattern, path[c.keyLen:])) &&
		(c.cond == nil || c.cond.admits(req))
}

// pathGroup collects the candidates of one path tree while Build runs.
type pathGroup map[keySpec][]candidate

func (g pathGroup) add(spec keySpec, c candidate) {
	list := g[spec]
	// An entry listing the same path (or host) twice lands twice in one list, always
	// at its tail because entries are added in order; once is enough. Two patterns under
	// one key ("/user/:id", "/user/:id/x") are different paths.
	if n := len(list); n > 0 && list[n-1].order == c.order && slices.Equal(list[n-1].pattern, c.pattern) {
		return
	}
	g[spec] = append(list, c)
}

func (g pathGroup) tree() *node[[]candidate] {
	for _, list := range g {
		slices.SortFunc(list, compareCandidates)
	}
	return buildTree(g)
}

// compareCandidates orders the candidates under one key as they are tried: higher
// priority first, then the longer path, then the earlier entry.
func compareCandidates(a, b candidate) int {
	if a.priority != b.priority {
		return cmp.Compare(b.priority, a.priority)
	}
	if a.pathLen != b.pathLen {
		return cmp.Compare(b.pathLen, a.pathLen)
	}
	return cmp.Compare(a.order, b.order)
}

// Build returns a Router for entries with the default Options. It fails for an entry
// without paths, a path that does not start with "/" or has a '*' inside a segment other
// than at the path's end, and a host that is empty or has a '*' anywhere but at its start.
// entries is not retained.
func Build(entries []Entry) (*Router, error) {
	return BuildWith(entries, Options{})
}

// BuildWith is Build with options.
func BuildWith(entries []Entry, opts Options) (*Router, error) {
	withoutHosts := pathGroup{}
	withHosts := map[keySpec]pathGroup{}
	for i := range entries {
		places, err := placementsOf(&entries[i], i, opts)
		if err != nil {
			return nil, fmt.Errorf("router: entry %d: %w", i, err)
		}
		for _, p := range places {
			if p.host == nil {
				withoutHosts.add(p.path, p.c)
				continue
			}
			group := withHosts[*p.host]
			if group == nil {
				group = pathGroup{}
				withHosts[*p.host] = group
			}
			group.add(p.path, p.c)
		}
	}

	r := &Router{withoutHosts: withoutHosts.tree(), entries: len(entries), opts: opts}
	if len(withHosts) > 0 {
		hostTrees := make(map[keySpec]*node[[]candidate], len(withHosts))
		for host, group := range withHosts {
			hostTrees[host] = group.tree()
		}
		r.withHosts = buildTree(hostTrees)
	}
	return r, nil
}

// placement is where one candidate of an entry is stored: under path in the path tree of
// host, or of the entries without hosts when host is nil.
type placement struct {
	host *keySpec
	path keySpec
	c    candidate
}

// placementsOf is every candidate e stores, as the order-th entry.
func placementsOf(e *Entry, order int, opts Options) ([]placement, error) {
	if len(e.Paths) == 0 {
		return nil, errors.New("no paths: a route needs at least one uri")
	}
	paths := make([]keySpec, len(e.Paths))
	patterns := make([][]token, len(e.Paths))
	for j, p := range e.Paths {
		spec, pattern, err := parsePath(p, opts.Parameters)
		if err != nil {
			return nil, fmt.Errorf("path %q: %w", p, err)
		}
		paths[j], patterns[j] = spec, pattern
	}
	hosts := make([]keySpec, len(e.Hosts))
	for j, h := range e.Hosts {
		spec, err := parseHost(h)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", h, err)
		}
		hosts[j] = spec
	}
	methods := slices.Clone(e.Methods)
	var hostNames []string // only candidates that check their hosts themselves name them
	if opts.HostsAsCondition {
		hostNames = slices.Clone(e.Hosts)
	}
	cond := newConditions(e)
	var places []placement
	for j, spec := range paths {
		c := candidate{
			methods:  methods,
			value:    e.Value,
			pattern:  patterns[j],
			keyLen:   len(spec.key),
			cond:     cond,
			priority: e.Priority,
			pathLen:  len(e.Paths[j]),
			order:    order,
			path:     e.Paths[j],
		}
		if len(hosts) == 0 || opts.HostsAsCondition {
			if len(hosts) > 0 {
				c.hosts, c.hostNames = hosts, hostNames
			}
			places = append(places, placement{path: spec, c: c})
			continue
		}
		for k := range hosts {
			c.host = e.Hosts[k]
			places = append(places, placement{host: &hosts[k], path: spec, c: c})
		}
	}
	return places, nil
}

// CheckEntry reports what BuildWith would refuse in e alone, so that a caller can leave
// one bad entry out and build the others.
func CheckEntry(e *Entry, opts Options) error {
	if len(e.Paths) == 0 {
		return errors.New("router: no paths: a route needs at least one uri")
	}
	for _, p := range e.Paths {
		if _, _, err := parsePath(p, opts.Parameters); err != nil {
			return fmt.Errorf("router: path %q: %w", p, err)
		}
	}
	for _, h := range e.Hosts {
		if _, err := parseHost(h); err != nil {
			return fmt.Errorf("router: host %q: %w", h, err)
		}
	}
	return nil
}

// parsePath returns the tree key of p and, for a path with wildcard or parameter
// segments, the pattern its candidates check after the key.
func parsePath(p string, parameters bool) (keySpec, []token, error) {
	if !strings.HasPrefix(p, "/") {
		return keySpec{}, nil, errors.New(`must start with "/"`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '*' && i != len(p)-1 && p[i-1] != '/' {
			return keySpec{}, nil, errors.New(`'*' is allowed only at the end of the path or at the start of a segment (a prefix match such as "/api/*", or "/files/*name")`)
		}
	}
	if prefix, pattern := splitPattern(p, parameters); pattern != nil {
		return keySpec{key: prefix, prefix: true}, pattern, nil
	}
	if strings.HasSuffix(p, "*") {
		return keySpec{key: p[:len(p)-1], prefix: true}, nil, nil
	}
	return keySpec{key: p}, nil, nil
}

// parseHost returns the host tree key of h: the host reversed and lower-cased, a prefix
// key for a wildcard ("*.example.com" becomes the prefix "moc.elpmaxe.").
func parseHost(h string) (keySpec, error) {
	if h == "" {
		return keySpec{}, errors.New("must not be empty")
	}
	wildcard := h[0] == '*'
	if wildcard {
		h = h[1:]
	}
	if strings.IndexByte(h, '*') >= 0 {
		return keySpec{}, errors.New(`'*' is allowed only as the first character (a wildcard such as "*.example.com")`)
	}
	reversed := make([]byte, len(h))
	for i := range len(h) {
		reversed[len(h)-1-i] = lowerASCII(h[i])
	}
	return keySpec{key: string(reversed), prefix: wildcard}, nil
}

// Len returns the number of entries the Router was built from.
func (r *Router) Len() int { return r.entries }

// Matched is what a lookup found: the entry's Value and which of its paths and hosts
// the request matched, as the entry gave them (APISIX's matched_uri and matched_host).
// Its strings are the entries' own, held by the Router: keeping them costs nothing.
type Matched struct {
	Value int
	// Path is the entry's path that matched ("/bar*" for a request for "/bar1").
	Path string
	// Host is the entry's host that matched ("*.bar.com" for "a.bar.com"), "" when the
	// entry has no hosts.
	Host string
}

// Match returns the Value of the route for a request, or ok == false when no route
// matches. host is the raw Host header (a port and one trailing dot are ignored, case does
// not matter); path is the request path without the query string. Match has no request
// to check conditions against, so it skips every entry with RemoteAddrs or Vars; use
// MatchCtx when any entry has them. Match allocates nothing and retains none of its
// arguments.
func (r *Router) Match(method, host, path []byte) (value int, ok bool) {
	m, ok := r.MatchCtx(method, host, path, nil)
	return m.Value, ok
}

// MatchCtx is Match that also checks each candidate's RemoteAddrs and Vars against req;
// a candidate that fails them lets the next one try, as in APISIX. It also says which of
// the entry's paths and hosts matched. method, host and path are passed apart from req
// so that the caller decides what they are (the handler's path is the normalised
// ctx.Path()). MatchCtx allocates nothing, except where a vars comparison must (regular
// expressions on formatted values; see compare).
func (r *Router) MatchCtx(method, host, path []byte, req *fasthttp.RequestCtx) (Matched, bool) {
	if r.withHosts != nil {
		name := vars.HostName(host)
		n, whole, prefix := r.withHosts.lookupHost(name)
		if whole && n.hasExact {
			if c := matchPath(n.exact, method, nil, path, req); c != nil {
				return c.matched(nil), true
			}
		}
		for n := prefix; n != nil; n = r.withHosts.nextPrefixHost(name, n) {
			if c := matchPath(n.prefix, method, nil, path, req); c != nil {
				return c.matched(nil), true
			}
		}
	}
	if c := matchPath(r.withoutHosts, method, host, path, req); c != nil {
		return c.matched(host), true
	}
	return Matched{}, false
}

// matched is the Matched of c for a request with the Host header host, which only a
// candidate that checks its hosts itself reads.
func (c *candidate) matched(host []byte) Matched {
	m := Matched{Value: c.value, Path: c.path, Host: c.host}
	if c.hosts != nil {
		m.Host = c.hostNames[matchHosts(c.hosts, host)]
	}
	return m
}

// matchPath finds the first candidate of tree for the request, nil for none. host is
// only read by candidates that check their hosts themselves (Options.HostsAsCondition).
func matchPath(tree *node[[]candidate], method, host, path []byte, req *fasthttp.RequestCtx) *candidate {
	n, whole, prefix := tree.lookup(path)
	if whole && n.hasExact {
		for i := range n.exact {
			if n.exact[i].matches(method, host, path, req) {
				return &n.exact[i]
			}
		}
	}
	for n := prefix; n != nil; n = tree.nextPrefix(path, n) {
		for i := range n.prefix {
			if n.prefix[i].matches(method, host, path, req) {
				return &n.prefix[i]
			}
		}
	}
	return nil
}

// matchHosts returns the index of the first of hosts, parseHost keys (the reversed,
// lower-cased name, a prefix for a wildcard), that the Host header host matches; -1 for
// none. It compares from the name's end, so nothing is reversed or allocated.
func matchHosts(hosts []keySpec, host []byte) int {
	name := vars.HostName(host)
	for i, h := range hosts {
		if len(h.key) > len(name) || (!h.prefix && len(h.key) != len(name)) {
			continue
		}
		if endsWithReversed(name, h.key) {
			return i
		}
	}
	return -1
}
