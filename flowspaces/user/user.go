// Package user is the userspace flowspace: the root of the hierarchy, where
// functions run as Go code in the ffpf process.
//
// Execution is run-to-completion per batch: one goroutine per source fills a
// batch into the source's PBuf and carries it through every function the
// source reaches, in topological order, before it reads the next. Each
// function works on its own copy of the batch's index entries (its IBuf
// view), so a fork costs a 2 KB copy of indices and never a packet copy. A
// function fed by several sources (a join) is reached from several
// goroutines and is serialised by a mutex taken once per batch.
//
// The sharp edge: a join of two branches of the same source sees the union
// of their packets, each once (a flow is a set of packets), so
// (pcap) > [(bpf,"tcp") | (bpf,"port 80")] > (pktcount) counts a TCP port 80
// packet once, not twice.
package user

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Options tune the userspace flowspace.
type Options struct {
	// Limit stops the sources after this many packets in total (ffpf run
	// -c); 0 means no limit.
	Limit int64
}

// Flowspace is the userspace flowspace.
type Flowspace struct {
	opts    Options
	nodes   []*flowspaces.Node
	workers []*worker
	budget  atomic.Int64 // packets the sources may still read, when limited
	// reserved counts packets claimed by a running Fill: they may come back.
	reserved atomic.Int64
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// New returns an empty userspace flowspace.
func New(opts Options) *Flowspace { return &Flowspace{opts: opts} }

// Name implements flowspaces.Flowspace.
func (fs *Flowspace) Name() string { return "user" }

// Target implements flowspaces.Flowspace.
func (fs *Flowspace) Target() functions.Target { return functions.TargetUser }

// step is one function on a worker's path: where its input comes from and
// the batch it works on.
type step struct {
	node *flowspaces.Node
	mu   *sync.Mutex // non-nil when several sources reach the node
	in   []*buffers.Batch
	out  *buffers.Batch
}

// worker carries one source's batches through the functions it reaches.
type worker struct {
	fs     *Flowspace
	node   *flowspaces.Node
	batch  *buffers.Batch
	window int // most packets per batch: MaxBatch, or fewer in a tiny PBuf
	steps  []step
	drops  uint64      // the source's drop count already accounted
	held   *sync.Mutex // the join lock held during Process, if any
	err    error
}

// Instantiate creates the functions of nodes and, per source, its PBuf and
// the path its batches take. Nodes must include every input of every node.
func (fs *Flowspace) Instantiate(nodes []*flowspaces.Node) error {
	order, err := topoSort(nodes)
	if err != nil {
		return err
	}
	for i, n := range order {
		n.Ctx.Flowspace = fs.Name()
		if !n.Class.IsSource() {
			// Slots hold no more than the sources deliver; a sink that records
			// a snap length (export) records that one.
			snap := 0
			for _, in := range n.Inputs {
				snap = max(snap, in.Ctx.Snaplen)
			}
			if snap > 0 {
				n.Ctx.Snaplen = snap
			}
		}
		if err := instantiate(n); err != nil {
			release(order[:i])
			return fmt.Errorf("%s: %w", n.ID, err)
		}
	}
	fs.nodes = order

	succ := map[*flowspaces.Node][]*flowspaces.Node{}
	for _, n := range order {
		for _, in := range n.Inputs {
			succ[in] = append(succ[in], n)
		}
	}
	// reach[n] lists the sources whose packets reach n.
	reach := map[*flowspaces.Node]int{}
	var sources []*flowspaces.Node
	for _, n := range order {
		if n.Source != nil {
			sources = append(sources, n)
			for m := range reachable(n, succ) {
				reach[m]++
			}
		}
	}
	locks := map[*flowspaces.Node]*sync.Mutex{}
	for n, k := range reach {
		if k > 1 {
			locks[n] = new(sync.Mutex)
		}
	}
	for i, src := range sources {
		fs.workers = append(fs.workers, newWorker(fs, uint16(i), src, order, succ, locks))
	}
	return nil
}

func instantiate(n *flowspaces.Node) (err error) {
	if n.Class.IsSource() {
		if n.Source, err = n.Class.NewSource(&n.Ctx); err == nil {
			n.Ctx.Snaplen = slotSize(n.Ctx.Snaplen, n.Source.Info().MaxCapLen)
		}
	} else {
		n.Function, err = n.Class.New(&n.Ctx)
	}
	return err
}

func newWorker(fs *Flowspace, idx uint16, src *flowspaces.Node, order []*flowspaces.Node,
	succ map[*flowspaces.Node][]*flowspaces.Node, locks map[*flowspaces.Node]*sync.Mutex) *worker {
	var pbuf *buffers.PBuf
	if o, ok := src.Source.(functions.PBufOwner); ok {
		pbuf = o.PBuf() // zero-copy: the packets are already in memory
	}
	if pbuf == nil {
		// One batch of slots: run to completion frees every slot before the
		// next fill, and a small PBuf stays in cache (FFPF §4.2).
		pbuf = buffers.NewPBuf(buffers.MaxBatch, src.Ctx.Snaplen)
	}
	window := min(buffers.MaxBatch, pbuf.Slots())
	w := &worker{fs: fs, node: src, batch: buffers.NewBatch(pbuf, 0, window, idx), window: window}
	reach := reachable(src, succ)
	outOf := map[*flowspaces.Node]*buffers.Batch{src: w.batch}
	for _, n := range order {
		if !reach[n] || n == src {
			continue
		}
		st := step{node: n, mu: locks[n], out: new(buffers.Batch)}
		for _, in := range n.Inputs {
			if b, ok := outOf[in]; ok {
				st.in = append(st.in, b)
			}
		}
		outOf[n] = st.out
		w.steps = append(w.steps, st)
	}
	return w
}

// Activate starts one goroutine per source.
func (fs *Flowspace) Activate(ctx context.Context) error {
	ctx, fs.cancel = context.WithCancel(ctx)
	fs.budget.Store(fs.opts.Limit)
	for _, w := range fs.workers {
		fs.wg.Add(1)
		go func() {
			defer fs.wg.Done()
			w.run(ctx)
		}()
		if in, ok := w.node.Source.(functions.Interrupter); ok {
			// A source blocked on a silent pipe would never see the stop.
			// (Close cancels ctx too, so this always runs, once.)
			context.AfterFunc(ctx, in.Interrupt)
		}
	}
	return nil
}

// Wait implements flowspaces.Flowspace.
func (fs *Flowspace) Wait() error {
	fs.wg.Wait()
	var errs []error
	for _, w := range fs.workers {
		if w.err != nil {
			errs = append(errs, w.err)
		}
	}
	return errors.Join(errs...)
}

// Stop implements flowspaces.Flowspace.
func (fs *Flowspace) Stop() {
	if fs.cancel != nil {
		fs.cancel()
	}
	fs.wg.Wait() // a live source's Fill returns within ~100 ms by contract
}

// Close releases every function and source, after stopping the workers.
func (fs *Flowspace) Close() error {
	fs.Stop()
	err := release(fs.nodes)
	for _, w := range fs.workers {
		// A live source counts its last drops when it closes.
		d, _ := w.node.Source.(functions.Dropper)
		w.accountDrops(d)
	}
	return err
}

// slotSize is the PBuf slot size of a source: the run's snap length, or
// less when the source cannot deliver longer packets.
func slotSize(snaplen, maxCapLen int) int {
	if maxCapLen > 0 && (snaplen <= 0 || maxCapLen < snaplen) {
		return maxCapLen
	}
	if snaplen <= 0 {
		return 65535
	}
	return snaplen
}

func release(nodes []*flowspaces.Node) error {
	var first error
	for _, n := range nodes {
		var err error
		if n.Source != nil {
			err = n.Source.Close()
		} else if c, ok := n.Function.(functions.Closer); ok {
			err = c.Close()
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%s: %w", n.ID, err)
		}
	}
	return first
}

// claim reserves up to want packets of the run's limit. It returns 0 only
// when the limit is spent: while another source holds a reservation it may
// give back, it waits for it.
func (fs *Flowspace) claim(ctx context.Context, want int) int {
	if fs.opts.Limit <= 0 {
		return want
	}
	for ctx.Err() == nil {
		left := fs.budget.Load()
		if left <= 0 {
			if fs.reserved.Load() == 0 {
				return 0
			}
			time.Sleep(50 * time.Microsecond) // another Fill is running
			continue
		}
		// At most a fair share, so that one source cannot keep the rest of
		// the limit reserved while the others wait.
		n := min(int64(want), max(1, left/int64(len(fs.workers))))
		fs.reserved.Add(n)
		if fs.budget.CompareAndSwap(left, left-n) {
			return int(n)
		}
		fs.reserved.Add(-n)
	}
	return 0
}

// settle ends a reservation of claimed packets of which used were read.
func (fs *Flowspace) settle(claimed, used int) {
	if fs.opts.Limit <= 0 {
		return
	}
	if unused := claimed - used; unused > 0 {
		fs.budget.Add(int64(unused))
	}
	fs.reserved.Add(-int64(claimed))
}

func (w *worker) run(ctx context.Context) {
	b := w.batch
	dropper, _ := w.node.Source.(functions.Dropper)
	defer w.accountDrops(dropper)
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
		w.err = fmt.Errorf("%s: packet memory became unreadable (%v): was the input changed while being read?", w.node.ID, r)
	}()
	for i := 0; ctx.Err() == nil; i++ {
		b.Reset()
		b.Cap = w.fs.claim(ctx, w.window)
		if b.Cap == 0 {
			return
		}
		err := w.node.Source.Fill(b)
		w.fs.settle(b.Cap, b.N)
		if b.N > 0 {
			w.node.Counters.Add(b.N, b.N, 0)
			w.process()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				w.err = fmt.Errorf("%s: %w", w.node.ID, err)
			}
			return
		}
		if dropper != nil && (b.N == 0 || i%64 == 0) {
			w.accountDrops(dropper)
		}
	}
}

// process carries the source batch through the functions it reaches.
func (w *worker) process() {
	for i := range w.steps {
		st := &w.steps[i]
		out := st.out
		out.Union(st.in)
		n := out.N
		if n == 0 {
			continue
		}
		if st.mu != nil {
			st.mu.Lock()
			w.held = st.mu
		}
		st.node.Function.Process(out)
		if st.mu != nil {
			w.held = nil
			st.mu.Unlock()
		}
		st.node.Counters.Add(n, out.N, out.Dropped)
	}
}

// accountDrops adds the packets the source lost before it read them: they
// count as arrived (in) and dropped, so in = out + dropped holds for it.
func (w *worker) accountDrops(d functions.Dropper) {
	if d == nil {
		return
	}
	if now := d.Drops(); now > w.drops {
		delta := now - w.drops
		w.drops = now
		w.node.Counters.In.Add(delta)
		w.node.Counters.Dropped.Add(delta)
	}
}

func reachable(src *flowspaces.Node, succ map[*flowspaces.Node][]*flowspaces.Node) map[*flowspaces.Node]bool {
	seen := map[*flowspaces.Node]bool{src: true}
	stack := []*flowspaces.Node{src}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, m := range succ[n] {
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
	}
	return seen
}

// topoSort orders nodes so that every node follows its inputs.
func topoSort(nodes []*flowspaces.Node) ([]*flowspaces.Node, error) {
	in := map[*flowspaces.Node]bool{}
	for _, n := range nodes {
		in[n] = true
	}
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
			return fmt.Errorf("flowspace user: cycle through %s", n.ID)
		case black:
			return nil
		}
		color[n] = grey
		for _, m := range n.Inputs {
			if !in[m] {
				return fmt.Errorf("flowspace user: input %s of %s is not placed here", m.ID, n.ID)
			}
			if err := visit(m); err != nil {
				return err
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
