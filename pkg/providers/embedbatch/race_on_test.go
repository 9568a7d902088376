//go:build race

package embedbatch

// raceEnabled: the race detector adds allocations of its own, so allocation
// counts mean nothing under it.
const raceEnabled = true
