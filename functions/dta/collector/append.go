package collector

import "sync"

// appendLists is Append's memory (Algorithms 3 and 4): one ring of 32-bit
// entries per list, written at its head a batch at a time (B = 1, 4, 8,
// 16 entries as the translator batches them) and read in order.
type appendLists struct {
	size    uint64
	entries []uint32 // list l's ring is entries[l*size : (l+1)*size]
	lists   []ring
}

// ring is a list's head. Writers and readers of a list take its lock: a
// reader then sees whole batches, in the order they were written (a
// reporter's reports reach one ingesting core, so its entries keep its
// order). Padded to a cache line, so lists written by different cores do
// not share one.
type ring struct {
	mu      sync.Mutex
	written uint64 // entries ever written: the head is written mod size
	_       [64 - 16]byte
}

func newAppendLists(c AppendConfig) *appendLists {
	return &appendLists{size: c.Size, entries: prefault32(make([]uint32, uint64(c.Lists)*c.Size)), lists: make([]ring, c.Lists)}
}

// write appends entries to list l: the translator's WriteBatch, at the
// head, wrapping at the ring's end.
func (a *appendLists) write(l uint32, entries []uint32) {
	r := &a.lists[l]
	base := uint64(l) * a.size
	r.mu.Lock()
	for len(entries) > 0 {
		head := r.written % a.size
		n := copy(a.entries[base+head:base+a.size], entries)
		entries = entries[n:]
		r.written += uint64(n)
	}
	r.mu.Unlock()
}

// write1 appends one entry.
func (a *appendLists) write1(l uint32, v uint32) {
	r := &a.lists[l]
	r.mu.Lock()
	a.entries[uint64(l)*a.size+r.written%a.size] = v
	r.written++
	r.mu.Unlock()
}

// read appends to dst the entries of list l from position from (counting
// every entry ever written, 0 first) on, at most max of them, oldest
// first. It returns the position after the last one read, and how many
// entries from position from on were overwritten before this read
// (skipped: the ring holds the last size entries).
func (a *appendLists) read(l uint32, from uint64, max int, dst []uint32) (out []uint32, next, lost uint64) {
	r := &a.lists[l]
	base := uint64(l) * a.size
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.written
	if oldest := w - min(w, a.size); from < oldest {
		lost, from = oldest-from, oldest
	}
	if from > w {
		from = w
	}
	n := min(w-from, uint64(max))
	for i := range n {
		dst = append(dst, a.entries[base+(from+i)%a.size])
	}
	return dst, from + n, lost
}

// total is how many entries list l was ever given.
func (a *appendLists) total(l uint32) uint64 {
	r := &a.lists[l]
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}
