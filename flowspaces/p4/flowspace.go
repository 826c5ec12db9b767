package p4

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// run is the state of a switch flowspace: the functions placed on it and,
// once connected, its program and controller.
type run struct {
	codeCache
	mu      sync.Mutex
	nodes   []*flowspaces.Node // instantiated here, in topological order
	halves  map[*flowspaces.Node]*half
	removed []*flowspaces.Node
	offered []*flowspaces.Node // accepted by Host since the last Connect
	want    []*flowspaces.Node // outputs the parent asked for
	up      *inproc.Bridge

	asm    *Assembly          // the program connected
	out    *Output            // and its printed forms
	client *controller.Client // nil until the first Connect with functions
	sent   []*flowspaces.Node // the outputs the pushed program sends up

	active  bool
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}
	synced  sync.WaitGroup
	err     error // why the run ended by itself (the switch went away)
	way     atomic.Pointer[wayUp]
	digests atomic.Pointer[map[string]digestOwner] // by digest name
	wins    atomic.Pointer[windows]                // the windows followed
	shared  *inproc.Bridge                         // the bridge up this flowspace sends through (Share)
}

func (r *run) init() { r.halves = map[*flowspaces.Node]*half{} }

// codeCache holds the nodes' P4 code (Flowspace.code), under codeMu:
// Host and Instantiate ask for it, and a class may work hard for it.
type codeCache struct {
	codeMu sync.Mutex
	codes  map[*flowspaces.Node]p4code
	valid  map[*flowspaces.Node]bool // a program with the node was valid (Assembly.validate)
}

// half is a function's Go half: the Go function of its class, which never
// sees a packet, holding its MBuf (filled from the switch), its records
// and its handlers.
type half struct {
	node *flowspaces.Node
	gofn functions.Function
	mbuf *buffers.MBuf
	code p4gen.Function
	port uint16 // a source's
	recs *records
}

// Host implements flowspaces.Flowspace: a capture of a front-panel port
// runs here; a function runs here when its class has P4 code for it, its
// inputs run here, and the program with it still fits the switch's
// resources (the reason otherwise is the allocator's).
func (fs *Flowspace) Host(n *flowspaces.Node) error {
	c := n.Class
	if c.IsSource() {
		if c.Interface == nil {
			return fmt.Errorf("%s reads nothing but its ports", fs.Name())
		}
		if iface := c.Interface(n.Ctx.Params); fs.Entry(iface) == flowspaces.NoEntry {
			return fmt.Errorf("packets of %s do not enter at %s", iface, fs.Name())
		}
		fs.mu.Lock()
		fs.offer(n)
		fs.mu.Unlock()
		return nil
	}
	if !c.Supports(functions.TargetP4) {
		return fmt.Errorf("class %s has no P4 implementation", c.Name)
	}
	if err := c.CanRun(functions.TargetP4, n.Ctx.Params); err != nil {
		return err
	}
	for _, in := range n.Inputs {
		if in.Flowspace != flowspaces.Flowspace(fs) {
			return fmt.Errorf("its input %s runs in %s, and packets cannot come down to the switch", in.ID, where(in))
		}
	}
	if snap := sourceSnaplen(n); snap < 65535 {
		return fmt.Errorf("its packets are captured with a snap length of %d bytes, and a switch sees all of a packet: libpcap's verdicts need the truncation", snap)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	a, err := fs.assemble(append(fs.placed(n), n))
	if err != nil {
		return err
	}
	// The way up takes its own resources: the program must still end.
	if err := a.Finish(outputs(a)); err != nil {
		return err
	}
	fs.offer(n)
	return nil
}

// offer records that n was placed here, until the next Connect.
func (fs *Flowspace) offer(n *flowspaces.Node) {
	if !slices.Contains(fs.offered, n) {
		fs.offered = append(fs.offered, n)
	}
}

// placed returns the functions the switch runs or was given since the
// last Connect, in order, without n; fs.mu is held.
func (fs *Flowspace) placed(n *flowspaces.Node) []*flowspaces.Node {
	var out []*flowspaces.Node
	for _, o := range fs.nodes {
		if o != n && !slices.Contains(fs.removed, o) {
			out = append(out, o)
		}
	}
	for _, o := range fs.offered {
		if o != n && o.Flowspace == flowspaces.Flowspace(fs) && !slices.Contains(out, o) && !slices.Contains(fs.removed, o) {
			out = append(out, o)
		}
	}
	return out
}

// assemble builds the program of nodes, in order; an error names the
// function that does not fit and why.
func (fs *Flowspace) assemble(nodes []*flowspaces.Node) (*Assembly, error) {
	a, err := fs.NewAssembly()
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := a.Add(n); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// outputs returns every output a program could send up: those of all
// its functions but producers (their records leave as digests).
func outputs(a *Assembly) []*flowspaces.Node {
	var out []*flowspaces.Node
	for _, l := range a.Lowered {
		if !l.Node.Producer() {
			out = append(out, l.Node)
		}
	}
	return out
}

// sourceSnaplen is the smallest snap length of the captures that feed n.
func sourceSnaplen(n *flowspaces.Node) int {
	snap := 1 << 30
	var reach flowspaces.Reach
	for _, s := range reach.Sources(n) {
		if _, ok := s.Class.Param("snaplen"); ok {
			if sl := int(s.Ctx.Params.Int("snaplen")); sl > 0 {
				snap = min(snap, sl)
			}
		}
	}
	return snap
}

// Instantiate implements flowspaces.Flowspace: a capture becomes the
// switch's port, a function its P4 code and its Go half.
func (fs *Flowspace) Instantiate(n *flowspaces.Node) error {
	if n.Ctx.Flowspace == "" {
		n.Ctx.Flowspace = fs.Name()
	}
	h := &half{node: n}
	if n.Class.IsSource() {
		iface := n.Class.Interface(n.Ctx.Params)
		port, ok := fs.opts.Ports[iface]
		if !ok {
			return fmt.Errorf("packets of %s do not enter at %s", iface, fs.Name())
		}
		h.port = port
		n.Source = portSource{name: fmt.Sprintf("%s (port %d of %s)", iface, port, fs.Name())}
	} else {
		fn, err := fs.code(n)
		if err != nil {
			return err
		}
		h.code = fn
		n.Ctx.Target = functions.TargetP4
		gofn, err := n.Class.New(&n.Ctx)
		if err != nil {
			return err
		}
		h.gofn = gofn
		n.Function = noState{}
		if st, ok := gofn.(functions.Stateful); ok {
			h.mbuf = st.MBuf()
			n.Function = stateOnly{h.mbuf}
			if sum, ok := gofn.(functions.Summarizer); ok {
				hs, _ := gofn.(functions.Handlers)
				n.Function = summarized{stateOnly{h.mbuf}, sum, &handlers{fs: fs, node: n, hs: hs}}
			}
		}
		if pr, ok := gofn.(functions.Producer); ok && n.Producer() {
			sum, ok := n.Function.(summarized)
			if !ok {
				return fmt.Errorf("class %s produces records on a switch but summarizes no state", n.Class.Name)
			}
			h.recs = &records{node: n}
			pr.SetEmit(h.recs.emit)
			n.Function = producing{sum, pr}
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.nodes = append(fs.nodes, n)
	fs.halves[n] = h
	return nil
}

// Remove implements flowspaces.Flowspace.
func (fs *Flowspace) Remove(n *flowspaces.Node) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if slices.Contains(fs.nodes, n) && !slices.Contains(fs.removed, n) {
		fs.removed = append(fs.removed, n)
	}
}

// SetWant implements user.Child: the parent asks for the outputs of want
// (functions here), which go up through b.
func (fs *Flowspace) SetWant(want []*flowspaces.Node, b *inproc.Bridge, parentStores bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.want = nil
	for _, w := range want {
		if w.Flowspace == flowspaces.Flowspace(fs) {
			fs.want = append(fs.want, w)
		}
	}
	if b != nil {
		fs.up = b
	}
}

// Placed returns the functions (and port captures) placed here, in the
// order they were placed: those instantiated, then those the flowgraph
// placed since (a request populated and not yet instantiated, as
// 'ffpf place' and 'ffpf p4 build' leave it).
func (fs *Flowspace) Placed() []*flowspaces.Node {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.placed(nil)
}

// Build builds the program of nodes (placed here, in order), ending with
// the way up of want: what Connect pushes, and what 'ffpf p4 build'
// prints. It needs no switch.
func (fs *Flowspace) Build(nodes, want []*flowspaces.Node) (*Assembly, error) {
	a, err := fs.assemble(nodes)
	if err != nil {
		return nil, err
	}
	if err := a.Finish(packetsOf(want)); err != nil {
		return nil, err
	}
	return a, nil
}

// packetsOf returns the functions of want whose outputs are packets.
func packetsOf(want []*flowspaces.Node) []*flowspaces.Node {
	var out []*flowspaces.Node
	for _, w := range want {
		if !w.Producer() {
			out = append(out, w)
		}
	}
	return out
}

// Connect implements flowspaces.Flowspace: it builds the program of the
// functions placed here and pushes it to the switch, connecting to it the
// first time. A switch that cannot be reached, is another device or
// refuses the program fails it with the switch's message, and nothing
// stays installed.
func (fs *Flowspace) Connect() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var keep []*flowspaces.Node
	for _, n := range fs.nodes {
		if !slices.Contains(fs.removed, n) {
			keep = append(keep, n)
		} else {
			delete(fs.halves, n)
		}
	}
	fs.codeMu.Lock()
	for n := range fs.codes {
		if !slices.Contains(keep, n) {
			delete(fs.codes, n) // placed and gone, or offered and not kept
			delete(fs.valid, n)
		}
	}
	fs.codeMu.Unlock()
	fs.nodes, fs.removed, fs.offered = keep, nil, nil
	if len(keep) == 0 {
		fs.asm = nil
		return nil
	}
	if err := fs.checkWayUp(); err != nil {
		return err
	}
	a, err := fs.Build(keep, fs.want)
	if err != nil {
		return err
	}
	if fs.client == nil {
		c, err := controller.Dial(controller.Options{Address: fs.opts.Address, DeviceID: fs.opts.DeviceID,
			Timeout: fs.opts.Timeout, OnDigest: fs.digest, OnPacket: fs.packetIn})
		if err != nil {
			return err
		}
		fs.client = c
	}
	out, err := a.Output()
	if err != nil {
		return err
	}
	// The way up is ready before the switch runs the program: a packet
	// it sends up at once is not lost.
	fs.asm, fs.out, fs.sent = a, out, packetsOf(fs.want)
	fs.storeDigests()
	fs.restartWayUp()
	fs.startWindows()
	if err := fs.push(a, out); err != nil {
		// Nothing stays installed: what the client wrote is deleted.
		fs.stopWayUp()
		if ws := fs.wins.Swap(nil); ws != nil {
			close(ws.wake)
			<-ws.done
		}
		fs.client.Close() // the stream's goroutine takes no fs.mu
		fs.client, fs.asm, fs.out, fs.sent = nil, nil, nil, nil
		fs.storeDigests()
		return err
	}
	return nil
}

// push sends the program to the switch with what it needs installed:
// its tables' entries, the digests turned on.
func (fs *Flowspace) push(a *Assembly, out *Output) error {
	// Saved, filled, then committed: the switch never runs the program
	// with its tables empty (a filter that rejects every packet).
	if err := fs.client.SavePipeline(out.P4Info, out.DeviceConfig); err != nil {
		return err
	}
	// A table's entries that are not part of the program (Const) are the
	// controller's to install (a filter's).
	for _, t := range a.Prog.Tables {
		if t.Const {
			continue
		}
		for _, e := range t.Entries {
			te, err := fs.client.TableEntry(out.Printed.Name(t), e, out.Printed.Name(e.Action))
			if err != nil {
				return err
			}
			if err := fs.client.Insert(te); err != nil {
				return err
			}
		}
	}
	for _, d := range a.Prog.Digests {
		e, err := fs.client.DigestConfig(d.Name)
		if err != nil {
			return err
		}
		if err := fs.client.Insert(e); err != nil {
			return err
		}
	}
	return fs.client.Commit()
}

// Activate implements flowspaces.Flowspace: it starts reading the
// functions' state from the switch (the way up runs from Connect on).
func (fs *Flowspace) Activate(ctx context.Context) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ctx, fs.cancel = context.WithCancel(ctx)
	fs.active = true
	fs.stopped = make(chan struct{})
	if fs.client != nil {
		fs.synced.Add(1)
		go fs.syncLoop(fs.ctx)
	}
	context.AfterFunc(fs.ctx, fs.Stop)
	return nil
}

// Wait implements flowspaces.Flowspace: a switch's ports are live: they
// end when the run is stopped.
func (fs *Flowspace) Wait() error {
	fs.mu.Lock()
	ctx, n := fs.ctx, len(fs.nodes)
	fs.mu.Unlock()
	if ctx == nil || n == 0 {
		return nil
	}
	<-ctx.Done()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.err
}

// Stop implements flowspaces.Flowspace: the way up stops (what it holds
// goes up first), the state is read a last time, and the bridge up is
// closed.
func (fs *Flowspace) Stop() {
	fs.mu.Lock()
	if !fs.active {
		stopped := fs.stopped
		fs.mu.Unlock()
		if stopped != nil {
			<-stopped
		}
		return
	}
	fs.active = false
	stopped := fs.stopped
	defer close(stopped)
	fs.cancel()
	fs.mu.Unlock()
	fs.synced.Wait()
	fs.stopWindows() // the last windows reported: their records go up
	fs.mu.Lock()
	fs.stopWayUp()
	fs.mu.Unlock()
	fs.sync()
}

// Close implements flowspaces.Flowspace: what the controller installed is
// removed, and the connection closed.
func (fs *Flowspace) Close() error {
	fs.Stop()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.stopWayUp() // never activated
	if ws := fs.wins.Swap(nil); ws != nil {
		close(ws.wake)
		<-ws.done
	}
	var err error
	if fs.client != nil {
		if e := fs.client.Close(); e != nil {
			err = fmt.Errorf("switch %s: %w", fs.Name(), e)
		}
		fs.client = nil
	}
	for _, n := range fs.nodes {
		if c, ok := n.Function.(functions.Closer); ok {
			err = errors.Join(err, c.Close())
		}
	}
	return err
}

// portSource is a capture of a front-panel port: its packets never come
// to this process as a source's would.
type portSource struct{ name string }

func (p portSource) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: p.name, LinkType: functions.LinkEthernet, MaxCapLen: 65535, Live: true}
}
func (p portSource) Fill(*buffers.Batch) error { return errors.New("a switch port is not read") }
func (p portSource) Close() error              { return nil }

// noState stands for a function without state that runs on the switch.
type noState struct{}

func (noState) Process(*buffers.Batch) {}

// stateOnly stands for a function that runs on the switch: its MBuf holds
// the state read from the switch's counters and registers.
type stateOnly struct{ m *buffers.MBuf }

func (s stateOnly) Process(*buffers.Batch) {}
func (s stateOnly) MBuf() *buffers.MBuf    { return s.m }

// summarized is a stateOnly whose class computes the state users see from
// its MBuf.
type summarized struct {
	stateOnly
	sum functions.Summarizer
	h   *handlers
}

func (s summarized) Summary() map[string]any { return s.sum.Summary() }

// Handlers implements functions.Handlers: the Go half's, on its state as
// the switch has it (Lock reads it first); reset zeroes the function's
// counters and registers on the switch as well.
func (s summarized) Handlers() []functions.Handler {
	if s.h.hs == nil {
		return nil
	}
	var out []functions.Handler
	for _, x := range s.h.hs.Handlers() {
		if x.Name == "reset" {
			call := x.Call
			x.Call = func(arg string) (any, error) {
				if err := s.h.fs.zero(s.h.node); err != nil {
					return nil, err
				}
				return call(arg)
			}
		}
		out = append(out, x)
	}
	return out
}

// handlers is what a function's handlers need.
type handlers struct {
	fs   *Flowspace
	node *flowspaces.Node
	hs   functions.Handlers // the Go half's, nil for none
}

// Lock implements flowspaces.Locker: a handler of a function on the
// switch sees its state as the switch has it now.
func (fs *Flowspace) Lock(n *flowspaces.Node) func() {
	fs.sync()
	return func() {}
}

// producing is a function whose records (digests) its Go half writes.
type producing struct {
	summarized
	pr functions.Producer
}

func (p producing) Records() uint64              { return p.pr.Records() }
func (p producing) SetEmit(func(*buffers.Batch)) {}
