package router

import (
	"strings"
	"testing"
)

// request is one lookup and the Value it must return; want 0 means no match (test
// entries use Values from 1 up).
type request struct {
	method, host, path string
	want               int
}

func checkRequests(t *testing.T, r *Router, requests []request) {
	t.Helper()
	for _, q := range requests {
		got, ok := r.Match([]byte(q.method), []byte(q.host), []byte(q.path))
		switch {
		case q.want == 0 && ok:
			t.Errorf("Match(%q, %q, %q) = %d, want no match", q.method, q.host, q.path, got)
		case q.want != 0 && !ok:
			t.Errorf("Match(%q, %q, %q) = no match, want %d", q.method, q.host, q.path, q.want)
		case q.want != 0 && got != q.want:
			t.Errorf("Match(%q, %q, %q) = %d, want %d", q.method, q.host, q.path, got, q.want)
		}
	}
}

func paths(p ...string) []string { return p }

func TestMatch(t *testing.T) {
	tests := []struct {
		name     string
		entries  []Entry
		requests []request
	}{
		{
			name: "docs example: exact first, then the deepest prefix",
			entries: []Entry{
				{Paths: paths("/blog/foo/*"), Value: 1},
				{Paths: paths("/blog/foo/a/*"), Value: 2},
				{Paths: paths("/blog/foo/c/*"), Value: 3},
				{Paths: paths("/blog/foo/bar"), Value: 4},
			},
			requests: []request{
				{"GET", "", "/blog/foo/bar", 4},
				{"GET", "", "/blog/foo/a/b/c", 2},
				{"GET", "", "/blog/foo/c/d", 3},
				{"GET", "", "/blog/foo/gloo", 1},
				{"GET", "", "/blog/foo/bar/x", 1},
				{"GET", "", "/blog/foo/", 1},
				{"GET", "", "/blog/foo", 0},
				{"GET", "", "/blog/bar", 0},
			},
		},
		{
			name:    "prefix with a slash before the star needs the slash",
			entries: []Entry{{Paths: paths("/anything/*"), Value: 1}},
			requests: []request{
				{"GET", "", "/anything/", 1},
				{"GET", "", "/anything/a/b", 1},
				{"GET", "", "/anything", 0},
				{"GET", "", "/anythingelse", 0},
				{"GET", "", "/", 0},
			},
		},
		{
			name:    "prefix without a slash matches the bare prefix and longer names",
			entries: []Entry{{Paths: paths("/blog/bar*"), Value: 1}},
			requests: []request{
				{"GET", "", "/blog/bar", 1},
				{"GET", "", "/blog/bar/a", 1},
				{"GET", "", "/blog/barx", 1},
				{"GET", "", "/blog/ba", 0},
				{"GET", "", "/blog/baz", 0},
			},
		},
		{
			name:    "slash star matches every path",
			entries: []Entry{{Paths: paths("/*"), Value: 1}},
			requests: []request{
				{"GET", "", "/", 1},
				{"GET", "", "/a/b/c", 1},
				{"DELETE", "x.com", "/%00", 1},
				{"GET", "", "", 0},
				{"GET", "", "a", 0},
			},
		},
		{
			name: "exact path is case-sensitive and does not match longer paths",
			entries: []Entry{
				{Paths: paths("/hello"), Value: 1},
			},
			requests: []request{
				{"GET", "", "/hello", 1},
				{"GET", "", "/Hello", 0},
				{"GET", "", "/hello/", 0},
				{"GET", "", "/hell", 0},
				{"GET", "", "/hello?x=1", 0},
			},
		},
		{
			name: "colon is literal text",
			entries: []Entry{
				{Paths: paths("/user/:id"), Value: 1},
				{Paths: paths("/files/:name/*"), Value: 2},
			},
			requests: []request{
				{"GET", "", "/user/:id", 1},
				{"GET", "", "/user/john", 0},
				{"GET", "", "/files/:name/x", 2},
				{"GET", "", "/files/a/x", 0},
			},
		},
		{
			name: "exact beats a prefix of higher priority",
			entries: []Entry{
				{Paths: paths("/a*"), Priority: 100, Value: 1},
				{Paths: paths("/a"), Priority: -5, Value: 2},
			},
			requests: []request{
				{"GET", "", "/a", 2},
				{"GET", "", "/ab", 1},
			},
		},
		{
			name: "longer prefix beats a shorter one of higher priority",
			entries: []Entry{
				{Paths: paths("/api/*"), Priority: 100, Value: 1},
				{Paths: paths("/api/v1/*"), Value: 2},
			},
			requests: []request{
				{"GET", "", "/api/v1/users", 2},
				{"GET", "", "/api/v2/users", 1},
			},
		},
		{
			name: "same key: priority descending, ties in entry order",
			entries: []Entry{
				{Paths: paths("/p"), Priority: 1, Value: 1},
				{Paths: paths("/p"), Priority: 5, Value: 2},
				{Paths: paths("/p"), Priority: 5, Value: 3},
				{Paths: paths("/q/*"), Priority: -1, Value: 4},
				{Paths: paths("/q/*"), Value: 5},
				{Paths: paths("/q/*"), Value: 6},
			},
			requests: []request{
				{"GET", "", "/p", 2},
				{"GET", "", "/q/x", 5},
			},
		},
		{
			name: "priority among the entries whose method passes",
			entries: []Entry{
				{Paths: paths("/p"), Methods: []string{"POST"}, Priority: 9, Value: 1},
				{Paths: paths("/p"), Methods: []string{"GET", "PUT"}, Priority: 5, Value: 2},
				{Paths: paths("/p"), Priority: 1, Value: 3},
			},
			requests: []request{
				{"POST", "", "/p", 1},
				{"GET", "", "/p", 2},
				{"PUT", "", "/p", 2},
				{"DELETE", "", "/p", 3},
			},
		},
		{
			name: "methods are exact and case-sensitive; a failed method falls through to prefixes",
			entries: []Entry{
				{Paths: paths("/m"), Methods: []string{"GET"}, Value: 1},
				{Paths: paths("/m*"), Methods: []string{"POST"}, Value: 2},
				{Paths: paths("/*"), Methods: []string{"PURGE"}, Value: 3},
			},
			requests: []request{
				{"GET", "", "/m", 1},
				{"POST", "", "/m", 2},
				{"PURGE", "", "/m", 3},
				{"get", "", "/m", 0},
				{"GETX", "", "/m", 0},
				{"", "", "/m", 0},
				{"PUT", "", "/m", 0},
			},
		},
		{
			name: "an entry with several paths answers under each",
			entries: []Entry{
				{Paths: paths("/one", "/two/*", "/one"), Value: 7},
			},
			requests: []request{
				{"GET", "", "/one", 7},
				{"GET", "", "/two/x", 7},
				{"GET", "", "/three", 0},
			},
		},
		{
			name: "hosts: port, IPv6 literal, case and trailing dot are ignored",
			entries: []Entry{
				{Paths: paths("/*"), Hosts: []string{"Example.COM"}, Value: 1},
				{Paths: paths("/*"), Hosts: []string{"[::1]"}, Value: 2},
				{Paths: paths("/*"), Hosts: []string{"10.0.0.1"}, Value: 3},
			},
			requests: []request{
				{"GET", "example.com", "/", 1},
				{"GET", "EXAMPLE.com:8080", "/x", 1},
				{"GET", "example.com.", "/", 1},
				{"GET", "example.com.:80", "/", 1},
				{"GET", "example.com:", "/", 1},
				{"GET", "[::1]:8080", "/", 2},
				{"GET", "[::1]", "/", 2},
				{"GET", "10.0.0.1:443", "/", 3},
				{"GET", "example.co", "/", 0},
				{"GET", "xexample.com", "/", 0},
				{"GET", "example.com..", "/", 0},
				{"GET", "[::2]:8080", "/", 0},
				{"GET", "", "/", 0},
			},
		},
		{
			name: "wildcard host is a suffix match",
			entries: []Entry{
				{Paths: paths("/*"), Hosts: []string{"*.example.com"}, Value: 1},
				{Paths: paths("/*"), Hosts: []string{"*foo.org"}, Value: 2},
			},
			requests: []request{
				{"GET", "a.example.com", "/", 1},
				{"GET", "A.B.Example.Com:8443", "/", 1},
				{"GET", "example.com", "/", 0},
				{"GET", "aexample.com", "/", 0},
				{"GET", "foo.org", "/", 2},
				{"GET", "barfoo.org", "/", 2},
				{"GET", "oo.org", "/", 0},
			},
		},
		{
			name: "host star matches any host, even none",
			entries: []Entry{
				{Paths: paths("/s"), Hosts: []string{"*"}, Value: 1},
			},
			requests: []request{
				{"GET", "anything.test", "/s", 1},
				{"GET", "", "/s", 1},
				{"GET", "[::1]:1", "/s", 1},
				{"GET", "anything.test", "/t", 0},
			},
		},
		{
			name: "routes with hosts are tried before routes without, whatever the paths",
			entries: []Entry{
				{Paths: paths("/exact"), Value: 1},
				{Paths: paths("/*"), Hosts: []string{"api.test"}, Value: 2},
				{Paths: paths("/only-host"), Hosts: []string{"api.test"}, Methods: []string{"POST"}, Value: 3},
			},
			requests: []request{
				{"GET", "api.test", "/exact", 2},
				{"GET", "other.test", "/exact", 1},
				{"POST", "api.test", "/only-host", 3},
				{"GET", "other.test", "/only-host", 0},
			},
		},
		{
			name: "no route with hosts passing: the routes without hosts answer",
			entries: []Entry{
				{Paths: paths("/x"), Hosts: []string{"api.test"}, Methods: []string{"POST"}, Value: 1},
				{Paths: paths("/x"), Value: 2},
			},
			requests: []request{
				{"POST", "api.test", "/x", 1},
				{"GET", "api.test", "/x", 2},
				{"POST", "web.test", "/x", 2},
			},
		},
		{
			name: "host keys in order: exact host, longer wildcard, shorter wildcard, star",
			entries: []Entry{
				{Paths: paths("/exact"), Hosts: []string{"*"}, Value: 1},
				{Paths: paths("/exact", "/w/*"), Hosts: []string{"*.test"}, Priority: 50, Value: 2},
				{Paths: paths("/w/x/*"), Hosts: []string{"*.b.test"}, Value: 3},
				{Paths: paths("/*"), Hosts: []string{"a.b.test"}, Methods: []string{"GET"}, Value: 4},
			},
			requests: []request{
				// The exact host's "/*" wins over more specific paths under wildcards.
				{"GET", "a.b.test", "/exact", 4},
				{"GET", "a.b.test", "/w/x/y", 4},
				// Its method fails: the longest wildcard is next, then the shorter one.
				{"POST", "a.b.test", "/w/x/y", 3},
				{"POST", "a.b.test", "/w/y", 2},
				{"POST", "a.b.test", "/exact", 2},
				{"POST", "c.test", "/exact", 2},
				{"POST", "c.example", "/exact", 1},
				{"POST", "a.b.test", "/nothing", 0},
			},
		},
		{
			name: "an entry with several hosts answers under each",
			entries: []Entry{
				{Paths: paths("/"), Hosts: []string{"a.test", "*.b.test", "a.test"}, Value: 1},
			},
			requests: []request{
				{"GET", "a.test", "/", 1},
				{"GET", "x.b.test", "/", 1},
				{"GET", "b.test", "/", 0},
			},
		},
		{
			name:    "empty router matches nothing",
			entries: nil,
			requests: []request{
				{"GET", "", "/", 0},
				{"GET", "a.test", "/x", 0},
				{"", "", "", 0},
			},
		},
		{
			name: "radix edges split and shared",
			entries: []Entry{
				{Paths: paths("/abc"), Value: 1},
				{Paths: paths("/abd"), Value: 2},
				{Paths: paths("/ab*"), Value: 3},
				{Paths: paths("/a"), Value: 4},
				{Paths: paths("/abcdef*"), Value: 5},
				{Paths: paths("/b/*"), Value: 6},
			},
			requests: []request{
				{"GET", "", "/abc", 1},
				{"GET", "", "/abd", 2},
				{"GET", "", "/abe", 3},
				{"GET", "", "/ab", 3},
				{"GET", "", "/a", 4},
				{"GET", "", "/abcde", 3},
				{"GET", "", "/abcdefg", 5},
				{"GET", "", "/abcdef", 5},
				{"GET", "", "/b/", 6},
				{"GET", "", "/b", 0},
				{"GET", "", "/c", 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Build(tt.entries)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if r.Len() != len(tt.entries) {
				t.Errorf("Len() = %d, want %d", r.Len(), len(tt.entries))
			}
			checkRequests(t, r, tt.requests)
		})
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name    string
		entry   Entry
		wantErr string
	}{
		{"no paths", Entry{}, "entry 1: no paths"},
		{"empty path", Entry{Paths: paths("")}, `path "": must start with "/"`},
		{"relative path", Entry{Paths: paths("api/*")}, `path "api/*": must start with "/"`},
		{"star alone", Entry{Paths: paths("*")}, `path "*": must start with "/"`},
		{"star inside a segment", Entry{Paths: paths("/a*/b")}, `path "/a*/b": '*' is allowed only at the end of the path or at the start of a segment`},
		{"two stars", Entry{Paths: paths("/a**")}, `path "/a**": '*' is allowed only at the end`},
		{"star after a star segment", Entry{Paths: paths("/a/**/b")}, `path "/a/**/b": '*' is allowed only at the end`},
		{"bad second path", Entry{Paths: paths("/ok", "/x*y")}, `path "/x*y"`},
		{"empty host", Entry{Paths: paths("/"), Hosts: []string{""}}, `host "": must not be empty`},
		{"star in host", Entry{Paths: paths("/"), Hosts: []string{"a.*.com"}}, `host "a.*.com": '*' is allowed only as the first`},
		{"two stars in host", Entry{Paths: paths("/"), Hosts: []string{"**"}}, `host "**": '*' is allowed only as the first`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			valid := Entry{Paths: paths("/fine"), Hosts: []string{"*.fine.test"}}
			r, err := Build([]Entry{valid, tt.entry})
			if err == nil {
				t.Fatalf("Build succeeded (Len %d), want an error containing %q", r.Len(), tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Build error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestBuildAccepts(t *testing.T) {
	for _, p := range []string{"/", "/*", "/a", "/a*", "/a/*", "/user/:id", "/α/β*", "/a b", "/a/*/b", "/files/*name", "/a/*/b*"} {
		if _, err := Build([]Entry{{Paths: paths(p)}}); err != nil {
			t.Errorf("Build(path %q): %v", p, err)
		}
	}
	for _, h := range []string{"*", "*.a.test", "*a.test", "a.test", "A.TEST", "[::1]", "127.0.0.1"} {
		if _, err := Build([]Entry{{Paths: paths("/"), Hosts: []string{h}}}); err != nil {
			t.Errorf("Build(host %q): %v", h, err)
		}
	}
}

// TestBuildDoesNotRetainEntries guards the immutability promise: the caller may reuse
// its slices after Build.
func TestBuildDoesNotRetainEntries(t *testing.T) {
	methods := []string{"GET"}
	r, err := Build([]Entry{{Paths: paths("/x"), Methods: methods, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	methods[0] = "POST"
	checkRequests(t, r, []request{{"GET", "", "/x", 1}, {"POST", "", "/x", 0}})
}

// TestHostsAsCondition: with APISIX's radixtree_uri router a route's hosts are one more
// condition, so the path decides first (a longer prefix without hosts beats a shorter one
// with hosts), while by default (radixtree_host_uri) the routes with hosts are tried first.
func TestHostsAsCondition(t *testing.T) {
	entries := []Entry{
		{Paths: paths("/api/*"), Hosts: []string{"api.example.com"}, Value: 1},
		{Paths: paths("/api/v2/*"), Value: 2},
		{Paths: paths("/api/v2/*"), Hosts: []string{"*.example.org"}, Priority: 1, Value: 3},
		{Paths: paths("/any"), Hosts: []string{"*"}, Value: 4},
		{Paths: paths("/exact"), Hosts: []string{"Exact.Example.com"}, Value: 5},
	}
	byPath, err := BuildWith(entries, Options{HostsAsCondition: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, byPath, []request{
		{"GET", "api.example.com", "/api/v2/x", 2},
		{"GET", "api.example.com", "/api/v1", 1},
		{"GET", "API.EXAMPLE.COM:8080", "/api/v1", 1},
		{"GET", "api.example.com.", "/api/v1", 1},
		{"GET", "other.com", "/api/v1", 0},
		{"GET", "a.example.org", "/api/v2/x", 3},
		{"GET", "example.org", "/api/v2/x", 2},
		{"GET", "xexample.org", "/api/v2/x", 2},
		{"GET", "anything", "/any", 4},
		{"GET", "", "/any", 4},
		{"GET", "exact.example.com", "/exact", 5},
		{"GET", "x.exact.example.com", "/exact", 0},
		{"GET", "xact.example.com", "/exact", 0},
	})
	hostFirst, err := BuildWith(entries, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, hostFirst, []request{
		{"GET", "api.example.com", "/api/v2/x", 1},
		{"GET", "a.example.org", "/api/v2/x", 3},
		{"GET", "other.com", "/api/v2/x", 2},
	})
}

func BenchmarkMatchHostsAsCondition(b *testing.B) {
	var entries []Entry
	for i := range 1000 {
		entries = append(entries, Entry{Paths: paths("/api/" + strings.Repeat("x", i%7) + "/*"), Hosts: []string{"*.example.com", "api.example.org"}, Value: i + 1})
	}
	r, err := BuildWith(entries, Options{HostsAsCondition: true})
	if err != nil {
		b.Fatal(err)
	}
	method, host, path := []byte("GET"), []byte("api.example.org"), []byte("/api/xxx/y")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Match(method, host, path); !ok {
			b.Fatal("no match")
		}
	}
}

// TestMatchedPathAndHost: a lookup says which of the entry's paths and hosts matched, as
// the entry gave them, under every router. t/plugin/prometheus2.t TEST 8 and 12-15: route
// 9 with uris ["/foo*", "/bar*"] and hosts ["foo.com", "bar.com"] matches GET /foo1 with
// Host: foo.com under "/foo*" and "foo.com", GET /bar1 with Host: bar.com under "/bar*"
// and "bar.com".
func TestMatchedPathAndHost(t *testing.T) {
	entries := []Entry{
		{Paths: paths("/foo*", "/bar*"), Hosts: []string{"foo.com", "bar.com"}, Methods: []string{"GET"}, Value: 9},
		{Paths: paths("/w/*", "/w/exact"), Hosts: []string{"*.Example.com", "example.org"}, Value: 2},
		{Paths: paths("/user/:id", "/users"), Value: 3},
		{Paths: paths("/a/*/c", "/a/*"), Value: 4},
	}
	tests := []struct {
		method, host, path string
		want               Matched
		// onlyWith, when set, is the one set of options the request is for (a ":id"
		// segment is literal text without Options.Parameters).
		onlyWith *Options
	}{
		{"GET", "foo.com", "/foo1", Matched{9, "/foo*", "foo.com"}, nil},
		{"GET", "bar.com", "/bar1", Matched{9, "/bar*", "bar.com"}, nil},
		{"GET", "BAR.com:8080", "/foo/x", Matched{9, "/foo*", "bar.com"}, nil},
		{"GET", "a.b.example.COM", "/w/exact", Matched{2, "/w/exact", "*.Example.com"}, nil},
		{"GET", "a.example.com", "/w/other", Matched{2, "/w/*", "*.Example.com"}, nil},
		{"GET", "example.org", "/w/exact", Matched{2, "/w/exact", "example.org"}, nil},
		{"GET", "any", "/users", Matched{3, "/users", ""}, nil},
		{"GET", "any", "/user/7", Matched{3, "/user/:id", ""}, &Options{HostsAsCondition: true, Parameters: true}},
		{"GET", "", "/a/b/c", Matched{4, "/a/*/c", ""}, nil},
		{"GET", "", "/a/b/d", Matched{4, "/a/*", ""}, nil},
	}
	for _, opts := range []Options{{}, {HostsAsCondition: true}, {HostsAsCondition: true, Parameters: true}} {
		r, err := BuildWith(entries, opts)
		if err != nil {
			t.Fatal(err)
		}
		// With and Without keep what each candidate reports as Build does.
		grown, err := BuildWith(nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range entries {
			if grown, err = grown.With(e, i); err != nil {
				t.Fatal(err)
			}
		}
		for name, r := range map[string]*Router{"Build": r, "With": grown} {
			for _, tt := range tests {
				if tt.onlyWith != nil && *tt.onlyWith != opts {
					continue
				}
				got, ok := r.MatchCtx([]byte(tt.method), []byte(tt.host), []byte(tt.path), nil)
				if !ok || got != tt.want {
					t.Errorf("%+v %s: MatchCtx(%q, %q, %q) = %+v, %v; want %+v", opts, name, tt.method, tt.host, tt.path, got, ok, tt.want)
				}
			}
		}
	}
}
