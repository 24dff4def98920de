package shm

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// A health table holds the health of upstream nodes, shared by the master (which probes
// them) and every worker (which reads it when picking a node and counts live traffic into
// it). It lives in a segment's data area:
//
//	[0, 64)    header: 8 words (magic, slot count, the rest reserved)
//	[64, ...)  slots of two words: key, then state
//
// A key is HealthKey's 64-bit hash of an upstream's name and a node's address; 0 marks a
// free slot and 1 a slot given up (a tombstone, which lookups step over). Keys are
// found by linear probing from the hash, at most maxHealthProbe slots. Only the master
// installs and removes keys (Sync), before it hands workers a snapshot that uses them, so a
// worker only ever looks keys up, once per snapshot, and keeps the slot's index. Every
// access after that checks that the slot still holds the key, so a worker on an older
// snapshot never reads or counts into a slot meanwhile given to another node.
//
// The state word packs four 8-bit counters (successes, HTTP failures, TCP failures,
// timeouts, from bit 0 up) and the unhealthy flag (bit 32). Zero is a healthy node with
// nothing counted, so a fresh slot starts healthy, as APISIX's nodes do. Counting follows
// lua-resty-healthcheck: a success clears the failure counters and a failure clears the
// success counter, so thresholds count consecutive events; reaching one flips the state
// and clears every counter. Each event is one compare-and-swap loop on the state word: no
// lock, nothing a killed process can leave half done.

// HealthTableVersion is the layout version of a health table. Bump it when the header,
// slot format, key hash or state packing changes.
const HealthTableVersion = 1

// HealthLayoutName names the health table's segment.
const HealthLayoutName = "health-check"

// HealthLayout is the layout of the health table's segment.
var HealthLayout = Layout{Name: HealthLayoutName, Version: HealthTableVersion}

const (
	healthHeaderWords = 8
	healthSlotWords   = 2
	maxHealthProbe    = 256
	keyFree           = 0
	keyTombstone      = 1
	unhealthyBit      = 1 << 32
	counterMask       = 0xff
	counterMax        = 0xff
	successShift      = 0
	failureCounters   = 0xffffff00 // the three failure counters' bits
)

var healthMagic = uint64(0x6777_6865_616c_7468) // "gwhealth"

// ErrHealthTable means a segment's data area does not hold an initialised health table.
var ErrHealthTable = errors.New("shm: not a health table")

// HealthEvent is what one probe or one live request said about a node.
type HealthEvent uint8

// The events, in the order of their counters in the state word.
const (
	HealthSuccess HealthEvent = iota
	HealthHTTPFailure
	HealthTCPFailure
	HealthTimeout
)

// HealthTableCapacity is how many nodes a data area of dataSize bytes holds.
func HealthTableCapacity(dataSize int) int {
	if dataSize < healthHeaderWords*8 {
		return 0
	}
	return (dataSize - healthHeaderWords*8) / (healthSlotWords * 8)
}

// InitHealthTable lays out an empty table in a freshly created, zeroed segment. The master
// calls it once, before any worker maps the segment.
func InitHealthTable(seg *Segment) error {
	slots := HealthTableCapacity(seg.Size())
	if slots < 1 {
		return fmt.Errorf("shm: %s: %d bytes hold no health table; give it at least %d", seg.Layout().Name, seg.Size(), (healthHeaderWords+healthSlotWords)*8)
	}
	seg.Word(8).Store(uint64(slots))
	seg.Word(0).Store(healthMagic)
	return nil
}

// HealthTable is a view of a health table in a mapped segment. It is safe for concurrent
// use by any number of goroutines and processes; it holds no state of its own.
type HealthTable struct {
	words []atomic.Uint64
	slots uint64
}

// OpenHealthTable checks that seg holds a table InitHealthTable laid out and returns a
// view of it. The view is valid while seg is mapped.
func OpenHealthTable(seg *Segment) (*HealthTable, error) {
	if seg.Size() < healthHeaderWords*8 || seg.Word(0).Load() != healthMagic {
		return nil, fmt.Errorf("%w: %s was not initialised", ErrHealthTable, seg.Layout().Name)
	}
	slots := seg.Word(8).Load()
	if slots < 1 || slots > uint64(HealthTableCapacity(seg.Size())) {
		return nil, fmt.Errorf("%w: %s claims %d slots in %d bytes", ErrHealthTable, seg.Layout().Name, slots, seg.Size())
	}
	data := seg.Data()
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&data[0])), len(data)/8)
	return &HealthTable{words: words, slots: slots}, nil
}

// Capacity is the number of slots, the most nodes the table holds at once.
func (t *HealthTable) Capacity() int { return int(t.slots) }

// HealthKey is the key of node addr ("host:port") of the upstream named upstream: FNV-1a
// over both, kept clear of the free and tombstone markers. It is the same in every process
// and every build of one layout version.
func HealthKey(upstream, addr string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(upstream); i++ {
		h = (h ^ uint64(upstream[i])) * prime
	}
	h = (h ^ 0) * prime // a separator: ("a", "bc") and ("ab", "c") differ
	for i := 0; i < len(addr); i++ {
		h = (h ^ uint64(addr[i])) * prime
	}
	if h <= keyTombstone {
		h += 2
	}
	return h
}

func (t *HealthTable) key(i uint64) *atomic.Uint64 {
	return &t.words[healthHeaderWords+i*healthSlotWords]
}

func (t *HealthTable) state(i uint64) *atomic.Uint64 {
	return &t.words[healthHeaderWords+i*healthSlotWords+1]
}

// find returns the slot holding key, or -1.
func (t *HealthTable) find(key uint64) int {
	probes := min(t.slots, maxHealthProbe)
	for p, i := uint64(0), key%t.slots; p < probes; p, i = p+1, (i+1)%t.slots {
		switch t.key(i).Load() {
		case key:
			return int(i)
		case keyFree:
			return -1
		}
	}
	return -1
}

// Sync makes the table hold exactly keys: every other key is given up, and each missing
// one is installed in a free slot with a fresh, healthy state. Keys already present keep
// their state. It returns the keys that found no slot within their probe sequence (the
// table is too full): those nodes go unchecked and are always used. Only the master calls
// it, and only from one goroutine at a time.
func (t *HealthTable) Sync(keys map[uint64]bool) (homeless []uint64) {
	for i := uint64(0); i < t.slots; i++ {
		k := t.key(i).Load()
		if k > keyTombstone && !keys[k] {
			t.key(i).Store(keyTombstone)
		}
	}
	for key := range keys {
		if t.find(key) >= 0 {
			continue
		}
		if !t.install(key) {
			homeless = append(homeless, key)
		}
	}
	return homeless
}

func (t *HealthTable) install(key uint64) bool {
	probes := min(t.slots, maxHealthProbe)
	for p, i := uint64(0), key%t.slots; p < probes; p, i = p+1, (i+1)%t.slots {
		k := t.key(i).Load()
		if k != keyFree && k != keyTombstone {
			continue
		}
		// The state first: a worker that sees the key must see a fresh state.
		t.state(i).Store(0)
		if t.key(i).CompareAndSwap(k, key) {
			return true
		}
	}
	return false
}

// Lookup returns the handle of key's node, ok false when the table does not hold it.
// Workers call it when they build a snapshot, never per request.
func (t *HealthTable) Lookup(key uint64) (n HealthNode, ok bool) {
	i := t.find(key)
	if i < 0 {
		return HealthNode{}, false
	}
	return HealthNode{table: t, slot: uint64(i), key: key}, true
}

// HealthNode is one node's entry in a health table. The zero HealthNode is a node without
// an entry: always healthy, and reports are dropped. It is a small value, safe to copy and
// to use from any goroutine.
type HealthNode struct {
	table *HealthTable
	slot  uint64
	key   uint64
}

// Valid reports whether n refers to an entry.
func (n HealthNode) Valid() bool { return n.table != nil }

// load returns the node's state word, ok false when the slot no longer holds the key.
func (n HealthNode) load() (uint64, bool) {
	if n.table == nil || n.table.key(n.slot).Load() != n.key {
		return 0, false
	}
	return n.table.state(n.slot).Load(), true
}

// Healthy reports the node's health; a node without an entry is healthy. It is one or two
// atomic loads and never allocates.
func (n HealthNode) Healthy() bool {
	s, ok := n.load()
	return !ok || s&unhealthyBit == 0
}

// Counters returns the node's counters: consecutive successes, HTTP failures, TCP failures
// and timeouts since the last change of state.
func (n HealthNode) Counters() (successes, httpFailures, tcpFailures, timeouts int) {
	s, _ := n.load()
	return int(s & counterMask), int(s >> 8 & counterMask), int(s >> 16 & counterMask), int(s >> 24 & counterMask)
}

// Report counts one event for the node. threshold is how many consecutive events of this
// kind change the node's state (successes make an unhealthy node healthy, failures of one
// kind make a healthy node unhealthy); 0 means this source does not count the kind, and
// the event is dropped. It returns whether the event changed the node's state, and the
// state after it. It never allocates.
func (n HealthNode) Report(e HealthEvent, threshold int) (changed, healthy bool) {
	if n.table == nil || threshold <= 0 {
		return false, n.Healthy()
	}
	state := n.table.state(n.slot)
	for {
		if n.table.key(n.slot).Load() != n.key {
			return false, true
		}
		old := state.Load()
		next, flipped := healthStep(old, e, threshold)
		if next == old || state.CompareAndSwap(old, next) {
			return flipped, next&unhealthyBit == 0
		}
	}
}

// healthStep is the state after event e: counters bumped and cleared, the state flipped once a
// threshold is reached.
func healthStep(s uint64, e HealthEvent, threshold int) (next uint64, flipped bool) {
	unhealthy := s&unhealthyBit != 0
	shift := uint(e) * 8
	if e == HealthSuccess {
		s &^= failureCounters
	} else {
		s &^= counterMask << successShift
	}
	// A healthy node needs no successes counted, an unhealthy one no failures: only the
	// events that lead towards the other state are counted.
	if (e == HealthSuccess) != unhealthy {
		return s, false
	}
	count := s >> shift & counterMask
	if count < counterMax {
		count++
	}
	if int(count) >= threshold {
		return s&unhealthyBit ^ unhealthyBit, true
	}
	return s&^(counterMask<<shift) | count<<shift, false
}

// Slot is the index of n's slot, for tests and diagnostics.
func (n HealthNode) Slot() int { return int(n.slot) }
