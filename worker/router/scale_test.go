package router

import (
	"fmt"
	"sync"
	"testing"
)

// entries10k is a 10,000-route table shaped like a large gateway: exact API paths, prefix
// services, per-tenant exact hosts and wildcard hosts. Values are the entry indexes + 1.
func entries10k() []Entry {
	const (
		exact    = 4000
		prefix   = 3000
		hostName = 1500
		wildcard = 1500
	)
	entries := make([]Entry, 0, exact+prefix+hostName+wildcard)
	add := func(e Entry) {
		e.Value = len(entries) + 1
		entries = append(entries, e)
	}
	for i := range exact {
		e := Entry{Paths: paths(fmt.Sprintf("/svc/%d/items", i))}
		if i%2 == 0 {
			e.Methods = []string{"GET", "HEAD"}
		}
		add(e)
	}
	for i := range prefix {
		add(Entry{Paths: paths(fmt.Sprintf("/api/v%d/*", i)), Priority: i % 3})
	}
	for i := range hostName {
		add(Entry{Paths: paths("/app/*", "/health"), Hosts: []string{fmt.Sprintf("h%d.example.com", i)}})
	}
	for i := range wildcard {
		add(Entry{Paths: paths("/v1/*"), Hosts: []string{fmt.Sprintf("*.t%d.example.org", i)}, Methods: []string{"GET"}})
	}
	return entries
}

// requests10k covers hits and misses of every kind against entries10k.
var requests10k = []request{
	{"GET", "", "/svc/0/items", 1},
	{"GET", "whatever.test", "/svc/3998/items", 3999},
	{"POST", "", "/svc/3999/items", 4000},
	{"POST", "", "/svc/3998/items", 0},
	{"GET", "", "/api/v0/users/1", 4001},
	{"GET", "", "/api/v2999/a/b/c", 7000},
	{"GET", "", "/api/v29990/a", 0},
	{"GET", "H1499.example.com:8080", "/app/index.html", 8500},
	{"GET", "h0.example.com", "/health", 7001},
	{"GET", "h0.example.com", "/svc/1/items", 2},
	{"GET", "x.T1499.example.org", "/v1/orders", 10000},
	{"GET", "a.b.t0.example.org.", "/v1/", 8501},
	{"POST", "a.t0.example.org", "/v1/x", 0},
	{"GET", "t0.example.org", "/v1/x", 0},
	{"GET", "unknown.test", "/nothing/here", 0},
	{"GET", "", "/", 0},
}

func build10k(tb testing.TB) *Router {
	tb.Helper()
	r, err := Build(entries10k())
	if err != nil {
		tb.Fatalf("Build: %v", err)
	}
	return r
}

func TestMatch10k(t *testing.T) {
	r := build10k(t)
	if r.Len() != 10000 {
		t.Fatalf("Len() = %d, want 10000", r.Len())
	}
	checkRequests(t, r, requests10k)
}

func TestMatchAllocatesNothing(t *testing.T) {
	r := build10k(t)
	for _, q := range requests10k {
		method, host, path := []byte(q.method), []byte(q.host), []byte(q.path)
		allocs := testing.AllocsPerRun(100, func() {
			r.Match(method, host, path)
		})
		if allocs != 0 {
			t.Errorf("Match(%q, %q, %q): %v allocations, want 0", q.method, q.host, q.path, allocs)
		}
	}
}

// TestMatchConcurrent shares one Router between goroutines, as a worker does; under -race
// it also proves that Match never writes to the Router.
func TestMatchConcurrent(t *testing.T) {
	r := build10k(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for _, q := range requests10k {
					got, ok := r.Match([]byte(q.method), []byte(q.host), []byte(q.path))
					if ok != (q.want != 0) || (ok && got != q.want) {
						t.Errorf("Match(%q, %q, %q) = %d, %v, want %d", q.method, q.host, q.path, got, ok, q.want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// benchRequests turns n generated lookups into byte slices up front so that the loop
// measures Match alone, and varies the key so that one cached path does not flatter it.
func benchRequests(n int, host func(i int) string, path func(i int) string) [][3][]byte {
	out := make([][3][]byte, n)
	for i := range out {
		out[i] = [3][]byte{[]byte("GET"), []byte(host(i)), []byte(path(i))}
	}
	return out
}

func runMatchBenchmark(b *testing.B, requests [][3][]byte, wantOK bool) {
	r := build10k(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q := requests[i%len(requests)]
		if _, ok := r.Match(q[0], q[1], q[2]); ok != wantOK {
			b.Fatalf("Match(%q, %q, %q) ok = %v, want %v", q[0], q[1], q[2], ok, wantOK)
		}
	}
}

func BenchmarkMatch10kExact(b *testing.B) {
	requests := benchRequests(1024,
		func(int) string { return "gw.example.net" },
		func(i int) string { return fmt.Sprintf("/svc/%d/items", i*3%4000) })
	runMatchBenchmark(b, requests, true)
}

func BenchmarkMatch10kPrefix(b *testing.B) {
	requests := benchRequests(1024,
		func(int) string { return "gw.example.net" },
		func(i int) string { return fmt.Sprintf("/api/v%d/users/%d/orders", i*3%3000, i) })
	runMatchBenchmark(b, requests, true)
}

func BenchmarkMatch10kHostWildcard(b *testing.B) {
	requests := benchRequests(1024,
		func(i int) string { return fmt.Sprintf("Tenant.t%d.example.org:443", i*3%1500) },
		func(i int) string { return fmt.Sprintf("/v1/orders/%d", i) })
	runMatchBenchmark(b, requests, true)
}

func BenchmarkMatch10kMiss(b *testing.B) {
	requests := benchRequests(1024,
		func(i int) string { return fmt.Sprintf("n%d.example.com", i) },
		func(i int) string { return fmt.Sprintf("/svc/%d/other", i) })
	runMatchBenchmark(b, requests, false)
}

func BenchmarkBuild10k(b *testing.B) {
	entries := entries10k()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(entries); err != nil {
			b.Fatal(err)
		}
	}
}
