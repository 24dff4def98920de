package prometheus

import (
	"errors"
	"os"

	"github.com/valyala/fasthttp"
)

// Worker area words: one area per live worker process, found by its owner's pid.
const (
	areaOwner    = 0 // pid of the worker writing here; 0 when free
	areaAccepted = 8 // connections accepted (nginx "accepted" and "handled")
	areaRequests = 16
	areaActive   = 24 // open connections
	areaReading  = 32 // accepted, first request not yet read
	areaWriting  = 40 // a request is being handled
	areaWaiting  = 48 // keep-alive, between requests
)

// ConnGauge is the state a connection was last counted in, which the caller keeps with the
// connection (the zero value before StateNew) so that ConnState finds it without a lookup.
type ConnGauge uint8

const (
	connReading ConnGauge = iota + 1
	connWriting
	connWaiting
)

// ErrNoWorkerArea means every worker area in the segment is held by a live process.
var ErrNoWorkerArea = errors.New("prometheus: no free worker area in the metrics segment")

// ConnTracker counts one worker's connections by state and its requests, in the worker's
// own area of the metrics segment, for apisix_nginx_http_current_connections and
// apisix_http_requests_total. Its ConnState method backs a fasthttp.Server ConnState hook
// and is safe for concurrent use.
type ConnTracker struct {
	t    *Table
	area int // byte offset of the area
}

// NewConnTracker claims a free worker area for this process. The master frees it once
// the process is gone (ReclaimWorkerAreas), keeping its accepted and request counts.
func NewConnTracker(t *Table) (*ConnTracker, error) {
	pid := uint64(os.Getpid())
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		if t.word(off+areaOwner).CompareAndSwap(0, pid) {
			return &ConnTracker{t: t, area: off}, nil
		}
	}
	return nil, ErrNoWorkerArea
}

func (ct *ConnTracker) add(word int, delta uint64) { ct.t.word(ct.area + word).Add(delta) }

const minusOne = ^uint64(0)

// ConnState records one connection's state change; g is that connection's gauge, which
// only the connection's own goroutine touches (fasthttp reports a connection's states from
// the goroutine serving it).
func (ct *ConnTracker) ConnState(g *ConnGauge, s fasthttp.ConnState) {
	prev := *g
	switch s {
	case fasthttp.StateNew:
		*g = connReading
	case fasthttp.StateActive:
		*g = connWriting
	case fasthttp.StateIdle:
		*g = connWaiting
	default: // closed or hijacked: the connection is no longer ours
		*g = 0
	}
	switch prev {
	case connReading:
		ct.add(areaReading, minusOne)
	case connWriting:
		ct.add(areaWriting, minusOne)
	case connWaiting:
		ct.add(areaWaiting, minusOne)
	}
	switch s {
	case fasthttp.StateNew:
		ct.add(areaAccepted, 1)
		ct.add(areaActive, 1)
		ct.add(areaReading, 1)
	case fasthttp.StateActive:
		ct.add(areaRequests, 1)
		ct.add(areaWriting, 1)
	case fasthttp.StateIdle:
		ct.add(areaWaiting, 1)
	default:
		if prev != 0 {
			ct.add(areaActive, minusOne)
		}
	}
}

// ConnStats are the instance's connection and request counts, APISIX's stub_status set.
type ConnStats struct {
	Accepted, Handled, Requests       uint64
	Active, Reading, Writing, Waiting uint64
}

// ReclaimWorkerAreas frees the areas of processes that alive reports gone, folding their
// accepted and request counts into the retired totals so that those never decrease; their
// gauges are dropped, as their connections died with them. Only the master calls it, and
// never concurrently with itself or ConnStats.
func (t *Table) ReclaimWorkerAreas(alive func(pid int) bool) {
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		pid := t.word(off + areaOwner).Load()
		if pid == 0 || alive(int(pid)) {
			continue
		}
		t.word(offRetired).Add(t.word(off + areaAccepted).Load())
		t.word(offRetired + 8).Add(t.word(off + areaRequests).Load())
		for w := areaAccepted; w < workerAreaSize; w += 8 {
			t.word(off + w).Store(0)
		}
		t.word(off + areaOwner).Store(0) // last: a new worker may claim it from here on
	}
}

// ConnStats sums the retired totals and every claimed area.
func (t *Table) ConnStats() ConnStats {
	s := ConnStats{Accepted: t.word(offRetired).Load(), Requests: t.word(offRetired + 8).Load()}
	for i := 0; i < WorkerAreas; i++ {
		off := offAreas + i*workerAreaSize
		if t.word(off+areaOwner).Load() == 0 {
			continue
		}
		s.Accepted += t.word(off + areaAccepted).Load()
		s.Requests += t.word(off + areaRequests).Load()
		s.Active += t.word(off + areaActive).Load()
		s.Reading += t.word(off + areaReading).Load()
		s.Writing += t.word(off + areaWriting).Load()
		s.Waiting += t.word(off + areaWaiting).Load()
	}
	s.Handled = s.Accepted
	return s
}
