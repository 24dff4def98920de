package prometheus

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"gw/conf"
	"gw/shm"
)

// newTable makes an initialised metrics segment for maxSeries label sets.
func newTable(tb testing.TB, maxSeries int) (*Table, *shm.Segment) {
	tb.Helper()
	cfg := &conf.Config{Shm: conf.Shm{Metrics: 1 << 30}, Prometheus: conf.Prometheus{MaxSeries: maxSeries}}
	seg, err := shm.Create(SegmentLayout, SegmentSize(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { seg.Close() })
	if err := InitSegment(seg); err != nil {
		tb.Fatal(err)
	}
	t, err := OpenTable(seg)
	if err != nil {
		tb.Fatal(err)
	}
	return t, seg
}

func set(code int, route, node string) *labels {
	l := &labels{code: code}
	l.values[labelRoute], l.values[labelNode] = route, node
	return l
}

func TestSegmentSizeFollowsMaxSeriesWithinShmMetrics(t *testing.T) {
	tests := []struct {
		name      string
		maxSeries int
		shm       int64
		wantCap   int
	}{
		{"max_series fits", 100, 16 << 20, 100},
		{"default 10000 fits in 16m", 10000, 16 << 20, 10000},
		{"shm.metrics is the ceiling", 100000, 1 << 20, entriesFitting(1<<20) - 1},
		{"smallest shm.metrics", 1000, 64 << 10, entriesFitting(64<<10) - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &conf.Config{Shm: conf.Shm{Metrics: tt.shm}, Prometheus: conf.Prometheus{MaxSeries: tt.maxSeries}}
			size := SegmentSize(cfg)
			if size > int(tt.shm) {
				t.Fatalf("size %d exceeds shm.metrics %d", size, tt.shm)
			}
			seg, err := shm.Create(SegmentLayout, size)
			if err != nil {
				t.Fatal(err)
			}
			defer seg.Close()
			if err := InitSegment(seg); err != nil {
				t.Fatal(err)
			}
			tab, err := OpenTable(seg)
			if err != nil {
				t.Fatal(err)
			}
			if tab.Capacity() != tt.wantCap {
				t.Errorf("capacity = %d, want %d", tab.Capacity(), tt.wantCap)
			}
		})
	}
}

func TestOpenTableRejectsAnUninitialisedSegment(t *testing.T) {
	seg, err := shm.Create(SegmentLayout, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if _, err := OpenTable(seg); err == nil {
		t.Fatal("OpenTable of a zeroed segment succeeded")
	}
	if _, err := OpenTable(nil); err == nil {
		t.Fatal("OpenTable(nil) succeeded")
	}
}

func TestResolve(t *testing.T) {
	tab, _ := newTable(t, 10)
	a := tab.resolve(set(200, "1", "10.0.0.1"))
	if a == 0 {
		t.Fatal("a new set got the overflow entry")
	}
	if again := tab.resolve(set(200, "1", "10.0.0.1")); again != a {
		t.Errorf("the same set resolved to %d and %d", a, again)
	}
	distinct := map[int]string{a: "a"}
	for name, l := range map[string]*labels{
		"other code":  set(404, "1", "10.0.0.1"),
		"other route": set(200, "2", "10.0.0.1"),
		"other node":  set(200, "1", "10.0.0.2"),
		// the same bytes split differently between two values must differ
		"shifted": set(200, "11", "0.0.0.1"),
	} {
		e := tab.resolve(l)
		if prev, dup := distinct[e]; dup {
			t.Errorf("%s shares entry %d with %s", name, e, prev)
		}
		distinct[e] = name
	}
	if tab.Used() != 5 {
		t.Errorf("Used = %d, want 5", tab.Used())
	}
}

func TestResolvePastCapacityFoldsIntoOverflow(t *testing.T) {
	tab, _ := newTable(t, 3)
	for i := 0; i < 3; i++ {
		if e := tab.resolve(set(200, string(rune('a'+i)), "")); e == 0 {
			t.Fatalf("set %d of 3 overflowed", i)
		}
	}
	for i := 0; i < 5; i++ {
		if e := tab.resolve(set(500, "late", string(rune('a'+i)))); e != 0 {
			t.Fatalf("set past the cap got entry %d, want the overflow entry 0", e)
		}
	}
	if tab.Overflowed() != 5 {
		t.Errorf("Overflowed = %d, want 5", tab.Overflowed())
	}
	if tab.Used() != 3 || tab.FreeBytes() != 0 {
		t.Errorf("Used = %d, FreeBytes = %d; want 3 and 0", tab.Used(), tab.FreeBytes())
	}
	// Sets stored before the table filled up still resolve to their own entries.
	if e := tab.resolve(set(200, "a", "")); e == 0 {
		t.Error("a stored set resolved to overflow once the table was full")
	}
}

// Two mappings of one segment, as two workers have, resolving the same sets at once
// must agree on every entry.
func TestResolveConcurrentMappingsAgree(t *testing.T) {
	tab, seg := newTable(t, 1000)
	other, err := shm.Open(seg.File(), SegmentLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tab2, err := OpenTable(other)
	if err != nil {
		t.Fatal(err)
	}
	const sets = 200
	results := [2][sets]int{}
	var wg sync.WaitGroup
	for w, tb := range []*Table{tab, tab2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < sets; i++ {
				results[w][i] = tb.resolve(set(200, "r", strings.Repeat("n", i)))
			}
		}()
	}
	wg.Wait()
	for i := 0; i < sets; i++ {
		if results[0][i] != results[1][i] || results[0][i] == 0 {
			t.Fatalf("set %d: entries %d and %d", i, results[0][i], results[1][i])
		}
	}
	var indexed int
	tab.entries(func(int) { indexed++ })
	if indexed != sets+1 {
		t.Errorf("%d entries indexed, want %d and the overflow one", indexed, sets)
	}
}

func TestLongLabelValuesAreCutButStayDistinct(t *testing.T) {
	tab, _ := newTable(t, 10)
	long := strings.Repeat("é", 200) // 400 bytes, 2-byte runes: a cut may fall inside one
	a := tab.resolve(set(200, long+"a", long))
	b := tab.resolve(set(200, long+"b", long))
	if a == b {
		t.Fatal("two long values that differ only at the end share an entry")
	}
	var va, vb [labelCount][]byte
	decodeText(tab.entryText(a), &va)
	decodeText(tab.entryText(b), &vb)
	if string(va[labelRoute]) == string(vb[labelRoute]) {
		t.Errorf("both print as %q", va[labelRoute])
	}
	for _, v := range [][]byte{va[labelRoute], va[labelNode]} {
		if len(v) > maxValue || !utf8.Valid(v) {
			t.Errorf("stored value %q: %d bytes, valid UTF-8 %v", v, len(v), utf8.Valid(v))
		}
	}
}
