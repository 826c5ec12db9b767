package buffers

import (
	"fmt"
	"sync/atomic"
)

// IBuf is a circular buffer of index entries: the output of one function as
// seen by a reader that consumes it at its own pace (an application, a
// bridge). One goroutine writes and one reads; neither blocks. When the
// reader falls behind, Push refuses the entry and the writer counts a drop.
type IBuf struct {
	e          []Entry
	mask       uint64
	head, tail atomic.Uint64 // head: next to read; tail: next to write
}

// NewIBuf allocates an IBuf of n entries; n must be a power of two.
func NewIBuf(n int) *IBuf {
	if n <= 0 || n&(n-1) != 0 {
		panic(fmt.Sprintf("buffers: IBuf size %d is not a power of two", n))
	}
	return &IBuf{e: make([]Entry, n), mask: uint64(n - 1)}
}

// Len returns the number of entries waiting to be read.
func (q *IBuf) Len() int { return int(q.tail.Load() - q.head.Load()) }

// Cap returns the capacity.
func (q *IBuf) Cap() int { return len(q.e) }

// PushBatch appends the entries of b that fit and returns how many did.
func (q *IBuf) PushBatch(b *Batch) int {
	t, h := q.tail.Load(), q.head.Load()
	n := min(b.N, len(q.e)-int(t-h))
	for i := 0; i < n; i++ {
		q.e[(t+uint64(i))&q.mask] = b.E[i]
	}
	q.tail.Store(t + uint64(n))
	return n
}

// Pop copies up to len(dst) entries into dst and returns how many.
func (q *IBuf) Pop(dst []Entry) int {
	h, t := q.head.Load(), q.tail.Load()
	n := min(len(dst), int(t-h))
	for i := 0; i < n; i++ {
		dst[i] = q.e[(h+uint64(i))&q.mask]
	}
	q.head.Store(h + uint64(n))
	return n
}
