package shm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// A keyed table maps key fingerprints (KeyHash) to one 56-bit payload each, shared by
// every process that maps its segment. It is the primitive of the traffic-control
// plugins whose state is a number per key and whose every change is one read-modify-write
// of it: limit-req's arrival time, limit-conn's requests in flight, api-breaker's state
// per route. Each plugin has its own segment and gives the payload its meaning; the table
// knows only which payloads are idle, which the caller says at each insertion. Layout of
// the data area:
//
//	[0, 64)     header: 8 words (magic, buckets, secret, full, 4 unused)
//	[64, ...)   buckets of 128 bytes: a lock word, a spare word, and 7 slots of two
//	            words, key then state
//
// A key lives only in the bucket its fingerprint picks, in any of its 7 slots. The key
// word holds the fingerprint's top 56 bits and the slot's 8-bit generation; the state
// word holds the same generation in its top 8 bits and the payload below. A slot belongs
// to the key in its key word only while the two generations agree.
//
// Reading and changing a key's payload takes no lock: Find scans the bucket, and Entry's
// CompareAndSwap changes the payload with one 64-bit compare-and-swap of the state word,
// which fails if the slot has changed owner since (the generation is part of the word).
// Giving a slot to a new key (Insert) takes the bucket's lock, so that two processes
// never install one key twice: under it the bucket is scanned again, then the slot's
// state is swapped to the next generation and the new payload (failing, and trying
// again, if a lock-free update got there first), then the key word is written.
//
// Crashes. A process killed between any two instructions leaves the table usable and
// every payload exact: an update is one compare-and-swap, so it happened or it did not.
// Killed holding a bucket's lock, it delays insertions into that bucket (and only those;
// keys already there are counted meanwhile) for lockStale, one second, after which the
// next inserter takes the lock over. Killed between the state's swap and the key word's
// write, it leaves a slot whose generations disagree, which no key finds and the next
// insertion into the bucket takes as free. The one inexactness is a process stopped, not
// killed, for more than lockStale while holding a lock (SIGSTOP, a machine swapping): the
// lock is taken from it, and if both then install the same key, the key has two slots
// until they fall idle, and its requests count in one of them.
//
// Collisions: keys are told apart by 56 bits of a hash keyed with the table's secret,
// so n live keys share a payload by accident with odds about n²/2^57.
type KeyedTable struct {
	words   []atomic.Uint64
	buckets uint64
	secret  uint64
}

const (
	keyedHeaderWords = 8
	keyedBucketWords = 16
	keyedSlots       = 7
	keyedHdrMagic    = 0
	keyedHdrBuckets  = 1
	keyedHdrSecret   = 2
	keyedHdrFull     = 3
	genShift         = 56
	payloadMask      = 1<<genShift - 1
	fingerprintMask  = ^uint64(0xff)
	// lockStale is how long a bucket's lock may be held before another process takes it
	// over: an insertion takes microseconds, so a holder that long was killed.
	lockStale = int64(time.Second)
)

// MaxPayload is the largest payload a keyed table holds.
const MaxPayload = payloadMask

// ErrKeyedTable means a segment's data area does not hold the keyed table asked for.
var ErrKeyedTable = errors.New("shm: not a keyed table")

// KeyedTableCapacity is how many keys a data area of dataSize bytes holds.
func KeyedTableCapacity(dataSize int) int {
	return max(dataSize-keyedHeaderWords*8, 0) / (keyedBucketWords * 8) * keyedSlots
}

// InitKeyedTable lays out an empty table in a freshly created, zeroed segment, marked
// with magic (the owner's, so that one plugin's segment is never read as another's). The
// master calls it once, before any worker maps the segment.
func InitKeyedTable(seg *Segment, magic uint64) error {
	buckets := (seg.Size() - keyedHeaderWords*8) / (keyedBucketWords * 8)
	if buckets < 1 {
		return fmt.Errorf("shm: %s: %d bytes hold no keyed table; give it at least %d", seg.Layout().Name, seg.Size(),
			keyedHeaderWords*8+keyedBucketWords*8)
	}
	var secret [8]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return fmt.Errorf("shm: %s: keyed table secret: %w", seg.Layout().Name, err)
	}
	seg.Word(keyedHdrBuckets * 8).Store(uint64(buckets))
	seg.Word(keyedHdrSecret * 8).Store(binary.LittleEndian.Uint64(secret[:]))
	seg.Word(keyedHdrMagic * 8).Store(magic)
	return nil
}

// OpenKeyedTable checks that seg holds a table InitKeyedTable laid out with magic and
// returns a view of it, valid while seg is mapped. The view holds no state of its own and
// is safe for concurrent use by any number of goroutines and processes.
func OpenKeyedTable(seg *Segment, magic uint64) (*KeyedTable, error) {
	if seg.Size() < keyedHeaderWords*8 || seg.Word(keyedHdrMagic*8).Load() != magic {
		return nil, fmt.Errorf("%w: %s was not initialised as one", ErrKeyedTable, seg.Layout().Name)
	}
	buckets := seg.Word(keyedHdrBuckets * 8).Load()
	if buckets < 1 || buckets > uint64((seg.Size()-keyedHeaderWords*8)/(keyedBucketWords*8)) {
		return nil, fmt.Errorf("%w: %s claims %d buckets in %d bytes", ErrKeyedTable, seg.Layout().Name, buckets, seg.Size())
	}
	data := seg.Data()
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&data[0])), len(data)/8)
	return &KeyedTable{words: words, buckets: buckets, secret: seg.Word(keyedHdrSecret * 8).Load()}, nil
}

// KeyHash returns a hash keyed with the table's secret, for its fingerprints.
func (t *KeyedTable) KeyHash() KeyHash { return NewKeyHash(t.secret) }

// Capacity is the most keys the table holds at once.
func (t *KeyedTable) Capacity() int { return int(t.buckets) * keyedSlots }

// Full is how many insertions found their bucket holding no idle slot, since the table
// was made.
func (t *KeyedTable) Full() uint64 { return t.words[keyedHdrFull].Load() }

// Entry is one key's slot, as Find or Insert found it. It is a value for one request:
// its methods fail once the slot has passed to another key.
type Entry struct {
	state *atomic.Uint64
	gen   uint64 // the slot's generation, shifted into place
	slot  uint32
}

// Slot names the entry's slot and generation, for a record kept elsewhere in shared
// memory (limit-conn's ledger of what a worker holds); EntryAt finds it again.
func (e Entry) Slot() (slot uint32, gen uint8) { return e.slot, uint8(e.gen >> genShift) }

// EntryAt is the entry of slot and gen, as Slot named it; false when the slot has passed
// to another key since, or does not exist.
func (t *KeyedTable) EntryAt(slot uint32, gen uint8) (Entry, bool) {
	if uint64(slot) >= t.buckets*keyedSlots {
		return Entry{}, false
	}
	st := &t.words[t.stateWord(slot)]
	e := Entry{state: st, gen: uint64(gen) << genShift, slot: slot}
	_, ok := e.Load()
	return e, ok
}

// Range calls fn with every key's entry and payload, slot by slot, until fn returns
// false. It reads the whole table: a millisecond or so per 10 MB.
func (t *KeyedTable) Range(fn func(e Entry, payload uint64) bool) {
	for slot := uint32(0); uint64(slot) < t.buckets*keyedSlots; slot++ {
		w := t.stateWord(slot)
		kw, s := t.words[w-1].Load(), t.words[w].Load()
		if kw == 0 || (kw&0xff)<<genShift != s&^payloadMask {
			continue
		}
		if !fn(Entry{state: &t.words[w], gen: s &^ payloadMask, slot: slot}, s&payloadMask) {
			return
		}
	}
}

// stateWord is the index of slot's state word.
func (t *KeyedTable) stateWord(slot uint32) int {
	return keyedHeaderWords + int(slot/keyedSlots)*keyedBucketWords + 3 + 2*int(slot%keyedSlots)
}

// Load returns the key's payload, and false when the slot is no longer the key's (find
// it again).
func (e Entry) Load() (payload uint64, ok bool) {
	s := e.state.Load()
	return s & payloadMask, s&^payloadMask == e.gen
}

// CompareAndSwap sets the key's payload to new if it is old and the slot is still the
// key's. A false return means another process changed the payload (Load again) or the
// slot changed owner (Load says so).
func (e Entry) CompareAndSwap(old, new uint64) bool {
	return e.state.CompareAndSwap(e.gen|old, e.gen|new&payloadMask)
}

// Add adds delta to the key's payload, which must stay within 0 and MaxPayload (the
// caller's to ensure), and returns the payload after it; false when the slot is no
// longer the key's.
func (e Entry) Add(delta int64) (payload uint64, ok bool) {
	for {
		s := e.state.Load()
		if s&^payloadMask != e.gen {
			return 0, false
		}
		p := uint64(int64(s&payloadMask) + delta)
		if e.state.CompareAndSwap(s, e.gen|p&payloadMask) {
			return p, true
		}
	}
}

func (t *KeyedTable) bucket(fp uint64) int {
	// The bucket comes from the low bits, the stored fingerprint from the high ones, so
	// that keys sharing a bucket still differ in what is stored.
	return keyedHeaderWords + int(fp%t.buckets)*keyedBucketWords
}

// slotOf numbers slot i of the bucket at word b.
func (t *KeyedTable) slotOf(b, i int) uint32 {
	return uint32((b-keyedHeaderWords)/keyedBucketWords*keyedSlots + i)
}

func storedKey(fp uint64) uint64 {
	k := fp & fingerprintMask
	if k == 0 {
		k = 1 << 8 // a key word of 0 is a slot never used
	}
	return k
}

// Find returns key fp's slot, without a lock; false when the key has none.
func (t *KeyedTable) Find(fp uint64) (Entry, bool) {
	b, want := t.bucket(fp), storedKey(fp)
	for i := 0; i < keyedSlots; i++ {
		k := &t.words[b+2+2*i]
		kw := k.Load()
		if kw&fingerprintMask != want {
			continue
		}
		st := &t.words[b+3+2*i]
		if gen := (kw & 0xff) << genShift; st.Load()&^payloadMask == gen {
			return Entry{state: st, gen: gen, slot: t.slotOf(b, i)}, true
		}
	}
	return Entry{}, false
}

// Insert gives key fp a slot holding payload, or returns the one it has (another process
// may have inserted it since Find; existed then says so, and the payload is not
// written), under the bucket's lock. A slot is taken if it was
// never used, was left half given, or holds a payload below idleBelow (the caller's idle:
// a bucket that has drained, a connection count of 0). With none such, evict takes the
// slot of the lowest payload, and without evict Insert returns false (and counts it in
// Full). now is the wall clock in Unix nanoseconds, for the lock's age.
func (t *KeyedTable) Insert(fp, payload, idleBelow uint64, evict bool, now int64) (e Entry, existed, ok bool) {
	return t.insert(fp, payload, idleBelow, evict, noSlot, now)
}

// InsertBeside is Insert without eviction that never takes keep's slot, even idle: for
// a second entry that must live beside a first one still idle. limit-conn inserts a
// key's count at 0 (idle until the request's place is added), then the ledger entry
// naming it; when both fingerprints fall in one bucket, a plain Insert of the ledger
// takes the idle count's slot, and the count's next Insert the ledger's, forever.
func (t *KeyedTable) InsertBeside(fp, payload, idleBelow uint64, keep Entry, now int64) (e Entry, existed, ok bool) {
	return t.insert(fp, payload, idleBelow, false, keep.slot, now)
}

// noSlot is no slot's number: a table holds at most 2^22 of them, well below it.
const noSlot = ^uint32(0)

func (t *KeyedTable) insert(fp, payload, idleBelow uint64, evict bool, keep uint32, now int64) (e Entry, existed, ok bool) {
	b, want := t.bucket(fp), storedKey(fp)
	stamp := t.lock(b, now)
	defer t.unlock(b, stamp)
	for {
		if e, ok := t.Find(fp); ok {
			return e, true, true
		}
		victim, seen := -1, uint64(0)
		for i := 0; i < keyedSlots; i++ {
			if t.slotOf(b, i) == keep {
				continue
			}
			kw, s := t.words[b+2+2*i].Load(), t.words[b+3+2*i].Load()
			if kw == 0 || (kw&0xff)<<genShift != s&^payloadMask || s&payloadMask < idleBelow {
				victim, seen = i, s
				break
			}
			if evict && (victim < 0 || s&payloadMask < seen&payloadMask) {
				victim, seen = i, s
			}
		}
		if victim < 0 {
			t.words[keyedHdrFull].Add(1)
			return Entry{}, false, false
		}
		// The swap is from the state as seen: if a lock-free update changed it since (the
		// slot is no longer idle), it fails and the bucket is looked at again.
		gen := ((seen>>genShift + 1) & 0xff) << genShift
		st := &t.words[b+3+2*victim]
		if !st.CompareAndSwap(seen, gen|payload&payloadMask) {
			continue
		}
		t.words[b+2+2*victim].Store(want | gen>>genShift)
		return Entry{state: st, gen: gen, slot: t.slotOf(b, victim)}, false, true
	}
}

// lock takes bucket b's lock word, which holds its holder's clock reading, and returns
// the reading: one older than lockStale is a holder that was killed, and the lock is
// taken over.
func (t *KeyedTable) lock(b int, now int64) uint64 {
	w := &t.words[b]
	for {
		stamp := uint64(now) | 1
		held := w.Load()
		if held == 0 && w.CompareAndSwap(0, stamp) {
			return stamp
		}
		if held != 0 && now-int64(held) > lockStale && w.CompareAndSwap(held, stamp) {
			return stamp
		}
		runtime.Gosched()
		now = time.Now().UnixNano()
	}
}

// unlock clears this holder's stamp only: a lock taken over while it was stopped is the
// new holder's.
func (t *KeyedTable) unlock(b int, stamp uint64) { t.words[b].CompareAndSwap(stamp, 0) }
