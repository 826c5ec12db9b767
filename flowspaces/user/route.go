package user

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
)

// route is the way one stream (the packets of one source) takes through
// this flowspace: the batches it arrives as, the functions it reaches, and
// the outputs that go up.
type route struct {
	gen    uint64
	stream *flowspaces.Node
	// inputs are where the stream's batches come from: the source itself
	// when it runs here, otherwise the outputs of functions beneath that
	// arrive through a bridge (ghosts). vals[i] is input i's batch, then
	// step j's output is vals[len(inputs)+j].
	inputs  []*flowspaces.Node
	steps   []step
	exports []export
	vals    []*buffers.Batch
	blank   []buffers.Batch // stand-ins for inputs a message lacks

	// clocked are the steps whose functions have periodic work (see
	// carry); orig and head are carry's views of the inputs' batches.
	clocked []int
	next    []int // part's cursors into the inputs, on a serial route
	// serial is set when a function on the route reads the state of
	// another before it on the route (named state): the packets are
	// carried one at a time, so that the reader sees the state as the
	// writer left it after this packet, as MAFIA's per-packet pipeline
	// does, whatever the batch size.
	serial bool
	orig   []*buffers.Batch
	head   []buffers.Batch

	// hashes are the key hashes of the batch being carried, one memo per
	// key of the route's keyed functions (flowkey.Keyed): a packet is
	// parsed and hashed once for all the functions keyed alike.
	hashes []*flowkey.Hashes

	// budget is the packet limit the stream counts in: its source's own
	// (its request's) or the run's (flowspaces.Node.BudgetOr); nil for
	// none. count says that it counts packets at the ends of the graph
	// (flowspaces.Budget.AtEnds): of each batch carried,
	// ended marks the packets that reached an end here (by slot, from
	// base), below those that reached one beneath (inproc.Ended), and
	// srcEnd says that the stream's source is an end itself.
	budget *flowspaces.Budget
	count  bool
	srcEnd bool
	base   uint32
	ended  [buffers.MaxBatch]bool
	below  [buffers.MaxBatch]bool

	sentNow      int64 // the packet clock the last message up carried
	stored       bool  // the stream's packets are stored in a PBuf here (§6.2)
	up           *inproc.Bridge
	pool         *inproc.Pool // where copies up go
	zeroCopy     bool         // the bridge up refers to stored packets in place
	parentStores bool
}

type step struct {
	node *flowspaces.Node
	// fn is the instance this route's worker runs (its lane's, see
	// shard.go), under mu (nil: no lock), counting in ctr.
	fn     functions.Function
	mu     *sync.Mutex
	ctr    *functions.Counters
	in     []int
	ins    []*buffers.Batch
	out    *buffers.Batch
	keyed  flowkey.Keyed   // the function, when it takes hashes
	hashes *flowkey.Hashes // the memo of its key (route.hashes)
	// The packets that pass an end of the graph, and those that reach a
	// producer (whose output is records), have reached an end (route.count).
	end, prod bool
}

type export struct {
	node *flowspaces.Node
	val  int
}

// routeSet is what a bridge reader follows: the routes of the streams that
// arrive through its bridge.
type routeSet struct {
	gen    uint64
	stream map[*flowspaces.Node]*route
}

// Child is a flowspace beneath a Go flowspace that sends function outputs
// up through an in-process bridge: another Go flowspace, or an eBPF one
// whose ring buffer a goroutine of this process reads.
type Child interface {
	flowspaces.Flowspace
	// SetWant is the parent's request, through the child's stub, for the
	// outputs of want (functions in the child or beneath it), sent up
	// through b from the child's next Connect on. parentStores says
	// whether the parent keeps PBufs.
	SetWant(want []*flowspaces.Node, b *inproc.Bridge, parentStores bool)
}

// Laned is a child that sends up through several lanes of its bridge at
// once (the ring buffers of an eBPF flowspace, one per CPU; its AF_XDP
// sockets, one per receive queue): each lane gets a reader here, a worker
// of its own (DESIGN.md §15).
type Laned interface {
	Lanes() int
}

// lanesOf is how many lanes, each with a reader here, the bridge from
// beneath s gets: as many as the child sends on, at most Options.Workers.
func (fs *Flowspace) lanesOf(s *flowspaces.Stub) int {
	if l, ok := s.Child().(Laned); ok {
		return max(1, min(l.Lanes(), fs.workers()))
	}
	return 1
}

// workers is the most workers one source may spread over.
func (fs *Flowspace) workers() int {
	if fs.opts.Workers > 0 {
		return fs.opts.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// SetWorkers implements flowspaces.Spreader.
func (fs *Flowspace) SetWorkers(n int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.opts.Workers = n
}

// SetWant implements Child.
func (fs *Flowspace) SetWant(want []*flowspaces.Node, b *inproc.Bridge, parentStores bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.want = want
	fs.parentStores = parentStores
	if b != nil && b != fs.upSent {
		fs.up, fs.upSent = b, b
	}
}

// Connect implements flowspaces.Flowspace.
func (fs *Flowspace) Connect() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.state.Settle(fs)

	// First what the new datapath is, without changing anything.
	var keep []*flowspaces.Node
	local := map[*flowspaces.Node]bool{}
	for _, n := range fs.nodes {
		if !slices.Contains(fs.removed, n) {
			keep = append(keep, n)
			local[n] = true
		}
	}
	order, err := topoSort(keep, local)
	if err != nil {
		return err
	}
	var reach flowspaces.Reach
	// What this flowspace needs from each child: the inputs of its
	// functions that run beneath, and what the parent wants from beneath.
	need := map[*flowspaces.Stub][]*flowspaces.Node{}
	var ghosts []*flowspaces.Node
	addNeed := func(x *flowspaces.Node) error {
		if local[x] || slices.Contains(ghosts, x) {
			return nil
		}
		cs := fs.Children()
		i := x.Path.At(fs.Level())
		if int(i) >= len(cs) || x.Flowspace == nil || !flowspaces.Above(fs, x.Flowspace) {
			return fmt.Errorf("%s is not placed beneath %s", x.ID, fs.Name())
		}
		need[cs[i]] = append(need[cs[i]], x)
		ghosts = append(ghosts, x)
		return nil
	}
	for _, n := range order {
		for _, in := range n.Inputs {
			if err := addNeed(in); err != nil {
				return err
			}
		}
	}
	for _, x := range fs.want {
		if err := addNeed(x); err != nil {
			return err
		}
	}
	for s, ns := range need {
		if _, ok := s.Child().(Child); !ok && len(ns) > 0 {
			return fmt.Errorf("no bridge from %s (%s) to %s yet", s.Name(), s.Child().Kind(), fs.Name())
		}
	}

	// The bridges from beneath: one per child that has something to send;
	// one that its child closed (it had nothing left to run) is replaced.
	for _, s := range fs.Children() {
		child, ok := s.Child().(Child)
		if !ok {
			continue
		}
		b := fs.downs[s]
		if len(need[s]) > 0 && (b == nil || b.Closed()) {
			nb := inproc.NewLanes(child.Name()+">"+fs.Name(), fs.lanesOf(s))
			if b != nil {
				for _, w := range fs.readers[b] {
					for w.started && !w.done.Load() {
						time.Sleep(50 * time.Microsecond) // it has read the close
					}
				}
				delete(fs.readers, b)
				nb.Carry(b)
			}
			fs.downs[s], b = nb, nb
		}
		child.SetWant(need[s], b, fs.Stores())
	}

	// One route per stream.
	fs.gen++
	gen := fs.gen
	var upStrategy flowspaces.Strategy
	if s := flowspaces.StubOf(fs); s != nil {
		upStrategy = s.Strategy
	}
	// How each function runs on several workers, from now on.
	var demoted []*runner
	for _, n := range order {
		if n.Source == nil && fs.runs[n].setKind(order) {
			demoted = append(demoted, fs.runs[n])
		}
	}
	var laneErr error
	ends := endsOf(order, fs.want)
	newRoute := func(stream *flowspaces.Node, inputs []*flowspaces.Node, lane int) *route {
		r := &route{gen: gen, stream: stream, inputs: inputs, up: fs.up,
			zeroCopy: upStrategy == flowspaces.ZeroCopy, parentStores: fs.parentStores}
		r.budget = stream.BudgetOr(fs.opts.Budget)
		r.count = r.budget.AtEnds() && !stream.Producer()
		r.srcEnd = ends[stream]
		idx := map[*flowspaces.Node]int{}
		for i, x := range inputs {
			idx[x] = i
		}
		for _, n := range order {
			if n.Source != nil || !reach.Reaches(stream, n) {
				continue
			}
			st := step{node: n, out: new(buffers.Batch), end: ends[n], prod: n.Producer()}
			fn, mu, ctr, err := fs.runs[n].lane(lane)
			if err != nil {
				// The route is not adopted: Connect fails first.
				laneErr = cmp.Or(laneErr, err)
				fn, mu, ctr = n.Function, &fs.runs[n].mu, &n.Counters
			}
			st.fn, st.mu, st.ctr = fn, mu, ctr
			for _, in := range n.Inputs {
				// A producer's output is its own stream: the packets of
				// the streams that reach it end there.
				if in == stream || reach.Reaches(stream, in) && !in.Producer() {
					st.in = append(st.in, idx[in])
				}
			}
			if _, ok := fn.(functions.Clocked); ok {
				r.clocked = append(r.clocked, len(r.steps))
			}
			for _, x := range n.Reads {
				if _, ok := idx[x]; ok && x != stream {
					r.serial = true
				}
			}
			st.ins = make([]*buffers.Batch, len(st.in))
			if k, ok := fn.(flowkey.Keyed); ok && !fs.opts.PerFunctionKeys {
				if sp, _, _ := k.KeyHash(); sp != nil {
					st.keyed, st.hashes = k, r.memo(k)
				}
			}
			idx[n] = len(inputs) + len(r.steps)
			r.steps = append(r.steps, st)
		}
		if r.up != nil {
			for _, x := range fs.want {
				if i, ok := idx[x]; ok && reach.Reaches(stream, x) {
					r.exports = append(r.exports, export{x, i})
				}
			}
		}
		r.vals = make([]*buffers.Batch, len(inputs)+len(r.steps))
		r.blank = make([]buffers.Batch, len(inputs))
		if len(r.clocked) > 0 || r.serial {
			r.orig = make([]*buffers.Batch, len(inputs))
			r.head = make([]buffers.Batch, len(inputs))
			r.next = make([]int, len(inputs))
		}
		for j := range r.steps {
			r.vals[len(inputs)+j] = r.steps[j].out
		}
		r.stored = fs.Stores() && len(r.steps) > 0
		if len(r.exports) > 0 && (r.parentStores || !r.zeroCopy) {
			// Copies of this stream go into a PBuf of the parent's, sized
			// for its packets (or of the bridge's, for a parent that keeps
			// none: a copy-once barrier copies all the same).
			if fs.pools[stream] == nil {
				fs.pools[stream] = inproc.NewPool(stream.Ctx.Snaplen)
			}
			r.pool = fs.pools[stream]
		}
		return r
	}
	// The routes are adopted (adopt) once all are built: a worker's
	// instance of a function that cannot be made fails Connect first.
	var adopt []func()
	// The streams of records of the producers here.
	for _, n := range order {
		if !n.Producer() {
			continue
		}
		p := fs.prods[n]
		if p == nil {
			p = &producer{}
			p.w.lane = fs.newLane()
			fs.prods[n] = p
			if pr, ok := n.Function.(functions.Producer); ok {
				pr.SetEmit(p.emit)
			}
		}
		r := newRoute(n, []*flowspaces.Node{n}, p.w.lane)
		if len(r.exports) > 0 {
			return fmt.Errorf("the records of %s cannot leave %s yet: place what reads them in %s", n.ID, fs.Name(), fs.Name())
		}
		adopt = append(adopt, func() { p.route.Store(r) })
	}
	fs.ending.set(&reach, order, fs.runs)
	var started []*worker
	for _, n := range order {
		if n.Source == nil {
			continue
		}
		w := fs.srcs[n]
		if w == nil {
			w = newSourceWorker(fs, n, readsShared(n, order, &reach))
			fs.srcs[n] = w
		}
		r := newRoute(n, []*flowspaces.Node{n}, w.lane)
		adopt = append(adopt, func() { w.route.Store(r) })
		started = append(started, w)
	}
	// Capture files that meet are read in time order by one worker.
	if fs.Parent() == nil {
		for _, grp := range groupFiles(started, order, &reach, fs.runs) {
			g := newMerger(fs, grp)
			fs.mergers = append(fs.mergers, g)
			started = append(started, g)
		}
	}
	// Streams from beneath, grouped by the bridge they arrive through.
	streams := map[*flowspaces.Node][]*flowspaces.Node{}
	var streamOrder []*flowspaces.Node
	for _, x := range ghosts {
		srcs := reach.Sources(x)
		if x.Producer() {
			// A producer beneath (a sketch in eBPF with report=): its
			// records come up as a stream of their own.
			srcs = []*flowspaces.Node{x}
		}
		for _, s := range srcs {
			if _, ok := streams[s]; !ok {
				streamOrder = append(streamOrder, s)
			}
			streams[s] = append(streams[s], x)
		}
	}
	sort.Slice(streamOrder, func(i, j int) bool { return streamOrder[i].ID < streamOrder[j].ID })
	// A reader per lane of each bridge (see Laned), each with routes of
	// its own.
	byBridge := map[*inproc.Bridge][]*flowspaces.Node{}
	for _, s := range streamOrder {
		b := fs.downs[fs.Children()[s.Path.At(fs.Level())]]
		byBridge[b] = append(byBridge[b], s)
	}
	for b := range fs.readers {
		if _, ok := byBridge[b]; !ok { // nothing of it is needed any more
			byBridge[b] = nil
		}
	}
	for b, ss := range byBridge {
		ws := fs.readers[b]
		if ws == nil {
			ws = newReaders(fs, b)
			fs.readers[b] = ws
		}
		for _, w := range ws {
			set := &routeSet{gen: gen, stream: map[*flowspaces.Node]*route{}}
			for _, s := range ss {
				set.stream[s] = newRoute(s, streams[s], w.lane)
			}
			adopt = append(adopt, func() { w.routes.Store(set) })
			started = append(started, w)
		}
		if len(ws) > 0 {
			ws[0].lanes.keepOnly(ss)
		}
	}
	if laneErr != nil {
		return laneErr
	}
	for _, f := range adopt {
		f()
	}

	// Sources that leave finish the batch at hand and stop; the others
	// adopt the new routes. Only then is what left released.
	var gone []*worker
	for n, w := range fs.srcs {
		if !local[n] {
			gone = append(gone, w)
			delete(fs.srcs, n)
			delete(fs.pools, n)
			w.quit.Store(true)
		}
	}
	if fs.ctx != nil {
		for _, w := range started {
			fs.start(w)
		}
		fs.mu.Unlock()
		fs.settle(gen, started)
		for _, w := range gone {
			w.stop()
		}
		fs.mu.Lock()
		if fs.live == 0 {
			fs.finish() // nothing runs here now
		}
	}
	for _, r := range demoted { // no worker runs their shards any more
		r.demote()
	}
	for _, w := range gone {
		w.accountDrops()
	}
	err = fs.release(fs.removed)
	for _, n := range fs.removed {
		delete(fs.runs, n)
		delete(fs.prods, n)
	}
	fs.ending.keepOnly(append(keep, streamOrder...))
	fs.nodes, fs.removed = keep, nil
	return err
}

// endsOf returns the ends of the graph among nodes (those here): the
// functions that feed none and whose outputs the parent does not want
// (want). A producer is none: the packets that reach it end there, and
// its output is records.
func endsOf(nodes, want []*flowspaces.Node) map[*flowspaces.Node]bool {
	fed := map[*flowspaces.Node]bool{}
	for _, n := range nodes {
		for _, in := range n.Inputs {
			fed[in] = true
		}
	}
	ends := map[*flowspaces.Node]bool{}
	for _, n := range nodes {
		if !fed[n] && !n.Producer() && !slices.Contains(want, n) {
			ends[n] = true
		}
	}
	return ends
}

// memo returns the route's memo of the hashes k computes, shared with the
// functions before it keyed alike.
func (r *route) memo(k flowkey.Keyed) *flowkey.Hashes {
	sp, lt, seed := k.KeyHash()
	for _, hs := range r.hashes {
		if hs.Matches(sp, lt, seed) {
			return hs
		}
	}
	hs := flowkey.NewHashes(sp, lt, seed)
	r.hashes = append(r.hashes, hs)
	return hs
}

// settle waits until every worker has adopted routes of generation gen, is
// between two batches, or has ended.
func (fs *Flowspace) settle(gen uint64, ws []*worker) {
	for _, w := range ws {
		for !w.done.Load() && w.busy.Load() && w.seen.Load() < gen {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// topoSort orders nodes so that every node follows its inputs among them.
func topoSort(nodes []*flowspaces.Node, local map[*flowspaces.Node]bool) ([]*flowspaces.Node, error) {
	const (
		white = iota
		grey
		black
	)
	color := map[*flowspaces.Node]int{}
	order := make([]*flowspaces.Node, 0, len(nodes))
	var visit func(n *flowspaces.Node) error
	visit = func(n *flowspaces.Node) error {
		switch color[n] {
		case grey:
			return fmt.Errorf("cycle through %s", n.ID)
		case black:
			return nil
		}
		color[n] = grey
		for _, m := range n.Inputs {
			if local[m] {
				if err := visit(m); err != nil {
					return err
				}
			}
		}
		color[n] = black
		order = append(order, n)
		return nil
	}
	for _, n := range nodes {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}
