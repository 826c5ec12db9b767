//go:build !race

package bpf

const raceEnabled = false
