// Package monotime is a cheap monotonic clock for stamps that are only ever compared with
// each other: Now reads the monotonic clock once, where time.Now also reads the wall
// clock, which costs as much again. Time and Of convert to and from time.Time without
// reading either clock, so that a deadline can be computed from a stamp already read.
package monotime

import "time"

var (
	epoch     = time.Now()
	epochUnix = epoch.UnixNano()
)

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

// Unix is stamp as Unix nanoseconds: the wall clock when the process started plus the
// monotonic time since. It stays within any step of the wall clock since the start, and
// unlike a wall reading it never goes back.
func Unix(stamp int64) int64 {
	return epochUnix + stamp - 1
}
