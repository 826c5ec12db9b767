package flowspaces

import (
	"context"
	"sync/atomic"
	"time"
)

// Budget is the number of packets the sources of one run may read in total
// (ffpf run -c), shared by every flowspace of the run that reads packets
// itself (Limited), and split fairly: no source can reserve more than its
// share of what is left. A nil *Budget is no limit.
type Budget struct {
	limit   int64
	left    atomic.Int64
	sources atomic.Int64
	// reserved counts packets claimed by a running Fill: they may come back.
	reserved atomic.Int64
}

// NewBudget returns a budget of limit packets; limit <= 0 means none.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	b := &Budget{limit: limit}
	b.left.Store(limit)
	return b
}

// Join counts one more source reading from the budget, until it calls
// Leave: a source's share of what is left depends on how many read.
func (b *Budget) Join() {
	if b != nil {
		b.sources.Add(1)
	}
}

// Leave ends Join.
func (b *Budget) Leave() {
	if b != nil {
		b.sources.Add(-1)
	}
}

// Claim reserves up to want packets. It returns 0 only when the limit is
// spent: while another source holds a reservation it may give back, it
// waits for it.
func (b *Budget) Claim(ctx context.Context, want int) int {
	if b == nil {
		return want
	}
	for ctx.Err() == nil {
		left := b.left.Load()
		if left <= 0 {
			if b.reserved.Load() == 0 {
				return 0
			}
			time.Sleep(50 * time.Microsecond) // another Fill is running
			continue
		}
		n := min(int64(want), max(1, left/max(1, b.sources.Load())))
		b.reserved.Add(n)
		if b.left.CompareAndSwap(left, left-n) {
			return int(n)
		}
		b.reserved.Add(-n)
	}
	return 0
}

// Settle ends a reservation of claimed packets of which used were read.
func (b *Budget) Settle(claimed, used int) {
	if b == nil {
		return
	}
	if unused := claimed - used; unused > 0 {
		b.left.Add(int64(unused))
	}
	b.reserved.Add(-int64(claimed))
}

// Sources returns how many sources read from the budget now.
func (b *Budget) Sources() int64 { return b.sources.Load() }

// Spent reports whether the limit has been reached.
func (b *Budget) Spent() bool { return b != nil && b.left.Load() <= 0 && b.reserved.Load() == 0 }

// Limited is a flowspace whose sources read packets themselves (files,
// generators, libpcap): the flowgraph gives every such flowspace of a run
// the same Budget, before Activate.
type Limited interface {
	Flowspace
	SetBudget(*Budget)
}
