package buffers

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
)

// Ring hands batches from one producer goroutine to one consumer goroutine.
// Passing a batch (not a packet) per operation keeps the cost of crossing
// goroutines at a few nanoseconds per packet.
//
// Notification adapts to load the way NAPI does: a consumer that finds the
// ring empty polls for a short while (packets are arriving fast, a wake-up
// would cost more than the wait) and only then sleeps until the producer
// signals. The producer signals only when the consumer says it sleeps.
//
// The userspace flowspace runs each source to completion and needs none;
// a bridge whose two sides run on different goroutines (a kernel ring buffer
// reader feeding userspace functions) hands its batches over a Ring.
type Ring struct {
	slots      []*Batch
	mask       uint64
	head, tail atomic.Uint64
	sleeping   atomic.Bool
	wake       chan struct{} // consumer waits here
	space      chan struct{} // producer waits here
	pfull      atomic.Bool
	closed     atomic.Bool
}

// PollSpins is how many times a consumer re-checks an empty ring before it
// sleeps. At 256 packets per batch, a batch every few microseconds means a
// rate of tens of Mpps, where sleeping is never worth it.
const PollSpins = 64

// NewRing returns a ring for n batches; n must be a power of two.
func NewRing(n int) *Ring {
	if n <= 0 || n&(n-1) != 0 {
		panic(fmt.Sprintf("buffers: ring size %d is not a power of two", n))
	}
	return &Ring{
		slots: make([]*Batch, n), mask: uint64(n - 1),
		wake: make(chan struct{}, 1), space: make(chan struct{}, 1),
	}
}

// Push enqueues b, waiting while the ring is full. It fails only when ctx
// is done.
func (r *Ring) Push(ctx context.Context, b *Batch) error {
	for {
		t := r.tail.Load()
		if t-r.head.Load() < uint64(len(r.slots)) {
			r.slots[t&r.mask] = b
			r.tail.Store(t + 1)
			if r.sleeping.Load() {
				signal(r.wake)
			}
			return nil
		}
		r.pfull.Store(true)
		if t-r.head.Load() < uint64(len(r.slots)) {
			continue // consumer made room between our checks
		}
		select {
		case <-r.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close tells the consumer that no more batches will come.
func (r *Ring) Close() {
	r.closed.Store(true)
	signal(r.wake)
}

// Pop dequeues the next batch, waiting while the ring is empty. It returns
// nil when the ring is closed and drained, or when ctx is done.
func (r *Ring) Pop(ctx context.Context) *Batch {
	for spins := 0; ; spins++ {
		h := r.head.Load()
		if h < r.tail.Load() {
			b := r.slots[h&r.mask]
			r.slots[h&r.mask] = nil
			r.head.Store(h + 1)
			if r.pfull.Load() {
				r.pfull.Store(false)
				signal(r.space)
			}
			return b
		}
		if r.closed.Load() {
			if h < r.tail.Load() {
				continue
			}
			return nil
		}
		if spins < PollSpins {
			if spins > PollSpins/2 {
				runtime.Gosched() // the producer may share our core
			}
			continue
		}
		r.sleeping.Store(true)
		if h < r.tail.Load() || r.closed.Load() {
			r.sleeping.Store(false)
			continue
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			r.sleeping.Store(false)
			return nil
		}
		r.sleeping.Store(false)
		spins = 0
	}
}

// Len returns the number of batches waiting.
func (r *Ring) Len() int { return int(r.tail.Load() - r.head.Load()) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
