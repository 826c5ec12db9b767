package user

import (
	"context"
	"sync/atomic"
	"time"
)

// Budget is the number of packets the sources of one run may read in total
// (ffpf run -c), shared by every Go flowspace of the run, and split fairly:
// no source can reserve more than its share of what is left.
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

// claim reserves up to want packets. It returns 0 only when the limit is
// spent: while another source holds a reservation it may give back, it
// waits for it.
func (b *Budget) claim(ctx context.Context, want int) int {
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

// settle ends a reservation of claimed packets of which used were read.
func (b *Budget) settle(claimed, used int) {
	if b == nil {
		return
	}
	if unused := claimed - used; unused > 0 {
		b.left.Add(int64(unused))
	}
	b.reserved.Add(-int64(claimed))
}

// Spent reports whether the limit has been reached.
func (b *Budget) Spent() bool { return b != nil && b.left.Load() <= 0 && b.reserved.Load() == 0 }

// SetBudget makes the flowspace's sources share b (the run's packet
// limit); call it before Activate.
func (fs *Flowspace) SetBudget(b *Budget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.opts.Budget = b
}
