package flowspaces

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is the number of packets the sources of one run may read in total
// (ffpf run -c), shared by every flowspace of the run that reads packets
// itself (Limited), and split fairly: no source can reserve more than its
// share of what is left. A nil *Budget is no limit.
//
// What is left is one word of memory; eBPF programs that count packets
// themselves take from the same word (Shared), one packet at a time with
// an atomic add, so that the limit holds across flowspaces.
type Budget struct {
	limit   int64
	left    atomic.Pointer[atomic.Int64]
	own     atomic.Int64
	sources atomic.Int64
	// reserved counts packets claimed by a running Fill: they may come back.
	reserved atomic.Int64

	mu     sync.Mutex
	shared any
}

// NewBudget returns a budget of limit packets; limit <= 0 means none.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	b := &Budget{limit: limit}
	b.own.Store(limit)
	b.left.Store(&b.own)
	return b
}

// Limit returns the number of packets the run may read (0: no limit).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Shared returns the value newShared made on the first call of any
// flowspace of the run: memory that eBPF programs can take packets from
// (a kernel map mapped into the process). newShared gets the word that
// holds what is left and returns the word that holds it from now on, in
// that memory; later calls get the same value. What was left moves to the
// new word, also while sources claim from the old one.
func (b *Budget) Shared(newShared func() (word *atomic.Int64, v any, err error)) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared != nil {
		return b.shared, nil
	}
	word, v, err := newShared()
	if err != nil {
		return nil, err
	}
	word.Store(0)
	old := b.left.Swap(word)
	// A claim that read the old word fails its compare-and-swap against
	// the zero left there and reads the new one.
	word.Add(old.Swap(0))
	b.shared = v
	return v, nil
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
		word := b.left.Load()
		left := word.Load()
		if left <= 0 {
			if b.reserved.Load() == 0 {
				return 0
			}
			time.Sleep(50 * time.Microsecond) // another Fill is running
			continue
		}
		n := min(int64(want), max(1, left/max(1, b.sources.Load())))
		b.reserved.Add(n)
		if word.CompareAndSwap(left, left-n) {
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
		b.left.Load().Add(int64(unused))
	}
	b.reserved.Add(-int64(claimed))
}

// Sources returns how many sources read from the budget now.
func (b *Budget) Sources() int64 { return b.sources.Load() }

// Spent reports whether the limit has been reached.
func (b *Budget) Spent() bool {
	return b != nil && b.left.Load().Load() <= 0 && b.reserved.Load() == 0
}

// Limited is a flowspace whose sources read packets themselves (files,
// generators, libpcap): the flowgraph gives every such flowspace of a run
// the same Budget, before Activate.
type Limited interface {
	Flowspace
	SetBudget(*Budget)
}
