package worker

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// A worker's heap is almost all its config's tables, which live until the next write
// replaces them, while a request allocates nothing. What allocates between writes is
// per connection (its edgeConn, its goroutine's stack, fasthttp's pooled reader and
// writer, remade after a collection drops them) and per TLS handshake (crypto/tls's few
// dozen objects). The collector's goal for such a heap is its live size plus
// max(gcLiveShare of it, gcHeadroom):
//   - a big table (100,000 routes, a live heap of about 220 MiB) keeps the flat GOGC of
//     25 the worker had, so its RSS stays near its live size (the default GOGC of 100
//     let such a worker hold 494 MiB);
//   - a small one (a few MiB) gets gcHeadroom to allocate in before the next collection,
//     where GOGC 25 gave it one MiB (Go's least goal is 4 MiB × GOGC/100): a thousand new
//     connections a second then paid a collection every few hundred of them, with its
//     mark of a thousand goroutine stacks and its shrinking of them, grown again by the
//     next connection.
//
// Go has no such goal, so the worker sets GOGC to give it. The inputs (the live heap
// and the stacks and globals the collector scans) change only when a collection ends,
// so the percent is set again after every collection (gcPolicy.watch), whether a config
// write or connections drove it, and at once after a big config is applied. A memory
// limit (debug.SetMemoryLimit) would not do: it raises the collector's pace as the heap
// nears it whatever is live, so a worker whose table outgrew it would collect without
// end. The headroom is paid in RSS: about 16 MiB more under load (README, "A new
// connection per request").
//
// An explicit GOGC in the environment still wins; GOMEMLIMIT applies as Go applies it.
const (
	gcHeadroom  = 16 << 20
	gcLiveShare = 25 // percent
)

// gcPercentFor is the GOGC that makes the collector's next goal live + max(live ×
// gcLiveShare%, gcHeadroom), given what the last collection found: live heap bytes, and
// the stack and global bytes it scanned. Go's goal is live + (live + stacks + globals) ×
// GOGC/100, and never under 4 MiB × GOGC/100 (its least heap).
func gcPercentFor(live, stacks, globals uint64) int {
	roots := max(live+stacks+globals, 1)
	headroom := max(live*gcLiveShare/100, gcHeadroom)
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
	stopped atomic.Bool
}

// startGCPolicy sets the worker's GOGC from its heap now and after every collection,
// unless GOGC is set in the environment (then it returns nil). The policy lives as long
// as the process.
func startGCPolicy() *gcPolicy {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	p := &gcPolicy{samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
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
	if percent := gcPercentFor(v[0], v[1], v[2]); percent != p.percent {
		debug.SetGCPercent(percent)
		p.percent = percent
	}
}

// watch has update run after the next collection, and again after each one after it: a
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
		p.update()
		p.watch()
	}, p)
}

// stop ends the watch after the next collection; GOGC stays as last set.
func (p *gcPolicy) stop() { p.stopped.Store(true) }

// gcSentinel is a heap object that no collection can leave in place: new of a zero-size
// type returns one shared address that is never collected, and a tiny allocation could
// share its block with a live object.
type gcSentinel struct{ _ [16]byte }
