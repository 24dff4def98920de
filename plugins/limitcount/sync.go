package limitcount

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gw/conf"
	"gw/plugins"
	"gw/plugins/redispolicy"
	"gw/shm"
)

// syncer is sync_interval (APISIX 3.18's delayed-syncer.lua): a key's requests are
// counted in the node's shared memory against what Redis said was left at the last
// sync, and the requests the node admitted since are added to Redis once an interval, by
// one of its workers. A key's first request on the node, and its first after the window
// Redis reported has ended, syncs before it is answered, as in APISIX; every other
// request costs a map lookup, two table lookups and one compare-and-swap, and allocates
// nothing.
//
// Shared state (two keyed tables, each in a segment of its own, keyed by the Redis key's
// fingerprint):
//
//   - syncCounts: allowance (low 28 bits), what the node may still admit before its next
//     sync, and delta (next 28 bits), what it admitted and has not yet added to Redis. A
//     request takes one from allowance into delta in one compare-and-swap, so the node's
//     workers share one count and a limit is exact within a node.
//   - syncWindows: the window's end as Redis reported it (high 28 bits, 100 ms ticks, to
//     within a tick, modulo 310 days) and when a worker last claimed the key's flush (low
//     28 bits, 10 ms ticks, modulo 31 days).
//
// Flushing: every worker ticks each interval over the keys it has seen; a worker flushes a
// key only if it wins the compare-and-swap that moves the key's claim to now, and
// nobody claimed it within the last nine tenths of an interval: one flush per node and
// key per interval, whatever the number of workers. A flush takes delta to 0, adds it to
// Redis with APISIX's script, and sets allowance to what Redis has left less what the
// node admitted meanwhile.
//
// How far a limit can be exceeded: between two syncs a node admits at most what Redis
// had left at its last sync, so a window admits at most count plus, for every other node
// counting the key, what Redis had left when that node last synced: at worst count × the
// number of nodes, when all start a window at the same moment; once they have synced,
// each node's view lags the others' admissions by at most one interval, so about count +
// the key's request rate (all nodes together) × sync_interval. One node alone is exact.
//
// Crashes (a worker killed at any instruction): a flush that took delta and died before
// Redis counted it loses those requests, at most what the node admitted for the key in
// one interval: Redis under-counts them, and the fleet may admit as many more in that
// window. Nothing is counted twice: delta leaves shared memory before it is sent, and a
// failed send puts it back. Killed after Redis counted it, before allowance was set, the
// node goes on with the older, larger allowance until the next flush, one interval on
// (the claim is only a time). A key's delta waits in shared memory for a worker that
// knows the key's text (the tables hold fingerprints): the worker's replacement, at its
// first request of the key.
//
// Eviction: both tables evict when full (the entry with the least delta, or the window
// nearest its end); an evicted key syncs again at its next request, and an evicted delta
// is lost as a crashed flush's is. Size them with shm.limit_count, as the local policy's
// table.
//
// A syncer is safe for concurrent use. It must not refer to its limiter, whose cleanup
// stops it.
type syncer struct {
	client   *redispolicy.Client
	counts   *shm.KeyedTable
	windows  *shm.KeyedTable
	count    int64
	window   string // seconds, for the script
	timeout  time.Duration
	interval time.Duration
	logf     func(format string, args ...any)

	mu      sync.Mutex
	entries map[string]*syncEntry // the keys this worker has seen, by Redis key
	done    chan struct{}
	exited  chan struct{} // closed when run returns
	once    sync.Once
}

// syncEntry is a key this worker has seen. inline is held by this worker's request
// that syncs the key before it is answered, so that its other requests wait for that
// one rather than each asking Redis.
type syncEntry struct {
	key    string
	fp     uint64
	inline sync.Mutex
	// forgotten is set once run has dropped the entry from the map; a request that
	// counted on it meanwhile puts it back, so that this worker flushes what it counted.
	forgotten atomic.Bool
}

const (
	syncBits      = 28
	syncMask      = 1<<syncBits - 1
	syncEndTick   = int64(100 * time.Millisecond)
	syncClaimTick = int64(10 * time.Millisecond)
	// maxSyncCount is the largest allowance a node takes from one sync (allowance and
	// delta are 28-bit fields). A larger count works, but a node that has spent its
	// allowance asks Redis again at its next request rather than refusing it.
	maxSyncCount = syncMask
)

// Layouts of the two segments; bump a version when a payload's meaning changes.
var (
	syncCountsLayout  = shm.Layout{Name: "lc-sync-counts", Version: 1}
	syncWindowsLayout = shm.Layout{Name: "lc-sync-windows", Version: 1}
)

const (
	syncCountsMagic  = 0x6777_6c63_7363_6e31 // "gwlcscn1"
	syncWindowsMagic = 0x6777_6c63_7377_6e31 // "gwlcswn1"
)

func init() {
	plugins.RegisterSegment(syncCountsLayout.Name, &plugins.SegmentSpec{Layout: syncCountsLayout, Size: syncSegmentSize,
		Init: plugins.KeyedTableInit(syncCountsMagic)})
	plugins.RegisterSegment(syncWindowsLayout.Name, &plugins.SegmentSpec{Layout: syncWindowsLayout, Size: syncSegmentSize,
		Init: plugins.KeyedTableInit(syncWindowsMagic)})
}

// syncSegmentSize is each sync table's size: half of shm.limit_count's, as a key takes
// 16 bytes in each and the local policy's table holds 16 bytes a key too. Pages are
// only touched as keys arrive.
func syncSegmentSize(cfg *conf.Config) int {
	total := int64(defaultSegmentBytes)
	if cfg != nil && cfg.Shm.LimitCount > 0 {
		total = cfg.Shm.LimitCount
	}
	return int(max(total/2, 64<<10)-shm.HeaderSize) &^ 7
}

var errNoSyncTables = errors.New("no shared memory segments for limit-count's sync_interval (the master creates them at start)")

// openSyncTables finds the two tables in the worker's segments.
func openSyncTables(shared *plugins.Shared) (counts, windows *shm.KeyedTable, err error) {
	if shared == nil || shared.Segments[syncCountsLayout.Name] == nil || shared.Segments[syncWindowsLayout.Name] == nil {
		return nil, nil, errNoSyncTables
	}
	if counts, err = shm.OpenKeyedTable(shared.Segments[syncCountsLayout.Name], syncCountsMagic); err != nil {
		return nil, nil, err
	}
	if windows, err = shm.OpenKeyedTable(shared.Segments[syncWindowsLayout.Name], syncWindowsMagic); err != nil {
		return nil, nil, err
	}
	return counts, windows, nil
}

func newSyncer(l *redisLimiter, counts, windows *shm.KeyedTable, interval time.Duration) *syncer {
	s := &syncer{
		client:   l.client,
		counts:   counts,
		windows:  windows,
		count:    l.count,
		window:   l.window,
		timeout:  l.timeout,
		interval: interval,
		logf:     l.logf,
		entries:  map[string]*syncEntry{},
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	go s.run()
	return s
}

func (s *syncer) stop() { s.once.Do(func() { close(s.done) }) }

// fingerprint is the key's in both tables (the counts table's secret keys it).
func (s *syncer) fingerprint(key []byte) uint64 {
	h := s.counts.KeyHash()
	h.Write(key)
	return h.Sum()
}

// endTicks is a unix-nanos time in the windows table's 100 ms ticks, modulo 2^28.
func endTicks(nanos int64) uint64 { return uint64(nanos/syncEndTick) & syncMask }

func claimTicks(nanos int64) uint64 { return uint64(nanos/syncClaimTick) & syncMask }

// windowLeft is the time from now to the window's end in payload w; not positive once it
// has ended. The difference is read as a signed 28-bit number of ticks: exact for
// windows up to 155 days (time_window is at most 124).
func windowLeft(w uint64, now int64) time.Duration {
	diff := int64((w>>syncBits - endTicks(now)) & syncMask)
	if diff >= 1<<(syncBits-1) {
		diff -= 1 << syncBits
	}
	return time.Duration(diff*syncEndTick - now%syncEndTick)
}

// incoming counts one request of key and returns what is left after it (negative:
// rejected) and the window's time left.
func (s *syncer) incoming(key []byte) (remaining int64, left time.Duration, err error) {
	s.mu.Lock()
	e := s.entries[string(key)]
	if e == nil {
		e = &syncEntry{key: string(key), fp: s.fingerprint(key)}
		s.entries[e.key] = e
	}
	s.mu.Unlock()
	for attempt := 0; ; attempt++ {
		remaining, left, ok := s.take(e.fp, time.Now().UnixNano())
		if ok {
			if e.forgotten.Load() {
				s.remember(e)
			}
			return remaining, left, nil
		}
		if attempt == 2 {
			// Synced twice and still nothing to take: Redis has nothing left (a count
			// above the allowance's cap), or the entries were evicted or the window
			// ended at once each time. Refuse rather than admit uncounted.
			return -1, left, nil
		}
		if err := s.syncInline(e); err != nil {
			return 0, 0, err
		}
	}
}

// remember puts a forgotten entry back in the map, unless another took its place.
func (s *syncer) remember(e *syncEntry) {
	s.mu.Lock()
	if s.entries[e.key] == nil {
		e.forgotten.Store(false)
		s.entries[e.key] = e
	}
	s.mu.Unlock()
}

// take admits a request against the node's allowance; ok is false when the key must
// sync first (no window, or it has ended).
func (s *syncer) take(fp uint64, now int64) (remaining int64, left time.Duration, ok bool) {
	we, found := s.windows.Find(fp)
	if !found {
		return 0, 0, false
	}
	w, found := we.Load()
	if left = windowLeft(w, now); !found || left <= 0 {
		return 0, 0, false
	}
	ce, found := s.counts.Find(fp)
	if !found {
		return 0, 0, false
	}
	for {
		c, found := ce.Load()
		if !found {
			return 0, 0, false
		}
		allowance, delta := c&syncMask, c>>syncBits
		if allowance == 0 {
			if s.count > maxSyncCount {
				// The allowance was capped below what Redis had left: ask it again.
				return 0, left, false
			}
			return -1, left, true
		}
		if ce.CompareAndSwap(c, (delta+1)<<syncBits|(allowance-1)) {
			return int64(allowance) - 1, left, true
		}
	}
}

// syncInline syncs e before a request is answered, unless another request of this
// worker has done so meanwhile.
func (s *syncer) syncInline(e *syncEntry) error {
	e.inline.Lock()
	defer e.inline.Unlock()
	now := time.Now().UnixNano()
	if we, ok := s.windows.Find(e.fp); ok {
		if w, ok := we.Load(); ok && windowLeft(w, now) > 0 {
			if ce, ok := s.counts.Find(e.fp); ok {
				if c, ok := ce.Load(); ok && (c&syncMask > 0 || s.count <= maxSyncCount) {
					return nil
				}
			}
		}
	}
	return s.flush(e, now)
}

// flush adds the node's delta for e to Redis and records what Redis has left, and when
// its window ends.
func (s *syncer) flush(e *syncEntry, now int64) error {
	ce, _, ok := s.counts.Insert(e.fp, 0, 1<<syncBits, true, now)
	if !ok {
		return errors.New("limit-count: no room for the key in the sync table")
	}
	var taken uint64
	for {
		c, ok := ce.Load()
		if !ok {
			return errors.New("limit-count: the key's sync entry was evicted")
		}
		taken = c >> syncBits
		if ce.CompareAndSwap(c, c&syncMask) {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	used, left, err := incr(ctx, s.client, e.key, []string{strconv.FormatInt(s.count, 10), s.window, strconv.FormatUint(taken, 10)})
	cancel()
	if err != nil {
		if taken > 0 {
			ce.Add(int64(taken) << syncBits) // sent by the next flush
		}
		return err
	}
	now = time.Now().UnixNano()
	end := endTicks(now + int64(left) + syncEndTick - 1) // rounded up: never before Redis's
	we, _, ok := s.windows.Insert(e.fp, end<<syncBits|claimTicks(now), endTicks(now)<<syncBits, true, now)
	for ok {
		w, found := we.Load()
		if !found || we.CompareAndSwap(w, end<<syncBits|w&syncMask) {
			break
		}
	}
	for {
		c, ok := ce.Load()
		if !ok {
			return nil // evicted meanwhile: the next request syncs again
		}
		delta := c >> syncBits
		allowance := max(0, min(s.count-used-int64(delta), syncMask-int64(delta)))
		if ce.CompareAndSwap(c, delta<<syncBits|uint64(allowance)) {
			return nil
		}
	}
}

// claim reports whether this worker flushes e in this interval: it moves the key's claim
// time to now, unless another worker did within nine tenths of an interval.
func (s *syncer) claim(e *syncEntry, now int64) bool {
	we, ok := s.windows.Find(e.fp)
	if !ok {
		return true // evicted: whoever flushes first takes the delta, the others find none
	}
	due := uint64(s.interval.Nanoseconds()*9/10/syncClaimTick) & syncMask
	for {
		w, ok := we.Load()
		if !ok {
			return true
		}
		if (claimTicks(now)-w)&syncMask < due {
			return false
		}
		if we.CompareAndSwap(w, w&^syncMask|claimTicks(now)) {
			return true
		}
	}
}

// ended reports whether the key's window has ended, or its entry is gone.
func (s *syncer) ended(fp uint64, now int64) bool {
	we, ok := s.windows.Find(fp)
	if !ok {
		return true
	}
	w, ok := we.Load()
	return !ok || windowLeft(w, now) <= 0
}

// run flushes, once an interval, every key this worker has seen whose flush it claims and
// that has requests to add, concurrently (the client pipelines them), and forgets keys
// whose window has ended with nothing to add.
func (s *syncer) run() {
	defer close(s.exited)
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		var due []*syncEntry
		s.mu.Lock()
		for k, e := range s.entries {
			var delta uint64
			if ce, ok := s.counts.Find(e.fp); ok {
				if c, ok := ce.Load(); ok {
					delta = c >> syncBits
				}
			}
			switch {
			case delta == 0:
				if s.ended(e.fp, now) {
					e.forgotten.Store(true)
					delete(s.entries, k)
				}
			case s.claim(e, now):
				due = append(due, e)
			}
		}
		s.mu.Unlock()
		var wg sync.WaitGroup
		for _, e := range due {
			wg.Go(func() {
				if err := s.flush(e, time.Now().UnixNano()); err != nil {
					s.client.Failed(s.logf, failedWhat, err)
				}
			})
		}
		wg.Wait()
	}
}
