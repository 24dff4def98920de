//go:build race

package proxyrewrite

const raceEnabled = true
