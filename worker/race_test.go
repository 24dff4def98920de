//go:build race

package worker

// raceEnabled: the race detector makes sync.Pool drop items, so allocation counts lie.
const raceEnabled = true
