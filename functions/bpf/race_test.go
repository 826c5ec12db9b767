//go:build race

package bpf

// raceEnabled: the race detector slows the engine tenfold and finds nothing
// in single-goroutine differential runs, which then use fewer packets.
const raceEnabled = true
