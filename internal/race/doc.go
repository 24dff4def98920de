// Package race says whether the binary was built with the race detector (go test -race).
// Tests consult it to skip what the detector makes untrue: it allocates, makes sync.Pool
// drop items (so allocation counts lie) and shuffles the scheduler's run queue (so no
// order can be measured). Enabled is a constant, so a skipped branch costs nothing.
package race
