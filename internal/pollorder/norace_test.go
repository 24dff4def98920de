//go:build !race

package pollorder

const raceEnabled = false
