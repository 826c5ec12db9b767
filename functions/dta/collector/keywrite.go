package collector

import "sync/atomic"

// keyWrite is Key-Write's memory: M slots of {checksum:32, data:32}, in
// one 64-bit word each (checksum in the low half, so that a
// little-endian machine holds the slot's bytes in the paper's order).
// Copy n of key K goes to slot CRC-32(K ‖ n) mod M.
type keyWrite struct {
	slots []uint64
	red   reducer
	n     int    // the redundancy a query assumes by default
	mask  uint32 // of the checksum's bits: 32 but in tests of the analysis with fewer (b)
}

func newKeyWrite(c KeyWriteConfig) *keyWrite {
	return &keyWrite{slots: prefault64(make([]uint64, c.Slots)), red: newReducer(c.Slots), n: c.Redundancy, mask: ^uint32(0)}
}

func slotWord(checksum, data uint32) uint64 { return uint64(data)<<32 | uint64(checksum) }

// write stores {checksum, data} in the key's n slots, as the translator's
// n RDMA writes would.
//
// The stores are plain: like RDMA writes into a collector's memory, they
// race with queries by design. A slot is one aligned machine word, which
// the Go memory model guarantees is never torn, and queries read it
// atomically; the race detector is told not to watch the stores (an
// atomic store on amd64 is an XCHG, which waits for the cache miss that
// a plain store leaves to the store buffer: 3x slower on random slots).
//
//go:norace
func (kw *keyWrite) write(key, data uint32, n int) {
	st := keyState(key)
	w := slotWord(^st&kw.mask, data)
	for i := range n {
		kw.slots[kw.red.mod(slotHash(st, i))] = w
	}
}

// Status is a query's outcome.
type Status uint8

const (
	NotFound  Status = iota // no copy of the key's checksum: never written, or every copy overwritten
	Found                   // a value won
	Collision               // copies with the key's checksum disagree and none won: a checksum collision detected
)

func (s Status) String() string {
	switch s {
	case Found:
		return "found"
	case Collision:
		return "collision"
	}
	return "not found"
}

// KeyWriteAnswer is a Key-Write query's answer.
type KeyWriteAnswer struct {
	Status Status
	Value  uint32 // when found
	// Votes is how many of the N slots hold the value; Matches how many
	// hold the key's checksum (votes for any value).
	Votes, Matches int
	Slots          int // N, the slots read
}

// query is Algorithm 2 with the plurality vote the paper suggests as the
// default (A.5): among the N slots, those with the key's checksum are
// candidates; the value most of them hold wins if it has at least
// consensus votes and no other value has as many (a tie is a collision).
func (kw *keyWrite) query(key uint32, n, consensus int) KeyWriteAnswer {
	st := keyState(key)
	want := ^st & kw.mask
	a := KeyWriteAnswer{Slots: n}
	var vals [MaxRedundancy]uint32
	var votes [MaxRedundancy]int
	k := 0
	for i := range n {
		w := atomic.LoadUint64(&kw.slots[kw.red.mod(slotHash(st, i))])
		if w == 0 || uint32(w) != want { // an empty slot is no candidate, not even for a checksum of 0
			continue
		}
		a.Matches++
		d := uint32(w >> 32)
		j := 0
		for j < k && vals[j] != d {
			j++
		}
		if j == k {
			vals[k] = d
			k++
		}
		votes[j]++
	}
	if k == 0 {
		return a
	}
	best, tie := 0, false
	for j := 1; j < k; j++ {
		switch {
		case votes[j] > votes[best]:
			best, tie = j, false
		case votes[j] == votes[best]:
			tie = true
		}
	}
	a.Votes = votes[best]
	if tie || votes[best] < consensus {
		a.Status = Collision
		return a
	}
	a.Status, a.Value = Found, vals[best]
	return a
}
