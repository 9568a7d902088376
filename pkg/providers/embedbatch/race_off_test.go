//go:build !race

package embedbatch

const raceEnabled = false
