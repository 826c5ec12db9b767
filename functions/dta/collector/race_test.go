//go:build race

package collector

// raceEnabled scales the statistical tests down under the race detector,
// which runs them ten times slower; their bounds allow for the noise.
const raceEnabled = true
