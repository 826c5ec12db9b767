package collector

import (
	"math"
	"sync/atomic"
)

// keyIncrement is Key-Increment's memory: a count-min sketch of M 64-bit
// counters in one array, where copy n of key K is counter
// CRC-32(K ‖ n) mod M (the reference translator places Key-Increment as it
// places Key-Write), incremented by Fetch-and-Add.
type keyIncrement struct {
	counters []uint64
	red      reducer
	n        int
	// ones counts the adds whose counters' bits or'ed were all ones: it
	// only keeps the compiler from dropping add's loads.
	ones uint64
}

func newKeyIncrement(c KeyIncrementConfig) *keyIncrement {
	return &keyIncrement{counters: prefault64(make([]uint64, c.Slots)), red: newReducer(c.Slots), n: c.Redundancy}
}

// add is the translator's N Fetch-and-Adds: atomic, so that no increment
// is lost between ingesting cores and the sketch never under-counts.
//
// A locked add waits for its cache line; plain loads of the N counters
// first fetch the lines in parallel, so that the adds find them in cache
// (the loads' values are not used: the race detector is told not to
// watch them).
//
//go:norace
func (ki *keyIncrement) add(key uint32, v uint64, n int) {
	st := keyState(key)
	var idx [MaxRedundancy]uint32
	var touch uint64
	for i := range n {
		idx[i] = ki.red.mod(slotHash(st, i))
		touch |= ki.counters[idx[i]]
	}
	if touch == 1<<64-1 { // practically never: a use of the loads, so that they stay
		ki.ones++
	}
	for i := range n {
		atomic.AddUint64(&ki.counters[idx[i]], v)
	}
}

// query is Algorithm 6: the minimum of the key's N counters.
func (ki *keyIncrement) query(key uint32, n int) uint64 {
	st := keyState(key)
	m := uint64(math.MaxUint64)
	for i := range n {
		m = min(m, atomic.LoadUint64(&ki.counters[ki.red.mod(slotHash(st, i))]))
	}
	return m
}
