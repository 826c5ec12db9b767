package flowspaces

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// StateBudget bounds the state that the functions placed in one flowspace
// keep together: MBuf bytes in a Go flowspace, map memory in an eBPF one.
// A flowspace whose budget has no room for a function's state refuses it
// in Host, so placement passes over it with that reason, as over one that
// lacks the class; when the root refuses, the request fails at populate
// with a sentence naming the function. A nil *StateBudget, or one of
// Limit ≤ 0, bounds nothing.
//
// A function counts from the moment a flowspace accepts it, if it is
// placed there (Node.Flowspace: a request that fails to populate leaves
// none of its functions placed), until it is removed.
//
// The sharp edge: the budget bounds the state a class declares (its MBuf,
// its maps), not the memory a function allocates besides it.
type StateBudget struct {
	Limit int64 // bytes

	mu   sync.Mutex
	size map[*Node]int64
}

// NewStateBudget returns a budget of limit bytes: 0 takes def, < 0 none.
func NewStateBudget(limit, def int64) *StateBudget {
	if limit == 0 {
		limit = def
	}
	return &StateBudget{Limit: limit}
}

// Admit counts n's state of size bytes against fs's budget, or says why
// it does not fit. The functions counted are those fs accepted that are
// placed in fs (or not placed yet: n).
func (b *StateBudget) Admit(fs Flowspace, n *Node, size int64) error {
	if b == nil || b.Limit <= 0 || size <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var used int64
	for m, s := range b.size {
		if m != n && m.Flowspace == fs {
			used += s
		}
	}
	if used+size > b.Limit {
		return fmt.Errorf("its state (%s) does not fit in the %s of state %s keeps for its functions (%s taken)",
			MiB(size), MiB(b.Limit), fs.Name(), MiB(used))
	}
	if b.size == nil {
		b.size = map[*Node]int64{}
	}
	b.size[n] = size
	return nil
}

// Release stops counting n (removed).
func (b *StateBudget) Release(n *Node) {
	if b == nil {
		return
	}
	b.mu.Lock()
	delete(b.size, n)
	b.mu.Unlock()
}

// Settle forgets the functions fs accepted that were placed elsewhere (or
// not at all: their request failed to populate); fs calls it in Connect.
func (b *StateBudget) Settle(fs Flowspace) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for m := range b.size {
		if m.Flowspace != fs {
			delete(b.size, m)
		}
	}
}

// Used is the state counted against fs's budget.
func (b *StateBudget) Used(fs Flowspace) int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var used int64
	for m, s := range b.size {
		if m.Flowspace == fs {
			used += s
		}
	}
	return used
}

// MemoryShare returns the machine's RAM divided by div (0 when unknown):
// the default budgets are shares of it.
func MemoryShare(div int64) int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil || div <= 0 {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) / div
}

// MiB formats a size in bytes for a message: "12.5 MiB", "300 B".
func MiB(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
