package batch

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gw/internal/monotime"
)

// MaxPending bounds the bytes of entries a worker holds for its processors, every one of
// them together: past it an entry is dropped (counted as buffer full) rather than kept.
// 32 MiB is some 30,000 default entries, minutes of a busy route's log while a collector
// is down, and a worker's memory is never more than that past normal.
const MaxPending = 32 << 20

// pendingBytes is the bytes the worker's processors hold, sent or not yet.
var pendingBytes atomic.Int64

// Counters are where a processor counts the entries it drops: in shared memory, summed
// across workers, for the metrics (or local words in tests). A nil word counts nothing.
type Counters struct {
	// BufferFull counts entries dropped as they came, the worker holding MaxPending.
	BufferFull *atomic.Uint64
	// SendFailed counts entries of batches that failed max_retry_count + 1 times.
	SendFailed *atomic.Uint64
}

// Send delivers one batch: entries, in the order they were added, at most batch_max_size
// of them. They are the processor's bytes, valid during the call. It runs on the
// processor's goroutine, never a request's, and an error has the batch retried.
type Send func(entries [][]byte) error

// Joined is how a processor made by NewJoined joins a batch's entries into one body: Open
// (none when 0), the entries with Sep between them, Close (none when Open is 0); as
// http-logger's JSON array '[', ',', ']', or its new_line 0, '\n', 0.
type Joined struct{ Open, Sep, Close byte }

// SendJoined delivers one batch as one body, its entries joined as Joined says. body is
// the processor's buffer itself (valid during the call, never to be kept): no entry is
// copied to make it. It runs on the processor's goroutine, never a request's, and an
// error has the batch retried.
type SendJoined func(body []byte) error

// Processor buffers one logger instance's entries and sends them in batches. Add is safe
// for concurrent use and never blocks on the sending.
type Processor struct {
	cfg  Config
	send Send
	// sendJoined, when set, is used in place of send: the processor keeps a byte before
	// each entry for joined.Sep, and a batch leaves as the span of buf it lies in.
	sendJoined SendJoined
	joined     Joined
	counters   Counters
	logf       func(format string, args ...any)
	lastLog    atomic.Int64 // Unix nanoseconds of the last drop logged

	mu sync.Mutex
	// buf holds the entries waiting, back to back; ends[i] is where entry i ends. spare
	// are the lists last sent, kept for the next batch so that steady state allocates
	// nothing.
	buf, spareBuf   []byte
	ends, spareEnds []int
	first, last     int64 // when the oldest and the newest waiting entry came (monotime stamps)
	running         bool  // a goroutine is sending or waiting to
	wake            chan struct{}
	// views is the goroutine's scratch for one batch.
	views [][]byte
}

// New makes a processor that delivers with send. logf (which may be nil) gets the drops,
// at most one line a second.
func New(cfg Config, send Send, counters Counters, logf func(format string, args ...any)) *Processor {
	return &Processor{cfg: cfg, send: send, counters: counters, logf: logf, wake: make(chan struct{}, 1)}
}

// NewJoined makes a processor that delivers each batch as one body, joined as j says,
// written where the entries lie: a batch of 1000 http-logger entries is some 700 KB that
// a copy into a body of its own would read and write once more, evicting the request
// path's memory from the CPU's caches as it goes.
func NewJoined(cfg Config, j Joined, send SendJoined, counters Counters, logf func(format string, args ...any)) *Processor {
	return &Processor{cfg: cfg, sendJoined: send, joined: j, counters: counters, logf: logf, wake: make(chan struct{}, 1)}
}

// gap is the bytes kept before each entry: one for Joined.Sep when the batches leave joined.
func (p *Processor) gap() int {
	if p.sendJoined != nil {
		return 1
	}
	return 0
}

// Add queues a copy of entry. It returns at once: the entry is dropped, and counted, when
// the worker holds MaxPending already.
func (p *Processor) Add(entry []byte) {
	size := int64(len(entry) + p.gap())
	if pendingBytes.Add(size) > MaxPending {
		pendingBytes.Add(-size)
		p.dropped(1, p.counters.BufferFull, "the worker's log buffer is full")
		return
	}
	now := monotime.Now() // one clock read, where time.Now reads two
	p.mu.Lock()
	if p.sendJoined != nil {
		p.buf = append(p.buf, p.joined.Sep)
	}
	p.buf = append(p.buf, entry...)
	p.queued(now)
}

// AddWith queues the entry write appends to dst, written straight into the processor's
// buffer: no copy, and no buffer of the caller's to keep. write runs under the
// processor's lock, so it must not block; whatever it keeps between calls is guarded by
// that lock (a logger's scratch memory). The entry is dropped, and counted, when the
// worker's processors then hold more than MaxPending.
func (p *Processor) AddWith(write func(dst []byte) []byte) {
	now := monotime.Now()
	p.mu.Lock()
	start := len(p.buf)
	if p.sendJoined != nil {
		p.buf = append(p.buf, p.joined.Sep)
	}
	p.buf = write(p.buf)
	size := int64(len(p.buf) - start)
	if pendingBytes.Add(size) > MaxPending {
		pendingBytes.Add(-size)
		p.buf = p.buf[:start]
		p.mu.Unlock()
		p.dropped(1, p.counters.BufferFull, "the worker's log buffer is full")
		return
	}
	p.queued(now)
}

// queued ends the entry just appended to p.buf, at now, and unlocks p.mu, which the
// caller holds; then it starts the processor's goroutine, or wakes it for a full batch.
func (p *Processor) queued(now int64) {
	if len(p.ends) == 0 {
		p.first = now
	}
	p.last = now
	p.ends = append(p.ends, len(p.buf))
	full := len(p.ends) >= p.cfg.BatchMaxSize
	start := !p.running
	p.running = true
	p.mu.Unlock()
	switch {
	case start:
		go p.run()
	case full:
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// run sends batches until no entry waits: the full batches at once, the rest after
// inactive_timeout of quiet or once the oldest has waited buffer_duration.
func (p *Processor) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		n := len(p.ends)
		if n == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		now := monotime.Now()
		wait := time.Duration(min(p.last+int64(p.cfg.InactiveTimeout), p.first+int64(p.cfg.BufferDuration)) - now)
		if n < p.cfg.BatchMaxSize && wait > 0 {
			p.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-p.wake:
			case <-timer.C:
			}
			continue
		}
		buf, ends := p.buf, p.ends
		p.buf, p.ends = p.spareBuf[:0], p.spareEnds[:0]
		if rest := n % p.cfg.BatchMaxSize; wait > 0 && rest > 0 {
			// Every full batch leaves now; the entries past the last wait for their own.
			// They are copied back, fewer than a batch: taking one batch at a time would
			// copy the whole backlog behind it for each, quadratic when the collector is
			// slow (BenchmarkAddBacklog).
			full := n - rest
			cut := ends[full-1]
			p.buf = append(p.buf, buf[cut:]...)
			for _, end := range ends[full:] {
				p.ends = append(p.ends, end-cut)
			}
			buf, ends = buf[:cut], ends[:full]
		}
		p.mu.Unlock()

		held := int64(len(buf))
		if p.sendJoined != nil {
			buf = p.flushJoined(buf, ends)
		} else {
			p.flush(buf, ends)
		}
		pendingBytes.Add(-held)
		p.mu.Lock()
		p.spareBuf, p.spareEnds = buf[:0], ends[:0]
		p.mu.Unlock()
	}
}

// flush sends buf's entries in batches of at most batch_max_size, each retried
// max_retry_count times retry_delay apart before it is dropped.
func (p *Processor) flush(buf []byte, ends []int) {
	start := 0
	for len(ends) > 0 {
		n := min(len(ends), p.cfg.BatchMaxSize)
		p.views = p.views[:0]
		for _, end := range ends[:n] {
			p.views = append(p.views, buf[start:end:end])
			start = end
		}
		ends = ends[n:]
		for attempt := 0; ; attempt++ {
			err := p.send(p.views)
			if err == nil {
				break
			}
			if attempt >= p.cfg.MaxRetryCount {
				p.dropped(len(p.views), p.counters.SendFailed, "sending failed "+strconv.Itoa(attempt+1)+" times: "+err.Error())
				break
			}
			time.Sleep(p.cfg.RetryDelay)
		}
	}
	clear(p.views) // keep no entry alive past its batch
}

// flushJoined sends buf's entries as flush does, each batch the span of buf it lies in:
// the gap byte before each entry is Sep, the first one's becomes Open and the byte past
// the last (the next batch's first gap, which becomes its Open in turn, or one appended)
// Close. It returns buf, grown when that byte was appended, to be kept for the next batch.
func (p *Processor) flushJoined(buf []byte, ends []int) []byte {
	start := 0
	for len(ends) > 0 {
		n := min(len(ends), p.cfg.BatchMaxSize)
		end := ends[n-1]
		ends = ends[n:]
		body := buf[start+1 : end]
		if p.joined.Open != 0 {
			if end == len(buf) {
				buf = append(buf, 0)
			}
			buf[start], buf[end] = p.joined.Open, p.joined.Close
			body = buf[start : end+1]
		}
		for attempt := 0; ; attempt++ {
			err := p.sendJoined(body)
			if err == nil {
				break
			}
			if attempt >= p.cfg.MaxRetryCount {
				p.dropped(n, p.counters.SendFailed, "sending failed "+strconv.Itoa(attempt+1)+" times: "+err.Error())
				break
			}
			time.Sleep(p.cfg.RetryDelay)
		}
		start = end
	}
	return buf
}

// dropped counts n entries dropped in counter and logs why, at most once a second.
func (p *Processor) dropped(n int, counter *atomic.Uint64, why string) {
	if counter != nil {
		counter.Add(uint64(n))
	}
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if p.logf == nil || now-last < int64(time.Second) || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	p.logf("batch processor %s: dropped %d entries: %s", p.cfg.Name, n, why)
}
