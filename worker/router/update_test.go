package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// liveEntry is an entry a test router holds, with the order it was placed at.
type liveEntry struct {
	e     Entry
	order int
}

// built is what Build makes of the live entries, in their orders: what With and Without
// must equal.
func built(t *testing.T, live []liveEntry, opts Options) *Router {
	t.Helper()
	sorted := slices.Clone(live)
	slices.SortFunc(sorted, func(a, b liveEntry) int { return a.order - b.order })
	entries := make([]Entry, len(sorted))
	for i, l := range sorted {
		entries[i] = l.e
	}
	r, err := BuildWith(entries, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// randomEntry draws a route from a small space of paths and hosts, so that entries share
// keys, prefixes, patterns and hosts, and tie on priority and path length.
func randomEntry(rng *rand.Rand, value int) Entry {
	segments := []string{"a", "b", "ab", "api", "v1", ":id", "*", "*name", "x*"}
	var paths []string
	for range 1 + rng.IntN(2) {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString("/" + segments[rng.IntN(len(segments))])
		}
		p := b.String()
		if strings.Contains(p, "x*/") || strings.HasSuffix(p, "x*") && rng.IntN(2) == 0 {
			p = strings.ReplaceAll(p, "x*", "x")
		}
		if rng.IntN(3) == 0 && !strings.HasSuffix(p, "*") {
			p += "*"
		}
		paths = append(paths, p)
	}
	e := Entry{Paths: paths, Priority: rng.IntN(3) - 1, Value: value}
	switch rng.IntN(4) {
	case 0:
		e.Hosts = []string{"example.com"}
	case 1:
		e.Hosts = []string{"*.example.com", "other.test"}
	}
	if rng.IntN(4) == 0 {
		e.Methods = []string{"POST"}
	}
	return e
}

func TestWithAndWithoutMatchWhatBuildMakes(t *testing.T) {
	requests := [][3]string{}
	for _, host := range []string{"", "example.com", "a.example.com", "other.test", "x.test"} {
		for _, path := range []string{"/a", "/a/b", "/api/v1/7", "/ab/x", "/x", "/a/ab/api", "/v1", "/api/a/b/c", "/b/1"} {
			for _, method := range []string{"GET", "POST"} {
				requests = append(requests, [3]string{method, host, path})
			}
		}
	}
	for _, opts := range []Options{{}, {Parameters: true}, {HostsAsCondition: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(fmt.Sprint(opts)))))
			r, err := BuildWith(nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var live []liveEntry
			order := 0
			for step := range 600 {
				if len(live) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(live))
					r = r.Without(live[i].e)
					live = slices.Delete(live, i, i+1)
				} else {
					e := randomEntry(rng, 1000+step)
					order++
					if rng.IntN(4) == 0 && len(live) > 0 {
						// A replaced route keeps its place: out and back in at its order.
						i := rng.IntN(len(live))
						r = r.Without(live[i].e)
						order--
						e.Value = live[i].e.Value
						live[i].e = e
						if r, err = r.With(e, live[i].order); err != nil {
							t.Fatal(err)
						}
						goto check
					}
					if r, err = r.With(e, order); err != nil {
						t.Fatal(err)
					}
					live = append(live, liveEntry{e, order})
				}
			check:
				want := built(t, live, opts)
				if r.Len() != len(live) {
					t.Fatalf("step %d: Len %d, want %d", step, r.Len(), len(live))
				}
				for _, q := range requests {
					got, gotOK := r.Match([]byte(q[0]), []byte(q[1]), []byte(q[2]))
					exp, expOK := want.Match([]byte(q[0]), []byte(q[1]), []byte(q[2]))
					if got != exp || gotOK != expOK {
						t.Fatalf("step %d: %v → %d %v, Build of the same entries → %d %v\nlive: %+v", step, q, got, gotOK, exp, expOK, live)
					}
				}
			}
		})
	}
}

func TestAnOldRouterIsUnchangedByWith(t *testing.T) {
	r, err := Build([]Entry{{Paths: []string{"/a*"}, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := r.With(Entry{Paths: []string{"/a/b"}, Value: 2, Priority: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Match([]byte("GET"), nil, []byte("/a/b")); v != 1 {
		t.Errorf("the old router answers %d for /a/b after With, want 1", v)
	}
	if v, _ := next.Match([]byte("GET"), nil, []byte("/a/b")); v != 2 {
		t.Errorf("the new router answers %d for /a/b, want 2", v)
	}
	if gone := next.Without(Entry{Paths: []string{"/a*"}, Value: 1}); gone.Len() != 1 {
		t.Errorf("Len after Without = %d, want 1", gone.Len())
	} else if v, ok := gone.Match([]byte("GET"), nil, []byte("/a/c")); ok {
		t.Errorf("/a/c still matches %d after its route was removed", v)
	}
}

// A path passing many nested prefix routes tries every one of them,
// deepest first.
func TestMoreNestedPrefixesThanAWalkRemembers(t *testing.T) {
	var entries []Entry
	path := ""
	for i := range 48 {
		path += "/s"
		entries = append(entries, Entry{Paths: []string{path + "*"}, Value: i, Methods: []string{"GET"}})
	}
	// Only the shallowest admits POST: a lookup must walk past every deeper one.
	entries[0].Methods = []string{"POST"}
	r, err := Build(entries)
	if err != nil {
		t.Fatal(err)
	}
	deep := []byte(path + "/end")
	if v, ok := r.Match([]byte("GET"), nil, deep); !ok || v != len(entries)-1 {
		t.Errorf("GET: %d %v, want the deepest, %d", v, ok, len(entries)-1)
	}
	if v, ok := r.Match([]byte("POST"), nil, deep); !ok || v != 0 {
		t.Errorf("POST: %d %v, want the shallowest, 0", v, ok)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.Match([]byte("POST"), nil, deep) }); allocs != 0 {
		t.Errorf("a walk past %d prefixes allocates %.0f times", len(entries), allocs)
	}
}
