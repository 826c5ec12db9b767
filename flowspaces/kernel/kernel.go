// Package kernel holds the eBPF flowspaces of the host: the kernel's
// traffic-control hook (kind kernel: TCX ingress, or a clsact filter on
// kernels without TCX; any interface) and one XDP flowspace per interface
// (kind xdp: in the driver, or generic). The functions placed in one are
// chained into one eBPF program per interface, generated at run time from
// the code each class gives (Class.EBPF, functions/ebpfgen) and loaded
// with cilium/ebpf; a source placed here is the hook itself.
//
// The files follow the concerns: placement and the verifier's say
// (place.go), program generation and verdicts (prog.go), attaching
// (attach.go: XDP, TCX, clsact), state sync from the per-CPU counter map
// into the nodes' counters and MBufs every 100 ms (sync.go), windows
// double-buffered by epoch parity and closed by the functions' Go halves
// in this process, and per-flow maps by epoch parity drained by them
// (window.go), whose records (report=) go up as streams of
// their own (records.go), and the way
// up (up.go): packets a flowspace above asks for cross the barrier through
// the ring-buffer bridge (bridges/ringbuf: a ring buffer per CPU, up to
// the run's workers) or, when the capture steals them, the AF_XDP bridge
// (bridges/afxdp: a socket per receive queue), each ring or socket on a
// lane of its own, read by a worker of its own above. The verdict lets the packet on
// to the kernel stack, unless the capture says drop=true and the graph
// filtered it out. The hierarchy includes these flowspaces only where the
// machine can load such programs (see flowspaces/hierarchy).
//
// The sharp edge: a program holds at most 40 functions, and packets cannot
// come into it from another flowspace: a function whose input runs
// elsewhere is placed above, as is one whose class has no eBPF code or
// whose code the verifier refuses (placement loads it once to ask).
package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// Options describe an eBPF flowspace.
type Options struct {
	Kind      flowspaces.Kind // KindKernel or KindXDP
	Interface string          // for KindXDP: the interface whose driver runs it
	Name      string          // defaults to "kernel" or "xdp:<interface>"
	// StateLimit bounds the memory of the state maps of the functions
	// placed here together (flowspaces.StateBudget): 0 is a quarter of
	// the machine's RAM, < 0 no bound.
	StateLimit int64
}

// Flowspace is an eBPF flowspace.
type Flowspace struct {
	flowspaces.Position
	opts   Options
	target functions.Target

	mu       sync.Mutex
	nodes    []*node // instantiated here, in topological order
	removed  []*flowspaces.Node
	slots    int // counter slots handed out
	counters *ebpf.Map
	ring     *ebpf.Map
	// rings are the ring buffers, one per CPU up to workers (ring is the
	// first); ringOf gives each CPU its ring (nil with one ring).
	rings   []*ebpf.Map
	ringOf  *ebpf.Map
	workers int // the most lanes the way up spreads over (0: GOMAXPROCS)
	// The packet clock: offset is CLOCK_REALTIME − CLOCK_MONOTONIC, taken
	// once (ringbuf.Offset), the one offset of the flowspace: the clock
	// map holds it for the windows' epochs (window.go), timestamps have it
	// compiled in, and the ring buffer's reader adds it to the records'
	// times. sent is, per CPU, when it last sent a clock-only record.
	clock    *ebpf.Map
	offset   int64
	sent     *ebpf.Map
	state    *flowspaces.StateBudget // the memory of the functions' state maps
	xsks     *ebpf.Map               // AF_XDP sockets by receive queue (XDP)
	want     []*flowspaces.Node
	up       *inproc.Bridge
	sending  *inproc.Bridge         // up, while this flowspace sends through it
	attached map[string]*attachment // by hook (hookKey)
	reserved map[string]*attachment // XDP hooks held by a placeholder until Activate, by interface (reserve)
	modes    map[string]string      // how each hook was attached, kept after detach
	xsk      *afxdp.Set             // AF_XDP sockets, once a capture steals (XDP)
	sockets  string                 // the AF_XDP sockets last used, for Attachments
	ringsUp  string                 // the ring buffers last read, when several, for Attachments
	taken    string                 // why a capture did not come here (hookFree), for Attachments
	progName string                 // tests name their programs apart from a run's
	verified map[string]error       // Host's verifier checks, by class and parameters
	offered  []*flowspaces.Node     // nodes Host accepted, until the next Connect
	free     []slotRange            // counter slots of removed functions
	stopped  chan struct{}          // closed when Stop is done
	reader   reader                 // of the ring buffer or the AF_XDP sockets
	active   bool
	stopSync chan struct{}
	budget   *flowspaces.Budget // the run's packet limit (-c), nil for none
	budgetM  *ebpf.Map          // where the programs take packets from it
	ifindex  map[string]int     // the attached interfaces' indexes, to tell one deleted (gone.go)
	err      error              // why the capture ended by itself (an interface disappeared)
	synced   sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

// node is a function placed here.
type node struct {
	*flowspaces.Node
	fn    ebpfgen.Function
	iface string               // a source's interface
	slot  int                  // its first counter slot
	need  int                  // how many slots it has
	mbuf  *buffers.MBuf        // its state, summed from the counter map
	maps  map[string]*stateMap // its state maps (statemap.go)
	lost  uint64               // a source's: ring buffer overflows already counted
	slots int                  // its state slots (of one half, windowed)
	gofn  functions.Function   // the Go half: the layout, the window's reports
	win   *epochs              // with window=: the double-buffering (window.go)
	recs  *records             // a producer's: its records on their way up (records.go)
	// started is set once its Go half's clock (and window) started, before
	// its program saw a packet.
	started atomic.Bool
	// goMu serialises a Drained function's Go half: its drains and ticks,
	// and its handlers (Lock).
	goMu sync.Mutex
}

// New returns an eBPF flowspace.
func New(opts Options) (*Flowspace, error) {
	fs := &Flowspace{opts: opts, state: flowspaces.NewStateBudget(opts.StateLimit, flowspaces.MemoryShare(4))}
	switch opts.Kind {
	case flowspaces.KindKernel:
		fs.target = functions.TargetKernel
		if fs.opts.Name == "" {
			fs.opts.Name = "kernel"
		}
	case flowspaces.KindXDP:
		if opts.Interface == "" {
			return nil, fmt.Errorf("an xdp flowspace needs an interface")
		}
		fs.target = functions.TargetXDP
		if fs.opts.Name == "" {
			fs.opts.Name = "xdp:" + opts.Interface
		}
	default:
		return nil, fmt.Errorf("kind %q is not an eBPF flowspace", opts.Kind)
	}
	return fs, nil
}

// Name implements flowspaces.Flowspace.
func (fs *Flowspace) Name() string { return fs.opts.Name }

// Kind implements flowspaces.Flowspace.
func (fs *Flowspace) Kind() flowspaces.Kind { return fs.opts.Kind }

// Target implements flowspaces.Flowspace.
func (fs *Flowspace) Target() functions.Target { return fs.target }

// Interface returns the XDP flowspace's interface ("" for the kernel).
func (fs *Flowspace) Interface() string { return fs.opts.Interface }

// Entry implements flowspaces.Flowspace: the tc hook sees every
// interface, an XDP program only its own.
func (fs *Flowspace) Entry(iface string) flowspaces.Entry {
	switch {
	case iface == fs.opts.Interface:
		return flowspaces.OwnEntry
	case fs.opts.Kind == flowspaces.KindKernel:
		return flowspaces.AnyEntry
	}
	return flowspaces.NoEntry
}

// Stores implements flowspaces.Flowspace: eBPF programs work on the packet
// where the kernel holds it.
func (fs *Flowspace) Stores() bool { return false }

// Instantiate implements flowspaces.Flowspace.
func (fs *Flowspace) Instantiate(n *flowspaces.Node) error {
	if err := fs.Host(n); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err := fs.maps(); err != nil {
		return err
	}
	k := &node{Node: n}
	if n.Class.IsSource() {
		k.iface = n.Class.Interface(n.Ctx.Params)
		if _, err := net.InterfaceByName(k.iface); err != nil {
			return fmt.Errorf("cannot capture on %s: %v", k.iface, err)
		}
		if err := fs.reserve(n); err != nil {
			return err
		}
		// A hook's state: what its verdicts took from the kernel stack.
		k.mbuf = buffers.NewMBuf(16, buffers.Native,
			buffers.Field{Name: "stolen", Type: buffers.U64, Offset: 0},
			buffers.Field{Name: "discarded", Type: buffers.U64, Offset: 8})
		n.Source = hookSource{fs.Name(), k.iface, k.mbuf, captureSnap(n)}
		k.need, k.slots = 2+hookStateSlots, hookStateSlots
	} else {
		fn, err := n.Class.EBPF(fs.target, &n.Ctx)
		if err != nil {
			return err
		}
		// The Go function gives the state's layout (its MBuf); it never
		// sees a packet.
		n.Ctx.Target = fs.target
		gofn, err := n.Class.New(&n.Ctx)
		if err != nil {
			return err
		}
		k.fn, k.gofn, k.slots = fn, gofn, fn.StateSlots()
		n.Function = noState{}
		if st, ok := gofn.(functions.Stateful); ok {
			k.mbuf = st.MBuf()
			n.Function = stateOnly{k.mbuf}
			if sum, ok := gofn.(functions.Summarizer); ok {
				n.Function = summarized{stateOnly{k.mbuf}, sum}
			}
		}
		if r, ok := gofn.(readable); ok && n.Class.Annotates > 0 && k.mbuf == nil {
			// Its annotation words come up with each packet: a reader
			// above reads them as the Go function would.
			n.Function = annotating{noState{}, r}
		}
		if pr, ok := gofn.(functions.Producer); ok && n.Producer() {
			sum, ok := n.Function.(summarized)
			if !ok {
				return fmt.Errorf("%s: class %s produces records in eBPF but summarizes no state", n.ID, n.Class.Name)
			}
			k.recs = &records{node: n}
			pr.SetEmit(k.recs.emit)
			n.Function = producing{sum, pr}
			if hs, ok := gofn.(functions.Handlers); ok {
				if _, drained := fn.(ebpfgen.Drained); drained {
					// Its Go half holds what the handlers change (trumpet's
					// events): they run under goMu, between two drains.
					n.Function = handling{producing{sum, pr}, hs}
				}
			}
		}
		if k.win, err = windowOf(n, fn); err != nil {
			n.Source, n.Function = nil, nil
			return fmt.Errorf("%s: %v", n.ID, err)
		}
		k.need = k.win.need(k.slots)
		if _, ok := fn.(ebpfgen.Mapped); ok && k.mbuf != nil {
			if k.maps, err = newStateMaps(n.Class, k.mbuf.Fields(), fn, k.win.halves()); err != nil {
				k.win.close()
				n.Source, n.Function = nil, nil
				return fmt.Errorf("%s: %v", n.ID, err)
			}
		}
	}
	slot, err := fs.allocSlots(k.need)
	if err != nil {
		closeMaps(k.maps)
		k.win.close()
		n.Source, n.Function = nil, nil
		return fmt.Errorf("%s: %s", n.ID, err)
	}
	k.slot = slot
	fs.nodes = append(fs.nodes, k)
	return nil
}

// Remove implements flowspaces.Flowspace.
func (fs *Flowspace) Remove(n *flowspaces.Node) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.removed = append(fs.removed, n)
	fs.state.Release(n)
}

// SetWant implements user.Child: the parent asks for the outputs of want,
// which go up through b. Outputs of functions beneath (an XDP flowspace
// under the kernel's) are asked of the child they run in, to come up
// through the same bridge: an eBPF program cannot relay packets, but the
// process reads every ring buffer.
func (fs *Flowspace) SetWant(want []*flowspaces.Node, b *inproc.Bridge, parentStores bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var local []*flowspaces.Node
	below := map[*flowspaces.Stub][]*flowspaces.Node{}
	for _, w := range want {
		if w.Flowspace == flowspaces.Flowspace(fs) {
			local = append(local, w)
			continue
		}
		if i := int(w.Path.At(fs.Level())); i < len(fs.Children()) {
			s := fs.Children()[i]
			below[s] = append(below[s], w)
		}
	}
	for _, s := range fs.Children() {
		if c, ok := s.Child().(interface {
			SetWant([]*flowspaces.Node, *inproc.Bridge, bool)
		}); ok {
			c.SetWant(below[s], b, parentStores)
		}
	}
	fs.want = local
	if b != nil {
		fs.up = b
	}
}

// Connect implements flowspaces.Flowspace: it generates and loads one
// program per interface from the functions placed here, and on an active
// flowspace swaps it in atomically.
func (fs *Flowspace) Connect() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var keep []*node
	for _, k := range fs.nodes {
		if !slices.Contains(fs.removed, k.Node) {
			keep = append(keep, k)
		}
	}
	progs := map[string]*ebpf.Program{}
	release := func() {
		for _, p := range progs {
			p.Close()
		}
	}
	for port, iface := range ifaces(keep) {
		if err := fs.load(keep, iface, port, progs); err != nil {
			release()
			return err
		}
	}
	if fs.active {
		if err := fs.openXSK(keep); err != nil {
			release()
			return err
		}
		if err := fs.startWindows(keep); err != nil {
			release()
			return err
		}
		if err := fs.attach(progs); err != nil {
			release()
			return err
		}
	} else {
		fs.swap(progs)
	}
	// The programs that counted into the slots of removed functions are
	// replaced: the slots can serve again.
	for _, k := range fs.nodes {
		if slices.Contains(fs.removed, k.Node) {
			fs.free = append(fs.free, slotRange{k.slot, k.need})
			closeMaps(k.maps)
			k.win.close()
		}
	}
	fs.nodes, fs.removed, fs.offered = keep, nil, nil
	fs.release(keep)
	fs.state.Settle(fs)
	fs.restartReader(keep)
	fs.restartRecords(keep)
	return nil
}

// Activate implements flowspaces.Flowspace: it attaches the programs and
// starts reading the counters (every 100 ms) and the ring buffer.
func (fs *Flowspace) Activate(ctx context.Context) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ctx, fs.cancel = context.WithCancel(ctx)
	pending := map[string]*ebpf.Program{}
	for iface, a := range fs.attached {
		pending[iface] = a.prog
	}
	fs.attached = nil
	// The sockets first: a program that redirects to none passes packets on.
	if err := fs.openXSK(fs.nodes); err != nil {
		return err
	}
	if err := fs.startWindows(fs.nodes); err != nil {
		return err
	}
	if err := fs.attach(pending); err != nil {
		return err
	}
	fs.active = true
	if fs.up != nil && len(fs.want) > 0 {
		fs.up.Share()
		fs.sending = fs.up
	}
	fs.stopSync = make(chan struct{})
	fs.synced.Add(1)
	go fs.syncLoop()
	fs.restartReader(fs.nodes)
	fs.restartRecords(fs.nodes)
	// The end of the run detaches the programs and closes the bridge up,
	// which the flowspace above waits for.
	context.AfterFunc(fs.ctx, fs.Stop)
	return nil
}

// Wait implements flowspaces.Flowspace: a live capture ends when the run
// is stopped.
func (fs *Flowspace) Wait() error {
	fs.mu.Lock()
	ctx := fs.ctx
	n := len(fs.nodes)
	fs.mu.Unlock()
	if ctx == nil || n == 0 {
		return nil
	}
	<-ctx.Done()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.err
}

// Stop implements flowspaces.Flowspace: it detaches the programs (so that
// nothing more is counted) and reads the counters a last time.
func (fs *Flowspace) Stop() {
	fs.mu.Lock()
	if !fs.active {
		stopped := fs.stopped
		fs.mu.Unlock()
		if stopped != nil {
			<-stopped // another Stop (the end of the run) is under way: wait for its last sync
		}
		return
	}
	fs.active = false
	stopped := make(chan struct{})
	fs.stopped = stopped
	defer close(stopped)
	fs.cancel()
	for iface, a := range fs.attached {
		if a.link != nil {
			a.link.Close()
			a.link = nil
		}
		_ = iface
	}
	r := fs.reader
	fs.reader = nil
	fs.mu.Unlock()
	if r != nil {
		r.Stop()
	}
	close(fs.stopSync)
	fs.synced.Wait()
	fs.mu.Lock()
	fs.lostXSK()
	if fs.sending != nil {
		fs.sending.Close() // nothing more comes up from here
		fs.sending = nil
	}
	fs.mu.Unlock()
}

// Close implements flowspaces.Flowspace: nothing stays attached.
func (fs *Flowspace) Close() error {
	fs.Stop()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, a := range fs.attached {
		if a.link != nil {
			a.link.Close()
		}
		a.prog.Close()
	}
	fs.attached = nil
	fs.release(nil)
	if fs.up != nil {
		fs.up = nil
	}
	for _, k := range fs.nodes {
		closeMaps(k.maps)
		k.win.close()
		k.maps = nil
	}
	if fs.ring != nil {
		closeRings(fs.rings, fs.ringOf)
		fs.counters.Close()
		fs.clock.Close()
		fs.ring, fs.rings, fs.ringOf, fs.counters, fs.clock = nil, nil, nil, nil, nil
	}
	if fs.sent != nil {
		fs.sent.Close()
		fs.sent = nil
	}
	if fs.xsk != nil {
		// The flowspace above has stopped: the frames it referred to are
		// released, or will be in a moment.
		fs.xsk.Close(5 * time.Second)
		fs.xsk = nil
	}
	if fs.xsks != nil {
		fs.xsks.Close()
		fs.xsks = nil
	}
	return nil
}

// hookSource is a source that is an eBPF hook: its packets never come to
// userspace as a source's would.
type hookSource struct {
	fs, iface string
	mbuf      *buffers.MBuf
	snap      int // what it keeps of a packet (captureSnap)
}

// hookStateSlots are a hook's counter slots beyond in and out: packets of
// its stream the program redirected to AF_XDP (stolen), filtered packets
// it dropped (discarded), both in its MBuf, and packets of its stream the
// ring buffer had no room for (lost: the bridge's dropped).
const (
	hookStateSlots = 3
	slotStolen     = 2
	slotDiscarded  = 3
	slotLost       = 4
)

// MBuf makes a hook's verdict counts its state.
func (h hookSource) MBuf() *buffers.MBuf { return h.mbuf }

func (h hookSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: h.iface + " (" + h.fs + ")", LinkType: functions.LinkEthernet, MaxCapLen: h.snap}
}
func (h hookSource) Fill(*buffers.Batch) error { return errors.New("an eBPF hook is not read") }
func (h hookSource) Close() error              { return nil }

// stateOnly stands for a function that runs in eBPF: its MBuf holds the
// state summed from the counter map.
type stateOnly struct{ m *buffers.MBuf }

func (s stateOnly) Process(*buffers.Batch) {}
func (s stateOnly) MBuf() *buffers.MBuf    { return s.m }

// summarized is a stateOnly whose class computes the state users see from
// its MBuf (an estimate from registers): the Go function, which never sees
// a packet, computes it from the state the flowspace syncs.
type summarized struct {
	stateOnly
	sum functions.Summarizer
}

func (s summarized) Summary() map[string]any { return s.sum.Summary() }

// annotating stands for a function without state that runs in eBPF and
// annotates the packets: the Go function reads its words, which the
// packets' records carry up into the slots' annotation areas.
type annotating struct {
	noState
	readable
}

// readable is what a reader reads annotation words through.
type readable interface {
	functions.Readable
	functions.IntReadable
}

// handling is a producing function whose handlers its Go half serves
// (a Drained function's).
type handling struct {
	producing
	hs functions.Handlers
}

func (h handling) Handlers() []functions.Handler { return h.hs.Handlers() }

// Lock implements flowspaces.Locker: a Drained function's Go half is
// locked against its drains while a handler runs, and told the present
// (functions.Presenter).
func (fs *Flowspace) Lock(n *flowspaces.Node) func() {
	fs.mu.Lock()
	var k *node
	for _, o := range fs.nodes {
		if o.Node == n {
			k = o
		}
	}
	fs.mu.Unlock()
	if k == nil {
		return func() {}
	}
	k.goMu.Lock()
	if p, ok := k.gofn.(functions.Presenter); ok && k.started.Load() {
		p.Present(fs.now())
	}
	return k.goMu.Unlock
}

// noState stands for a function without state that runs in eBPF.
type noState struct{}

func (noState) Process(*buffers.Batch) {}
