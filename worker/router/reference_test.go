package router

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// referenceMatch is the router's specification written as a brute-force search over
// entries, sharing no code with the router: host keys in APISIX order (the exact host,
// then wildcard suffixes from the longest to the empty one), each answered by
// referencePath over the entries holding that key; then the entries without hosts.
func referenceMatch(entries []Entry, method, host, path string) (int, bool) {
	h := referenceHost(host)
	var subset []int
	for i, e := range entries {
		// A configured host starting with '*' is a wildcard, never an exact host.
		if !strings.HasPrefix(h, "*") && hasHostPattern(e, h) {
			subset = append(subset, i)
		}
	}
	if v, ok := referencePath(entries, subset, method, path); ok {
		return v, true
	}
	for l := len(h); l >= 0; l-- {
		subset = subset[:0]
		for i, e := range entries {
			if hasWildcardFor(e, h[len(h)-l:]) {
				subset = append(subset, i)
			}
		}
		if len(subset) == 0 {
			continue
		}
		if v, ok := referencePath(entries, subset, method, path); ok {
			return v, true
		}
	}
	subset = subset[:0]
	for i, e := range entries {
		if len(e.Hosts) == 0 {
			subset = append(subset, i)
		}
	}
	return referencePath(entries, subset, method, path)
}

func referenceHost(host string) string {
	if strings.HasPrefix(host, "[") {
		if end := strings.Index(host, "]"); end >= 0 {
			host = host[:end+1]
		}
	} else if name, _, found := strings.Cut(host, ":"); found {
		host = name
	}
	host = strings.TrimSuffix(host, ".")
	return asciiLower(host)
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// hasHostPattern reports whether e lists pattern; a pattern without '*' must not be
// empty because no configured host is.
func hasHostPattern(e Entry, pattern string) bool {
	if pattern == "" {
		return false
	}
	for _, h := range e.Hosts {
		if asciiLower(h) == pattern {
			return true
		}
	}
	return false
}

// referencePath tries, among the entries in subset, the exact path and then the stored
// prefixes from longest to shortest; within one key the best entry by (priority desc,
// original path length desc, entry order) among those allowing method wins.
func referencePath(entries []Entry, subset []int, method, path string) (int, bool) {
	if v, ok := referenceBest(entries, subset, method, path, false); ok {
		return v, true
	}
	for l := len(path); l >= 0; l-- {
		if v, ok := referenceBest(entries, subset, method, path[:l], true); ok {
			return v, true
		}
	}
	return 0, false
}

// referenceBest answers for one stored path: text itself, or text+"*" when prefix is set.
func referenceBest(entries []Entry, subset []int, method, text string, prefix bool) (int, bool) {
	best := -1
	for _, i := range subset {
		e := entries[i]
		if !hasStoredPath(e, text, prefix) {
			continue
		}
		if len(e.Methods) > 0 && !containsString(e.Methods, method) {
			continue
		}
		if best < 0 || e.Priority > entries[best].Priority {
			best = i
		}
		// Equal priority: the stored path is the same string, so its length ties too,
		// and the earlier entry (already in best) stays.
	}
	if best < 0 {
		return 0, false
	}
	return entries[best].Value, true
}

// hasWildcardFor reports whether e lists the wildcard "*"+suffix.
func hasWildcardFor(e Entry, suffix string) bool {
	for _, h := range e.Hosts {
		if len(h) == len(suffix)+1 && h[0] == '*' && asciiLower(h[1:]) == suffix {
			return true
		}
	}
	return false
}

func hasStoredPath(e Entry, text string, prefix bool) bool {
	for _, p := range e.Paths {
		if prefix && len(p) == len(text)+1 && p[len(text)] == '*' && p[:len(text)] == text {
			return true
		}
		if !prefix && p == text && !strings.HasSuffix(p, "*") {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fuzzEntries is a small table dense in overlaps: shared prefixes, exact and prefix keys on
// the same text, priority ties, method sets, and every kind of host pattern.
var fuzzEntries = []Entry{
	{Paths: paths("/"), Value: 1},
	{Paths: paths("/*"), Methods: []string{"GET"}, Value: 2},
	{Paths: paths("/a"), Value: 3},
	{Paths: paths("/a*"), Priority: 2, Value: 4},
	{Paths: paths("/a/*"), Methods: []string{"POST", "PUT"}, Value: 5},
	{Paths: paths("/a/*"), Priority: 1, Methods: []string{"PUT"}, Value: 6},
	{Paths: paths("/a/b"), Value: 7},
	{Paths: paths("/a/b*", "/ab"), Value: 8},
	{Paths: paths("/a/bc/*"), Methods: []string{"GET"}, Value: 9},
	{Paths: paths("/user/:id"), Value: 10},
	{Paths: paths("/α/*"), Value: 11},
	{Paths: paths("/a/b"), Methods: []string{"DELETE"}, Priority: 3, Value: 12},
	{Paths: paths("/*"), Hosts: []string{"Example.com"}, Methods: []string{"GET"}, Value: 13},
	{Paths: paths("/a/*"), Hosts: []string{"example.com", "*.example.com"}, Value: 14},
	{Paths: paths("/a/b"), Hosts: []string{"*.example.com"}, Methods: []string{"POST"}, Value: 15},
	{Paths: paths("/b*"), Hosts: []string{"*example.com"}, Value: 16},
	{Paths: paths("/a"), Hosts: []string{"*"}, Methods: []string{"PATCH"}, Value: 17},
	{Paths: paths("/c/*"), Hosts: []string{"*.b.example.com"}, Value: 18},
	{Paths: paths("/*"), Hosts: []string{"[::1]", "a.B.example.COM"}, Methods: []string{"HEAD"}, Value: 19},
	{Paths: paths("/c/d"), Hosts: []string{"*.com"}, Priority: -1, Value: 20},
	{Paths: paths("/c/d"), Hosts: []string{"*.com"}, Priority: -1, Value: 21},
}

func checkAgainstReference(t *testing.T, r *Router, entries []Entry, method, host, path string) {
	t.Helper()
	got, gotOK := r.Match([]byte(method), []byte(host), []byte(path))
	want, wantOK := referenceMatch(entries, method, host, path)
	if got != want || gotOK != wantOK {
		t.Fatalf("Match(%q, %q, %q) = %d, %v; reference says %d, %v", method, host, path, got, gotOK, want, wantOK)
	}
}

func FuzzMatch(f *testing.F) {
	r, err := Build(fuzzEntries)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][3]string{
		{"GET", "", "/"},
		{"PUT", "x.example.com:80", "/a/b/c"},
		{"POST", "A.b.Example.com.", "/a/b"},
		{"HEAD", "[::1]:9", "/c/d"},
		{"DELETE", "fooexample.com", "/bar"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, method, host, path string) {
		checkAgainstReference(t, r, fuzzEntries, method, host, path)
	})
}

// TestMatchAgreesWithReference builds many small random tables from a fixed seed, so
// that radix edge splits and fallback links are exercised in shapes the fixed fuzz table
// does not have.
func TestMatchAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	segments := []string{"a", "b", "ab", "abc", "x", ":id", "", "α"}
	hostParts := []string{"a", "b", "example", "com", "Ex", "x"}
	methods := []string{"GET", "POST", "PUT"}
	randomPath := func() string {
		var sb strings.Builder
		for range rng.IntN(4) {
			sb.WriteString("/" + pick(segments))
		}
		if sb.Len() == 0 || rng.IntN(3) == 0 {
			sb.WriteString("/")
		}
		return sb.String()
	}
	randomHost := func() string {
		var parts []string
		for range 1 + rng.IntN(3) {
			parts = append(parts, pick(hostParts))
		}
		return strings.Join(parts, ".")
	}
	for range 300 {
		entries := make([]Entry, rng.IntN(20))
		for i := range entries {
			e := Entry{Priority: rng.IntN(3) - 1, Value: i + 1}
			for range 1 + rng.IntN(2) {
				p := randomPath()
				if rng.IntN(2) == 0 {
					p += "*"
				}
				e.Paths = append(e.Paths, p)
			}
			for range rng.IntN(3) {
				e.Methods = append(e.Methods, pick(methods))
			}
			switch rng.IntN(4) {
			case 1:
				e.Hosts = []string{randomHost()}
			case 2:
				e.Hosts = []string{"*." + randomHost(), randomHost()}
			case 3:
				e.Hosts = []string{pick([]string{"*", "*x", "*.com", "*e.com"})}
			}
			entries[i] = e
		}
		r, err := Build(entries)
		if err != nil {
			t.Fatalf("Build(%+v): %v", entries, err)
		}
		for range 50 {
			host := randomHost()
			if rng.IntN(4) == 0 {
				host += fmt.Sprintf(":%d", rng.IntN(100))
			}
			checkAgainstReference(t, r, entries, pick(methods), host, randomPath()+pick([]string{"", "x", "/y"}))
		}
	}
}
