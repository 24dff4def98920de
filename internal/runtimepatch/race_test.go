//go:build race

package runtimepatch

// raceEnabled: the race detector's runtime shuffles the scheduler's queues on purpose, so
// no order can be measured under it.
const raceEnabled = true
