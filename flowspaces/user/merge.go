package user

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Capture files that meet in a function whose result depends on the order
// of its packets (an export, a window of an ordered function, a producer, a
// reader of state) are
// read as mergecap reads them: in the order of their packets' times, by
// one goroutine, so that a join
// of two files sees its packets in time order and a clocked function
// closes its windows at the same packets on every run. Each file keeps its
// own batches, route and accounting; the merge cuts their batches into the
// runs that precede the other files' next packets.

// groupFiles returns the sets of file sources among ws (not yet started,
// in the root flowspace) that reach a common function whose result depends
// on the order of its packets, in ws's order.
func groupFiles(ws []*worker, nodes []*flowspaces.Node, reach *flowspaces.Reach, runs map[*flowspaces.Node]*runner) [][]*worker {
	var files []*worker
	for _, w := range ws {
		if w.node != nil && !w.started && !w.live && w.group == nil {
			files = append(files, w)
		}
	}
	if len(files) < 2 {
		return nil
	}
	parent := make([]int, len(files))
	for i := range parent {
		parent[i] = i
	}
	var find func(i int) int
	find = func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	for _, n := range nodes {
		if !ordered(n, runs[n]) {
			continue
		}
		first := -1
		for i, w := range files {
			if reach.Reaches(w.node, n) {
				if first < 0 {
					first = i
				} else {
					parent[find(i)] = find(first)
				}
			}
		}
	}
	byRoot := map[int][]*worker{}
	var roots []int
	for i, w := range files {
		r := find(i)
		if byRoot[r] == nil {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], w)
	}
	var out [][]*worker
	for _, r := range roots {
		if len(byRoot[r]) > 1 {
			out = append(out, byRoot[r])
		}
	}
	return out
}

// ordered reports whether what n does depends on the order its packets
// arrive in: it keeps time (windows), emits records, reads another's state,
// or writes its packets out (an export). A join that reaches only counters
// and filters needs no merge, and its files are read in parallel; nor does
// a window of a mergeable function, whose shards close it each on their
// own file's time and merge into the serial window (shard.go).
func ordered(n *flowspaces.Node, r *runner) bool {
	if n.Source != nil || r != nil && r.kind != functions.Ordered {
		return false
	}
	switch n.Function.(type) {
	case functions.Clocked, functions.Producer, functions.Closer:
		return true
	}
	return len(n.Reads) > 0
}

// newMerger returns the worker that reads the files of a group in time
// order; its members are not started on their own.
func newMerger(fs *Flowspace, members []*worker) *worker {
	g := &worker{fs: fs, members: members}
	for _, m := range members {
		m.group = g
		m.started = true // run by g
	}
	return g
}

// mhead is a member's batch being merged.
type mhead struct {
	w    *worker
	reg  *inproc.Region
	b    *buffers.Batch
	part buffers.Batch // the run being carried
	i    int           // next entry of b
	end  bool          // the source has no more
}

func (h *mhead) ts() int64 {
	if h.i >= h.b.N {
		return math.MaxInt64
	}
	return h.b.PBuf.Meta(h.b.E[h.i].Slot).Timestamp
}

// merge reads the group's files to their ends, in time order.
func (g *worker) merge(ctx context.Context) {
	// The files that meet are one request's, or the run's: one budget.
	budget := g.members[0].node.BudgetOr(g.fs.opts.Budget)
	budget.Join()
	defer budget.Leave()
	hs := make([]*mhead, len(g.members))
	for i, m := range g.members {
		hs[i] = &mhead{w: m, reg: m.regions[0], b: m.batches[0]}
	}
	defer func() {
		for _, h := range hs {
			h.w.done.Store(true)
			if !h.w.quit.Load() {
				g.fs.endStreams(h.w.clock, h.w.node)
				g.fs.endUp(ctx, h.w.route.Load(), h.w.node, h.w.clock)
			}
		}
	}()
	for ctx.Err() == nil {
		// Refill the members whose batch is spent.
		for _, h := range hs {
			if h.end || h.i < h.b.N {
				continue
			}
			if h.w.quit.Load() { // its request was removed
				h.end = true
				h.w.done.Store(true)
				continue
			}
			if h.reg.Wait(ctx) != nil {
				return
			}
			h.b.Reset()
			h.i = 0
			// Counting at capture, a member claims the packets it reads;
			// counting at the ends, the packets claim their units as they
			// are carried (carryPart): a member must read its next packet
			// to know the order, while the units left may all be held by
			// the packets of another one that wait for it.
			h.b.Cap = h.w.window
			if !budget.AtEnds() {
				h.b.Cap = budget.Claim(ctx, h.w.window)
			}
			if h.b.Cap == 0 { // the run's limit is reached: the others' batches still go
				h.end = true
				continue
			}
			err := h.w.src.Fill(h.b)
			if !budget.AtEnds() {
				budget.Read(h.b.Cap, h.b.N)
				h.w.node.Counters.Add(h.b.N, h.b.N, 0)
			}
			if err != nil {
				h.end = true
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					g.err = errors.Join(g.err, fmt.Errorf("%s: %w", h.w.node.ID, err))
					return
				}
			}
		}
		// The member whose next packet is earliest carries its packets up
		// to the next of another member's (a tie goes to the earlier file).
		var first *mhead
		for _, h := range hs {
			if h.i < h.b.N && (first == nil || h.ts() < first.ts()) { // ties: the earlier file
				first = h
			}
		}
		if first == nil {
			if allEnded(hs) {
				return
			}
			continue
		}
		// A tie goes to the earlier file: first takes a packet at the time
		// of an earlier file's next one only after it.
		before, after := int64(math.MaxInt64), int64(math.MaxInt64)
		seenFirst := false
		for _, h := range hs {
			switch {
			case h == first:
				seenFirst = true
			case h.i < h.b.N && !seenFirst:
				before = min(before, h.ts())
			case h.i < h.b.N:
				after = min(after, h.ts())
			}
		}
		j := first.i
		for j < first.b.N {
			t := first.b.PBuf.Meta(first.b.E[j].Slot).Timestamp
			if t >= before || t > after {
				break
			}
			j++
		}
		if j == first.i {
			j++
		}
		if !g.carryPart(ctx, first, j) {
			return // the run's limit is reached
		}
	}
}

func allEnded(hs []*mhead) bool {
	for _, h := range hs {
		if !h.end {
			return false
		}
	}
	return true
}

// carryPart carries entries [h.i, j) of h's batch through its route;
// counting the run's packet limit at the ends, as many as it has units
// for at a time. It returns false when the limit is reached.
func (g *worker) carryPart(ctx context.Context, h *mhead, j int) bool {
	budget := h.w.node.BudgetOr(g.fs.opts.Budget)
	for h.i < j {
		k := j
		if budget.AtEnds() {
			n := budget.Claim(ctx, j-h.i)
			if n == 0 {
				return false
			}
			k = h.i + n
			h.w.node.Counters.Add(n, n, 0)
		}
		g.carryRun(ctx, h, k)
	}
	return true
}

// carryRun carries entries [h.i, j) of h's batch through its route.
func (g *worker) carryRun(ctx context.Context, h *mhead, j int) {
	w := h.w
	p := &h.part
	p.PBuf, p.Base, p.Source, p.Cap = h.b.PBuf, h.b.Base, h.b.Source, h.b.Cap
	p.Dropped = 0
	p.N = copy(p.E[:], h.b.E[h.i:j])
	h.i = j
	w.clock = clockOf(p, w.clock, false, wallClock)
	p.Now = w.clock
	r := w.route.Load()
	g.busy.Store(true)
	g.seen.Store(r.gen)
	r.vals[0] = p
	g.held = nil
	r.begin(p.Base)
	if r.count && r.srcEnd {
		r.mark(p)
	}
	g.hold(r, p.N)
	r.carry(g)
	r.settle(p.N, w.export(ctx, r, h.reg, r.stored))
	g.holding = 0
	g.busy.Store(false)
}
