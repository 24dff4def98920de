//go:build !race

package keyauth

const raceEnabled = false
