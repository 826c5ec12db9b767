package user

import (
	"fmt"
	"math"
	"sync"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Functions on several workers (DESIGN.md §15). Each worker (a source's,
// a bridge reader's, a producer's) has a lane, and a function that several
// lanes reach runs as its class's concurrency allows
// (flowspaces.Node.Concurrency):
//
//   - ordered: one instance under one lock, as one worker would run it;
//   - stateless: an instance per lane, without a lock;
//   - mergeable: an instance per lane on a shard of the state, under a lock
//     of the shard's own that only a merge contends for.
//
// Each lane of a stateless or mergeable function counts in counters of its
// own (functions.Counters.Shard). A merge folds the other shards into the
// function itself (Node.Function, the first shard) field by field, as the
// class declares (functions.Class.Fold): --json, handlers and the end of
// the run read one state, the one a single worker would have left.
//
// Windows close on every shard at the same deadline of the packet clock,
// each on its own stream's time, so that shards merge window by window.
// At the end of the run every shard is brought to the time the streams
// ended at before the merge, so the merged window is the serial one. A
// merge while the run goes on first brings the shards behind on the packet
// clock to the window of the one furthest on, as one lock would have (the
// first stream to reach a deadline closes the window for all).

// runner is how one function runs here.
type runner struct {
	n *flowspaces.Node
	// cfg guards kind, why, shards and lanes, which Connect changes while
	// handlers and readers of the state merge.
	cfg  sync.Mutex
	kind functions.Concurrency
	why  string     // why it runs ordered, when its class has another kind
	set  bool       // kind was set by a Connect
	mu   sync.Mutex // ordered: the one lock
	// shards are the instances of a stateless or mergeable function, one
	// per lane that reached it; the first is n.Function. A merge takes
	// their locks in this order.
	shards []*shard
	lanes  map[int]*shard
	// admit counts total bytes of state for the function against the
	// flowspace's budget, or says why they do not fit: another shard is
	// made only when its copy of the state fits.
	admit func(total int64) error
}

// shard is a function's instance for one lane. Its lock is taken once per
// batch by its worker: padding keeps another shard's off its cache line.
type shard struct {
	fn  functions.Function
	mu  sync.Mutex // mergeable: held while its worker processes or ticks, and by a merge
	ctr *functions.Counters
	_   [64]byte
}

func newRunner(n *flowspaces.Node, admit func(int64) error) *runner {
	return &runner{n: n, lanes: map[int]*shard{}, admit: admit}
}

// setKind is Connect's: the kind the function runs as from now on. A
// mergeable function that has become ordered (a reader of its state
// arrived) is folded into its first shard once the workers have left the
// old routes: demote says so.
func (r *runner) setKind(nodes []*flowspaces.Node) (demote bool) {
	r.cfg.Lock()
	defer r.cfg.Unlock()
	k, why := r.n.Concurrency(nodes)
	if r.set && r.kind == functions.Ordered {
		// Once ordered, always: workers may still run the old routes
		// under the one lock while others would adopt shards.
		return false
	}
	demote = r.kind == functions.Mergeable && k != functions.Mergeable && len(r.shards) > 1
	r.kind, r.why, r.set = k, why, true
	return demote
}

// lane returns what lane l runs of the function: its instance, the lock it
// takes (nil: none) and the counters it counts in.
func (r *runner) lane(l int) (functions.Function, *sync.Mutex, *functions.Counters, error) {
	r.cfg.Lock()
	defer r.cfg.Unlock()
	if r.kind == functions.Ordered {
		return r.n.Function, &r.mu, &r.n.Counters, nil
	}
	s := r.lanes[l]
	if s == nil && len(r.shards) > 0 && r.kind == functions.Mergeable && !r.roomFor(len(r.shards)+1) {
		// No room for another copy of the state: the lane shares a shard
		// (and its lock) with others, taking them in turn.
		s = r.shards[len(r.lanes)%len(r.shards)]
		r.lanes[l] = s
	}
	if s == nil {
		s = &shard{fn: r.n.Function}
		if len(r.shards) > 0 {
			ctx := r.n.Ctx
			fn, err := r.n.Class.New(&ctx)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: another worker's instance: %w", r.n.ID, err)
			}
			s.fn = fn
		}
		s.ctr = r.n.Counters.Shard()
		r.shards = append(r.shards, s)
		r.lanes[l] = s
	}
	if r.kind == functions.Stateless {
		return s.fn, nil, s.ctr, nil
	}
	return s.fn, &s.mu, s.ctr, nil
}

// roomFor reports whether k copies of the function's state fit in the
// flowspace's budget, and counts them if they do.
func (r *runner) roomFor(k int) bool {
	st, ok := r.n.Function.(functions.Stateful)
	if !ok || r.admit == nil {
		return true
	}
	return r.admit(int64(k)*int64(len(st.MBuf().Bytes()))) == nil
}

// lockAll holds every shard still, in order; it returns the function that
// releases them.
func (r *runner) lockAll() func() {
	for _, s := range r.shards {
		s.mu.Lock()
	}
	return func() {
		for _, s := range r.shards {
			s.mu.Unlock()
		}
	}
}

// merged folds the shards of a mergeable function into the first and runs
// f while they are held still; false (f not run) when the function is not
// mergeable.
func (r *runner) merged(f func()) bool {
	r.cfg.Lock()
	defer r.cfg.Unlock()
	if r.kind != functions.Mergeable || len(r.shards) == 0 {
		return false
	}
	unlock := r.lockAll()
	defer unlock()
	r.align()
	r.fold()
	f()
	return true
}

// align brings the shards of a clocked function that are behind on the
// packet clock to the window of the one furthest on (see above). The
// shards are held.
func (r *runner) align() {
	if _, ok := r.n.Function.(functions.Clocked); !ok {
		return
	}
	d := int64(math.MinInt64)
	for _, s := range r.shards {
		if x := s.fn.(functions.Clocked).Deadline(); x != functions.NoDeadline {
			d = max(d, x)
		}
	}
	if d == math.MinInt64 {
		return // no window is open
	}
	for _, s := range r.shards {
		if c := s.fn.(functions.Clocked); c.Deadline() < d {
			c.Tick(d - 1) // the window that ends at d
		}
	}
}

// tickAll brings every shard of a clocked function to time now, as its
// worker would on a packet at now. The shards are held.
func (r *runner) tickAll(now int64) {
	for _, s := range r.shards {
		if c, ok := s.fn.(functions.Clocked); ok && c.Deadline() <= now {
			c.Tick(now)
		}
	}
}

// fold merges the other shards' state into the first's. The shards are
// held.
func (r *runner) fold() {
	if len(r.shards) < 2 {
		return
	}
	dst, ok := r.shards[0].fn.(functions.Stateful)
	if !ok {
		return
	}
	for _, s := range r.shards[1:] {
		if err := r.n.Class.Fold(functions.TargetUser, dst.MBuf(), s.fn.(functions.Stateful).MBuf()); err != nil {
			panic(fmt.Sprintf("user: %s: %v", r.n.ID, err)) // a class whose state drifted from its declaration: CheckState catches it first
		}
	}
}

// demote ends the shards of a function that now runs ordered: they are
// folded into the first, which goes on alone. The workers no longer use
// the others.
func (r *runner) demote() {
	r.cfg.Lock()
	defer r.cfg.Unlock()
	r.mu.Lock()
	unlock := r.lockAll()
	r.align()
	r.fold()
	unlock()
	r.mu.Unlock()
	for _, s := range r.shards[1:] {
		if c, ok := s.fn.(functions.Closer); ok {
			c.Close()
		}
	}
	r.shards = r.shards[:1]
	clear(r.lanes)
}

// lock holds the function still between two batches, for a handler: the
// one lock of an ordered function; every shard of a mergeable one, merged
// first, so that the handler sees and changes the whole state in
// n.Function.
func (r *runner) lock() func() {
	r.cfg.Lock()
	switch r.kind {
	case functions.Ordered:
		r.cfg.Unlock()
		r.mu.Lock()
		return r.mu.Unlock
	case functions.Mergeable:
		unlock := r.lockAll()
		r.align()
		r.fold()
		return func() { unlock(); r.cfg.Unlock() }
	}
	r.cfg.Unlock()
	return func() {} // stateless: nothing to hold
}

// close releases the instances of the other lanes (n.Function is the
// flowgraph's to release).
func (r *runner) close() error {
	r.cfg.Lock()
	defer r.cfg.Unlock()
	var first error
	for _, s := range r.shards[min(1, len(r.shards)):] {
		if c, ok := s.fn.(functions.Closer); ok {
			if err := c.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
