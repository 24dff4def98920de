package prometheus

import (
	"errors"
	"os"

	"gw/plugins"
)

// Worker area words: one area per worker process, found by its owner's pid.
const (
	areaOwner    = 0 // an owner word, below
	areaAccepted = 8 // connections accepted (nginx "accepted" and "handled")
	areaRequests = 16
	areaActive   = 24 // open connections
	areaReading  = 32 // accepted, first request not yet read
	areaWriting  = 40 // a request is being handled
	areaWaiting  = 48 // keep-alive, between requests
)

// A worker area is claimed by a worker process, which alone adds to it, and retired by a
// master once that process is gone. Its owner word is one of:
//
//	0                                   never claimed since the segment was made
//	claims (31) | pid (32)              claimed by worker pid
//	claims (31) | retiredPID (32)       retired: gauges zero, counts kept; claimable
//	1 | claims (31) | master pid (32)   retiring: that master is zeroing the gauges
//
// claims counts the area's claims, so that a master that loaded a dead worker's owner
// word cannot retire the area once it has been retired and claimed again by a process
// that reuses the dead one's pid: its CAS expects the old count.
//
// Counts (accepted, requests) never leave their area and are never zeroed: a new owner
// adds on to what the retired ones counted, and ConnStats sums the counts of every area
// whatever its state. That makes the totals exact with nothing to lock. A request is one
// atomic add to one word, which a worker killed at any instruction (kill -9 in the middle
// of ConnState) has either made or not; and as no count ever moves, no reader can see
// one twice or miss it in transit. Successive scrapes never decrease: the exporter's
// scrapes are serialised, and each reads every word after the one before read it. (Folding
// a dead worker's counts into totals elsewhere, as older binaries did into offRetired,
// takes two stores, the add and the zeroing, and a reader between them sees the count
// twice or not at all; a lock across processes to prevent that would stay held by a
// master killed while holding it.)
//
// Gauges (active, reading, writing, waiting) die with their process, as its connections
// did. A master retires an area by a CAS of the owner word from the dead pid to retiring,
// which one master alone can win; it then zeroes the gauges, which nobody else writes (the
// owner is dead and no worker can claim the area yet), and stores retired. A worker
// claims a never-claimed or retired area by a CAS to its own pid and so starts from zero
// gauges. ConnStats sums the gauges of claimed areas only; one that reads an area while
// its dead owner is being retired may see some of its gauges zeroed and others not, an
// error that lasts no longer than the retirement, in values that are only ever a
// moment's. A master killed while retiring leaves the area retiring under a dead pid; the
// next retirement by any master completes it, as each of its steps may be repeated.
//
// Older binaries (layout version 1 too) take any non-zero owner word for a pid, its low
// 32 bits, and free the area of a dead one, folding its counts into offRetired, which
// ConnStats still sums. Such a binary, run after this one, takes a retired area
// (retiredPID, nobody's) for a dead worker's and folds it, so its totals stay whole, and
// leaves a retiring one (a live master's pid) alone. The one unsafe meeting is the
// moment of an upgrade from such a binary, while both masters run: a scrape of the old
// one may fold a retired area just as a new worker claims it. That takes a new worker
// crashing and being replaced within the hand-over.
const (
	ownerPIDBits    = 32
	ownerPIDMask    = 1<<ownerPIDBits - 1
	ownerClaimsMask = 1<<31 - 1 // once shifted down
	ownerRetiring   = 1 << 63
	// retiredPID is above Linux's PID_MAX_LIMIT (2^22), so no process has it.
	retiredPID = 1<<31 - 1
)

func ownerPID(w uint64) int           { return int(w & ownerPIDMask) }
func ownerClaimCount(w uint64) uint64 { return w >> ownerPIDBits & ownerClaimsMask }

func ownerWord(claims uint64, pid int) uint64 {
	return (claims&ownerClaimsMask)<<ownerPIDBits | uint64(pid)&ownerPIDMask
}

// claimable tells whether an area with owner word w may be claimed by a new worker.
func claimable(w uint64) bool { return w == 0 || w&ownerRetiring == 0 && ownerPID(w) == retiredPID }

// claimed tells whether w names a worker process that writes to the area.
func claimed(w uint64) bool { return w&ownerRetiring == 0 && !claimable(w) }

// ErrNoWorkerArea means every worker area in the segment is claimed, by a live process or
// by a dead one no master has retired yet.
var ErrNoWorkerArea = errors.New("prometheus: no free worker area in the metrics segment")

// ConnTracker counts one worker's connections by state and its requests, in the worker's
// own area of the metrics segment, for apisix_nginx_http_current_connections and
// apisix_http_requests_total. It is the plugin's plugins.ConnObserver, safe for concurrent
// use.
type ConnTracker struct {
	t    *Table
	area int // byte offset of the area
}

var (
	_ plugins.ConnWatcher  = plugin{}
	_ plugins.ConnObserver = (*ConnTracker)(nil)
)

// ObserveConns claims the worker's area of the metrics segment for its connections.
func (plugin) ObserveConns(shared *plugins.Shared) (plugins.ConnObserver, error) {
	seg := shared.Segments[Name]
	if seg == nil {
		return nil, nil // no metrics segment (tests): nothing to count into
	}
	t, err := tableFor(seg)
	if err != nil {
		return nil, err
	}
	return NewConnTracker(t)
}

// NewConnTracker claims a free worker area for this process. The master retires it once
// the process is gone (RetireWorkerAreas), keeping its accepted and request counts for
// the next worker to add on to.
func NewConnTracker(t *Table) (*ConnTracker, error) {
	off, err := t.claimWorkerArea(os.Getpid())
	if err != nil {
		return nil, err
	}
	return &ConnTracker{t: t, area: off}, nil
}

// claimWorkerArea claims a never-claimed or retired area for pid and returns its offset.
func (t *Table) claimWorkerArea(pid int) (int, error) {
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		owner := t.word(off + areaOwner)
		if w := owner.Load(); claimable(w) && owner.CompareAndSwap(w, ownerWord(ownerClaimCount(w)+1, pid)) {
			return off, nil
		}
	}
	return 0, ErrNoWorkerArea
}

func (ct *ConnTracker) add(word int, delta uint64) { ct.t.word(ct.area + word).Add(delta) }

const minusOne = ^uint64(0)

// ConnChanged moves one connection from one state's gauge to the other's, and counts
// its acceptance and each request: a handful of atomic adds into the worker's own area.
func (ct *ConnTracker) ConnChanged(from, to plugins.ConnState) {
	switch from {
	case plugins.ConnNew:
		ct.add(areaReading, minusOne)
	case plugins.ConnActive:
		ct.add(areaWriting, minusOne)
	case plugins.ConnIdle:
		ct.add(areaWaiting, minusOne)
	}
	switch to {
	case plugins.ConnNew:
		ct.add(areaAccepted, 1)
		ct.add(areaActive, 1)
		ct.add(areaReading, 1)
	case plugins.ConnActive:
		ct.add(areaRequests, 1)
		ct.add(areaWriting, 1)
	case plugins.ConnIdle:
		ct.add(areaWaiting, 1)
	case plugins.ConnClosed:
		if from != plugins.ConnUnseen {
			ct.add(areaActive, minusOne)
		}
	}
}

// ConnStats are the instance's connection and request counts, APISIX's stub_status set.
type ConnStats struct {
	Accepted, Handled, Requests       uint64
	Active, Reading, Writing, Waiting uint64
}

// RetireWorkerAreas retires the area of every worker process that gone reports gone, and
// completes any retirement that a master gone meanwhile left half done (see the owner
// words above). Their counts stay in place; their gauges are dropped, as their
// connections died with them. gone must say true only of a process that has exited: a
// retired area may be claimed at once by another. A master calls it; it is safe for
// concurrent use with itself, ConnStats and the workers, in any number of processes. It
// returns how many areas it retired.
func (t *Table) RetireWorkerAreas(gone func(pid int) bool) int {
	self := os.Getpid()
	retired := 0
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		owner := t.word(off + areaOwner)
		w := owner.Load()
		if claimable(w) || !gone(ownerPID(w)) {
			continue
		}
		claims := ownerClaimCount(w)
		if !owner.CompareAndSwap(w, ownerRetiring|ownerWord(claims, self)) {
			continue // claimed, retired or taken over by another since the load
		}
		for g := areaActive; g < workerAreaSize; g += 8 {
			t.word(off + g).Store(0)
		}
		owner.Store(ownerWord(claims, retiredPID)) // last: a new worker may claim it from here on
		retired++
	}
	return retired
}

// ConnStats sums the counts of every area, the gauges of claimed ones and the totals
// older binaries folded into offRetired.
func (t *Table) ConnStats() ConnStats {
	s := ConnStats{Accepted: t.word(offRetired).Load(), Requests: t.word(offRetired + 8).Load()}
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		s.Accepted += t.word(off + areaAccepted).Load()
		s.Requests += t.word(off + areaRequests).Load()
		if !claimed(t.word(off + areaOwner).Load()) {
			continue
		}
		s.Active += t.word(off + areaActive).Load()
		s.Reading += t.word(off + areaReading).Load()
		s.Writing += t.word(off + areaWriting).Load()
		s.Waiting += t.word(off + areaWaiting).Load()
	}
	s.Handled = s.Accepted
	return s
}
