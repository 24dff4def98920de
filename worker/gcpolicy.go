package worker

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// A worker's heap is almost all its config's tables, which live until the next write
// replaces them, while a request allocates nothing. What allocates between writes is
// per connection (its edgeConn, its goroutine's stack, fasthttp's pooled reader and
// writer, remade after a collection drops them) and per TLS handshake (crypto/tls's few
// dozen objects). The collector's goal for such a heap is its live size plus
// max(gcLiveShare of it, gcHeadroom) for gcHeadroomWindow after each collection, and
// live plus gcLiveShare of it after that:
//   - a big table (100,000 routes, a live heap of about 220 MiB) keeps the flat GOGC of
//     25 the worker had, so its RSS stays near its live size (the default GOGC of 100
//     let such a worker hold 494 MiB);
//   - a small one (a few MiB) that allocates fast, a thousand new connections a second,
//     gets gcHeadroom to allocate in before the next collection, where GOGC 25 gave it
//     one MiB (Go's least goal is 4 MiB × GOGC/100): it paid a collection every few
//     hundred connections, with its mark of a thousand goroutine stacks and its shrinking
//     of them, grown again by the next connection. With the window it collects once
//     gcHeadroom is used or gcHeadroomWindow has passed, whichever comes first;
//   - a small one that allocates little, as under keep-alive (about 12 bytes a request,
//     most of it the upstream's re-dial every 1000 requests), collects at GOGC 25 as it
//     did once the window closes, and so never touches the headroom. Held open, the
//     headroom filled with that garbage a page at a time, without a collection over
//     issue 7's minute of load, which put the worker at 31-34 MiB of RSS where it had 26.
//     When a burst of connections ends, the window closes and the next allocation
//     collects: the heap goes back to live plus a quarter, reusing the pages it freed.
//
// Go has no such goal, so the worker sets GOGC to give it. The inputs (the live heap
// and the stacks and globals the collector scans) change only when a collection ends,
// so the percent is set again after every collection (gcPolicy.watch), whether a config
// write or connections drove it, when the window closes, and at once after a big config
// is applied. A memory limit (debug.SetMemoryLimit) would not do: it raises the
// collector's pace as the heap nears it whatever is live, so a worker whose table
// outgrew it would collect without end. The headroom is paid in RSS while connections
// churn: about 16 MiB more under seed 001's load (README, "A new connection per
// request").
//
// An explicit GOGC in the environment still wins; GOMEMLIMIT applies as Go applies it.
const (
	gcHeadroom       = 16 << 20
	gcHeadroomWindow = 4 * time.Second
	gcLiveShare      = 25 // percent
)

// gcPercentFor is the GOGC that makes the collector's next goal live + max(live ×
// gcLiveShare%, headroom), given what the last collection found: live heap bytes, and
// the stack and global bytes it scanned. Go's goal is live + (live + stacks + globals) ×
// GOGC/100, and never under 4 MiB × GOGC/100 (its least heap). A headroom of 0 gives
// GOGC gcLiveShare.
func gcPercentFor(live, stacks, globals, headroom uint64) int {
	roots := max(live+stacks+globals, 1)
	headroom = max(live*gcLiveShare/100, headroom)
	percent := (headroom*100 + roots - 1) / roots
	// A big heap: the share, as GOGC would give it (the roots other than the heap only
	// add to that runway, as they did with the flat GOGC).
	percent = max(percent, gcLiveShare)
	// A small heap: Go's least goal, 4 MiB × GOGC/100, would otherwise exceed the goal
	// (at 1 MiB live, 1600% makes it 64 MiB).
	const goMinHeap = 4 << 20
	percent = min(percent, max((live+headroom)*100/goMinHeap, gcLiveShare))
	return int(percent)
}

// gcPolicy keeps a worker's GOGC at gcPercentFor of what each collection found. Its
// methods are safe for concurrent use; a nil *gcPolicy (GOGC set in the environment)
// does nothing.
type gcPolicy struct {
	mu      sync.Mutex
	samples []metrics.Sample
	percent int // the last one set
	// open is whether the headroom is given: from a collection's end (openedAt) until
	// window after it (close). A collection that comes sooner opens it again. All three
	// are under mu.
	open     bool
	openedAt time.Time
	window   time.Duration
	closing  *time.Timer
	stopped  atomic.Bool
}

// startGCPolicy sets the worker's GOGC from its heap now and after every collection,
// unless GOGC is set in the environment (then it returns nil). The policy lives as long
// as the process.
func startGCPolicy() *gcPolicy {
	return startGCPolicyWindow(gcHeadroomWindow)
}

// startGCPolicyWindow is startGCPolicy with the headroom open for window after each
// collection (a test's shorter one). The headroom is closed until the first collection:
// a worker's start-up allocations say nothing of its load.
func startGCPolicyWindow(window time.Duration) *gcPolicy {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	p := &gcPolicy{window: window, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
	p.closing = time.AfterFunc(time.Hour, p.close)
	p.closing.Stop()
	p.update()
	p.watch()
	return p
}

// update sets GOGC from the last collection's figures, if they call for a change.
func (p *gcPolicy) update() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	metrics.Read(p.samples)
	var v [3]uint64
	for i, s := range p.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	var headroom uint64
	if p.open {
		headroom = gcHeadroom
	}
	if percent := gcPercentFor(v[0], v[1], v[2], headroom); percent != p.percent {
		debug.SetGCPercent(percent)
		p.percent = percent
	}
}

// collected opens the headroom after a collection, until window passes without another.
func (p *gcPolicy) collected() {
	p.mu.Lock()
	p.open = true
	p.openedAt = time.Now()
	window := p.window
	p.mu.Unlock()
	p.update()
	p.closing.Reset(window)
}

// close ends the headroom: the goal falls to GOGC gcLiveShare's, and a worker whose heap
// is already over it collects at its next allocation. (Go's scavenger returns the freed
// pages once a collection finds them free: it keeps what was in use at the last one.)
func (p *gcPolicy) close() {
	if p.stopped.Load() {
		return
	}
	p.mu.Lock()
	// The timer may have fired for an earlier collection just as a later one opened the
	// headroom again (before collected reset it): that one keeps its whole window.
	if left := p.window - time.Since(p.openedAt); left > 0 {
		p.mu.Unlock()
		p.closing.Reset(left)
		return
	}
	p.open = false
	p.mu.Unlock()
	p.update()
}

// watch has collected run after the next collection, and again after each one after it: a
// cleanup runs once the object it watches is found unreachable, which the first
// collection after watch does (the object is referenced from nowhere else). Cleanups run
// on a goroutine of the runtime's. A cleanup that runs while the next collection is
// already marking reads the figures of the one before, and the sentinel it allocates
// then is marked live by that collection: the policy then catches up one collection
// late, which a worker that allocates reaches soon.
func (p *gcPolicy) watch() {
	runtime.AddCleanup(new(gcSentinel), func(p *gcPolicy) {
		if p.stopped.Load() {
			return
		}
		p.collected()
		p.watch()
	}, p)
}

// stop ends the watch after the next collection; GOGC stays as last set.
func (p *gcPolicy) stop() {
	p.stopped.Store(true)
	p.closing.Stop()
}

// gcSentinel is a heap object that no collection can leave in place: new of a zero-size
// type returns one shared address that is never collected, and a tiny allocation could
// share its block with a live object.
type gcSentinel struct{ _ [16]byte }
