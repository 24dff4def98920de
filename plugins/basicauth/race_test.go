//go:build race

package basicauth

const raceEnabled = true
