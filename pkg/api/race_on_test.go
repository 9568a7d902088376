//go:build race

package api

// raceEnabled: the race detector adds allocations of its own, so counts of
// them mean nothing under it.
const raceEnabled = true
