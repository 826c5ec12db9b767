package monitor

import "unsafe"

// MaxTriggers is the most triggers a flow joins (the reference's
// FLOWENTRY_TRIGGER_SIZE); a match beyond is counted in unmatched.
const MaxTriggers = 16

// flow is one entry of the flow table: a 5-tuple, the epochs it was seen
// in, the summary units its triggers need, and the per-flow state of the
// TCP variables (which outlives an epoch). Its first 64 bytes are all a
// packet of a flow already seen in the epoch reads (with its summary
// words); the entry is 256 bytes, so that a pool allocated on a cache
// line keeps each entry's lines to itself.
type flow struct {
	// The hot line.
	key   Key
	last  int64  // epoch of its last packet
	units uint64 // summary units kept
	gen   uint32 // bumped when the entry is freed or reset: stale references see it
	vars  uint32 // values computed for it (those of units)

	hash   uint64
	stamp  [2]int64 // epoch whose summary each parity holds
	rev    int32    // the flow of the other direction, or -1
	revGen uint32
	used   bool
	ntl    uint8
	wscale int8
	rttOn  bool
	// state initialised
	seqInit, ackInit, burstInit bool
	kept                        bool // dead, kept for its matches
	// gate is the lowest number of the flow's triggers when each of them
	// is a fast test (trigHot) "unit gateUnit > number" (or >=, gateOp):
	// the sweep skips a flow whose value is below it without reading its
	// triggers; gateUnit -1 is no gate (narrow).
	gate     float64
	gateUnit int8
	gateOp   uint8
	_        [14]byte

	tl [MaxTriggers]int32 // the triggers it matched

	// TCP state (unwrapped sequence space; see Monitor's doc) and burst
	// state: the line TCP and burst variables update.
	seqLast   uint64
	seqMax    uint64
	maxEnd    uint64 // highest seq+payload seen
	ackLast   uint64
	dup       uint64
	rttTS     int64
	burstLast int64
	rttEnd    uint32
	burstRun  int32
}

// The entry is four cache lines, no more, no less.
var _ = [1]struct{}{}[unsafe.Sizeof(flow{})-256]

// flowTable is the 5-tuple flow table: an open-addressing index (linear
// probing, backward-shift deletion) over a preallocated pool of entries
// whose positions never move, so that triggers keep references to them.
type flowTable struct {
	// tab holds entry+1 in its low 32 bits (0 is empty) and the low 32
	// bits of the key's hash in its high ones: a probe compares the hash
	// without reading the entry, and a deletion finds a slot's home.
	tab  []uint64
	mask uint64
	pool []flow
	free []int32
	// keeps has bit i set when entry i keeps a summary (units != 0): a
	// batch reads a flow's summary line beside its entry's, not after it.
	keeps []uint64
}

// newFlowTable returns a table of n entries, whose memory owner frees.
func newFlowTable(owner *Monitor, n int) flowTable {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	t := flowTable{tab: hugeSlice[uint64](owner, size), mask: uint64(size - 1), pool: hugeSlice[flow](owner, n), free: make([]int32, n),
		keeps: make([]uint64, (n+63)/64)}
	for i := range t.free {
		t.free[i] = int32(n - 1 - i)
		t.pool[i].rev = -1
	}
	return t
}

// find returns the entry holding key, or -1.
func (t *flowTable) find(k *Key, h uint64) int32 {
	tag := h << 32
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		e := t.tab[i]
		if e == 0 {
			return -1
		}
		if e&^0xffffffff == tag {
			if idx := int32(uint32(e)) - 1; t.pool[idx].key.eq(k) {
				return idx
			}
		}
	}
}

// insert adds key (absent) and returns its entry, or -1 when the pool is
// full.
func (t *flowTable) insert(k *Key, h uint64) int32 {
	if len(t.free) == 0 {
		return -1
	}
	idx := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	i := h & t.mask
	for t.tab[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.tab[i] = h<<32 | uint64(idx+1)
	f := &t.pool[idx]
	gen := f.gen
	*f = flow{key: *k, hash: h, gen: gen + 1, used: true, rev: -1, stamp: [2]int64{-1 << 62, -1 << 62}}
	t.setUnits(idx, 0)
	return idx
}

// setUnits sets the summary units entry idx keeps.
func (t *flowTable) setUnits(idx int32, units uint64) {
	t.pool[idx].units = units
	if units != 0 {
		t.keeps[idx>>6] |= 1 << (idx & 63)
	} else {
		t.keeps[idx>>6] &^= 1 << (idx & 63)
	}
}

// keeps reports whether entry idx keeps a summary, without reading it.
func (t *flowTable) keepsSummary(idx uint32) bool { return t.keeps[idx>>6]&(1<<(idx&63)) != 0 }

// remove frees entry idx.
func (t *flowTable) remove(idx int32) {
	f := &t.pool[idx]
	i := f.hash & t.mask
	for uint32(t.tab[i]) != uint32(idx+1) {
		i = (i + 1) & t.mask
	}
	t.tab[i] = 0
	for j := (i + 1) & t.mask; t.tab[j] != 0; j = (j + 1) & t.mask {
		home := t.tab[j] >> 32 & t.mask
		// move j back into the hole at i unless its home lies in (i, j]
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.tab[i], t.tab[j] = t.tab[j], 0
			i = j
		}
	}
	f.used = false
	f.gen++
	t.free = append(t.free, idx)
}

func (t *flowTable) len() int { return len(t.pool) - len(t.free) }
