//go:build race

package gateway

// raceEnabled: the race detector multiplies the memory a program uses, so
// measurements of RSS mean nothing under it.
const raceEnabled = true
