//go:build !race

package runtimepatch

const raceEnabled = false
