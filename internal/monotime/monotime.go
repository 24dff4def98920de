// Package monotime is a cheap monotonic clock for stamps that are only ever compared with
// each other: Now reads the monotonic clock once, where time.Now also reads the wall
// clock, which costs as much again. Time and Of convert to and from time.Time without
// reading either clock, so that a deadline can be computed from a stamp already read.
// Unix turns a stamp into wall-clock time for what is shown or shared (log lines,
// rate-limit windows), following steps of the system clock through Resync.
package monotime

import (
	"sync/atomic"
	"time"
)

var (
	epoch = time.Now()
	// offset is Unix nanoseconds at stamp 0: the wall clock's reading at the start, moved
	// by Resync when the wall clock was stepped since.
	offset atomic.Int64
)

func init() { offset.Store(epoch.UnixNano() - 1) }

// maxWallDrift is how far the wall clock may move from the monotonic one before Resync
// follows it: NTP's slewing never gets there, a step does.
const maxWallDrift = int64(time.Millisecond)

// Now is the time since the process started, in nanoseconds; never 0, so that 0 can mean
// "no stamp".
func Now() int64 {
	return int64(time.Since(epoch)) + 1
}

// Time is stamp as a time.Time that carries a monotonic reading, as time.Now's do, so
// that a deadline set from it (SetReadDeadline) measures against the monotonic clock.
// The zero stamp is the zero Time: no deadline.
func Time(stamp int64) time.Time {
	if stamp == 0 {
		return time.Time{}
	}
	return epoch.Add(time.Duration(stamp - 1))
}

// Of is t as a stamp (0 for the zero Time), by its monotonic reading when it has one.
func Of(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(int64(t.Sub(epoch))+1, 1)
}

// Unix is stamp as Unix nanoseconds: the wall clock at the last Resync (or the start)
// plus the monotonic time since. Between steps of the wall clock it never goes back.
func Unix(stamp int64) int64 {
	return stamp + offset.Load()
}

// Resync reads the wall clock again, so that Unix follows a step of the system clock
// (NTP at boot, an operator) made since the process started, as nginx's cached time
// does; a difference under a millisecond is left alone. Call it now and then (a worker
// does, once a second); it is safe for concurrent use.
func Resync() {
	wall := time.Now().UnixNano()
	if drift := wall - Unix(Now()); drift > maxWallDrift || drift < -maxWallDrift {
		offset.Add(drift)
	}
}
