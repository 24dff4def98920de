package limitcount

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"gw/shm"
)

// A window table counts requests per key in fixed windows. limit-count is its only user,
// so it lives here; shm keeps the segment it is laid out in and the keyed hash (KeyHash)
// that fingerprints its keys. It lives in the segment's data area and is shared by every
// process that maps the segment:
//
//	[0, 64)    header: 8 words (magic, buckets, secret, evictions, refusals, report state)
//	[64, ...)  buckets of 8 slots; a slot is two words, key then state (16 bytes)
//
// A key's fingerprint picks two buckets; its probe sequence is the first bucket's 8 slots
// then the second's, and a new key goes to the emptier of the two (two-choice hashing: in
// a test, no eviction happened before 70% of the slots held live windows). The key word holds the fingerprint's top 56 bits and an 8-bit
// generation bumped on every change of owner. The state word is one of:
//
//	0                                  free
//	1 | claim time (31) | tag (32)     claiming: a process is installing a key
//	0 | window end (31) | used (32)    owned by the key in the key word; used >= 1
//
// Times are ticks (Tick, 10 ms) modulo 2^31, compared with wrap-around arithmetic, so the
// table works for any uptime. (A window left untouched for a whole cycle, 248 days, could
// look open again; one ending further ahead than twice the key's time_window plus a minute
// is known to be stale, which narrows that to a key returning within that span of the
// cycle's turn, and any key may reclaim the slot meanwhile.) Counting a request for a key that owns a slot is one
// compare-and-swap of the state word. Installing a key (into a free slot, an expired
// window, a stale claim, or a live window evicted for it) is a claim: swap the state to
// claiming, write the key word, check that no other slot of the probe sequence holds or
// is claiming the same key, then swap the state to a fresh window. Any process that finds
// a claim for its own key completes it (helping), and a check that finds two claims for one
// key cancels the later one in probe order, so a key never owns two slots at once and its
// count stays exact across processes. Nothing waits on another process and no lock
// exists: a process killed between any two instructions leaves at most a claiming state,
// which the same key's next request completes or, after a second, any key may take.
//
// Collision odds: keys are told apart by 56 bits of a 64-bit hash keyed with a random
// secret kept in the header, so n keys live at once share a counter by accident with odds
// about n²/2^57 (1 in 144,000 for a million keys); an outsider cannot aim a collision
// without the secret.

// WindowTableVersion is the layout version of a window table. Bump it when the header,
// slot format, probe sequence, tick or key hash (shm.KeyHash) changes: a segment of
// another version must not be read as this one (a binary upgrade then starts with fresh
// counters).
const WindowTableVersion = 1

// Tick is the unit of a window table's clock.
const Tick = 10 * time.Millisecond

const (
	// MaxWindowTicks is the longest window (124 days): half the clock's cycle of 2^31
	// ticks (248 days), so that a window's end is never mistaken for one a cycle earlier.
	MaxWindowTicks = 1 << 30
	// MaxUsed is where a window's count saturates; a limit above it never rejects.
	MaxUsed = 1<<32 - 1

	tickMask         = 1<<31 - 1
	claimingBit      = 1 << 63
	secondTicks      = uint32(time.Second / Tick)
	staleClaimTicks  = secondTicks // a claim takes microseconds; one older than this was abandoned
	ghostSlackTicks  = 60 * secondTicks
	slotsPerBucket   = 8
	probeLen         = 2 * slotsPerBucket
	tableHeaderWords = 8
	wordsPerSlot     = 2
	bucketBytes      = slotsPerBucket * wordsPerSlot * 8
	maxRetries       = 64
)

// Header words.
const (
	hdrMagic = iota
	hdrBuckets
	hdrSecret
	hdrEvictions
	hdrRefusals
	hdrReportTick
	hdrReportedEvictions
	hdrReportedRefusals
)

var tableMagic = binary.LittleEndian.Uint64([]byte("gwwindow"))

// ErrWindowTable means a segment's data area does not hold an initialised window table.
var ErrWindowTable = errors.New("limit-count: not a window table")

// WindowTableCapacity is how many keys a data area of dataSize bytes holds.
func WindowTableCapacity(dataSize int) int {
	if dataSize < tableHeaderWords*8 {
		return 0
	}
	return (dataSize - tableHeaderWords*8) / bucketBytes * slotsPerBucket
}

// InitWindowTable lays out an empty table in a freshly created, zeroed segment. The master
// calls it once, before any worker maps the segment.
func InitWindowTable(seg *shm.Segment) error {
	buckets := (seg.Size() - tableHeaderWords*8) / bucketBytes
	if buckets < 2 {
		return fmt.Errorf("limit-count: %s: %d bytes hold no window table; give it at least %d", seg.Layout().Name, seg.Size(), tableHeaderWords*8+2*bucketBytes)
	}
	var secret [8]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return fmt.Errorf("limit-count: window table secret: %w", err)
	}
	seg.Word(hdrBuckets * 8).Store(uint64(buckets))
	seg.Word(hdrSecret * 8).Store(binary.LittleEndian.Uint64(secret[:]) | 1)
	seg.Word(hdrMagic * 8).Store(tableMagic)
	return nil
}

// WindowTable is a view of a window table in a mapped segment. It is safe for concurrent
// use by any number of goroutines and processes; it holds no state of its own.
type WindowTable struct {
	words   []atomic.Uint64
	buckets uint64
	secret  uint64
}

// OpenWindowTable checks that seg holds a table InitWindowTable laid out and returns a
// view of it. The view is valid while seg is mapped.
func OpenWindowTable(seg *shm.Segment) (*WindowTable, error) {
	if seg.Size() < tableHeaderWords*8 || seg.Word(hdrMagic*8).Load() != tableMagic {
		return nil, fmt.Errorf("%w: %s was not initialised", ErrWindowTable, seg.Layout().Name)
	}
	buckets := seg.Word(hdrBuckets * 8).Load()
	if buckets < 2 || buckets > uint64((seg.Size()-tableHeaderWords*8)/bucketBytes) {
		return nil, fmt.Errorf("%w: %s claims %d buckets in %d bytes", ErrWindowTable, seg.Layout().Name, buckets, seg.Size())
	}
	data := seg.Data()
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&data[0])), len(data)/8)
	return &WindowTable{words: words, buckets: buckets, secret: seg.Word(hdrSecret * 8).Load()}, nil
}

// Capacity is the number of slots, the most keys the table holds at once.
func (t *WindowTable) Capacity() int { return int(t.buckets) * slotsPerBucket }

// Evictions is how many live windows were evicted to make room, since the table was made.
func (t *WindowTable) Evictions() uint64 { return t.words[hdrEvictions].Load() }

// Refusals is how many requests were refused because the table was full, since the
// table was made.
func (t *WindowTable) Refusals() uint64 { return t.words[hdrRefusals].Load() }

// Live counts the slots holding a window that has not ended at now. It reads every slot:
// about a millisecond per 10 MB.
func (t *WindowTable) Live(now uint32) int {
	live := 0
	for i := uint64(0); i < t.buckets*slotsPerBucket; i++ {
		if t.live(i, now) {
			live++
		}
	}
	return live
}

// LiveEstimate is Live read from about maxSlots slots: whole buckets at an even stride,
// the count scaled up. Keys land in buckets by a keyed hash, so a stride is a fair
// sample; a table of at most maxSlots slots is counted exactly. A metrics scrape uses it,
// so that it never walks a large table (and the caches) on a worker's CPU.
func (t *WindowTable) LiveEstimate(now uint32, maxSlots int) int {
	sampled := uint64(max(maxSlots/slotsPerBucket, 1))
	if t.buckets <= sampled {
		return t.Live(now)
	}
	stride := (t.buckets + sampled - 1) / sampled
	var live, seen uint64
	for b := uint64(0); b < t.buckets; b += stride {
		for i := b * slotsPerBucket; i < (b+1)*slotsPerBucket; i++ {
			if t.live(i, now) {
				live++
			}
		}
		seen++
	}
	return int(live * t.buckets / seen)
}

func (t *WindowTable) live(slot uint64, now uint32) bool {
	s := t.state(slot).Load()
	return s != 0 && s&claimingBit == 0 && remaining(s, now) > 0
}

// Report returns the evictions and refusals since the last report and true at most once a
// second across every process sharing the table, so that one of them logs; otherwise
// false.
func (t *WindowTable) Report(now uint32) (evictions, refusals uint64, ok bool) {
	last := t.words[hdrReportTick].Load()
	if last != 0 && (now-uint32(last))&tickMask < secondTicks {
		return 0, 0, false
	}
	if !t.words[hdrReportTick].CompareAndSwap(last, uint64(now)|1<<32) {
		return 0, 0, false
	}
	evictions, refusals = t.Evictions(), t.Refusals()
	evictions -= t.words[hdrReportedEvictions].Swap(evictions)
	refusals -= t.words[hdrReportedRefusals].Swap(refusals)
	return evictions, refusals, true
}

// Ticks converts a Unix time in nanoseconds to the table's clock.
func Ticks(unixNanos int64) uint32 { return uint32(uint64(unixNanos)/uint64(Tick)) & tickMask }

// WindowTicks converts a window length to ticks, rounding up, clamped to MaxWindowTicks.
func WindowTicks(d time.Duration) uint32 {
	if d <= 0 {
		return 1
	}
	ticks := (d + Tick - 1) / Tick
	if ticks > MaxWindowTicks {
		return MaxWindowTicks
	}
	return uint32(ticks)
}

// FullPolicy says what Hit does when every slot a key may use holds a live window.
type FullPolicy uint8

const (
	// EvictOnFull replaces the live window nearest its end (fail open for its key).
	EvictOnFull FullPolicy = iota
	// RejectOnFull answers Full and counts a refusal (fail closed).
	RejectOnFull
)

// Outcome is Hit's verdict.
type Outcome uint8

const (
	// Allowed: the request was counted and is within the limit.
	Allowed Outcome = iota
	// Limited: the window's count has reached the limit; nothing was counted.
	Limited
	// Full: no slot could be had for the key (RejectOnFull, or contention so heavy that
	// Hit gave up rather than spin); nothing was counted.
	Full
)

// HitResult is what Hit found. Used includes this request when Allowed; Left is the
// ticks until the window ends (0 when Full).
type HitResult struct {
	Outcome Outcome
	Used    uint64
	Left    uint32
	// Evicted reports that a live window of another key was evicted for this one.
	Evicted bool
}

// Hit counts one request for the key with fingerprint fp (see KeyHash) in a fixed window
// of window ticks anchored at the key's first request, at time now (Ticks), if fewer than
// limit requests were counted in the current window. It never blocks and does not
// allocate.
func (t *WindowTable) Hit(fp, limit uint64, window, now uint32, policy FullPolicy) HitResult {
	a, b := t.bucketsOf(fp)
	want := fingerprint(fp)
	evicted := false
	for attempt := 0; attempt < maxRetries; attempt++ {
		var free freeSlots
		victim, victimState, victimLeft := -1, uint64(0), uint32(math.MaxUint32)
		claim, claimState := -1, uint64(0)
		found := false
		for p := 0; p < probeLen; p++ {
			i := slotIndex(a, b, p)
			s := t.state(i).Load()
			switch {
			case s == 0:
				free.note(p, s)
			case s&claimingBit != 0:
				if uint32(s) == uint32(want) {
					if claim < 0 {
						claim, claimState = p, s
					}
				} else if (now-uint32(s>>32))&tickMask > staleClaimTicks {
					free.note(p, s)
				}
			default:
				// The key word is read after the state: if the state is unchanged at the
				// compare-and-swap, no claim ran in between, so the key was this one.
				if t.key(i).Load()>>8 == want {
					if r, ok := t.count(i, s, limit, window, now); ok {
						r.Evicted = evicted
						return r
					}
					found = true
					break
				}
				left := remaining(s, now)
				if left == 0 {
					free.note(p, s)
				} else if left < victimLeft {
					victim, victimState, victimLeft = p, s, left
				}
			}
			if found {
				break
			}
		}
		if found {
			continue // lost a race on the key's own slot: look again
		}
		fresh := HitResult{Outcome: Allowed, Used: 1, Left: window}
		switch {
		case claim >= 0:
			if t.complete(a, b, claim, claimState, want, window, now) {
				fresh.Evicted = evicted
				return fresh
			}
		case free.found():
			p, freeState := free.best()
			c := claiming(now, want)
			if t.state(slotIndex(a, b, p)).CompareAndSwap(freeState, c) && t.complete(a, b, p, c, want, window, now) {
				fresh.Evicted = evicted
				return fresh
			}
		case victim >= 0 && policy == EvictOnFull:
			c := claiming(now, want)
			if t.state(slotIndex(a, b, victim)).CompareAndSwap(victimState, c) {
				evicted = true
				t.words[hdrEvictions].Add(1)
				if t.complete(a, b, victim, c, want, window, now) {
					fresh.Evicted = true
					return fresh
				}
			}
		default:
			if policy == RejectOnFull {
				t.words[hdrRefusals].Add(1)
			}
			return HitResult{Outcome: Full, Evicted: evicted}
		}
	}
	return HitResult{Outcome: Full, Evicted: evicted}
}

// freeSlots notes the slots a new key may take (free, expired or a stale claim), per bucket.
type freeSlots struct {
	first [2]int
	state [2]uint64
	count [2]int
}

func (f *freeSlots) note(p int, s uint64) {
	bucket := p / slotsPerBucket
	if f.count[bucket] == 0 {
		f.first[bucket], f.state[bucket] = p, s
	}
	f.count[bucket]++
}

func (f *freeSlots) found() bool { return f.count[0]+f.count[1] > 0 }

// best is a slot of the bucket with more room: choosing the emptier of two buckets keeps
// them even, so a key rarely finds both full before the table is (two-choice hashing).
func (f *freeSlots) best() (p int, state uint64) {
	if f.count[1] > f.count[0] {
		return f.first[1], f.state[1]
	}
	return f.first[0], f.state[0]
}

// count counts a request in slot i, which held state s owned by the key. It reports false
// when it lost a race and the caller must look again.
func (t *WindowTable) count(i, s, limit uint64, window, now uint32) (HitResult, bool) {
	left := remaining(s, now)
	// A request may carry a time a little older than the window's opening (it started
	// before another worker's request opened it), so its end may lie somewhat more than a
	// window ahead. Far more than that, and the window was opened a clock cycle ago (the
	// slot sat untouched for 248 days): it has ended.
	if left > 2*window+ghostSlackTicks {
		left = 0
	}
	if left == 0 { // this request opens the next window, in place
		if t.state(i).CompareAndSwap(s, live((now+window)&tickMask, 1)) {
			return HitResult{Outcome: Allowed, Used: 1, Left: window}, true
		}
		return HitResult{}, false
	}
	left = min(left, window)
	used := s & MaxUsed
	switch {
	case used >= limit:
		return HitResult{Outcome: Limited, Used: used, Left: left}, true
	case used == MaxUsed: // saturated, and the limit is higher still
		return HitResult{Outcome: Allowed, Used: used, Left: left}, true
	case t.state(i).CompareAndSwap(s, s+1):
		return HitResult{Outcome: Allowed, Used: used + 1, Left: left}, true
	}
	return HitResult{}, false
}

// complete finishes the claim c of probe position p for the key want: it writes the key
// word, makes sure no other slot of the probe sequence holds or claims the key, and opens
// a window counting this request. It reports false when the claim was cancelled or
// completed by another process (the caller looks again).
func (t *WindowTable) complete(a, b uint64, p int, c, want uint64, window, now uint32) bool {
	i := slotIndex(a, b, p)
	for {
		k := t.key(i).Load()
		if k>>8 == want {
			break
		}
		if t.state(i).Load() != c {
			return false
		}
		// The generation byte makes a late writer, whose claim was taken over and whose
		// slot changed owner meanwhile, fail instead of overwriting the new owner's key.
		if t.key(i).CompareAndSwap(k, want<<8|uint64(uint8(k)+1)) {
			break
		}
	}
	for q := 0; q < probeLen; q++ {
		if q == p {
			continue
		}
		j := slotIndex(a, b, q)
		for {
			s := t.state(j).Load()
			if s&claimingBit != 0 && uint32(s) == uint32(want) {
				if q < p { // the earlier claim in probe order wins
					t.state(i).CompareAndSwap(c, 0)
					return false
				}
				if !t.state(j).CompareAndSwap(s, 0) {
					continue // it changed: judge it again
				}
			} else if s != 0 && s&claimingBit == 0 && t.key(j).Load()>>8 == want {
				t.state(i).CompareAndSwap(c, 0) // the key already owns a slot
				return false
			}
			break
		}
	}
	return t.state(i).CompareAndSwap(c, live((now+window)&tickMask, 1))
}

func (t *WindowTable) bucketsOf(fp uint64) (a, b uint64) {
	ba, _ := bits.Mul64(fp, t.buckets)
	bb, _ := bits.Mul64(fp*0x9e3779b97f4a7c15, t.buckets)
	if bb == ba {
		bb = (ba + 1) % t.buckets
	}
	return ba * slotsPerBucket, bb * slotsPerBucket
}

func slotIndex(a, b uint64, p int) uint64 {
	if p < slotsPerBucket {
		return a + uint64(p)
	}
	return b + uint64(p-slotsPerBucket)
}

func (t *WindowTable) key(slot uint64) *atomic.Uint64 {
	return &t.words[tableHeaderWords+slot*wordsPerSlot]
}

func (t *WindowTable) state(slot uint64) *atomic.Uint64 {
	return &t.words[tableHeaderWords+slot*wordsPerSlot+1]
}

// fingerprint is the 56 bits of a key's hash stored in the key word; never zero, so that a
// never-used slot's key word matches no key.
func fingerprint(fp uint64) uint64 {
	if f := fp >> 8; f != 0 {
		return f
	}
	return 1
}

func claiming(now uint32, want uint64) uint64 {
	return claimingBit | uint64(now&tickMask)<<32 | uint64(uint32(want))
}

func live(end uint32, used uint64) uint64 { return uint64(end&tickMask)<<32 | used }

// remaining is the ticks until an owned state's window ends, 0 once it has ended.
func remaining(s uint64, now uint32) uint32 {
	left := (uint32(s>>32) - now) & tickMask
	if left > MaxWindowTicks {
		return 0 // the end lies in the past (modulo the clock's cycle)
	}
	return left
}

// KeyHash returns a hash seeded with the table's secret, so that every process sharing
// the table computes the same fingerprints and outsiders cannot predict them.
func (t *WindowTable) KeyHash() shm.KeyHash { return shm.NewKeyHash(t.secret) }
