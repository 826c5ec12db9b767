package measure

import "github.com/ffpf-go/ffpf/functions"

// Touched remembers the entries of a structure that a window wrote, each
// once, when it went from empty to written, so that closing a window costs
// what the window touched, not the structure's size: the reset clears
// those entries, and a report walks them. It keeps at most an eighth of
// the entries (at least 64); past that it gives up the list (All), and the
// close clears and walks the whole structure, which then costs at most
// eight times what the window touched.
//
// A structure its function does not write itself (in an eBPF flowspace
// the flowspace loads it) is not tracked: All always. Touched is not safe
// for concurrent use: the function's lock serialises the writes and the
// window's close.
type Touched struct {
	list []uint32
	all  bool // the list overflowed this window, or there is no tracking
	off  bool
}

// NewTouched returns the tracking of a structure of n entries that the
// function of ctx writes (see Tracks).
func NewTouched(n int, ctx *functions.Context) *Touched {
	if !Tracks(ctx) {
		return &Touched{all: true, off: true}
	}
	return &Touched{list: make([]uint32, 0, max(n/8, 64))}
}

// Tracks says whether a function writes its structure itself, packet by
// packet (in userspace), which is what tracking needs; in an eBPF
// flowspace the structure is loaded whole from the maps at a window's end.
func Tracks(ctx *functions.Context) bool {
	return ctx.Target == "" || ctx.Target == functions.TargetUser
}

// Add records that entry i went from empty to written. It allocates
// nothing.
func (t *Touched) Add(i uint32) {
	if len(t.list) < cap(t.list) {
		t.list = append(t.list, i)
	} else {
		t.all = true
	}
}

// All says that the list does not hold every entry written: the close
// must clear and walk the whole structure.
func (t *Touched) All() bool { return t.all }

// SetAll says that the structure was written otherwise than entry by
// entry (a merge): until the next Reset, All.
func (t *Touched) SetAll() { t.all = true }

// Entries returns the entries written since the last Reset, when not All.
func (t *Touched) Entries() []uint32 { return t.list }

// Reset starts the next window: nothing written.
func (t *Touched) Reset() {
	t.list = t.list[:0]
	t.all = t.off
}
