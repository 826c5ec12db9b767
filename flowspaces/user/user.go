// Package user is the Go flowspace: functions run as Go code in the ffpf
// process. It is the root of every hierarchy (userspace on the host), and,
// declared with a class set, the test flowspaces that stand in for boards
// this machine does not have (FFPF's Figure 2 IXP boards, say).
//
// Execution is run-to-completion per batch. One goroutine per source fills
// a batch into a PBuf region and carries it through every function of this
// flowspace the source reaches, in topological order; one goroutine per
// child bridge does the same for the batches that arrive from beneath. The
// outputs the parent asked for leave through the bridge to the parent (see
// bridges/inproc); a bridge of several lanes (a ring buffer per CPU, an
// AF_XDP socket per queue beneath) has a goroutine per lane. Each function
// works on its own copy of the batch's index entries (its IBuf view), so a
// fork costs a 2 KB copy of indices and never a packet copy. A function
// reached from several goroutines runs as its class's concurrency kind
// allows (shard.go): an instance per goroutine, on a shard of its state
// merged when read, or one instance serialised by its own mutex, taken once
// per batch.
//
// The datapath of a running flowspace can change: Connect builds new routes
// and each goroutine adopts them between two batches, so functions that
// stay keep counting without a gap.
//
// Time and records (DESIGN.md §11): each stream keeps a packet clock (its
// packets' times); a batch is cut at the first packet that reaches a
// clocked function's deadline, so windows close at the same packet
// whatever the batch size (clock.go). A producer's records are a stream of
// their own, carried to its dependents when it emits them (produce.go),
// and functions flush when every stream that reaches them has ended.
// Capture files that meet where order matters are read in time order by
// one goroutine (merge.go).
//
// The sharp edge: a join of two branches of the same source sees the union
// of their packets, each once (a flow is a set of packets), so
// (pcap) > [(bpf,"tcp") | (bpf,"port 80")] > (pktcount) counts a TCP port 80
// packet once, not twice.
package user

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers/shared"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// Traffic is what a simulated interface of a test flowspace delivers: a
// source class and its parameters, e.g. (gen,seed=1,packets=10000).
type Traffic struct {
	Term   string // as written, for messages
	Class  *functions.Class
	Params functions.Params
}

// Options configure a Go flowspace.
type Options struct {
	// Name defaults to "user".
	Name string
	// Kind is KindUser (the default) or KindTest.
	Kind flowspaces.Kind
	// Classes, when set, are the only classes it runs (a test flowspace
	// stands in for hardware with a fixed repertoire).
	Classes []string
	// Interfaces, when set, are the interfaces whose packets enter here:
	// simulated, each replaying its Traffic (a test flowspace). When nil,
	// every interface of the machine can be captured here (userspace).
	Interfaces map[string]*Traffic
	// InPlace makes it process packets where they are, keeping no PBuf,
	// like a kernel hook: what goes up from it is copied.
	InPlace bool
	// Budget is the run's packet limit (ffpf run -c or --capture-count),
	// shared by every flowspace of the run; nil means no limit.
	Budget *flowspaces.Budget
	// StateLimit bounds the state (MBuf bytes) of the functions placed
	// here together (flowspaces.StateBudget): 0 is half the machine's
	// RAM, < 0 no bound.
	StateLimit int64
	// Workers bounds how many workers one source spreads over (the lanes
	// of a bridge from beneath: a ring buffer per CPU, an AF_XDP socket
	// per receive queue); 0 is GOMAXPROCS.
	Workers int
	// PerFunctionKeys makes each keyed function (flowkey.Keyed) parse and
	// hash its packets itself, as it does alone, instead of sharing one
	// hash per packet with the functions keyed alike on its route: the
	// simple path, kept to measure the shared one against.
	PerFunctionKeys bool
}

// Flowspace is a Go flowspace.
type Flowspace struct {
	flowspaces.Position
	opts Options

	mu      sync.Mutex
	nodes   []*flowspaces.Node           // instantiated here, in topological order
	runs    map[*flowspaces.Node]*runner // how each function runs on the workers (shard.go)
	lanes   int                          // lanes handed out to workers
	removed []*flowspaces.Node           // leave the datapath at the next Connect
	state   *flowspaces.StateBudget

	want []*flowspaces.Node // outputs the parent asked for (here or beneath)
	up   *inproc.Bridge     // to the parent, once it asked for something
	// upSent is the last bridge the parent gave (up is nil once closed).
	upSent       *inproc.Bridge
	parentStores bool
	downs        map[*flowspaces.Stub]*inproc.Bridge

	srcs    map[*flowspaces.Node]*worker
	readers map[*inproc.Bridge][]*worker      // one per lane of the bridge
	pools   map[*flowspaces.Node]*inproc.Pool // per stream, for copies up
	gen     uint64

	// shared is the sources' packet memory that other processes map
	// (sharedMemory), by source, unmapped when the source is released.
	shared map[*flowspaces.Node][]*shared.Memory

	prods   map[*flowspaces.Node]*producer // the producers here, by node
	mergers []*worker                      // each reads capture files that meet, in time order
	ending  ending

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	live   int     // running workers; when none is left, the bridge up closes
	errs   []error // of the workers that have ended
}

// New returns an empty Go flowspace.
func New(opts Options) *Flowspace {
	if opts.Name == "" {
		opts.Name = "user"
	}
	if opts.Kind == "" {
		opts.Kind = flowspaces.KindUser
	}
	return &Flowspace{opts: opts, state: flowspaces.NewStateBudget(opts.StateLimit, flowspaces.MemoryShare(2)),
		runs:  map[*flowspaces.Node]*runner{},
		downs: map[*flowspaces.Stub]*inproc.Bridge{}, srcs: map[*flowspaces.Node]*worker{},
		readers: map[*inproc.Bridge][]*worker{}, pools: map[*flowspaces.Node]*inproc.Pool{},
		prods: map[*flowspaces.Node]*producer{}, shared: map[*flowspaces.Node][]*shared.Memory{}}
}

// Name implements flowspaces.Flowspace.
func (fs *Flowspace) Name() string { return fs.opts.Name }

// Kind implements flowspaces.Flowspace.
func (fs *Flowspace) Kind() flowspaces.Kind { return fs.opts.Kind }

// Target implements flowspaces.Flowspace.
func (fs *Flowspace) Target() functions.Target { return functions.TargetUser }

// Stores implements flowspaces.Flowspace.
func (fs *Flowspace) Stores() bool { return !fs.opts.InPlace }

// Classes returns the classes it is restricted to (nil: every class with a
// Go implementation).
func (fs *Flowspace) Classes() []string { return fs.opts.Classes }

// Interfaces returns the simulated interfaces, sorted (nil for userspace,
// which reaches every interface of the machine).
func (fs *Flowspace) Interfaces() []string {
	var out []string
	for name := range fs.opts.Interfaces {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Traffic returns what the simulated interface delivers.
func (fs *Flowspace) Traffic(iface string) *Traffic { return fs.opts.Interfaces[iface] }

// Entry implements flowspaces.Flowspace: userspace captures any interface
// of the machine, a test flowspace its simulated ones.
func (fs *Flowspace) Entry(iface string) flowspaces.Entry {
	if fs.opts.Interfaces == nil {
		if fs.opts.Kind == flowspaces.KindUser {
			return flowspaces.AnyEntry
		}
		return flowspaces.NoEntry
	}
	if _, ok := fs.opts.Interfaces[iface]; ok {
		return flowspaces.OwnEntry
	}
	return flowspaces.NoEntry
}

// Host implements flowspaces.Flowspace.
func (fs *Flowspace) Host(n *flowspaces.Node) error {
	c := n.Class
	if c.Interface != nil && fs.opts.Interfaces != nil {
		// A simulated interface: the flowspace captures it whatever its
		// classes, by replaying its traffic.
		if iface := c.Interface(n.Ctx.Params); fs.Entry(iface) == flowspaces.NoEntry {
			return fmt.Errorf("packets of %s do not enter at %s", iface, fs.Name())
		}
		return nil
	}
	if !c.Supports(functions.TargetUser) {
		return fmt.Errorf("class %s has no Go implementation", c.Name)
	}
	if err := c.CanRun(functions.TargetUser, n.Ctx.Params); err != nil {
		return err
	}
	if fs.opts.Classes != nil && !slices.Contains(fs.opts.Classes, c.Name) {
		return fmt.Errorf("%s does not run class %s", fs.Name(), c.Name)
	}
	if c.IsSource() && c.Interface == nil && fs.opts.Kind != flowspaces.KindUser {
		return fmt.Errorf("%s reads nothing but its interfaces", fs.Name())
	}
	_, size, err := c.State.Layout(functions.TargetUser, n.Ctx.Params)
	if err != nil {
		return err
	}
	return fs.state.Admit(fs, n, int64(size))
}

// StateLimit is the bound on the state of the functions placed here
// together, in bytes (≤ 0: none), and how much of it they take.
func (fs *Flowspace) StateLimit() (limit, used int64) { return fs.state.Limit, fs.state.Used(fs) }

// Instantiate implements flowspaces.Flowspace.
func (fs *Flowspace) Instantiate(n *flowspaces.Node) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n.Ctx.Flowspace == "" { // placed by hand, not by the flowgraph
		n.Ctx.Flowspace = fs.Name()
	}
	if err := fs.instantiate(n); err != nil {
		return err
	}
	fs.nodes = append(fs.nodes, n)
	fs.runs[n] = newRunner(n, func(total int64) error { return fs.state.Admit(fs, n, total) })
	return nil
}

func (fs *Flowspace) instantiate(n *flowspaces.Node) (err error) {
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
		n.Function, err = n.Class.New(&n.Ctx)
		return err
	}
	class, ctx := n.Class, n.Ctx
	if fs.opts.Interfaces != nil && n.Class.Interface != nil {
		// A simulated interface: its traffic stands in for the capture.
		iface := n.Class.Interface(n.Ctx.Params)
		t := fs.opts.Interfaces[iface]
		if t == nil {
			return fmt.Errorf("%s simulates %s but has no traffic for it: give the interface a traffic term in the hierarchy", fs.Name(), iface)
		}
		class, ctx.Params = t.Class, t.Params
	}
	src, err := class.NewSource(&ctx)
	if err != nil {
		return err
	}
	if lt := src.Info().LinkType; n.Ctx.LinkType != 0 && lt != n.Ctx.LinkType {
		src.Close()
		return fmt.Errorf("%s delivers %v packets, but the request was checked for %v", src.Info().Name, lt, n.Ctx.LinkType)
	}
	n.Source = src
	n.Ctx.Snaplen = slotSize(n.Ctx.Snaplen, src.Info().MaxCapLen)
	return nil
}

// Remove implements flowspaces.Flowspace.
func (fs *Flowspace) Remove(n *flowspaces.Node) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if slices.Contains(fs.nodes, n) && !slices.Contains(fs.removed, n) {
		fs.removed = append(fs.removed, n)
	}
	fs.state.Release(n)
}

// Activate implements flowspaces.Flowspace: it starts a goroutine per
// source and per bridge from beneath.
func (fs *Flowspace) Activate(ctx context.Context) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.ctx != nil {
		return errors.New("flowspace " + fs.Name() + ": activated twice")
	}
	fs.ctx, fs.cancel = context.WithCancel(ctx)
	for _, w := range fs.srcs {
		fs.start(w)
	}
	for _, w := range fs.mergers {
		fs.start(w)
	}
	for _, ws := range fs.readers {
		for _, w := range ws {
			fs.start(w)
		}
	}
	if fs.live == 0 {
		fs.finish()
	}
	return nil
}

// start runs w; the caller holds fs.mu.
func (fs *Flowspace) start(w *worker) {
	if w.started || fs.ctx.Err() != nil { // running, or the flowspace is stopped
		return
	}
	w.started = true
	fs.live++
	fs.wg.Add(1)
	wctx, cancel := context.WithCancel(fs.ctx)
	w.cancel = cancel
	go func() {
		defer fs.wg.Done()
		w.run(wctx)
		// The worker's context goes with it: left registered with the
		// flowspace's, it (and the AfterFunc below, with the source) would
		// live as long as the flowspace, one per source ever run.
		cancel()
		fs.mu.Lock()
		if w.err != nil {
			fs.errs = append(fs.errs, w.err)
		}
		fs.live--
		if fs.live == 0 {
			fs.finish()
		}
		fs.mu.Unlock()
	}()
	if in, ok := w.src.(functions.Interrupter); ok {
		// A source blocked on a silent pipe would never see the stop.
		context.AfterFunc(wctx, in.Interrupt)
	}
}

// finish tells the parent that nothing more will come up for now: no
// worker runs. fs.mu is held. Should a later Connect start workers again,
// the parent gives a new bridge.
func (fs *Flowspace) finish() {
	if fs.up != nil {
		fs.up.Close()
		fs.up = nil
	}
}

// Wait implements flowspaces.Flowspace.
func (fs *Flowspace) Wait() error {
	fs.wg.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return errors.Join(fs.errs...)
}

// Stop implements flowspaces.Flowspace.
func (fs *Flowspace) Stop() {
	fs.mu.Lock()
	cancel := fs.cancel
	fs.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	fs.wg.Wait() // a live source's Fill returns within ~100 ms by contract
}

// Close releases every function and source, after stopping the workers.
func (fs *Flowspace) Close() error {
	fs.Stop()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	err := fs.release(fs.nodes)
	for _, w := range fs.srcs {
		// A live source counts its last drops when it closes.
		w.accountDrops()
	}
	fs.nodes = nil
	return err
}

// SourceEnded implements flowspaces.Ender: the source's worker has run
// to its end, and its stream has ended in the highest flowspace it
// reaches, where what it reached is flushed (flowspaces.Node.EndStream).
func (fs *Flowspace) SourceEnded(n *flowspaces.Node) (bool, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	w := fs.srcs[n]
	if w == nil || !w.done.Load() || !n.StreamEnded() {
		return false, nil
	}
	return true, w.err
}

// SetBudget implements flowspaces.Limited: the flowspace's sources share b
// (the run's packet limit); call it before Activate.
func (fs *Flowspace) SetBudget(b *flowspaces.Budget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.opts.Budget = b
}

// Bridges implements flowspaces.Receiver: the bridges from the flowspaces
// beneath, by child name.
func (fs *Flowspace) Bridges() map[string]*inproc.Bridge {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := map[string]*inproc.Bridge{}
	for s, b := range fs.downs {
		out[s.Name()] = b
	}
	return out
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

// release closes the sources and functions of nodes, and the other
// workers' instances of each function.
func (fs *Flowspace) release(nodes []*flowspaces.Node) error {
	var first error
	for _, n := range nodes {
		var err error
		if n.Source != nil {
			err = n.Source.Close()
			for _, m := range fs.shared[n] { // nothing refers to its packets now
				m.Close()
			}
			delete(fs.shared, n)
		} else if c, ok := n.Function.(functions.Closer); ok {
			err = c.Close()
		}
		if r := fs.runs[n]; r != nil {
			err = cmp.Or(err, r.close())
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%s: %w", n.ID, err)
		}
	}
	return first
}

// Lock implements flowspaces.Locker: the function's one lock, or, for a
// function on several workers' shards, every shard's, merged into
// n.Function first.
func (fs *Flowspace) Lock(n *flowspaces.Node) func() {
	fs.mu.Lock()
	r := fs.runs[n]
	fs.mu.Unlock()
	if r == nil {
		return func() {}
	}
	return r.lock()
}

// Merged implements flowspaces.Merger.
func (fs *Flowspace) Merged(n *flowspaces.Node, f func()) bool {
	fs.mu.Lock()
	r := fs.runs[n]
	fs.mu.Unlock()
	return r != nil && r.merged(f)
}

// Concurrency returns how n runs on the workers that reach it, and why it
// runs ordered when its class has another kind; workers is how many lanes
// run it now (instances, for stateless and mergeable functions).
func (fs *Flowspace) Concurrency(n *flowspaces.Node) (k functions.Concurrency, why string, workers int) {
	fs.mu.Lock()
	r := fs.runs[n]
	fs.mu.Unlock()
	if r == nil {
		return functions.Ordered, "", 0
	}
	r.cfg.Lock()
	defer r.cfg.Unlock()
	return r.kind, r.why, len(r.shards)
}

// newLane hands a worker its lane; fs.mu is held.
func (fs *Flowspace) newLane() int {
	fs.lanes++
	return fs.lanes - 1
}
