package flowspaces

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is the packet limit of one run, shared by every flowspace of the
// run, or of one request that has a limit of its own (ffpf submit -c: its
// sources' Node.Budget, and the request shares no function, so that the
// ends it counts at are its own). It counts packets in one of two places
// (Counting): where they reach the ends of the flowgraph (ffpf run -c, as
// tcpdump -c counts the packets its filter delivers), or where the
// sources capture them (ffpf run --capture-count). A nil *Budget is no
// limit.
//
// A packet holds a unit of the budget from the moment a source reads it
// (a source in Go claims units before it fills a batch; an eBPF hook takes
// one per packet) until its fate is known: counting at the ends, it spends
// its unit where it reaches an end, or gives it back when it leaves the
// graph without reaching one (filtered, or lost on its way up). A packet
// on its way up to a flowspace above keeps its unit, and that flowspace
// settles it. So no source reads a packet while every unit left is held,
// exactly the limit reaches the ends, and nothing is counted past it.
//
// What is left and what is held are one word of memory, so that one
// atomic add moves both: held in the high 32 bits, left in the low 32
// (signed: a failed take leaves it below zero for a moment). eBPF programs
// take from the same word (Shared), one packet at a time.
type Budget struct {
	limit    int64
	counting Counting
	word     atomic.Pointer[atomic.Int64]
	own      atomic.Int64
	sources  atomic.Int64

	mu     sync.Mutex
	shared any
}

// Counting is where a Budget counts packets.
type Counting int

const (
	// AtEnds counts the packets that reach the ends of the flowgraph,
	// each once (the packets ffpf run -w writes): ffpf run -c.
	AtEnds Counting = iota
	// AtCapture counts the packets the sources capture: ffpf run
	// --capture-count.
	AtCapture
)

// MaxLimit is the largest packet limit a Budget holds (its low word).
const MaxLimit = 1<<31 - 1

// The adds a unit's moves make to the word.
const (
	// TakeUnit holds one more unit and leaves one less.
	TakeUnit int64 = 1<<32 - 1
	// SpendUnit ends a held unit: its packet is counted.
	SpendUnit int64 = -1 << 32
	// ReturnUnit gives a held unit back: its packet is not counted.
	ReturnUnit int64 = -TakeUnit
)

// NewBudget returns a budget of limit packets counted as c says; limit <=
// 0 means none, and a larger limit than MaxLimit is MaxLimit.
func NewBudget(limit int64, c Counting) *Budget {
	if limit <= 0 {
		return nil
	}
	limit = min(limit, MaxLimit)
	b := &Budget{limit: limit, counting: c}
	b.own.Store(limit)
	b.word.Store(&b.own)
	return b
}

// Limit returns the number of packets the run may count (0: no limit).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// AtEnds reports whether the budget counts packets at the ends of the
// flowgraph (false: no limit, or counted at capture).
func (b *Budget) AtEnds() bool { return b != nil && b.counting == AtEnds }

// split returns what is held and what is left in word w.
func split(w int64) (held, left int64) {
	left = int64(int32(uint32(w)))
	return (w - left) >> 32, left
}

// Shared returns the value newShared made on the first call of any
// flowspace of the run: memory that eBPF programs can take packets from
// (a kernel map mapped into the process). newShared gets the word that
// holds what is left and returns the word that holds it from now on, in
// that memory; later calls get the same value. What was left and held
// moves to the new word, also while sources claim from the old one.
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
	old := b.word.Swap(word)
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

// Claim takes up to want units for a source to read as many packets. It
// returns 0 only when the limit is spent: while units are held that may
// come back (another source's running Fill, packets on their way to an
// end), it waits for them.
func (b *Budget) Claim(ctx context.Context, want int) int {
	if b == nil {
		return want
	}
	for ctx.Err() == nil {
		word := b.word.Load()
		w := word.Load()
		held, left := split(w)
		if left <= 0 {
			if held == 0 {
				return 0
			}
			time.Sleep(50 * time.Microsecond) // units held may come back
			continue
		}
		n := min(int64(want), max(1, left/max(1, b.sources.Load())))
		if word.CompareAndSwap(w, w+n*TakeUnit) {
			return int(n)
		}
	}
	return 0
}

// Read ends a source's claim of claimed units, of which it read read
// packets: the units of the packets it did not read come back; counting
// at capture, those it read are spent, while counting at the ends they
// stay held until Spend or Return.
func (b *Budget) Read(claimed, read int) {
	if b == nil {
		return
	}
	b.Return(claimed - read)
	if b.counting == AtCapture {
		b.Spend(read)
	}
}

// Spend counts n held units: their packets reached an end (or, at
// capture, were read).
func (b *Budget) Spend(n int) {
	if b != nil && n > 0 {
		b.word.Load().Add(int64(n) * SpendUnit)
	}
}

// Return gives n held units back: their packets left the graph without
// reaching an end, or were not read.
func (b *Budget) Return(n int) {
	if b != nil && n > 0 {
		b.word.Load().Add(int64(n) * ReturnUnit)
	}
}

// Sources returns how many sources read from the budget now.
func (b *Budget) Sources() int64 { return b.sources.Load() }

// Spent reports whether the limit has been reached: nothing is left, and
// no unit is held that could come back.
func (b *Budget) Spent() bool {
	if b == nil {
		return false
	}
	held, left := split(b.word.Load().Load())
	return held == 0 && left <= 0
}

// Counted returns how many packets have been counted so far.
func (b *Budget) Counted() int64 {
	if b == nil {
		return 0
	}
	held, left := split(b.word.Load().Load())
	return b.limit - held - max(left, 0)
}

// Limited is a flowspace whose sources read packets themselves (files,
// generators, libpcap, eBPF hooks): the flowgraph gives every such
// flowspace of a run the same Budget, before Populate. A source whose
// request has a limit of its own reads from its Node.Budget instead
// (Node.BudgetOr), and the packets of its stream count there; only a
// Limited flowspace runs such a source.
//
// The streams of a flowspace may so count in different budgets, each
// exactly: a stream's packets hold units of its own source's budget only.
// What ends a budget's stream is its budget, not the flowspace's: a
// request whose limit is reached ends, the others go on.
type Limited interface {
	Flowspace
	SetBudget(*Budget)
}

// BudgetOr returns the budget the stream of source n counts in: its own
// (Node.Budget), or run, the run's.
func (n *Node) BudgetOr(run *Budget) *Budget {
	if n.Budget != nil {
		return n.Budget
	}
	return run
}
