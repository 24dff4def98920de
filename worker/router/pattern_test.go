package router

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestSplitPattern(t *testing.T) {
	tests := []struct {
		path       string
		parameters bool
		prefix     string
		tokens     []token
	}{
		{"/hello", false, "/hello", nil},
		{"/api/*", false, "/api/*", nil},
		{"/user/:id", false, "/user/:id", nil},
		{"/user/:id", true, "/user/", []token{{kind: param}}},
		{"/user/:id/", true, "/user/", []token{{kind: param}, {kind: literal, text: "/"}}},
		{"/user/:user/*action", true, "/user/", []token{{kind: param}, {kind: literal, text: "/"}, {kind: catchAll}}},
		{"/:a/b/:c", true, "/", []token{{kind: param}, {kind: literal, text: "/b/"}, {kind: param}}},
		{"/files/*name", false, "/files/", []token{{kind: catchAll}}},
		{"/a/*/b", false, "/a/", []token{{kind: catchAll}, {kind: literal, text: "/b"}}},
		{"/a/*/b*", false, "/a/", []token{{kind: catchAll}, {kind: literal, text: "/b"}, {kind: catchAll}}},
		{"/a/*/b/:id", false, "/a/", []token{{kind: catchAll}, {kind: literal, text: "/b/:id"}}},
		{"/x:y/:z", true, "/x:y/", []token{{kind: param}}},
		{"/:", true, "/", []token{{kind: param}}},
	}
	for _, tt := range tests {
		prefix, tokens := splitPattern(tt.path, tt.parameters)
		if prefix != tt.prefix || !slices.Equal(tokens, tt.tokens) {
			t.Errorf("splitPattern(%q, %v) = %q, %v; want %q, %v", tt.path, tt.parameters, prefix, tokens, tt.prefix, tt.tokens)
		}
	}
}

func TestParameters(t *testing.T) {
	entries := []Entry{
		{Paths: paths("/user/:user"), Value: 1},
		{Paths: paths("/user/:user/*action"), Value: 2},
		{Paths: paths("/user/admin"), Value: 3},
		{Paths: paths("/blog/:y/:m/post"), Methods: []string{"GET"}, Value: 4},
		{Paths: paths("/blog/*"), Value: 5},
		{Paths: paths("/files/*path"), Value: 6},
		{Paths: paths("/a/*/z"), Value: 7},
		{Paths: paths("/v1.0/:id"), Value: 8},
		{Paths: paths("/t/:id", "/t/:id/edit"), Hosts: []string{"*.test"}, Value: 9},
	}
	withParams := []request{
		{"GET", "", "/user/john", 1},
		{"GET", "", "/user/admin", 3},
		{"GET", "", "/user/", 0},
		{"GET", "", "/user", 0},
		{"GET", "", "/user/john/", 2},
		{"GET", "", "/user/john/profile/edit", 2},
		{"GET", "", "/user//x", 0},
		{"GET", "", "/blog/2024/05/post", 4},
		{"POST", "", "/blog/2024/05/post", 5},
		{"GET", "", "/blog/2024/post", 5},
		{"GET", "", "/files/", 6},
		{"GET", "", "/files/a/b.txt", 6},
		{"GET", "", "/a/z", 0},
		{"GET", "", "/a//z", 7},
		{"GET", "", "/a/b/c/z", 7},
		{"GET", "", "/a/b/c/zz", 0},
		{"GET", "", "/v1.0/7", 8},
		{"GET", "", "/v1x0/7", 0},
		{"GET", "x.test", "/t/1", 9},
		{"GET", "x.test", "/t/1/edit", 9},
		{"GET", "x.test", "/t/1/view", 0},
	}
	r, err := BuildWith(entries, Options{Parameters: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, r, withParams)

	// Without Parameters, ':' is literal text; '*' segments still match anything.
	r, err = Build(entries)
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, r, []request{
		{"GET", "", "/user/:user", 1},
		{"GET", "", "/user/john", 0},
		{"GET", "", "/user/:user/x/y", 2},
		{"GET", "", "/user/john/x", 0},
		{"GET", "", "/files/a/b.txt", 6},
		{"GET", "", "/a/b/c/z", 7},
		{"GET", "", "/blog/2024/05/post", 5},
	})
}

// TestParameterPriority: a parameter route and a prefix route share the stored key
// "/user/"; priority orders them, then the longer original path.
func TestParameterPriority(t *testing.T) {
	r, err := BuildWith([]Entry{
		{Paths: paths("/user/*"), Value: 1},
		{Paths: paths("/user/:id"), Value: 2},
		{Paths: paths("/user/:id/x"), Priority: -1, Value: 3},
		{Paths: paths("/user/*"), Priority: 1, Methods: []string{"POST"}, Value: 4},
	}, Options{Parameters: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, r, []request{
		{"GET", "", "/user/john", 2},
		{"GET", "", "/user/john/x", 1},
		{"POST", "", "/user/john", 4},
		{"GET", "", "/user/", 1},
	})
}

// patternRegexp is the reference for matchTokens: lua-resty-radixtree's compare_param
// pattern (':' segment → [^/]+, '*' segment → any text), with literals quoted, anchored.
func patternRegexp(path string, parameters bool) *regexp.Regexp {
	var sb strings.Builder
	sb.WriteString(`^`)
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			sb.WriteString("/")
		}
		switch {
		case strings.HasPrefix(seg, "*"):
			sb.WriteString(`(?s:.*)`)
		case parameters && strings.HasPrefix(seg, ":"):
			sb.WriteString(`[^/]+`)
		case strings.HasSuffix(seg, "*") && i == strings.Count(path, "/"):
			sb.WriteString(regexp.QuoteMeta(seg[:len(seg)-1]) + `(?s:.*)`)
		default:
			sb.WriteString(regexp.QuoteMeta(seg))
		}
	}
	sb.WriteString(`$`)
	return regexp.MustCompile(sb.String())
}

func TestMatchTokensAgreesWithRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	patternSegs := []string{"a", "b", ":id", "*", "*rest", ":x", "ab", ""}
	pathSegs := []string{"a", "b", "ab", "", "x", "a/b"}
	for range 2000 {
		var p strings.Builder
		for range 1 + rng.IntN(4) {
			p.WriteString("/" + pick(patternSegs))
		}
		pattern := p.String()
		parameters := rng.IntN(2) == 0
		prefix, tokens := splitPattern(pattern, parameters)
		if tokens == nil {
			continue
		}
		re := patternRegexp(pattern, parameters)
		for range 20 {
			var q strings.Builder
			for range rng.IntN(5) {
				q.WriteString("/" + pick(pathSegs))
			}
			path := q.String()
			got := strings.HasPrefix(path, prefix) && matchTokens(tokens, []byte(path[len(prefix):]))
			if want := re.MatchString(path); got != want {
				t.Fatalf("pattern %q (parameters %v) on %q: matchTokens %v, regexp %s says %v", pattern, parameters, path, got, re, want)
			}
		}
	}
}

func TestParametersAllocateNothing(t *testing.T) {
	r, err := BuildWith([]Entry{
		{Paths: paths("/user/:user/*action"), Value: 1},
		{Paths: paths("/a/*/b/:c"), Value: 2},
	}, Options{Parameters: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/user/john/a/b", "/a/x/y/b/z", "/a/x/y/c/z"} {
		method, host, p := []byte("GET"), []byte("h"), []byte(path)
		if allocs := testing.AllocsPerRun(100, func() { r.Match(method, host, p) }); allocs != 0 {
			t.Errorf("Match(%q): %v allocations, want 0", path, allocs)
		}
	}
}
