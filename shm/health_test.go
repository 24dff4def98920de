package shm

import (
	"errors"
	"sync"
	"testing"
)

func newHealthTable(t testing.TB, dataSize int) (*Segment, *HealthTable) {
	t.Helper()
	seg, err := Create(HealthLayout, dataSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := InitHealthTable(seg); err != nil {
		t.Fatal(err)
	}
	table, err := OpenHealthTable(seg)
	if err != nil {
		t.Fatal(err)
	}
	return seg, table
}

func keys(ks ...uint64) map[uint64]bool {
	m := map[uint64]bool{}
	for _, k := range ks {
		m[k] = true
	}
	return m
}

func TestHealthTableOpenRefusesUninitialised(t *testing.T) {
	seg, err := Create(HealthLayout, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if _, err := OpenHealthTable(seg); !errors.Is(err, ErrHealthTable) {
		t.Errorf("got %v, want ErrHealthTable", err)
	}
	small, err := Create(HealthLayout, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := InitHealthTable(small); err == nil {
		t.Error("a 64-byte data area was accepted")
	}
}

func TestHealthTableCapacity(t *testing.T) {
	for _, tc := range []struct{ size, want int }{{0, 0}, {63, 0}, {64, 0}, {80, 1}, {1 << 20, (1<<20 - 64) / 16}} {
		if got := HealthTableCapacity(tc.size); got != tc.want {
			t.Errorf("HealthTableCapacity(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestHealthKey(t *testing.T) {
	a := HealthKey("/apisix/upstreams/1", "127.0.0.1:80")
	if a != HealthKey("/apisix/upstreams/1", "127.0.0.1:80") {
		t.Error("not deterministic")
	}
	for _, other := range []uint64{
		HealthKey("/apisix/upstreams/1", "127.0.0.1:81"),
		HealthKey("/apisix/upstreams/2", "127.0.0.1:80"),
		HealthKey("/apisix/upstreams/1127.0.0.1", ":80"),
	} {
		if other == a {
			t.Errorf("distinct nodes share key %#x", a)
		}
	}
	if a <= keyTombstone {
		t.Errorf("key %d is a marker", a)
	}
}

func TestHealthSyncAndLookup(t *testing.T) {
	_, table := newHealthTable(t, 4096)
	k1, k2, k3 := HealthKey("u", "a:1"), HealthKey("u", "b:1"), HealthKey("u", "c:1")
	if homeless := table.Sync(keys(k1, k2)); len(homeless) != 0 {
		t.Fatalf("homeless %v", homeless)
	}
	n1, ok := table.Lookup(k1)
	if !ok || !n1.Valid() || !n1.Healthy() {
		t.Fatalf("k1: ok %v, healthy %v", ok, n1.Healthy())
	}
	if _, ok := table.Lookup(k3); ok {
		t.Error("k3 found before it was synced")
	}
	n1.Report(HealthTCPFailure, 1)
	if n1.Healthy() {
		t.Fatal("still healthy after reaching the threshold")
	}
	// Keeping a key keeps its state.
	table.Sync(keys(k1, k2, k3))
	if again, _ := table.Lookup(k1); again.Healthy() || again.Slot() != n1.Slot() {
		t.Error("a kept key lost its state or moved")
	}
	// Dropping a key frees its slot: the old handle goes blind (healthy, reports dropped).
	table.Sync(keys(k2, k3))
	if _, ok := table.Lookup(k1); ok {
		t.Error("k1 still found after it was dropped")
	}
	if !n1.Healthy() {
		t.Error("a handle to a dropped key reads another node's state")
	}
	if changed, _ := n1.Report(HealthTCPFailure, 1); changed {
		t.Error("a report through a dropped key counted")
	}
	// Installed again, it starts fresh.
	table.Sync(keys(k1, k2, k3))
	if n, ok := table.Lookup(k1); !ok || !n.Healthy() {
		t.Errorf("re-installed k1: ok %v healthy %v", ok, n.Healthy())
	}
}

func TestHealthSyncReusesTombstonesAndReportsFull(t *testing.T) {
	_, table := newHealthTable(t, 64+4*16) // four slots
	all := map[uint64]bool{}
	for i := range 6 {
		all[HealthKey("u", string(rune('a'+i)))] = true
	}
	homeless := table.Sync(all)
	if len(homeless) != 2 {
		t.Fatalf("6 keys in 4 slots: %d homeless, want 2", len(homeless))
	}
	found := 0
	for k := range all {
		if _, ok := table.Lookup(k); ok {
			found++
		}
	}
	if found != 4 {
		t.Errorf("%d keys found, want 4", found)
	}
	// Replace them all: tombstones are reused.
	next := keys(HealthKey("v", "1"), HealthKey("v", "2"), HealthKey("v", "3"), HealthKey("v", "4"))
	if homeless := table.Sync(next); len(homeless) != 0 {
		t.Errorf("after dropping every key, %d of 4 new ones found no slot", len(homeless))
	}
	for k := range next {
		if _, ok := table.Lookup(k); !ok {
			t.Errorf("key %#x not found", k)
		}
	}
}

func TestHealthZeroNode(t *testing.T) {
	var n HealthNode
	if n.Valid() || !n.Healthy() {
		t.Error("the zero node must be invalid and healthy")
	}
	if changed, healthy := n.Report(HealthTCPFailure, 1); changed || !healthy {
		t.Error("the zero node counted a report")
	}
}

// TestHealthCounting walks lua-resty-healthcheck's rules: consecutive events of one kind
// flip the state at the threshold, the opposite kind resets the count, a flip clears every
// counter, and a threshold of 0 counts nothing.
func TestHealthCounting(t *testing.T) {
	type step struct {
		event     HealthEvent
		threshold int
		healthy   bool
		changed   bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"tcp failures reach the threshold", []step{
			{HealthTCPFailure, 2, true, false}, {HealthTCPFailure, 2, false, true},
		}},
		{"a success in between resets failures", []step{
			{HealthTCPFailure, 2, true, false}, {HealthSuccess, 2, true, false}, {HealthTCPFailure, 2, true, false}, {HealthTCPFailure, 2, false, true},
		}},
		{"kinds count separately", []step{
			{HealthHTTPFailure, 2, true, false}, {HealthTimeout, 2, true, false}, {HealthHTTPFailure, 2, false, true},
		}},
		{"timeouts", []step{{HealthTimeout, 3, true, false}, {HealthTimeout, 3, true, false}, {HealthTimeout, 3, false, true}}},
		{"threshold 1", []step{{HealthHTTPFailure, 1, false, true}}},
		{"threshold 0 counts nothing", []step{
			{HealthTCPFailure, 0, true, false}, {HealthTCPFailure, 0, true, false}, {HealthTCPFailure, 1, false, true},
			{HealthSuccess, 0, false, false}, {HealthSuccess, 0, false, false},
		}},
		{"successes bring it back, failures reset them", []step{
			{HealthTCPFailure, 1, false, true},
			{HealthSuccess, 2, false, false}, {HealthTCPFailure, 1, false, false}, {HealthSuccess, 2, false, false}, {HealthSuccess, 2, true, true},
		}},
		{"failures are not counted while unhealthy", []step{
			{HealthTCPFailure, 1, false, true}, {HealthTCPFailure, 1, false, false}, {HealthSuccess, 1, true, true},
			// The failures while unhealthy left nothing behind.
			{HealthTCPFailure, 2, true, false}, {HealthTCPFailure, 2, false, true},
		}},
		{"a flip clears every counter", []step{
			{HealthHTTPFailure, 5, true, false}, {HealthTimeout, 5, true, false}, {HealthTCPFailure, 1, false, true},
			{HealthSuccess, 1, true, true},
			{HealthHTTPFailure, 2, true, false}, {HealthHTTPFailure, 2, false, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, table := newHealthTable(t, 4096)
			k := HealthKey("u", "a:1")
			table.Sync(keys(k))
			n, _ := table.Lookup(k)
			for i, s := range tc.steps {
				changed, healthy := n.Report(s.event, s.threshold)
				if changed != s.changed || healthy != s.healthy || n.Healthy() != s.healthy {
					t.Fatalf("step %d (%v, %d): changed %v healthy %v (read %v), want %v %v",
						i, s.event, s.threshold, changed, healthy, n.Healthy(), s.changed, s.healthy)
				}
			}
		})
	}
}

func TestHealthCountersSaturate(t *testing.T) {
	_, table := newHealthTable(t, 4096)
	k := HealthKey("u", "a:1")
	table.Sync(keys(k))
	n, _ := table.Lookup(k)
	for range 300 {
		n.Report(HealthTimeout, 254)
	}
	// 254 flips it; nothing counted since (it is unhealthy and these are failures).
	if n.Healthy() {
		t.Fatal("still healthy after 300 timeouts with a threshold of 254")
	}
	n.Report(HealthSuccess, 254)
	if s, h, c, to := n.Counters(); s != 1 || h != 0 || c != 0 || to != 0 {
		t.Errorf("counters %d %d %d %d, want 1 0 0 0", s, h, c, to)
	}
}

// TestHealthSharedAcrossMappings counts from two mappings of one segment, as the master
// and a worker do, from many goroutines: exactly threshold failures flip the node once.
func TestHealthSharedAcrossMappings(t *testing.T) {
	seg, master := newHealthTable(t, 4096)
	other, err := Open(seg.File(), HealthLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	worker, err := OpenHealthTable(other)
	if err != nil {
		t.Fatal(err)
	}
	k := HealthKey("u", "a:1")
	master.Sync(keys(k))
	mn, _ := master.Lookup(k)
	wn, ok := worker.Lookup(k)
	if !ok {
		t.Fatal("the worker's mapping does not see the key")
	}
	const threshold = 200
	var wg sync.WaitGroup
	var flips sync.Map
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := mn
			if g%2 == 1 {
				n = wn
			}
			for range 25 {
				if changed, _ := n.Report(HealthHTTPFailure, threshold); changed {
					flips.Store(g, true)
				}
			}
		}()
	}
	wg.Wait()
	count := 0
	flips.Range(func(any, any) bool { count++; return true })
	if count != 1 || mn.Healthy() || wn.Healthy() {
		t.Errorf("%d flips, healthy %v/%v; want exactly one flip to unhealthy", count, mn.Healthy(), wn.Healthy())
	}
}

func BenchmarkHealthHealthy(b *testing.B) {
	_, table := newHealthTable(b, 4096)
	k := HealthKey("u", "a:1")
	table.Sync(keys(k))
	n, _ := table.Lookup(k)
	b.ReportAllocs()
	for b.Loop() {
		if !n.Healthy() {
			b.Fatal("unhealthy")
		}
	}
}

func BenchmarkHealthReport(b *testing.B) {
	_, table := newHealthTable(b, 4096)
	k := HealthKey("u", "a:1")
	table.Sync(keys(k))
	n, _ := table.Lookup(k)
	b.ReportAllocs()
	for b.Loop() {
		n.Report(HealthSuccess, 5)
	}
}
