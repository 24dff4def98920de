package router

import (
	"encoding/json"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"gw/conf"
	"gw/plugins/vars"
)

// FuzzBuildAndMatch builds a router from a fuzzed table of routes (paths, hosts, methods,
// priority, remote_addrs, vars) and matches a fuzzed request against it. Build must fail
// exactly for the tables its documentation says it refuses, and never for a route the
// Admin API accepts; Match and MatchCtx must never panic and must agree with
// referenceMatchAll, a brute-force search that also covers patterns and conditions.
//
// The table is one route per line, fields separated by '|':
//
//	paths|hosts|methods|priority|remote_addrs|vars
//
// with the lists separated by ',' and vars, the rest of the line, as JSON.
func FuzzBuildAndMatch(f *testing.F) {
	type seed struct {
		table                                   string
		parameters                              bool
		method, host, path, query, header, peer string
	}
	for _, s := range []seed{
		{"/a|||||\n/a*|||2||\n/a/*||POST,PUT|||", false, "PUT", "", "/a/b", "", "", "127.0.0.1"},
		{"/user/:id|||||\n/user/*|||||", true, "GET", "", "/user/john", "", "", "127.0.0.1"},
		{"/*|Example.com|GET|||\n/a/*|example.com,*.example.com||||\n/b*|*example.com||||\n/a|*|PATCH|||",
			false, "GET", "x.Example.com.:80", "/a/b", "", "", "::1"},
		{"/a/*/b|||||\n/a/*x/c*|||||\n/files/*name|||||", false, "GET", "", "/a/x/y/b", "", "", "10.0.0.1"},
		{"/api/*|||0|10.0.0.0/8||\n/api/*|||0||[[\"arg_a\",\"==\",\"1\"]]\n/api/*|||-1|||", false,
			"GET", "h", "/api/x", "a=1", "", "10.1.2.3"},
		{"/v|||||[\"OR\",[\"http_x_user\",\"~~\",\"^adm\"],[\"cookie_s\",\"==\",\"1\"]]\n/v|||||[[\"host\",\"==\",\"h\"],[\"uri\",\"!\",\"~*\",\"X\"]]",
			false, "GET", "H", "/v", "", "X-User: admin\nCookie: s=1", "192.0.2.1"},
		{"/c/d|*.com||-1||\n/c/d|*.com||-1||\n/c/*|*.b.example.com||||\n/*|[::1],a.B.example.COM|HEAD|||",
			false, "HEAD", "[::1]:9", "/c/d", "", "", "::1"},
		{"/*a/*b/*c/*d/*e/z|||||", false, "GET", "", strings.Repeat("/", 200), "", "", "127.0.0.1"},
		{"a|||||\n/a*b|||||\n/a||||| \n/x|*a*||||", false, "GET", "", "/", "", "", ""},
	} {
		f.Add(s.table, s.parameters, s.method, s.host, s.path, s.query, s.header, s.peer)
	}
	f.Fuzz(func(t *testing.T, table string, parameters bool, method, host, path, query, header, peer string) {
		entries := parseFuzzTable(table)
		r, err := BuildWith(entries, Options{Parameters: parameters})
		for i, e := range entries {
			reason := referenceInvalid(e)
			if reason == "" && err != nil {
				continue // another entry is the invalid one; checked below
			}
			if reason != "" && err == nil {
				t.Fatalf("Build accepted entry %d %+v, which %s", i, e, reason)
			}
			if reason != "" && adminAccepts(e) {
				t.Fatalf("the Admin API accepts entry %d %+v, which the router refuses: %s", i, e, reason)
			}
		}
		if err != nil {
			valid := true
			for _, e := range entries {
				valid = valid && referenceInvalid(e) == ""
			}
			if valid {
				t.Fatalf("Build refused a valid table %+v: %v", entries, err)
			}
			return
		}

		req := fuzzRequest(method, host, path, query, header, peer)
		m, gotOK := r.MatchCtx([]byte(method), []byte(host), []byte(path), req)
		got := m.Value
		want, wantOK := referenceMatchAll(entries, parameters, method, host, path, func(e *Entry) bool {
			return referenceAdmits(e, req)
		})
		if got != want || gotOK != wantOK {
			t.Fatalf("MatchCtx(%q, %q, %q) = %d, %v; the reference says %d, %v\ntable %+v",
				method, host, path, got, gotOK, want, wantOK, entries)
		}
		if gotOK {
			checkMatched(t, entries[got-1], m, Options{Parameters: parameters}, method, host, path, req)
		}
		// Without a request, no entry with a condition may match.
		got, gotOK = r.Match([]byte(method), []byte(host), []byte(path))
		want, wantOK = referenceMatchAll(entries, parameters, method, host, path, func(e *Entry) bool {
			return len(e.RemoteAddrs) == 0 && e.Vars == nil
		})
		if got != want || gotOK != wantOK {
			t.Fatalf("Match(%q, %q, %q) = %d, %v; the reference says %d, %v\ntable %+v",
				method, host, path, got, gotOK, want, wantOK, entries)
		}
	})
}

// checkMatched checks what MatchCtx said of the entry e it matched: m.Path is one of e's
// paths and m.Host one of its hosts ("" when it has none), and e with that path and host
// alone matches the request the same way.
func checkMatched(t *testing.T, e Entry, m Matched, opts Options, method, host, path string, req *fasthttp.RequestCtx) {
	t.Helper()
	if !slices.Contains(e.Paths, m.Path) || (m.Host == "") != (len(e.Hosts) == 0) || (m.Host != "" && !slices.Contains(e.Hosts, m.Host)) {
		t.Fatalf("MatchCtx(%q, %q, %q) = %+v: not a path and host of the entry %+v", method, host, path, m, e)
	}
	alone := e
	alone.Paths = []string{m.Path}
	if m.Host != "" {
		alone.Hosts = []string{m.Host}
	}
	r, err := BuildWith([]Entry{alone}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again, ok := r.MatchCtx([]byte(method), []byte(host), []byte(path), req); !ok || again != m {
		t.Fatalf("MatchCtx(%q, %q, %q) = %+v, but the entry with that path and host alone gives %+v, %v", method, host, path, m, again, ok)
	}
}

// parseFuzzTable reads the table format of FuzzBuildAndMatch. Values that do not parse
// (a priority, an address, vars) are left out, so that most inputs make a table.
func parseFuzzTable(text string) []Entry {
	const maxEntries = 16
	var entries []Entry
	for i, line := range strings.SplitN(text, "\n", maxEntries) {
		fields := strings.SplitN(line, "|", 6)
		for len(fields) < 6 {
			fields = append(fields, "")
		}
		e := Entry{Value: i + 1}
		e.Paths = splitList(fields[0])
		e.Hosts = splitList(fields[1])
		e.Methods = splitList(fields[2])
		e.Priority, _ = strconv.Atoi(fields[3])
		for _, s := range splitList(fields[4]) {
			if p, err := conf.ParseAddrOrPrefix(s); err == nil {
				e.RemoteAddrs = append(e.RemoteAddrs, p)
			}
		}
		if vars, err := conf.ParseVars(json.RawMessage(fields[5])); err == nil {
			e.Vars = vars
		}
		entries = append(entries, e)
	}
	return entries
}

// splitList splits a ',' list; an empty field is an empty list.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// referenceInvalid says why Build must refuse e, as its documentation words the rules,
// or "" when e is valid.
func referenceInvalid(e Entry) string {
	if len(e.Paths) == 0 {
		return "has no paths"
	}
	for _, p := range e.Paths {
		if !strings.HasPrefix(p, "/") {
			return "has a path not starting with /"
		}
		segments := strings.Split(p, "/")
		for i, segment := range segments {
			for k := 1; k < len(segment); k++ {
				if segment[k] == '*' && !(i == len(segments)-1 && k == len(segment)-1) {
					return "has a '*' inside a segment, not at the path's end"
				}
			}
		}
	}
	for _, h := range e.Hosts {
		if h == "" {
			return "has an empty host"
		}
		if strings.Contains(h[1:], "*") {
			return "has a host with '*' after its start"
		}
	}
	return ""
}

// adminAccepts reports whether conf.DecodeRoute accepts a route with e's paths, hosts and
// methods: what the Admin API stores, a worker must be able to build.
func adminAccepts(e Entry) bool {
	route := map[string]any{"uris": e.Paths, "plugins": map[string]any{}}
	if len(e.Hosts) > 0 {
		route["hosts"] = e.Hosts
	}
	if len(e.Methods) > 0 {
		route["methods"] = e.Methods
	}
	body, err := json.Marshal(route)
	if err != nil {
		return false
	}
	_, err = conf.DecodeRoute(body)
	return err == nil
}

// fuzzRequest builds the request MatchCtx checks conditions against: header is "Name:
// value" lines, peer an address (127.0.0.1 when it does not parse).
func fuzzRequest(method, host, path, query, header, peer string) *fasthttp.RequestCtx {
	addr, err := netip.ParseAddr(peer)
	if err != nil || addr.Zone() != "" {
		addr = netip.MustParseAddr("127.0.0.1")
	}
	ctx := &fasthttp.RequestCtx{}
	remote := &net.TCPAddr{IP: addr.AsSlice(), Port: 40000}
	ctx.Init2(addrConn{local: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9080}, remote: remote}, quietLogger{}, true)
	ctx.Request.Header.SetMethod(method)
	uri := path
	if query != "" {
		uri += "?" + query
	}
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost(host)
	for _, line := range strings.Split(header, "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && name != "" {
			ctx.Request.Header.Add(name, strings.TrimSpace(value))
		}
	}
	return ctx
}

// referenceAdmits checks e's conditions against req. remote_addrs is checked here
// independently; the vars expression is evaluated by the router's own evalExpr, whose
// operators conditions_test.go checks case by case: what this reference adds is which
// entry is asked, in which order.
func referenceAdmits(e *Entry, req *fasthttp.RequestCtx) bool {
	if len(e.RemoteAddrs) > 0 {
		peer, _ := netip.AddrFromSlice(req.RemoteAddr().(*net.TCPAddr).IP)
		found := false
		for _, p := range e.RemoteAddrs {
			found = found || p.Contains(peer.Unmap())
		}
		if !found {
			return false
		}
	}
	return e.Vars == nil || evalExpr(e.Vars, &vars.Request{HTTP: req})
}

// storedPath is where a path of an entry sits in the reference: under key, as an exact or
// a prefix key, and for a path with wildcard or parameter segments with a pattern the
// whole request path must match.
type storedPath struct {
	key     string
	prefix  bool
	pattern *regexp.Regexp
}

// referenceStore places p the way the package documentation says: a path with a wildcard
// segment before its end ("/a/*/b") or, with parameters, a parameter segment, goes under
// the literal text before that segment; a final '*' makes a prefix key; anything else is
// an exact key.
func referenceStore(p string, parameters bool) storedPath {
	segments := strings.Split(p, "/")
	offset := 0
	for i, segment := range segments {
		wildcard := strings.HasPrefix(segment, "*") && !(i == len(segments)-1 && segment == "*")
		if i > 0 && (wildcard || (parameters && strings.HasPrefix(segment, ":"))) {
			return storedPath{key: p[:offset], prefix: true, pattern: bytePattern(p, parameters)}
		}
		offset += len(segment) + 1
	}
	if strings.HasSuffix(p, "*") {
		return storedPath{key: p[:len(p)-1], prefix: true}
	}
	return storedPath{key: p}
}

// bytePattern is patternRegexp over widened text (see widen), so that paths which are
// not UTF-8 compare byte by byte, as the router does.
func bytePattern(path string, parameters bool) *regexp.Regexp {
	slash := widen("/")
	var sb strings.Builder
	sb.WriteString(`^`)
	segments := strings.Split(path, "/")
	for i, seg := range segments {
		if i > 0 {
			sb.WriteString(slash)
		}
		switch {
		case strings.HasPrefix(seg, "*"):
			sb.WriteString(`(?s:.*)`)
		case parameters && strings.HasPrefix(seg, ":"):
			sb.WriteString(`[^` + slash + `]+`)
		case strings.HasSuffix(seg, "*") && i == len(segments)-1:
			sb.WriteString(regexp.QuoteMeta(widen(seg[:len(seg)-1])) + `(?s:.*)`)
		default:
			sb.WriteString(regexp.QuoteMeta(widen(seg)))
		}
	}
	sb.WriteString(`$`)
	return regexp.MustCompile(sb.String())
}

// widen maps each byte to its own rune above U+00FF, none of which is special to regexp.
func widen(s string) string {
	runes := make([]rune, len(s))
	for i := range len(s) {
		runes[i] = 0x100 + rune(s[i])
	}
	return string(runes)
}

// referenceMatchAll is referenceMatch extended to patterns and conditions: the host
// groups in APISIX order, and within a group the exact path and then every prefix of
// the path from the longest; at the first key with a candidate that allows the method,
// matches the pattern and passes admits, the best such candidate by (priority desc,
// original path length desc, entry order) wins.
func referenceMatchAll(entries []Entry, parameters bool, method, host, path string, admits func(*Entry) bool) (int, bool) {
	stored := make([][]storedPath, len(entries))
	for i, e := range entries {
		for _, p := range e.Paths {
			stored[i] = append(stored[i], referenceStore(p, parameters))
		}
	}
	try := func(subset []int) (int, bool) {
		return referenceGroup(entries, stored, subset, method, path, admits)
	}
	h := referenceHost(host)
	var subset []int
	for i, e := range entries {
		if !strings.HasPrefix(h, "*") && hasHostPattern(e, h) {
			subset = append(subset, i)
		}
	}
	if v, ok := try(subset); ok {
		return v, true
	}
	for l := len(h); l >= 0; l-- {
		subset = subset[:0]
		for i, e := range entries {
			if hasWildcardFor(e, h[len(h)-l:]) {
				subset = append(subset, i)
			}
		}
		if v, ok := try(subset); ok {
			return v, true
		}
	}
	subset = subset[:0]
	for i, e := range entries {
		if len(e.Hosts) == 0 {
			subset = append(subset, i)
		}
	}
	return try(subset)
}

func referenceGroup(entries []Entry, stored [][]storedPath, subset []int, method, path string, admits func(*Entry) bool) (int, bool) {
	wide := ""
	best := func(key string, prefix bool) (int, bool) {
		found, bestPriority, bestLen := -1, 0, 0
		for _, i := range subset {
			e := &entries[i]
			if len(e.Methods) > 0 && !containsString(e.Methods, method) {
				continue
			}
			for j, sp := range stored[i] {
				if sp.key != key || sp.prefix != prefix {
					continue
				}
				if sp.pattern != nil {
					if wide == "" {
						wide = widen(path)
					}
					if !sp.pattern.MatchString(wide) {
						continue
					}
				}
				if !admits(e) {
					continue
				}
				pathLen := len(e.Paths[j])
				// Entries are visited in order, so an equal one found later never wins.
				if found < 0 || e.Priority > bestPriority || (e.Priority == bestPriority && pathLen > bestLen) {
					found, bestPriority, bestLen = i, e.Priority, pathLen
				}
			}
		}
		if found < 0 {
			return 0, false
		}
		return entries[found].Value, true
	}
	if v, ok := best(path, false); ok {
		return v, true
	}
	for l := len(path); l >= 0; l-- {
		if v, ok := best(path[:l], true); ok {
			return v, true
		}
	}
	return 0, false
}

// BenchmarkMatchManyCatchAlls matches a path of 4,000 slashes against a pattern of seven
// catch-alls that fails only at its last byte: exponential work before matchTokens placed
// each run at its leftmost match.
func BenchmarkMatchManyCatchAlls(b *testing.B) {
	r, err := Build([]Entry{{Paths: []string{"/*a/*b/*c/*d/*e/*f/*g/z"}, Value: 1}})
	if err != nil {
		b.Fatal(err)
	}
	method, host, path := []byte("GET"), []byte("h"), []byte(strings.Repeat("/", 4000))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Match(method, host, path); ok {
			b.Fatal("matched")
		}
	}
}
