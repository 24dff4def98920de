//go:build !race

package limitcount

const raceEnabled = false
