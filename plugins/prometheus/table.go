package prometheus

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"gw/conf"
	"gw/shm"
)

// SegmentLayout names the metrics segment; bump Version whenever the layout below changes.
var SegmentLayout = shm.Layout{Name: "metrics", Version: 1}

// The segment's data area, in order; every offset is a multiple of 64 (a cache line).
const (
	// control words
	offCapacity   = 0  // entries the table holds, the overflow entry 0 included
	offUsed       = 8  // entries handed out so far; may run past capacity, read it clamped
	offOverflowed = 16 // resolutions that found the table full and used the overflow entry
	offSlots      = 24 // index slots, a power of two
	offRetired    = 32 // [2]uint64: accepted and requests older binaries folded out of worker areas
	offWasted     = 48 // entries lost to a race for the same label set (never indexed)
	controlSize   = 64

	// WorkerAreas is how many worker processes can record connection counts at once,
	// draining generations included.
	WorkerAreas    = 256
	workerAreaSize = 64
	offAreas       = controlSize
	offIndex       = offAreas + WorkerAreas*workerAreaSize

	// EntrySize is the bytes one label set takes: counters and label text.
	EntrySize = 1152
)

// Entry layout: words first, then the label text.
const (
	entHash     = 0  // FNV-1a of code and label values; never 0 in a written entry
	entCode     = 8  // HTTP status code
	entTextLen  = 16 // bytes of label text
	entCounters = 64 // a counters struct
	entText     = 512
	textSize    = EntrySize - entText
)

// Latency types, APISIX's "type" label of apisix_http_latency.
const (
	latencyRequest = iota
	latencyUpstream
	latencyApisix
	latencyTypes
)

var latencyTypeNames = [latencyTypes]string{"request", "upstream", "apisix"}

// BucketsMillis are APISIX's default apisix_http_latency bucket bounds, in milliseconds.
var BucketsMillis = [...]uint64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000}

// bucketsNanos are BucketsMillis in nanoseconds, the unit latencies are measured in.
var bucketsNanos = func() (b [len(BucketsMillis)]int64) {
	for i, ms := range BucketsMillis {
		b[i] = int64(ms) * 1e6
	}
	return b
}()

// histogram is one latency histogram: per-bucket (not cumulative) counts, the last one
// past every bound (+Inf), and the sum of observations in nanoseconds. Its count is the
// sum of its buckets, so count and buckets can never disagree.
type histogram struct {
	buckets [len(BucketsMillis) + 1]uint64
	sumNano uint64
}

// counters is the part of an entry the request path adds to. It overlays shared memory,
// so every access is atomic. There is no status count: an entry is one status code, and
// each request adds exactly one request-latency observation, so that histogram's count is
// the status count, and the two can never disagree.
type counters struct {
	ingress uint64
	egress  uint64
	latency [latencyTypes]histogram
}

func init() {
	if entCounters+unsafe.Sizeof(counters{}) > entText {
		panic("BUG: prometheus: counters overlap the label text")
	}
}

// count is the number of observations, the sum of the buckets.
func (h *histogram) count() uint64 {
	var n uint64
	for i := range h.buckets {
		n += atomic.LoadUint64(&h.buckets[i])
	}
	return n
}

// observe adds one latency, in nanoseconds, to h: two atomic adds.
func (h *histogram) observe(nanos int64) {
	if nanos < 0 {
		nanos = 0
	}
	i := 0
	for i < len(bucketsNanos) && nanos > bucketsNanos[i] {
		i++
	}
	atomic.AddUint64(&h.buckets[i], 1)
	atomic.AddUint64(&h.sumNano, uint64(nanos))
}

// Label values of one series, in APISIX's order. Code is kept apart as a number.
const (
	labelRoute = iota
	labelMatchedURI
	labelMatchedHost
	labelService
	labelConsumer
	labelNode
	labelCount
)

// maxValue is the longest label value stored as is; longer ones are cut and end in "~"
// and a hash of the whole value, so two long values never print the same.
const maxValue = 100

// labels is one label set. The zero labels with code 0 is the overflow series.
type labels struct {
	code   int
	values [labelCount]string
}

// hash is FNV-1a over the code and every value, each value closed by 0xff, which no
// UTF-8 text contains.
func (l *labels) hash() uint64 {
	h := fnvOffset
	h = fnvByte(h, byte(l.code>>8))
	h = fnvByte(h, byte(l.code))
	for _, v := range l.values {
		h = fnvString(h, v)
		h = fnvByte(h, 0xff)
	}
	if h == 0 {
		h = 1
	}
	return h
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// encode writes the values as length-prefixed text into dst, cutting long values.
func (l *labels) encode(dst []byte) []byte {
	for _, v := range l.values {
		if len(v) > maxValue {
			cut := maxValue - 17
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			v = fmt.Sprintf("%s~%016x", v[:cut], fnvString(fnvOffset, v))
		}
		dst = append(dst, byte(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// decodeText splits label text back into values. The text was written by encode, so a
// malformed one is a broken invariant; it yields empty values rather than a panic.
func decodeText(text []byte, values *[labelCount][]byte) {
	for i := range values {
		values[i] = nil
		if len(text) == 0 {
			continue
		}
		n := int(text[0])
		if 1+n > len(text) {
			return
		}
		values[i] = text[1 : 1+n]
		text = text[1+n:]
	}
}

// Table is the series table in a metrics segment. Any number of processes may use one
// segment at once: entries are claimed with atomic adds and published with a CAS on an
// index slot, and counters are only ever added to.
type Table struct {
	seg      *shm.Segment
	data     []byte
	capacity int
	slots    int
}

// ErrNotMetrics means a segment was not initialised as a metrics table.
var ErrNotMetrics = errors.New("prometheus: segment is not an initialised metrics table")

// slotsFor is the index size for n entries: a power of two at least twice n, so probes
// stay short.
func slotsFor(n int) int {
	return 1 << bits.Len(uint(2*n-1))
}

func layoutSize(entries int) int {
	return offIndex + slotsFor(entries)*8 + entries*EntrySize
}

// SegmentSize is the data size of the metrics segment for cfg: room for
// prometheus.max_series label sets plus the overflow one, or as many as shm.metrics
// holds if that is less. Memory is fixed at start and never grows.
func SegmentSize(cfg *conf.Config) int {
	want := cfg.Prometheus.MaxSeries + 1
	if want < 2 {
		want = 2
	}
	if limit := int(cfg.Shm.Metrics); limit > 0 && layoutSize(want) > limit {
		want = entriesFitting(limit)
	}
	return layoutSize(want)
}

// entriesFitting is the most entries whose layout fits in size bytes (at least 2).
func entriesFitting(size int) int {
	lo, hi := 2, size/EntrySize+2
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if layoutSize(mid) <= size {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// InitSegment prepares a freshly created (zeroed) segment: it records the capacity that
// the segment's size allows and claims entry 0 for the overflow series.
func InitSegment(seg *shm.Segment) error {
	entries := entriesFitting(seg.Size())
	if layoutSize(entries) > seg.Size() {
		return fmt.Errorf("prometheus: a metrics segment needs at least %d bytes, got %d", layoutSize(2), seg.Size())
	}
	seg.Word(offSlots).Store(uint64(slotsFor(entries)))
	seg.Word(offUsed).Store(1) // entry 0: the overflow series, never indexed
	seg.Word(offCapacity).Store(uint64(entries))
	return nil
}

// OpenTable reads the table in an initialised metrics segment.
func OpenTable(seg *shm.Segment) (*Table, error) {
	if seg == nil {
		return nil, ErrNotMetrics
	}
	capacity := int(seg.Word(offCapacity).Load())
	slots := int(seg.Word(offSlots).Load())
	if capacity < 2 || slots < 2*capacity || slots&(slots-1) != 0 || offIndex+slots*8+capacity*EntrySize > seg.Size() {
		return nil, fmt.Errorf("%w (capacity %d, slots %d, %d bytes)", ErrNotMetrics, capacity, slots, seg.Size())
	}
	return &Table{seg: seg, data: seg.Data(), capacity: capacity, slots: slots}, nil
}

// Capacity is the number of label sets the table holds besides the overflow one.
func (t *Table) Capacity() int { return t.capacity - 1 }

// Used is the number of label sets stored, the overflow one excluded.
func (t *Table) Used() int {
	return min(int(t.word(offUsed).Load()), t.capacity) - 1
}

// Overflowed counts resolutions that found the table full.
func (t *Table) Overflowed() uint64 { return t.word(offOverflowed).Load() }

// FreeBytes is the space left for new label sets.
func (t *Table) FreeBytes() int { return (t.capacity - 1 - t.Used()) * EntrySize }

func (t *Table) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&t.data[off]))
}

func (t *Table) slot(i int) *atomic.Uint64 { return t.word(offIndex + i*8) }

func (t *Table) entryOffset(e int) int { return offIndex + t.slots*8 + e*EntrySize }

func (t *Table) counters(e int) *counters {
	return (*counters)(unsafe.Pointer(&t.data[t.entryOffset(e)+entCounters]))
}

func (t *Table) entryText(e int) []byte {
	off := t.entryOffset(e)
	n := min(int(t.word(off+entTextLen).Load()), textSize)
	return t.data[off+entText : off+entText+n]
}

func (t *Table) entryCode(e int) int { return int(t.word(t.entryOffset(e) + entCode).Load()) }

// resolve finds l's entry, adding it when it is new; past capacity it returns the
// overflow entry 0. It allocates (label text), so callers cache what it returns.
func (t *Table) resolve(l *labels) int {
	h := l.hash()
	text := l.encode(make([]byte, 0, 128))
	own := -1
	mask := t.slots - 1
	for probe, i := 0, int(h)&mask; probe < t.slots; probe, i = probe+1, (i+1)&mask {
		w := t.slot(i).Load()
		if w == 0 {
			if own < 0 {
				own = t.allocate(h, l.code, text)
				if own < 0 {
					t.word(offOverflowed).Add(1)
					return 0
				}
			}
			if t.slot(i).CompareAndSwap(0, uint64(own)+1) {
				return own
			}
			w = t.slot(i).Load() // another process indexed a set here first
		}
		e := int(w - 1)
		off := t.entryOffset(e)
		if t.word(off+entHash).Load() == h && t.entryCode(e) == l.code && bytes.Equal(t.entryText(e), text) {
			if own >= 0 {
				t.word(offWasted).Add(1) // lost a race for the same set: ours stays unindexed
			}
			return e
		}
	}
	t.word(offOverflowed).Add(1)
	return 0
}

// allocate claims a fresh entry and writes its labels; -1 when the table is full. The
// entry is invisible until its index slot is set, so a process killed in between only
// wastes it.
func (t *Table) allocate(h uint64, code int, text []byte) int {
	e := int(t.word(offUsed).Add(1) - 1)
	if e >= t.capacity {
		return -1
	}
	off := t.entryOffset(e)
	copy(t.data[off+entText:off+entText+textSize], text)
	t.word(off + entCode).Store(uint64(code))
	t.word(off + entTextLen).Store(uint64(len(text)))
	t.word(off + entHash).Store(h)
	return e
}

// entries calls f for the overflow entry and every indexed entry, in index order.
func (t *Table) entries(f func(e int)) {
	f(0)
	for i := 0; i < t.slots; i++ {
		if w := t.slot(i).Load(); w != 0 {
			f(int(w - 1))
		}
	}
}
