// Package monotime is a cheap monotonic clock for stamps that are only ever compared with
// each other: Now reads the monotonic clock once, where time.Now also reads the wall
// clock, which costs as much again.
package monotime

import "time"

var epoch = time.Now()

// Now is the time since the process started, in nanoseconds; never 0, so that 0 can mean
// "no stamp".
func Now() int64 {
	return int64(time.Since(epoch)) + 1
}
