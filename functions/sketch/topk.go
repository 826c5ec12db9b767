package sketch

import (
	"slices"
)

// TopK tracks the K keys with the largest estimates offered, for the report
// of a count-min sketch at the end of a window. Its memory is allocated by
// NewTopK; Offer allocates nothing and costs O(1) when the estimate is below
// the smallest tracked (the common case) and O(log K) otherwise: a min-heap
// of entries, found by key through an open-addressing table (linear probing
// on the key's hash, backward-shift deletion, no tombstones) twice K long.
//
// Ties: a key whose estimate equals the smallest tracked one does not
// displace it, so the first K keys to reach a value stay.
type TopK[K comparable] struct {
	heap  []topEntry[K]
	slots []int32 // heap index + 1; 0 = empty
	mask  uint64
	k     int
}

type topEntry[K comparable] struct {
	Entry[K]
	slot uint32
}

// Entry is a tracked key with its hash and estimate.
type Entry[K comparable] struct {
	Key      K
	Hash     uint64
	Estimate uint64
}

// NewTopK returns a tracker of the k (≥ 1) largest keys.
func NewTopK[K comparable](k int) *TopK[K] {
	k = max(k, 1)
	n := 2
	for n < 2*k {
		n *= 2
	}
	return &TopK[K]{heap: make([]topEntry[K], 0, k), slots: make([]int32, n), mask: uint64(n - 1), k: k}
}

// Len returns the number of keys tracked.
func (t *TopK[K]) Len() int { return len(t.heap) }

// Threshold returns the estimate a new key must exceed to enter: the
// smallest tracked estimate, or 0 while fewer than K keys are tracked.
func (t *TopK[K]) Threshold() uint64 {
	if len(t.heap) < t.k {
		return 0
	}
	return t.heap[0].Estimate
}

// Offer records that the key (with hash h) has estimate est now.
func (t *TopK[K]) Offer(key *K, h, est uint64) {
	full := len(t.heap) == t.k
	if full && est <= t.heap[0].Estimate {
		// Cannot enter; a tracked key with this estimate would be at the
		// root already, and its estimate does not change by this offer
		// unless it grows, which the test below catches.
		if est < t.heap[0].Estimate || !t.tracked(key, h) {
			return
		}
	}
	s, found := t.find(key, h)
	if found {
		i := int(t.slots[s]) - 1
		old := t.heap[i].Estimate
		t.heap[i].Estimate = est
		if est > old {
			t.down(i)
		} else {
			t.up(i)
		}
		return
	}
	if !full {
		i := len(t.heap)
		t.heap = append(t.heap, topEntry[K]{Entry: Entry[K]{*key, h, est}, slot: uint32(s)})
		t.slots[s] = int32(i + 1)
		t.up(i)
		return
	}
	// Replace the smallest.
	t.remove(uint64(t.heap[0].slot))
	s, _ = t.find(key, h) // the removal may have shifted the free slot
	t.heap[0] = topEntry[K]{Entry: Entry[K]{*key, h, est}, slot: uint32(s)}
	t.slots[s] = 1
	t.down(0)
}

func (t *TopK[K]) tracked(key *K, h uint64) bool { _, ok := t.find(key, h); return ok }

// find returns the slot holding key, or the empty slot where it would go.
func (t *TopK[K]) find(key *K, h uint64) (uint64, bool) {
	for s := h & t.mask; ; s = (s + 1) & t.mask {
		e := t.slots[s]
		if e == 0 {
			return s, false
		}
		if en := &t.heap[e-1]; en.Hash == h && en.Key == *key {
			return s, true
		}
	}
}

// remove empties slot s and shifts the following run back (Knuth's
// algorithm R), so every key stays reachable from its home slot.
func (t *TopK[K]) remove(s uint64) {
	t.slots[s] = 0
	for j := (s + 1) & t.mask; t.slots[j] != 0; j = (j + 1) & t.mask {
		e := &t.heap[t.slots[j]-1]
		home := e.Hash & t.mask
		// Move j to s if home is not cyclically in (s, j].
		if (j-home)&t.mask >= (j-s)&t.mask {
			t.slots[s] = t.slots[j]
			e.slot = uint32(s)
			t.slots[j] = 0
			s = j
		}
	}
}

func (t *TopK[K]) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.slots[t.heap[i].slot] = int32(i + 1)
	t.slots[t.heap[j].slot] = int32(j + 1)
}

func (t *TopK[K]) less(i, j int) bool { return t.heap[i].Estimate < t.heap[j].Estimate }

func (t *TopK[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *TopK[K]) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && t.less(r, l) {
			c = r
		}
		if !t.less(c, i) {
			return
		}
		t.swap(i, c)
		i = c
	}
}

// Append appends the tracked entries to dst, largest estimate first (ties
// by hash, then in tracking order), for a report; it allocates only when
// dst must grow.
func (t *TopK[K]) Append(dst []Entry[K]) []Entry[K] {
	start := len(dst)
	for _, e := range t.heap {
		dst = append(dst, e.Entry)
	}
	slices.SortStableFunc(dst[start:], func(a, b Entry[K]) int {
		if a.Estimate != b.Estimate {
			if a.Estimate > b.Estimate {
				return -1
			}
			return 1
		}
		if a.Hash != b.Hash {
			if a.Hash < b.Hash {
				return -1
			}
			return 1
		}
		return 0
	})
	return dst
}

// Reset forgets every key (at a window's end).
func (t *TopK[K]) Reset() {
	t.heap = t.heap[:0]
	clear(t.slots)
}
