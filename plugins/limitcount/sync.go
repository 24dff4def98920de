package limitcount

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// syncer is sync_interval (APISIX 3.18's delayed-syncer.lua): a key's requests are
// counted in the worker against what Redis said was left at the last sync, and the
// requests admitted since are added to Redis every interval. A key's first request, and
// its first after the window Redis reported has ended, syncs before it is answered, as
// in APISIX; every other request costs a map lookup.
//
// How far a limit can be exceeded: between two syncs each worker admits at most what
// Redis had left at its last sync, so a window admits at most count plus, for each
// other worker counting the key (on this gateway or another), what it saw left at its
// last sync: at most count × the number of workers in the worst case, when they all
// start a window together; once they have synced, each worker's view lags the others'
// admissions by at most one interval, so about count + the key's whole rate × interval.
// APISIX counts per gateway in its shared dict; gw counts per worker, so the bound is per
// worker.
//
// A syncer is safe for concurrent use. It must not refer to its limiter, whose cleanup
// stops it.
type syncer struct {
	client   *redisClient
	count    int64
	window   string // seconds, for the script
	timeout  time.Duration
	interval time.Duration
	logf     func(format string, args ...any)

	mu      sync.Mutex
	entries map[string]*syncEntry
	done    chan struct{}
	once    sync.Once
}

// syncEntry is one key's local count. Its fields but flushMu are guarded by syncer.mu;
// flushMu is held by whoever sends its delta to Redis, so one delta is never sent twice.
type syncEntry struct {
	key     string
	flushMu sync.Mutex
	synced  bool
	// delta is the requests admitted here and not yet added to Redis.
	delta int64
	// remaining is what Redis had left after the last sync, delta not counted.
	remaining int64
	resetAt   int64 // unix nanos: the window's end as Redis reported it
	// forgotten is set once run has dropped the entry from the map.
	forgotten bool
}

func newSyncer(l *redisLimiter, interval time.Duration) *syncer {
	s := &syncer{
		client:   l.client,
		count:    l.count,
		window:   l.args[1],
		timeout:  l.timeout,
		interval: interval,
		logf:     l.logf,
		entries:  map[string]*syncEntry{},
		done:     make(chan struct{}),
	}
	go s.run()
	return s
}

func (s *syncer) stop() { s.once.Do(func() { close(s.done) }) }

// incoming counts one request of key and returns what is left after it (negative:
// rejected) and the window's time left.
func (s *syncer) incoming(key []byte) (remaining int64, left time.Duration, err error) {
	for {
		now := time.Now().UnixNano()
		s.mu.Lock()
		e := s.entries[string(key)]
		if e == nil {
			e = &syncEntry{key: string(key)}
			s.entries[e.key] = e
		}
		if e.synced && now < e.resetAt {
			remaining, left = e.take(now)
			s.mu.Unlock()
			return remaining, left, nil
		}
		s.mu.Unlock()
		if err := s.flush(e, true); err != nil {
			return 0, 0, err
		}
		s.mu.Lock()
		// run forgets an ended window's entry with nothing to add, perhaps while this
		// request synced it; what it admits must go to the entry run flushes.
		if !e.forgotten {
			remaining, left = e.take(now)
			s.mu.Unlock()
			return remaining, left, nil
		}
		s.mu.Unlock()
	}
}

// take admits a request against the last sync when something is left; s.mu is held.
func (e *syncEntry) take(now int64) (remaining int64, left time.Duration) {
	remaining = e.remaining - e.delta - 1
	if remaining >= 0 {
		e.delta++
	}
	return remaining, time.Duration(max(0, e.resetAt-now))
}

// flush adds e's delta to Redis and records what Redis has left. With onlyIfStale it
// does nothing once another caller has synced e meanwhile.
func (s *syncer) flush(e *syncEntry, onlyIfStale bool) error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	s.mu.Lock()
	if onlyIfStale && e.synced && time.Now().UnixNano() < e.resetAt {
		s.mu.Unlock()
		return nil
	}
	delta := e.delta
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	used, left, err := s.client.incr(ctx, e.key, []string{strconv.FormatInt(s.count, 10), s.window, strconv.FormatInt(delta, 10)})
	cancel()
	if err != nil {
		return err
	}
	s.mu.Lock()
	e.delta -= delta
	e.remaining = s.count - used
	e.resetAt = time.Now().UnixNano() + int64(left)
	e.synced = true
	s.mu.Unlock()
	return nil
}

// run flushes every key with requests to add once an interval, concurrently (the client
// pipelines them), and forgets keys whose window has ended with nothing to add.
func (s *syncer) run() {
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
			switch {
			case e.delta > 0:
				due = append(due, e)
			case now >= e.resetAt:
				e.forgotten = true
				delete(s.entries, k)
			}
		}
		s.mu.Unlock()
		var wg sync.WaitGroup
		for _, e := range due {
			wg.Go(func() {
				if err := s.flush(e, false); err != nil {
					s.client.failed(s.logf, err)
				}
			})
		}
		wg.Wait()
	}
}
