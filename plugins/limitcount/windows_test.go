package limitcount

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gw/shm"
)

var windowLayout = shm.Layout{Name: "windows-test", Version: WindowTableVersion}

// newTable makes a table of the given number of buckets (8 slots each).
func newTable(t testing.TB, buckets int) *WindowTable {
	t.Helper()
	seg, err := shm.Create(windowLayout, tableHeaderWords*8+buckets*bucketBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	if err := InitWindowTable(seg); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenWindowTable(seg)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func fpOf(tbl *WindowTable, key string) uint64 {
	h := tbl.KeyHash()
	h.WriteString(key)
	return h.Sum()
}

func TestInitAndOpen(t *testing.T) {
	seg, err := shm.Create(windowLayout, 64+bucketBytes) // one bucket: too small
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if err := InitWindowTable(seg); err == nil {
		t.Error("InitWindowTable accepted a one-bucket segment")
	}
	if _, err := OpenWindowTable(seg); !errors.Is(err, ErrWindowTable) {
		t.Errorf("OpenWindowTable of an uninitialised segment: %v, want ErrWindowTable", err)
	}

	seg2, err := shm.Create(windowLayout, 10<<20-shm.HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	defer seg2.Close()
	if err := InitWindowTable(seg2); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenWindowTable(seg2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tbl.Capacity(), WindowTableCapacity(seg2.Size()); got != want || got != 655352 {
		t.Errorf("capacity of 10m = %d (WindowTableCapacity says %d), want 655352", got, want)
	}
	// A second view (another process) sees the same secret, so the same fingerprints.
	other, err := shm.Open(seg2.File(), windowLayout)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tbl2, err := OpenWindowTable(other)
	if err != nil {
		t.Fatal(err)
	}
	if fpOf(tbl, "10.0.0.1") != fpOf(tbl2, "10.0.0.1") {
		t.Error("two views of one table hash a key differently")
	}
	seg2.Word(hdrBuckets * 8).Store(1 << 40)
	if _, err := OpenWindowTable(other); !errors.Is(err, ErrWindowTable) {
		t.Errorf("OpenWindowTable with a bucket count beyond the segment: %v", err)
	}
}

func TestWindowMath(t *testing.T) {
	const second = 100 // ticks
	tests := []struct {
		name   string
		start  uint32 // the clock at the first request
		limit  uint64
		window uint32
		steps  []step
	}{
		{"limit reached then reset at the window's end", 1000, 3, 10 * second, []step{
			{0, Allowed, 1, 10 * second},
			{1, Allowed, 2, 10*second - 1},
			{250, Allowed, 3, 10*second - 250},
			{251, Limited, 3, 10*second - 251},
			{10*second - 1, Limited, 3, 1},
			{10 * second, Allowed, 1, 10 * second}, // anchored at the first request, not aligned
			{10*second + 5, Allowed, 2, 10*second - 5},
		}},
		{"a window starts at the first request after an idle time", 7, 1, second, []step{
			{0, Allowed, 1, second},
			{50, Limited, 1, 50},
			{5 * second, Allowed, 1, second},
			{5*second + 99, Limited, 1, 1},
			{6 * second, Allowed, 1, second},
		}},
		{"across the clock's wrap", tickMask - 30, 2, second, []step{
			{0, Allowed, 1, second},
			{40, Allowed, 2, second - 40},
			{60, Limited, 2, second - 60},
			{second, Allowed, 1, second},
		}},
		{"longest window", 0, 1, MaxWindowTicks, []step{
			{0, Allowed, 1, MaxWindowTicks},
			{MaxWindowTicks - 1, Limited, 1, 1},
			{MaxWindowTicks, Allowed, 1, MaxWindowTicks},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := newTable(t, 4)
			fp := fpOf(tbl, "client")
			for i, s := range tt.steps {
				now := (tt.start + s.at) & tickMask
				r := tbl.Hit(fp, tt.limit, tt.window, now, RejectOnFull)
				if r.Outcome != s.outcome || r.Used != s.used || r.Left != s.left {
					t.Fatalf("step %d (+%d ticks): got %+v, want outcome %d used %d left %d", i, s.at, r, s.outcome, s.used, s.left)
				}
			}
		})
	}
}

// Workers' requests carry their own start times: one that started just before another
// opened the window still counts in it. A window ending far beyond any the key could open
// is from a clock cycle ago and has ended.
func TestRequestTimesAndStaleWindows(t *testing.T) {
	tbl := newTable(t, 2)
	fp := fpOf(tbl, "client")
	tbl.Hit(fp, 2, 1000, 500, RejectOnFull)
	if r := tbl.Hit(fp, 2, 1000, 430, RejectOnFull); r.Outcome != Allowed || r.Used != 2 || r.Left != 1000 {
		t.Fatalf("a request that started 0.7 s before the window opened: %+v, want the second in it", r)
	}
	if r := tbl.Hit(fp, 2, 1000, 400, RejectOnFull); r.Outcome != Limited {
		t.Fatalf("third request: %+v, want Limited", r)
	}
	// Most of a cycle later the old end (1500) lies 500 s ahead: not a window of this key,
	// whose windows last 10 s.
	if r := tbl.Hit(fp, 2, 1000, (1500-50000+1<<31)&tickMask, RejectOnFull); r.Outcome != Allowed || r.Used != 1 || r.Left != 1000 {
		t.Fatalf("a cycle later: %+v, want a fresh window", r)
	}
}

type step struct {
	at      uint32
	outcome Outcome
	used    uint64
	left    uint32
}

func TestTicks(t *testing.T) {
	if got := Ticks(int64(3*time.Second + 25*time.Millisecond)); got != 302 {
		t.Errorf("Ticks(3.025s) = %d, want 302", got)
	}
	for _, tc := range []struct {
		d    time.Duration
		want uint32
	}{{time.Second, 100}, {time.Millisecond, 1}, {0, 1}, {60 * time.Second, 6000}, {1000 * 24 * time.Hour, MaxWindowTicks}} {
		if got := WindowTicks(tc.d); got != tc.want {
			t.Errorf("WindowTicks(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// With two buckets every key shares every slot: 16 keys fit, each counted on its own.
func TestCollidingKeysCountApart(t *testing.T) {
	tbl := newTable(t, 2)
	var fps []uint64
	for i := 0; i < probeLen; i++ {
		fps = append(fps, fpOf(tbl, string(rune('a'+i))))
	}
	for round := uint64(1); round <= 3; round++ {
		for i, fp := range fps {
			r := tbl.Hit(fp, 10, 1000, 5, RejectOnFull)
			if r.Outcome != Allowed || r.Used != round {
				t.Fatalf("round %d key %d: %+v, want Allowed used %d", round, i, r, round)
			}
		}
	}
	if got := tbl.Live(5); got != probeLen {
		t.Errorf("Live = %d, want %d", got, probeLen)
	}
}

// Two keys whose 56-bit fingerprints agree are one key: that is the documented collision.
func TestFingerprintCollisionSharesACounter(t *testing.T) {
	tbl := newTable(t, 2)
	const fp = 0x1234567890abcd00
	tbl.Hit(fp, 2, 1000, 0, RejectOnFull)
	if r := tbl.Hit(fp|0x7f, 2, 1000, 0, RejectOnFull); r.Used != 2 {
		t.Fatalf("fingerprints equal but for the low byte counted apart: %+v", r)
	}
	if r := tbl.Hit(fp^1<<8, 2, 1000, 0, RejectOnFull); r.Used != 1 {
		t.Fatalf("fingerprints differing in bit 8 shared a counter: %+v", r)
	}
}

func fill(t *testing.T, tbl *WindowTable, n int, window uint32, now uint32) []uint64 {
	t.Helper()
	var fps []uint64
	for i := 0; i < n; i++ {
		fp := fpOf(tbl, "key-"+string(rune('A'+i)))
		if r := tbl.Hit(fp, 100, window, now+uint32(i), RejectOnFull); r.Outcome != Allowed {
			t.Fatalf("filling key %d: %+v", i, r)
		}
		fps = append(fps, fp)
	}
	return fps
}

func TestFullTable(t *testing.T) {
	t.Run("reject refuses a new key and keeps the others", func(t *testing.T) {
		tbl := newTable(t, 2)
		fps := fill(t, tbl, probeLen, 1000, 0)
		newcomer := fpOf(tbl, "newcomer")
		if r := tbl.Hit(newcomer, 100, 1000, 20, RejectOnFull); r.Outcome != Full || r.Evicted {
			t.Fatalf("new key in a full table: %+v, want Full", r)
		}
		if tbl.Refusals() != 1 || tbl.Evictions() != 0 {
			t.Errorf("refusals %d evictions %d, want 1 and 0", tbl.Refusals(), tbl.Evictions())
		}
		for i, fp := range fps {
			if r := tbl.Hit(fp, 100, 1000, 20, RejectOnFull); r.Used != 2 {
				t.Fatalf("key %d lost its window: %+v", i, r)
			}
		}
	})
	t.Run("evict replaces the window nearest its end", func(t *testing.T) {
		tbl := newTable(t, 2)
		fps := fill(t, tbl, probeLen, 1000, 0) // key i opens at i, ends at 1000+i: key 0 ends first
		newcomer := fpOf(tbl, "newcomer")
		if r := tbl.Hit(newcomer, 100, 1000, 20, EvictOnFull); r.Outcome != Allowed || !r.Evicted || r.Used != 1 {
			t.Fatalf("new key in a full table: %+v, want Allowed after an eviction", r)
		}
		if tbl.Evictions() != 1 || tbl.Refusals() != 0 {
			t.Errorf("evictions %d refusals %d, want 1 and 0", tbl.Evictions(), tbl.Refusals())
		}
		if r := tbl.Hit(newcomer, 100, 1000, 21, EvictOnFull); r.Used != 2 {
			t.Fatalf("the newcomer's window: %+v", r)
		}
		for i, fp := range fps[1:] {
			if r := tbl.Hit(fp, 100, 1000, 22, RejectOnFull); r.Used != 2 {
				t.Fatalf("key %d was disturbed: %+v", i+1, r)
			}
		}
		// The evicted key comes back to a full table: it evicts in turn and starts over.
		if r := tbl.Hit(fps[0], 100, 1000, 23, EvictOnFull); r.Used != 1 || !r.Evicted {
			t.Fatalf("evicted key: %+v, want a fresh window", r)
		}
	})
	t.Run("expired windows are reclaimed before anything is evicted", func(t *testing.T) {
		tbl := newTable(t, 2)
		fill(t, tbl, probeLen, 100, 0) // windows end at 100..115
		newcomer := fpOf(tbl, "newcomer")
		if r := tbl.Hit(newcomer, 100, 1000, 101, RejectOnFull); r.Outcome != Allowed || r.Evicted {
			t.Fatalf("new key once a window ended: %+v, want Allowed without eviction", r)
		}
		if tbl.Evictions() != 0 || tbl.Refusals() != 0 {
			t.Errorf("evictions %d refusals %d", tbl.Evictions(), tbl.Refusals())
		}
		if got := tbl.Live(101); got != probeLen-1 { // keys 0 and 1 ended; the newcomer lives
			t.Errorf("Live = %d, want %d", got, probeLen-1)
		}
		if got := tbl.Live(5000); got != 0 {
			t.Errorf("Live long after = %d, want 0", got)
		}
	})
}

func TestSaturation(t *testing.T) {
	tbl := newTable(t, 2)
	fp := fpOf(tbl, "busy")
	tbl.Hit(fp, 1<<40, 1000, 0, RejectOnFull)
	a, b := tbl.bucketsOf(fp)
	var slot uint64
	for p := 0; p < probeLen; p++ {
		if i := slotIndex(a, b, p); tbl.state(i).Load() != 0 {
			slot = i
		}
	}
	tbl.state(slot).Store(live(1000, MaxUsed))
	if r := tbl.Hit(fp, 1<<40, 1000, 1, RejectOnFull); r.Outcome != Allowed || r.Used != MaxUsed {
		t.Fatalf("saturated count under a higher limit: %+v, want Allowed", r)
	}
	if r := tbl.Hit(fp, MaxUsed, 1000, 1, RejectOnFull); r.Outcome != Limited {
		t.Fatalf("saturated count at the limit: %+v, want Limited", r)
	}
	if got := tbl.state(slot).Load(); got != live(1000, MaxUsed) {
		t.Fatalf("state changed to %x", got)
	}
}

// A process killed in the middle of a claim leaves a claiming state: the same key's next
// request completes it, and after a second any key may take the slot.
func TestClaimLeftByAKilledProcess(t *testing.T) {
	for _, keyWritten := range []bool{false, true} {
		tbl := newTable(t, 2)
		fp := fpOf(tbl, "victim")
		a, b := tbl.bucketsOf(fp)
		i := slotIndex(a, b, 3)
		tbl.state(i).Store(claiming(50, fingerprint(fp)))
		if keyWritten {
			tbl.key(i).Store(fingerprint(fp) << 8)
		}
		if r := tbl.Hit(fp, 5, 1000, 51, RejectOnFull); r.Outcome != Allowed || r.Used != 1 {
			t.Fatalf("key written %v: the same key after a dead claim: %+v", keyWritten, r)
		}
		if s := tbl.state(i).Load(); s&claimingBit != 0 || s&MaxUsed != 1 || tbl.key(i).Load()>>8 != fingerprint(fp) {
			t.Fatalf("key written %v: the dead claim was not completed in place: state %x key %x", keyWritten, s, tbl.key(i).Load())
		}
	}

	tbl := newTable(t, 2)
	fill(t, tbl, probeLen, 100000, 0)
	other := fpOf(tbl, "someone else")
	a, b := tbl.bucketsOf(other)
	i := slotIndex(a, b, 0)
	tbl.state(i).Store(claiming(10, 0xdead)) // a dead claim by a key that never returns
	if r := tbl.Hit(other, 5, 1000, 10+staleClaimTicks, RejectOnFull); r.Outcome != Full {
		t.Fatalf("a fresh claim was taken: %+v", r)
	}
	if r := tbl.Hit(other, 5, 1000, 11+staleClaimTicks, RejectOnFull); r.Outcome != Allowed || r.Evicted {
		t.Fatalf("a stale claim was not reclaimed: %+v", r)
	}
}

// Goroutines stand in for workers here (the integration tests use real processes): many
// hitting one key admit exactly the limit, and new keys raced by many never split.
func TestExactUnderContention(t *testing.T) {
	tbl := newTable(t, 64)
	const goroutines, perGoroutine, limit = 8, 500, 1234
	keys := []uint64{fpOf(tbl, "hot"), fpOf(tbl, "warm"), fpOf(tbl, "cool")}
	var allowed [3]atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perGoroutine; i++ {
				k := i % len(keys)
				if tbl.Hit(keys[k], limit, 100000, 7, EvictOnFull).Outcome == Allowed {
					allowed[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		want := int64(min(limit, goroutines*perGoroutine/len(keys)))
		if k < goroutines*perGoroutine%len(keys) {
			want = int64(min(limit, goroutines*perGoroutine/len(keys)+1))
		}
		if got := allowed[k].Load(); got != want {
			t.Errorf("key %d: %d allowed, want %d", k, got, want)
		}
	}

	// Many goroutines race to install the same fresh keys: each key ends with one slot.
	tbl = newTable(t, 2)
	for round := 0; round < 200; round++ {
		fp := rand.Uint64()
		var admitted atomic.Int64
		var start sync.WaitGroup
		start.Add(1)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				if tbl.Hit(fp, 3, 100, uint32(round*1000), EvictOnFull).Outcome == Allowed {
					admitted.Add(1)
				}
			}()
		}
		start.Done()
		wg.Wait()
		if admitted.Load() != 3 {
			t.Fatalf("round %d: %d admitted for a limit of 3", round, admitted.Load())
		}
		owners := 0
		a, b := tbl.bucketsOf(fp)
		for p := 0; p < probeLen; p++ {
			i := slotIndex(a, b, p)
			if s := tbl.state(i).Load(); s != 0 && s&claimingBit == 0 && tbl.key(i).Load()>>8 == fingerprint(fp) {
				owners++
			}
		}
		if owners != 1 {
			t.Fatalf("round %d: the key owns %d slots", round, owners)
		}
	}
}

// Each table has a secret of its own: a key's fingerprint in one tells nothing of
// another's.
func TestTablesHaveTheirOwnSecret(t *testing.T) {
	if fpOf(newTable(t, 2), "x") == fpOf(newTable(t, 2), "x") {
		t.Error("two tables with different secrets hash alike")
	}
}

func TestReportOncePerSecond(t *testing.T) {
	tbl := newTable(t, 2)
	fill(t, tbl, probeLen, 1000, 0)
	for i := 0; i < 3; i++ {
		tbl.Hit(fpOf(tbl, "spray"+string(rune('a'+i))), 5, 1000, 1, EvictOnFull)
	}
	ev, ref, ok := tbl.Report(2)
	if !ok || ev != 3 || ref != 0 {
		t.Fatalf("first report: %d %d %v, want 3 0 true", ev, ref, ok)
	}
	tbl.Hit(fpOf(tbl, "late"), 5, 1000, 3, RejectOnFull)
	if _, _, ok := tbl.Report(2 + secondTicks - 1); ok {
		t.Fatal("reported twice within a second")
	}
	ev, ref, ok = tbl.Report(2 + secondTicks)
	if !ok || ev != 0 || ref != 1 {
		t.Fatalf("second report: %d %d %v, want 0 1 true", ev, ref, ok)
	}
}

// A claim checks the rest of the probe sequence before it opens a window, so that two
// processes that chose different slots for one new key (their clocks judged an expiry
// differently, say) never both count it.
func TestClaimRecheck(t *testing.T) {
	tests := []struct {
		name       string
		other      int  // probe position of the key's other slot
		otherOwned bool // owned (else claiming)
		mine       int
		wantMine   bool // my claim completes
	}{
		{"the key already owns a later slot", 9, true, 2, false},
		{"the key already owns an earlier slot", 1, true, 2, false},
		{"an earlier claim for the key wins", 1, false, 2, false},
		{"a later claim for the key loses", 12, false, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := newTable(t, 2)
			fp := fpOf(tbl, "new key")
			want := fingerprint(fp)
			a, b := tbl.bucketsOf(fp)
			other, mine := slotIndex(a, b, tt.other), slotIndex(a, b, tt.mine)
			tbl.key(other).Store(want << 8)
			if tt.otherOwned {
				tbl.state(other).Store(live(500, 4))
			} else {
				tbl.state(other).Store(claiming(99, want))
			}
			c := claiming(100, want)
			tbl.state(mine).Store(c)
			done := tbl.complete(a, b, tt.mine, c, want, 1000, 100)
			if done != tt.wantMine {
				t.Fatalf("complete = %v, want %v", done, tt.wantMine)
			}
			mineState, otherState := tbl.state(mine).Load(), tbl.state(other).Load()
			if tt.wantMine {
				if mineState != live(1100, 1) || otherState != 0 {
					t.Fatalf("mine %x other %x: want mine live and the other claim cancelled", mineState, otherState)
				}
			} else if mineState != 0 {
				t.Fatalf("my claim was not cancelled: %x", mineState)
			}
			// Whatever happened, the key now counts in exactly one slot.
			tbl.Hit(fp, 10, 1000, 101, RejectOnFull)
			owners := 0
			for p := 0; p < probeLen; p++ {
				i := slotIndex(a, b, p)
				if s := tbl.state(i).Load(); s != 0 && s&claimingBit == 0 && tbl.key(i).Load()>>8 == want {
					owners++
				}
			}
			if owners != 1 {
				t.Fatalf("the key owns %d slots", owners)
			}
		})
	}
}

// TestLiveEstimate: exact for a table within the sample, and within a few percent of Live
// for a large, partly filled one whose keys spread by hash.
func TestLiveEstimate(t *testing.T) {
	small := newTable(t, 64)
	fill(t, small, 40, 1000, 5)
	if got, want := small.LiveEstimate(50, 1024), small.Live(50); got != want || want != 40 {
		t.Errorf("small table: LiveEstimate %d, Live %d, want both 40", got, want)
	}

	big := newTable(t, 1<<14) // 131,072 slots
	for i := range 30000 {
		fp := fpOf(big, fmt.Sprintf("client-%d", i))
		if r := big.Hit(fp, 100, 1000, 5, EvictOnFull); r.Outcome != Allowed {
			t.Fatalf("key %d: %+v", i, r)
		}
	}
	live := big.Live(50)
	got := big.LiveEstimate(50, 4096)
	if live < 29000 || math.Abs(float64(got-live)) > 0.1*float64(live) {
		t.Errorf("large table: LiveEstimate %d from 4096 slots, Live %d: more than 10%% apart", got, live)
	}
	if got := big.LiveEstimate(5000, 4096); got != 0 {
		t.Errorf("after every window ended: LiveEstimate %d, want 0", got)
	}
}

func BenchmarkLiveEstimate(b *testing.B) {
	tbl := newTable(b, 40960) // about a 10m segment
	for b.Loop() {
		tbl.LiveEstimate(50, 4096)
	}
}

func BenchmarkLive(b *testing.B) {
	tbl := newTable(b, 40960)
	for b.Loop() {
		tbl.Live(50)
	}
}
