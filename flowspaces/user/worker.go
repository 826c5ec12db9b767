package user

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/buffers/shared"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// worker is a goroutine of the datapath: it carries the batches of one
// source (src set), or of one bridge from beneath (bridge set), through
// the functions of this flowspace.
type worker struct {
	fs   *Flowspace
	lane int // which instance of a function on several workers it runs (shard.go)

	// A source.
	node    *flowspaces.Node
	src     functions.Source
	regions []*inproc.Region
	batches []*buffers.Batch
	next    int
	window  int // most packets per batch: MaxBatch, or fewer in a tiny PBuf
	route   atomic.Pointer[route]
	drops   uint64 // the source's drop count already accounted
	clock   int64  // the stream's packet clock
	live    bool   // a live source: its clock follows wall time while idle

	// A merge of capture files (see merge.go): members is set on the
	// worker that reads them, group on each of them.
	members []*worker
	group   *worker

	// A bridge reader, of one of its lanes; lanes are the readers of
	// every lane of the bridge.
	bridge     *inproc.Bridge
	bridgeLane int
	lanes      *laneReaders
	routes     atomic.Pointer[routeSet]

	cur *inproc.Message // the message being carried

	// seen is the route generation in use; busy is set while a batch is
	// being carried (see Flowspace.settle); quit asks a source to stop
	// after the batch at hand (its request was removed).
	seen             atomic.Uint64
	busy, done, quit atomic.Bool
	started          bool
	cancel           context.CancelFunc
	held             *sync.Mutex // the function lock held during Process, if any
	// in is the route being processed, at its step at with atN packets:
	// where a fault leaves a batch half carried.
	in      *route
	at, atN int
	err     error
	// holding is how many units of a packet limit counted at the ends
	// (holdingOf: the stream's) the batch being carried holds, until it
	// is settled.
	holding   int
	holdingOf *flowspaces.Budget
}

// stop ends a source that quit was set on: it finishes the batch at hand;
// one blocked on a silent input is interrupted after a while. A batch
// being carried up (busy) is waited for longer: it waits for its consumers,
// which do take it, only late on a loaded machine, and interrupting it
// would count it as dropped.
func (w *worker) stop() {
	if !w.started {
		return
	}
	start := time.Now()
	for !w.done.Load() {
		el := time.Since(start)
		if w.cancel != nil && (el > 200*time.Millisecond && !w.busy.Load() || el > 30*time.Second) {
			w.cancel()
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// regionsFor is how many batch windows a source's PBuf has: one at the
// root, where a batch is done with before the next fill; more beneath, so
// that the source can fill while the flowspaces above still refer to
// earlier batches in place.
func regionsFor(fs *Flowspace, slot int) int {
	if fs.Parent() == nil || slot*inproc.Depth*buffers.MaxBatch > 64<<20 {
		return 1
	}
	return inproc.Depth
}

// newSourceWorker returns the worker of source n. share says that a
// function here that n reaches reads its packets in another process
// (readsShared): the source's packets then go in shared memory, which
// that process maps, so that they cross without a copy.
func newSourceWorker(fs *Flowspace, n *flowspaces.Node, share bool) *worker {
	w := &worker{fs: fs, node: n, src: n.Source, live: n.Source.Info().Live, lane: fs.newLane()}
	var pbuf *buffers.PBuf
	if s, ok := n.Source.(functions.Sharer); ok && share {
		// Its own memory, shared (or not: then copied once across).
		s.Share(func(size int) []byte { return fs.sharedMemory(n, size) })
	}
	if o, ok := n.Source.(functions.PBufOwner); ok {
		pbuf = o.PBuf() // zero-copy: the packets are already in memory
	}
	k := 1
	if pbuf == nil {
		// Few batches of slots: run to completion frees a window before it
		// is filled again, and a small PBuf stays in cache (FFPF §4.2).
		k = regionsFor(fs, n.Ctx.Snaplen)
		pbuf = fs.newPBuf(n, k*buffers.MaxBatch, n.Ctx.Snaplen, share)
	}
	w.window = min(buffers.MaxBatch, pbuf.Slots())
	for i := range k {
		base := uint32(i * buffers.MaxBatch)
		w.regions = append(w.regions, inproc.NewRegion(pbuf, base, true))
		w.batches = append(w.batches, buffers.NewBatch(pbuf, base, w.window, uint16(len(fs.srcs))))
	}
	return w
}

// newPBuf allocates source n's PBuf: on the heap, or, when share is set,
// in shared memory (sharedMemory). Shared memory that cannot be had (no
// memfd) leaves the heap: the packets are then copied once on their way
// to the other process.
func (fs *Flowspace) newPBuf(n *flowspaces.Node, slots, slotSize int, share bool) *buffers.PBuf {
	if share {
		if mem := fs.sharedMemory(n, slots*slotSize); mem != nil {
			return buffers.NewPBufOn(mem, slots, slotSize)
		}
	}
	return buffers.NewPBuf(slots, slotSize)
}

// sharedMemory returns size bytes of memory for source n's packets that
// other processes can map (buffers/shared), nil when there is none; it is
// unmapped when the source is released, after its Close. fs.mu is held.
func (fs *Flowspace) sharedMemory(n *flowspaces.Node, size int) []byte {
	m, err := shared.Alloc("ffpf-pbuf", size)
	if err != nil {
		return nil
	}
	fs.shared[n] = append(fs.shared[n], m)
	return m.Bytes()
}

// readsShared reports whether a function here that stream reaches reads
// its packets in another process, in place when they lie in shared memory
// (functions.SharedReader: a plugin's class).
func readsShared(stream *flowspaces.Node, order []*flowspaces.Node, reach *flowspaces.Reach) bool {
	for _, n := range order {
		if n.Source != nil || !reach.Reaches(stream, n) {
			continue
		}
		if r, ok := n.Function.(functions.SharedReader); ok && r.ReadsShared() {
			return true
		}
	}
	return false
}

// newReaders returns a reader for each lane of bridge b.
func newReaders(fs *Flowspace, b *inproc.Bridge) []*worker {
	l := &laneReaders{left: b.Lanes()}
	ws := make([]*worker, b.Lanes())
	for i := range ws {
		ws[i] = &worker{fs: fs, bridge: b, bridgeLane: i, lanes: l, lane: fs.newLane()}
	}
	return ws
}

// laneReaders are the readers of the lanes of one bridge: the streams that
// arrive through it end when the last of them has read its lane's end, or
// one stream ends when all its ends (inproc.Message.End, one from each
// goroutine that sends it up) have come.
type laneReaders struct {
	mu    sync.Mutex
	left  int
	clock int64 // the latest clock of those that ended
	ends  map[*flowspaces.Node]*laneEnd
}

// laneEnd is how far a stream's end has come: how many of its ends, of
// how many, with the latest clock among them.
type laneEnd struct {
	got, of int
	at      int64
}

// endOf records that a reader read one of the ends of stream s, of ends,
// at clock now, and returns whether all have come, with the latest clock
// of them.
func (l *laneReaders) endOf(s *flowspaces.Node, ends int, now int64) (all bool, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ends == nil {
		l.ends = map[*flowspaces.Node]*laneEnd{}
	}
	e := l.ends[s]
	if e == nil {
		e = &laneEnd{}
		l.ends[s] = e
	}
	e.got++
	e.of = ends
	e.at = max(e.at, now)
	return e.got == e.of, e.at
}

// keepOnly forgets the ends of the streams other than those of streams
// (those the bridge carries now): a removed request's source goes.
func (l *laneReaders) keepOnly(streams []*flowspaces.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.ends {
		if !slices.Contains(streams, s) {
			delete(l.ends, s)
		}
	}
}

// endedEarlier reports whether stream s ended through its ends (endOf),
// before the bridge closed.
func (l *laneReaders) endedEarlier(s *flowspaces.Node) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.ends[s]
	return e != nil && e.got >= e.of
}

// ended records that w read the end of its lane, and returns whether it
// was the last, with the latest packet clock of them all.
func (l *laneReaders) ended(clock int64) (last bool, at int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.left--
	l.clock = max(l.clock, clock)
	return l.left == 0, l.clock
}

func (w *worker) run(ctx context.Context) {
	defer w.done.Store(true)
	// A zero-copy source's memory can vanish under us (a mapped file
	// truncated by another process): make that an error of the source, not
	// a crash of the process.
	debug.SetPanicOnFault(true)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if _, fault := r.(interface{ Addr() uintptr }); !fault {
			panic(r)
		}
		if w.held != nil {
			w.held.Unlock()
		}
		if w.in != nil {
			w.in.dropFrom(w.at, w.atN) // so that in = out + filtered + dropped still holds
		}
		// The units of the packet limit the batch held go back, so that
		// no other source waits for them.
		w.holdingOf.Return(w.holding)
		if w.node != nil {
			// The source names what vanished (a mapped file cut short).
			if f, ok := w.src.(interface{ FaultError() error }); ok {
				w.err = fmt.Errorf("%s: %w", w.node.ID, f.FaultError())
			} else {
				w.err = fmt.Errorf("%s: the memory of %s became unreadable while its packets were processed: was it changed while being read?", w.node.ID, w.src.Info().Name)
			}
			return
		}
		w.err = fmt.Errorf("bridge %s: packet memory became unreadable: was the input changed while being read?", w.bridge.Name)
		// What comes up from now on is dropped (and counted), so that the
		// flowspace beneath is not left blocked.
		if w.cur != nil {
			w.bridge.Done(w.cur)
		}
		w.busy.Store(false) // it adopts no more routes: Connect must not wait for it
		w.bridge.DrainLaneUntilClosed(w.bridgeLane, w.fs.giveBack)
		w.lanes.ended(w.clock)
	}()
	if w.bridge != nil {
		w.read(ctx)
		return
	}
	if w.members != nil {
		w.merge(ctx)
		return
	}
	w.fill(ctx)
}

// fill reads the source to its end.
func (w *worker) fill(ctx context.Context) {
	budget := w.node.BudgetOr(w.fs.opts.Budget)
	budget.Join()
	defer budget.Leave()
	defer w.accountDrops()
	defer func() {
		if !w.quit.Load() { // a request removed ends nothing of the others'
			w.fs.endStreams(w.clock, w.node)
			w.fs.endUp(ctx, w.route.Load(), w.node, w.clock)
		}
	}()
	dropper, _ := w.src.(functions.Dropper)
	for i := 0; ctx.Err() == nil && !w.quit.Load(); i++ {
		k := w.next
		w.next = (w.next + 1) % len(w.regions)
		reg, b := w.regions[k], w.batches[k]
		if reg.Wait(ctx) != nil {
			return
		}
		b.Reset()
		b.Cap = budget.Claim(ctx, w.window)
		if b.Cap == 0 {
			return
		}
		err := w.src.Fill(b)
		budget.Read(b.Cap, b.N)
		w.clock = clockOf(b, w.clock, w.live && err == nil, wallClock)
		b.Now = w.clock
		if r := w.route.Load(); b.N > 0 || w.live && (len(r.clocked) > 0 || len(r.exports) > 0) {
			w.busy.Store(true)
			w.seen.Store(r.gen)
			w.node.Counters.Add(b.N, b.N, 0)
			r.vals[0] = b
			r.begin(b.Base)
			if r.count && r.srcEnd {
				r.mark(b)
			}
			w.hold(r, b.N)
			r.carry(w)
			r.settle(b.N, w.export(ctx, r, reg, r.stored))
			w.holding = 0
			w.busy.Store(false)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				w.err = fmt.Errorf("%s: %w", w.node.ID, err)
			}
			return
		}
		if dropper != nil && (b.N == 0 || i%64 == 0) {
			w.accountDrops()
		}
	}
}

// read carries the batches that arrive through a bridge from beneath.
func (w *worker) read(ctx context.Context) {
	stopped := false
	for {
		m := w.bridge.ReceiveLane(ctx, w.bridgeLane)
		if m == nil {
			if ctx.Err() != nil {
				stopped = true
				// Stopped: the flowspace beneath stops too, sends up what
				// it still holds (the last packets of its ring, the last
				// window's report of a function that runs there) and
				// closes the bridge. That is carried as a file's last
				// batch is, so that the run's results are complete.
				ctx = context.WithoutCancel(ctx)
				continue
			}
			// The streams end with the last lane's end (those that have
			// not ended before).
			if last, at := w.lanes.ended(w.clock); last {
				set := w.routes.Load()
				var streams []*flowspaces.Node
				for s := range set.stream {
					if !w.lanes.endedEarlier(s) {
						streams = append(streams, s)
					}
				}
				w.fs.endStreams(at, streams...)
				if !stopped {
					for _, s := range streams {
						w.fs.endUp(ctx, set.stream[s], s, at)
					}
				}
			}
			return
		}
		w.cur = m
		w.busy.Store(true)
		set := w.routes.Load()
		w.seen.Store(set.gen)
		// The message's clock moves ours even when no packet came with it
		// (a clock-only message): everything beneath was filtered.
		w.clock = max(w.clock, m.Now)
		if r := set.stream[m.Stream.(*flowspaces.Node)]; r != nil {
			if m.Region != nil {
				r.begin(m.Region.Base)
				r.beneath(m)
				w.hold(r, m.Held)
			}
			for i, g := range r.inputs {
				r.vals[i] = nil
				for j := range m.Out {
					if m.Out[j].Tag == g {
						r.vals[i] = &m.Out[j].Batch
						break
					}
				}
				if r.vals[i] == nil { // not sent: nothing of it passed
					bl := &r.blank[i]
					bl.PBuf, bl.Base, bl.N = nil, 0, 0
					if m.Region != nil {
						bl.PBuf, bl.Base = m.Region.PBuf, m.Region.Base
					}
					r.vals[i] = bl
				}
				for _, e := range r.vals[i].E[:r.vals[i].N] {
					w.clock = max(w.clock, r.vals[i].PBuf.Meta(e.Slot).Timestamp)
				}
			}
			for _, b := range r.vals[:len(r.inputs)] {
				b.Now = w.clock
			}
			r.carry(w)
			up := w.export(ctx, r, m.Region, m.Stored)
			if m.Region != nil {
				r.settle(m.Held, up)
				w.holding = 0
			}
			if s := m.Stream.(*flowspaces.Node); m.End {
				if all, at := w.lanes.endOf(s, m.Ends, w.clock); all {
					// Its last packets came, on every lane: it ends here.
					w.fs.endStreams(at, s)
					w.fs.endUp(ctx, r, s, at)
				}
			}
		} else {
			w.fs.giveBack(m.Stream, m.Held) // nothing here takes them any more
		}
		w.bridge.Done(m)
		w.cur = nil
		w.busy.Store(false)
	}
}

// process carries the stream's batch through the functions it reaches.
func (r *route) process(w *worker) {
	for i := range r.steps {
		st := &r.steps[i]
		for j, k := range st.in {
			st.ins[j] = r.vals[k]
		}
		out := st.out
		out.Union(st.ins)
		n := out.N
		if n == 0 {
			continue
		}
		if r.count && st.prod {
			r.mark(out) // the packets end here: the producer's output is records
		}
		lock(st.mu)
		w.held, w.in, w.at, w.atN = st.mu, r, i, n
		if st.keyed != nil {
			st.hashes.Fill(out)
			st.keyed.ProcessHashes(out, st.hashes)
		} else {
			st.fn.Process(out)
		}
		w.held, w.in = nil, nil
		unlock(st.mu)
		st.ctr.Add(n, out.N, out.Dropped)
		if r.count && st.end {
			r.mark(out)
		}
	}
}

// dropFrom accounts for a batch that step i, holding n packets, could not
// finish (their memory vanished): step i and every later step the batch
// reaches count what they held as dropped, and what would have gone up
// is lost on the bridge.
func (r *route) dropFrom(i, n int) {
	r.steps[i].ctr.Add(n, 0, n)
	r.steps[i].out.N = 0
	for j := i + 1; j < len(r.steps); j++ {
		st := &r.steps[j]
		for k, v := range st.in {
			st.ins[k] = r.vals[v]
		}
		st.out.Union(st.ins)
		if m := st.out.N; m > 0 {
			st.ctr.Add(m, 0, m)
			st.out.N = 0
		}
	}
	if len(r.exports) == 0 || r.up == nil {
		return
	}
	var seen [buffers.MaxBatch]bool
	lost := 0
	for _, e := range r.exports {
		b := r.vals[e.val]
		for _, x := range b.E[:b.N] {
			if k := x.Slot - b.Base; !seen[k] {
				seen[k] = true
				lost++
			}
		}
	}
	r.up.Lose(lost)
}

// export sends the outputs the parent asked for up the bridge, with the
// stream's packet clock: a clock-only message when none of them passed a
// packet but the clock moved since the last message. Counting the run's
// packet limit at the ends (route.count), it returns how many of the
// packets that went up hold their unit (they reached no end here nor
// beneath), and lists the others in the message's Ended out. stored says
// whether the packets are in a PBuf the parent may refer to. Across a
// zero-copy barrier the parent refers to such packets in place; otherwise a
// parent that keeps PBufs gets a copy in its own (one per stream); one
// that processes in place gets a copy across a copy-once barrier (in the
// bridge's memory, not stored), and across a zero-copy one the packets as
// they are, not stored.
func (w *worker) export(ctx context.Context, r *route, reg *inproc.Region, stored bool) (held int) {
	if len(r.exports) == 0 {
		return 0
	}
	var seen [buffers.MaxBatch]bool
	n := 0
	for _, e := range r.exports {
		b := r.vals[e.val]
		for _, x := range b.E[:b.N] {
			if k := x.Slot - b.Base; !seen[k] {
				seen[k] = true
				n++
			}
		}
	}
	if n == 0 {
		if w.clock > r.sentNow && r.up.SendClock(ctx, r.stream, w.clock) {
			r.sentNow = w.clock
		}
		return 0
	}
	m, err := r.up.Message(ctx)
	if err != nil {
		r.up.Lose(n) // the run stops: what was on its way up is dropped, and counted
		return 0
	}
	m.Stream, m.Region, m.Packets, m.Now = r.stream, reg, n, w.clock
	r.sentNow = w.clock
	for _, e := range r.exports {
		if b := r.vals[e.val]; b.N > 0 {
			m.Out = append(m.Out, inproc.Out{Tag: e.node})
			m.Out[len(m.Out)-1].Batch.CopyFrom(b)
		}
	}
	if r.count {
		m.Out = append(m.Out, inproc.Out{Tag: inproc.Ended})
		o := &m.Out[len(m.Out)-1].Batch
		o.N = 0
		o.PBuf, o.Base = r.vals[r.exports[0].val].PBuf, r.base
		r.endedUp(&seen, o)
		if o.N == 0 {
			m.Out = m.Out[:len(m.Out)-1]
		}
		m.Held = n - o.N
	}
	switch {
	case stored && r.zeroCopy:
		reg.Hold()
		m.Stored = true
	case r.parentStores || !r.zeroCopy:
		if r.up.CopyUp(ctx, m, r.pool) != nil {
			r.up.Recycle(m)
			r.up.Lose(n)
			return 0
		}
		// A parent that keeps no PBuf works on the copy where it is.
		m.Stored = r.parentStores
	default:
		reg.Hold()
		m.Stored = false
	}
	held = m.Held
	if r.up.Send(ctx, m) != nil {
		return 0 // dropped: the units come back
	}
	return held
}

func wallClock() int64 { return time.Now().UnixNano() }

// accountDrops adds the packets the source lost before it read them: they
// count as arrived (in) and dropped, so in = out + dropped holds for it.
func (w *worker) accountDrops() {
	d, ok := w.src.(functions.Dropper)
	if !ok {
		return
	}
	if now := d.Drops(); now > w.drops {
		delta := now - w.drops
		w.drops = now
		w.node.Counters.In.Add(delta)
		w.node.Counters.Dropped.Add(delta)
	}
}
