package shm

import (
	"sync"
	"testing"
	"time"
)

const testKeyedMagic = 0x7465737400000001

func newKeyedTable(t *testing.T, dataSize int) (*KeyedTable, *Segment) {
	t.Helper()
	seg, err := Create(Layout{Name: "keyed-test", Version: 1}, dataSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := InitKeyedTable(seg, testKeyedMagic); err != nil {
		t.Fatal(err)
	}
	table, err := OpenKeyedTable(seg, testKeyedMagic)
	if err != nil {
		t.Fatal(err)
	}
	return table, seg
}

func TestKeyedTableRefusesAnotherOwnersSegment(t *testing.T) {
	_, seg := newKeyedTable(t, 4096)
	if _, err := OpenKeyedTable(seg, testKeyedMagic+1); err == nil {
		t.Fatal("opened with another magic")
	}
}

// inBucket is the i-th key of bucket 3.
func inBucket(table *KeyedTable, i int) uint64 {
	return 3%table.buckets + table.buckets*uint64(i+1)<<8
}

// fill inserts keys 0..n-1 of one bucket (fingerprints b, b+buckets, ...) with payload p.
func fill(t *testing.T, table *KeyedTable, n int, p uint64) []uint64 {
	t.Helper()
	var fps []uint64
	for i := 0; i < n; i++ {
		fp := inBucket(table, i)
		if _, _, ok := table.Insert(fp, p, 0, false, time.Now().UnixNano()); !ok {
			t.Fatalf("insert %d refused", i)
		}
		fps = append(fps, fp)
	}
	return fps
}

func TestKeyedTableFindsWhatItInserted(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	if _, ok := table.Find(42); ok {
		t.Fatal("found a key never inserted")
	}
	e, existed, ok := table.Insert(42, 7, 0, false, time.Now().UnixNano())
	if !ok || existed {
		t.Fatal("insert refused")
	}
	again, existed, ok := table.Insert(42, 99, 0, false, time.Now().UnixNano())
	if p, _ := again.Load(); !ok || !existed || p != 7 {
		t.Fatalf("second insert of the key: payload %d, want the first's 7", p)
	}
	if !e.CompareAndSwap(7, 8) || e.CompareAndSwap(7, 9) {
		t.Fatal("compare-and-swap did not follow the payload")
	}
	found, ok := table.Find(42)
	if p, _ := found.Load(); !ok || p != 8 {
		t.Fatalf("found payload %d, want 8", p)
	}
}

func TestKeyedTableReusesIdleSlotsAndEvictsOnlyWhenAsked(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	fps := fill(t, table, keyedSlots, 10)
	newcomer := inBucket(table, 100)
	if _, _, ok := table.Insert(newcomer, 1, 10, false, time.Now().UnixNano()); ok {
		t.Fatal("inserted into a bucket of live keys without evict")
	}
	if table.Full() != 1 {
		t.Fatalf("Full() = %d, want 1", table.Full())
	}
	old, _ := table.Find(fps[2])
	old.CompareAndSwap(10, 3) // fps[2] falls idle below 5
	e, _, ok := table.Insert(newcomer, 1, 5, false, time.Now().UnixNano())
	if !ok {
		t.Fatal("the idle slot was not reused")
	}
	if _, ok := old.Load(); ok {
		t.Fatal("the old key's entry still reads its slot")
	}
	if old.CompareAndSwap(3, 4) {
		t.Fatal("the old key's entry changed the new key's payload")
	}
	if p, _ := e.Load(); p != 1 {
		t.Fatalf("new key's payload %d", p)
	}
	if _, ok := table.Find(fps[2]); ok {
		t.Fatal("the replaced key is still found")
	}
	// evict takes the lowest payload: the newcomer's 1.
	third := inBucket(table, 200)
	if _, _, ok := table.Insert(third, 50, 0, true, time.Now().UnixNano()); !ok {
		t.Fatal("evict refused")
	}
	if _, ok := table.Find(newcomer); ok {
		t.Fatal("evict did not take the lowest payload")
	}
}

// A process killed between the state's swap and the key word's write leaves a slot whose
// generations disagree: nobody finds it, and the next insertion takes it.
func TestKeyedTableHalfGivenSlotIsFree(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	fps := fill(t, table, keyedSlots, 10)
	b := table.bucket(fps[4])
	st := &table.words[b+3+2*4]
	st.Store(st.Load() + 1<<genShift) // the swap happened, the key word write did not
	if _, ok := table.Find(fps[4]); ok {
		t.Fatal("found a half-given slot")
	}
	if _, _, ok := table.Insert(inBucket(table, 300), 1, 0, false, time.Now().UnixNano()); !ok {
		t.Fatal("the half-given slot was not taken")
	}
}

// A process killed holding a bucket's lock delays insertions for lockStale, no longer.
func TestKeyedTableTakesOverAStaleLock(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	now := time.Now().UnixNano()
	table.words[table.bucket(42)].Store(uint64(now-2*lockStale) | 1) // a dead holder's
	done := make(chan bool)
	go func() {
		_, _, ok := table.Insert(42, 1, 0, false, now)
		done <- ok
	}()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("insert refused")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("insert still waits on a dead holder's lock")
	}
	if table.words[table.bucket(42)].Load() != 0 {
		t.Fatal("lock left held")
	}
}

// Many writers on few keys, each adding and taking away: every payload ends at what was
// added, and no key has two slots.
func TestKeyedTableIsExactUnderContention(t *testing.T) {
	table, _ := newKeyedTable(t, 2048) // 15 buckets
	const writers, rounds, keys = 8, 2000, 20
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				fp := uint64(r%keys) * 0x9e3779b97f4a7c15
				for {
					e, ok := table.Find(fp)
					if !ok {
						e, _, ok = table.Insert(fp, 0, 0, false, time.Now().UnixNano())
					}
					if !ok {
						t.Error("insert refused")
						return
					}
					if _, ok := e.Add(2); ok {
						e.Add(-1)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	var total uint64
	for k := 0; k < keys; k++ {
		e, ok := table.Find(uint64(k) * 0x9e3779b97f4a7c15)
		p, _ := e.Load()
		if !ok {
			t.Fatalf("key %d lost", k)
		}
		total += p
	}
	if total != writers*rounds {
		t.Fatalf("payloads sum to %d, want %d", total, writers*rounds)
	}
}

func TestKeyedTableSlotsNameEntries(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	fps := fill(t, table, keyedSlots, 10)
	seen := map[uint32]bool{}
	for i, fp := range fps {
		e, _ := table.Find(fp)
		slot, gen := e.Slot()
		again, ok := table.EntryAt(slot, gen)
		if !ok || !again.CompareAndSwap(10, uint64(20+i)) {
			t.Fatalf("key %d: EntryAt(%d, %d) does not reach its payload", i, slot, gen)
		}
		seen[slot] = true
		if _, ok := table.EntryAt(slot, gen+1); ok {
			t.Fatalf("EntryAt with another generation reached slot %d", slot)
		}
	}
	if len(seen) != keyedSlots {
		t.Fatalf("%d distinct slots for %d keys", len(seen), keyedSlots)
	}
	if _, ok := table.EntryAt(uint32(table.Capacity()), 0); ok {
		t.Fatal("EntryAt past the table")
	}
	var sum uint64
	table.Range(func(e Entry, p uint64) bool { sum += p; return true })
	if want := uint64(keyedSlots*20 + keyedSlots*(keyedSlots-1)/2); sum != want {
		t.Fatalf("Range saw payloads summing to %d, want %d", sum, want)
	}
}

// InsertBeside takes any idle slot but the one it keeps, and reports a bucket whose only
// idle slot is that one as full.
func TestKeyedTableInsertBesideKeepsItsEntry(t *testing.T) {
	table, _ := newKeyedTable(t, 4096)
	idle, _, _ := table.Insert(inBucket(table, 0), 0, 1, false, time.Now().UnixNano())
	beside, _, ok := table.InsertBeside(inBucket(table, 1), 5, 1, idle, time.Now().UnixNano())
	if !ok || beside.slot == idle.slot {
		t.Fatalf("InsertBeside took slot %d, the kept entry's %d (ok %v)", beside.slot, idle.slot, ok)
	}
	if _, ok := idle.Load(); !ok {
		t.Fatal("the kept entry lost its slot")
	}
	for i := 2; i < keyedSlots; i++ {
		if _, _, ok := table.Insert(inBucket(table, i), 9, 0, false, time.Now().UnixNano()); !ok {
			t.Fatalf("insert %d refused", i)
		}
	}
	if _, _, ok := table.InsertBeside(inBucket(table, 100), 5, 1, idle, time.Now().UnixNano()); ok {
		t.Fatal("InsertBeside took the kept idle slot, the bucket's only free one")
	}
	if _, _, ok := table.Insert(inBucket(table, 100), 5, 1, false, time.Now().UnixNano()); !ok {
		t.Fatal("a plain Insert did not take the idle slot")
	}
}
