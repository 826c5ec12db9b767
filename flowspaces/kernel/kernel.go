// Package kernel holds the eBPF flowspaces of the host: the kernel's
// traffic-control hook (kind kernel: TCX ingress, or a clsact filter on
// kernels without TCX; any interface) and one
// XDP flowspace per interface (kind xdp: in the driver, or generic). The
// functions placed in one are chained into one eBPF program per interface,
// generated at run time from the code each class gives (functions/ebpfgen)
// and loaded with cilium/ebpf; a source placed here is the hook itself.
// Counters and state live in a per-CPU map that a goroutine sums into the
// nodes' counters and MBufs every 100 ms; packets a flowspace above asks
// for go up through a BPF ring buffer, or, when the capture steals them,
// through AF_XDP sockets (ring.go). The verdict lets the packet on to the
// kernel stack, unless the capture says drop=true and the graph filtered
// it out (prog.go). The hierarchy includes these flowspaces only where the
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
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

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
	xsks     *ebpf.Map // AF_XDP sockets by receive queue (XDP)
	want     []*flowspaces.Node
	up       *inproc.Bridge
	sending  *inproc.Bridge         // up, while this flowspace sends through it
	attached map[string]*attachment // by interface
	modes    map[string]string      // how each interface was attached, kept after detach
	xsk      *xskSet                // AF_XDP sockets, once a capture steals (XDP)
	sockets  string                 // the AF_XDP sockets last used, for Attachments
	progName string                 // tests name their programs apart from a run's
	verified map[string]error       // Host's verifier checks, by class and parameters
	offered  []*flowspaces.Node     // nodes Host accepted, until the next Connect
	free     []slotRange            // counter slots of removed functions
	stopped  chan struct{}          // closed when Stop is done
	reader   *ringReader
	active   bool
	stopSync chan struct{}
	synced   sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

// node is a function placed here.
type node struct {
	*flowspaces.Node
	fn    ebpfgen.Function
	iface string        // a source's interface
	slot  int           // its first counter slot
	need  int           // how many slots it has
	mbuf  *buffers.MBuf // its state, summed from the counter map
	lost  uint64        // a source's: ring buffer overflows already counted
}

// attachment is the program of one interface and its link.
type attachment struct {
	prog *ebpf.Program
	link hook
	mode string // "native" or "generic" for XDP, "tcx" or "clsact" for the kernel
}

// hook is where a program is attached: a BPF link (XDP, TCX), or a tc
// filter on a clsact qdisc where the kernel has no TCX.
type hook interface {
	Update(*ebpf.Program) error
	Close() error
}

// New returns an eBPF flowspace.
func New(opts Options) (*Flowspace, error) {
	fs := &Flowspace{opts: opts}
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

// Host implements flowspaces.Flowspace: the function's class must have an
// eBPF implementation that accepts it, its inputs must run here (there is
// no bridge between two eBPF flowspaces), and a source must capture an
// interface whose packets enter here.
func (fs *Flowspace) Host(n *flowspaces.Node) error {
	c := n.Class
	if !c.Supports(fs.target) {
		return fmt.Errorf("class %s has no %s (eBPF) implementation", c.Name, fs.target)
	}
	if err := c.CanRun(fs.target, n.Ctx.Params); err != nil {
		return err
	}
	if c.IsSource() {
		if c.Interface == nil {
			return fmt.Errorf("%s captures only from interfaces", fs.Name())
		}
		if iface := c.Interface(n.Ctx.Params); fs.Entry(iface) == flowspaces.NoEntry {
			return fmt.Errorf("packets of %s do not enter at %s", iface, fs.Name())
		}
		return fs.room(n)
	}
	for _, in := range n.Inputs {
		if in.Flowspace != flowspaces.Flowspace(fs) {
			return fmt.Errorf("its input %s runs in %s, and packets cannot come into an eBPF program from another flowspace", in.ID, in.Flowspace.Name())
		}
	}
	if snap := sourceSnaplen(n); snap < 65535 {
		return fmt.Errorf("its packets are captured with a snap length of %d bytes, and an eBPF program sees all of a packet: libpcap's verdicts need the truncation", snap)
	}
	if err := fs.room(n); err != nil {
		return err
	}
	fn, err := c.EBPF(fs.target, &n.Ctx)
	if err != nil {
		return err
	}
	return fs.verify(n, fn)
}

// sourceSnaplen is the smallest snap length of the sources that feed n
// (a capture's snaplen parameter, or the run's).
func sourceSnaplen(n *flowspaces.Node) int {
	snap := n.Ctx.Snaplen
	if snap <= 0 {
		snap = 1 << 30
	}
	var reach flowspaces.Reach
	for _, s := range reach.Sources(n) {
		if sl := s.Ctx.Snaplen; sl > 0 {
			snap = min(snap, sl)
		}
		if sl := int(s.Ctx.Params.Int("snaplen")); sl > 0 {
			snap = min(snap, sl)
		}
	}
	return snap
}

// room refuses n when the programs are full: the functions instantiated
// here and those placed here since the last Connect (a request being
// populated) count.
func (fs *Flowspace) room(n *flowspaces.Node) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var kept []*flowspaces.Node
	for _, o := range fs.offered {
		if o != n && o.Flowspace == flowspaces.Flowspace(fs) && o.Source == nil && o.Function == nil {
			kept = append(kept, o) // placed here, not yet instantiated
		}
	}
	if len(fs.nodes)+len(kept)+1 > maxNodes && n.Source == nil && n.Function == nil {
		return fmt.Errorf("%s already runs %d functions, as many as one eBPF program holds", fs.Name(), maxNodes)
	}
	fs.offered = append(kept, n)
	return nil
}

// verify loads a program with fn alone, so that code the kernel's verifier
// refuses keeps the function out of this flowspace at placement, with the
// verifier's reason, rather than failing the run later. Results are kept
// per class and parameters.
func (fs *Flowspace) verify(n *flowspaces.Node, fn ebpfgen.Function) error {
	key := n.Class.Name + "\x00" + n.Ctx.Params.Canonical()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err, ok := fs.verified[key]; ok {
		return err
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(8 + fn.StateSlots())})
	if err != nil {
		return fmt.Errorf("%s cannot create maps: %w", fs.Name(), err)
	}
	defer m.Close()
	p := &progSpec{kind: fs.opts.Kind, iface: "probe", counters: m, snap: bridgeSnap, progName: "ffpf_verify",
		nodes: []progNode{{node: n, iface: "probe", slot: 0}, {node: n, fn: fn, inputs: []int{0}, slot: 2}}}
	prog, err := p.load(fs.Name())
	if err == nil {
		prog.Close()
	} else {
		err = fmt.Errorf("the kernel's verifier refuses its code: %w", err)
	}
	if fs.verified == nil {
		fs.verified = map[string]error{}
	}
	fs.verified[key] = err
	return err
}

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
		// A hook's state: what its verdicts took from the kernel stack.
		k.mbuf = buffers.NewMBuf(16, buffers.Native,
			buffers.Field{Name: "stolen", Type: buffers.U64, Offset: 0},
			buffers.Field{Name: "discarded", Type: buffers.U64, Offset: 8})
		n.Source = hookSource{fs.Name(), k.iface, k.mbuf}
		k.need = 2 + hookStateSlots
	} else {
		fn, err := n.Class.EBPF(fs.target, &n.Ctx)
		if err != nil {
			return err
		}
		// The Go function gives the state's layout (its MBuf); it never
		// sees a packet.
		gofn, err := n.Class.New(&n.Ctx)
		if err != nil {
			return err
		}
		k.fn = fn
		n.Function = noState{}
		if st, ok := gofn.(functions.Stateful); ok {
			k.mbuf = st.MBuf()
			n.Function = stateOnly{k.mbuf}
		}
		k.need = 2 + fn.StateSlots()
	}
	slot, err := fs.allocSlots(k.need)
	if err != nil {
		n.Source, n.Function = nil, nil
		return fmt.Errorf("%s: %s", n.ID, err)
	}
	k.slot = slot
	fs.nodes = append(fs.nodes, k)
	return nil
}

// allocSlots hands out need consecutive counter slots, reusing those of
// removed functions (zeroed first); fs.mu is held.
func (fs *Flowspace) allocSlots(need int) (int, error) {
	for i, r := range fs.free {
		if r.need < need {
			continue
		}
		zero := make([]uint64, ebpf.MustPossibleCPU())
		for s := r.slot; s < r.slot+need; s++ {
			if err := fs.counters.Update(uint32(s), zero, ebpf.UpdateAny); err != nil {
				return 0, fmt.Errorf("cannot reset counter slot %d: %w", s, err)
			}
		}
		if r.need == need {
			fs.free = append(fs.free[:i], fs.free[i+1:]...)
		} else {
			fs.free[i] = slotRange{r.slot + need, r.need - need}
		}
		return r.slot, nil
	}
	if fs.slots+need > counterSlots {
		return 0, fmt.Errorf("%s has no counter slots left", fs.Name())
	}
	fs.slots += need
	return fs.slots - need, nil
}

// slotRange is a run of free counter slots.
type slotRange struct{ slot, need int }

// counterSlots is the size of the counter map.
const counterSlots = 4096

// maps creates the counter map and the ring buffer once; fs.mu is held.
func (fs *Flowspace) maps() error {
	if fs.counters != nil {
		return nil
	}
	var err error
	fs.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_counters", Type: ebpf.PerCPUArray,
		KeySize: 4, ValueSize: 8, MaxEntries: counterSlots})
	if err != nil {
		return fmt.Errorf("%s: cannot create its counter map: %w", fs.Name(), err)
	}
	fs.ring, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_ring", Type: ebpf.RingBuf, MaxEntries: ringBytes})
	if err != nil {
		fs.counters.Close()
		fs.counters = nil
		return fmt.Errorf("%s: cannot create its ring buffer: %w", fs.Name(), err)
	}
	if fs.opts.Kind == flowspaces.KindXDP {
		fs.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: maxQueues})
		if err != nil {
			fs.ring.Close()
			fs.counters.Close()
			fs.ring, fs.counters = nil, nil
			return fmt.Errorf("%s: cannot create its AF_XDP socket map: %w", fs.Name(), err)
		}
	}
	return nil
}

// ringBytes is the ring buffer's size: about 4000 records of a full frame.
const ringBytes = 8 << 20

// Remove implements flowspaces.Flowspace.
func (fs *Flowspace) Remove(n *flowspaces.Node) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.removed = append(fs.removed, n)
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
		spec, err := fs.spec(keep, iface, port)
		if err != nil {
			release()
			return err
		}
		p, err := spec.load(fs.Name())
		if err != nil {
			release()
			return err
		}
		progs[iface] = p
	}
	if fs.active {
		if err := fs.openXSK(keep); err != nil {
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
		}
	}
	fs.nodes, fs.removed, fs.offered = keep, nil, nil
	fs.restartReader(keep)
	return nil
}

// ifaces returns the interfaces the sources here capture, sorted.
func ifaces(nodes []*node) []string {
	var out []string
	for _, k := range nodes {
		if k.iface != "" && !slices.Contains(out, k.iface) {
			out = append(out, k.iface)
		}
	}
	slices.Sort(out)
	return out
}

// spec describes the program for iface.
func (fs *Flowspace) spec(nodes []*node, iface string, port int) (*progSpec, error) {
	p := &progSpec{kind: fs.opts.Kind, iface: iface, port: port, counters: fs.counters, ring: fs.ring,
		snap: bridgeSnap, progName: fs.progName}
	idx := map[*flowspaces.Node]int{}
	for i, k := range nodes {
		idx[k.Node] = i
		pn := progNode{node: k.Node, fn: k.fn, iface: k.iface, slot: k.slot}
		for _, in := range k.Inputs {
			j, ok := idx[in]
			if !ok {
				return nil, fmt.Errorf("%s: its input %s is not in %s", k.ID, in.ID, fs.Name())
			}
			pn.inputs = append(pn.inputs, j)
		}
		if k.iface != "" && k.Ctx.Params.Int("snaplen") > 0 {
			p.snap = min(p.snap, int(k.Ctx.Params.Int("snaplen")))
		}
		p.nodes = append(p.nodes, pn)
	}
	for _, w := range fs.want {
		if i, ok := idx[w]; ok {
			p.exports = append(p.exports, i)
		}
	}
	if len(p.exports) > 64 {
		return nil, fmt.Errorf("%s: more than 64 functions send packets up", fs.Name())
	}
	if steals(nodes) && fs.opts.Kind == flowspaces.KindXDP {
		p.xsk = fs.xsks
	}
	p.verdicts(nodes)
	return p, nil
}

// verdicts decides whether the program drops the packets the graph filters
// out: only when every capture on its interface asks for it (an overlay
// that observes keeps them all). A packet is kept when it passed a
// function that feeds none here (an end of the graph, or an export).
func (p *progSpec) verdicts(nodes []*node) {
	feeds := make([]bool, len(p.nodes))
	for _, pn := range p.nodes {
		for _, j := range pn.inputs {
			feeds[j] = true
		}
	}
	var reach flowspaces.Reach
	p.drop = true
	for i, k := range nodes {
		if k.iface == p.iface {
			h := hookSlots{slot: k.slot}
			for b, e := range p.exports {
				if reach.Reaches(k.Node, p.nodes[e].node) {
					h.mask |= 1 << b
				}
			}
			p.hooks = append(p.hooks, h)
			p.drop = p.drop && k.Ctx.Params.Bool("drop")
		}
		if !feeds[i] || slices.Contains(p.exports, i) {
			p.keep = append(p.keep, i)
		}
	}
	p.drop = p.drop && len(p.hooks) > 0
}

// steals reports whether a capture placed here asks for its packets to go
// up through AF_XDP, leaving the kernel stack (dev's steal parameter).
func steals(nodes []*node) bool {
	for _, k := range nodes {
		if k.iface != "" && k.Ctx.Params.Bool("steal") {
			return true
		}
	}
	return false
}

// openXSK opens the AF_XDP sockets when a capture here steals and they are
// not open yet; fs.mu is held.
func (fs *Flowspace) openXSK(nodes []*node) error {
	if fs.xsk != nil || fs.xsks == nil || !steals(nodes) || fs.opts.Kind != flowspaces.KindXDP {
		return nil
	}
	inPlace := false
	if s := flowspaces.StubOf(fs); s != nil && s.Strategy == flowspaces.ZeroCopy {
		inPlace = true
	}
	x, err := openXSK(fs.opts.Interface, fs.xsks, inPlace)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	fs.xsk, fs.sockets = x, x.describe()
	return nil
}

// lostXSK counts, as the bridge's dropped, the packets of each capture's
// stream that its program redirected to an AF_XDP socket (stolen) but
// that never came up, less what the sockets' statistics already counted
// (once per frame); the readers have stopped and the counters are final.
func (fs *Flowspace) lostXSK() {
	x := fs.xsk
	if x == nil || fs.sending == nil {
		return
	}
	var lost uint64
	for _, k := range fs.nodes {
		if k.iface == "" || k.mbuf == nil {
			continue
		}
		stolen, got := k.mbuf.Load64(0), x.counter(k.Node).Load()
		lost += stolen - min(stolen, got)
	}
	if live := x.live.Load(); lost > live {
		fs.sending.Lose(int(lost - live))
		x.live.Store(lost)
	}
}

// maxQueues bounds the receive queues of an interface AF_XDP sockets serve.
const maxQueues = 64

// bridgeSnap is the most bytes of a packet the ring buffer carries up: a
// full Ethernet frame with VLAN tags. Longer packets arrive truncated, their
// wire length intact, as with a capture's snap length.
const bridgeSnap = 1536

// attach puts the programs on their interfaces, replacing the programs of
// an earlier Connect in place; fs.mu is held.
func (fs *Flowspace) attach(progs map[string]*ebpf.Program) error {
	if fs.attached == nil {
		fs.attached = map[string]*attachment{}
	}
	for iface, p := range progs {
		if a := fs.attached[iface]; a != nil {
			if err := a.link.Update(p); err != nil {
				return fmt.Errorf("%s: cannot replace the program on %s: %w", fs.Name(), iface, err)
			}
			a.prog.Close()
			a.prog = p
			continue
		}
		a, err := fs.attachNew(iface, p)
		if err != nil {
			return err
		}
		fs.attached[iface] = a
		if fs.modes == nil {
			fs.modes = map[string]string{}
		}
		fs.modes[iface] = a.mode
	}
	for iface, a := range fs.attached {
		if progs[iface] == nil { // nothing captures there any more
			a.link.Close()
			a.prog.Close()
			delete(fs.attached, iface)
		}
	}
	return nil
}

// swap keeps the programs for Activate to attach; fs.mu is held.
func (fs *Flowspace) swap(progs map[string]*ebpf.Program) {
	if fs.attached == nil {
		fs.attached = map[string]*attachment{}
	}
	for iface, a := range fs.attached {
		if a.link == nil {
			a.prog.Close()
			delete(fs.attached, iface)
		}
	}
	for iface, p := range progs {
		fs.attached[iface] = &attachment{prog: p}
	}
}

// attachNew links p to iface: XDP in the driver if it can, else generic;
// tc through TCX.
func (fs *Flowspace) attachNew(iface string, p *ebpf.Program) (*attachment, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("cannot capture on %s: %v", iface, err)
	}
	if fs.opts.Kind == flowspaces.KindXDP {
		l, err := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPDriverMode})
		if err == nil {
			return &attachment{prog: p, link: l, mode: "native"}, nil
		}
		l, err2 := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPGenericMode})
		if err2 != nil {
			return nil, fmt.Errorf("cannot attach XDP to %s: native: %v; generic: %v", iface, err, err2)
		}
		return &attachment{prog: p, link: l, mode: "generic"}, nil
	}
	if os.Getenv("FFPF_NO_TCX") == "" {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: p, Attach: ebpf.AttachTCXIngress})
		if err == nil {
			return &attachment{prog: p, link: l, mode: "tcx"}, nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("cannot attach to the tc ingress hook of %s: %w", iface, err)
		}
	}
	// Kernels before 6.6 have no TCX: a tc filter on a clsact qdisc.
	h, err := attachClsact(ifc.Index, p)
	if err != nil {
		return nil, fmt.Errorf("cannot attach to the tc ingress hook of %s: %w", iface, err)
	}
	return &attachment{prog: p, link: h, mode: "clsact"}, nil
}

// Attachments says where the flowspace's programs are (or were) attached
// and how: "fb: XDP in the driver (native)", "fb: XDP generic (the driver
// has no XDP support)", "fb: tc ingress (TCX)".
func (fs *Flowspace) Attachments() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for _, iface := range slices.Sorted(maps.Keys(fs.modes)) {
		switch fs.modes[iface] {
		case "native":
			out = append(out, iface+": XDP in the driver (native)")
		case "generic":
			out = append(out, iface+": XDP generic (the driver runs no XDP of its own)")
		case "clsact":
			out = append(out, iface+": tc ingress (a clsact filter: the kernel has no TCX)")
		default:
			out = append(out, iface+": tc ingress (TCX)")
		}
	}
	if fs.sockets != "" {
		out = append(out, fs.sockets)
	}
	return out
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
	// The end of the run detaches the programs and closes the bridge up,
	// which the flowspace above waits for.
	context.AfterFunc(fs.ctx, fs.Stop)
	return nil
}

func (fs *Flowspace) syncLoop() {
	defer fs.synced.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			fs.sync()
		case <-fs.stopSync:
			fs.sync()
			return
		}
	}
}

// sync sums the per-CPU counters into the nodes' counters and MBufs.
func (fs *Flowspace) sync() {
	fs.mu.Lock()
	nodes, m := append([]*node(nil), fs.nodes...), fs.counters
	fs.mu.Unlock()
	if m == nil {
		return
	}
	failed := false
	sum := func(slot int) uint64 {
		var per []uint64
		if err := m.Lookup(uint32(slot), &per); err != nil {
			failed = true
			return 0
		}
		var s uint64
		for _, v := range per {
			s += v
		}
		return s
	}
	for _, k := range nodes {
		if k.iface == "" {
			continue
		}
		// Packets of its stream the ring buffer had no room for entered
		// the bridge and were dropped there.
		if l := sum(k.slot + slotLost); !failed && l > k.lost {
			fs.mu.Lock()
			if fs.sending != nil {
				fs.sending.Lose(int(l - k.lost))
			}
			fs.mu.Unlock()
			k.lost = l
		}
	}
	for _, k := range nodes {
		// Read out before in: a packet counted in but not yet out is
		// filtered for a moment, never the reverse.
		out := sum(k.slot + 1)
		in := sum(k.slot)
		var state []uint64
		if k.mbuf != nil {
			for i := range min(len(k.mbuf.Fields()), k.need-2) {
				state = append(state, sum(k.slot+2+i))
			}
		}
		if failed {
			return // a map that cannot be read (closed) must not zero what was read before
		}
		k.Counters.Out.Store(out)
		k.Counters.Filtered.Store(in - min(in, out))
		k.Counters.In.Store(in)
		for i, v := range state {
			k.mbuf.Store64(k.mbuf.Fields()[i].Offset, v)
		}
	}
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
	return nil
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
		r.stop()
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
	if fs.up != nil {
		fs.up = nil
	}
	if fs.ring != nil {
		fs.ring.Close()
		fs.counters.Close()
		fs.ring, fs.counters = nil, nil
	}
	if fs.xsk != nil {
		// The flowspace above has stopped: the frames it referred to are
		// released, or will be in a moment.
		fs.xsk.close(5 * time.Second)
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
	return functions.SourceInfo{Name: h.iface + " (" + h.fs + ")", LinkType: functions.LinkEthernet, MaxCapLen: bridgeSnap}
}
func (h hookSource) Fill(*buffers.Batch) error { return errors.New("an eBPF hook is not read") }
func (h hookSource) Close() error              { return nil }

// stateOnly stands for a function that runs in eBPF: its MBuf holds the
// state summed from the counter map.
type stateOnly struct{ m *buffers.MBuf }

func (s stateOnly) Process(*buffers.Batch) {}
func (s stateOnly) MBuf() *buffers.MBuf    { return s.m }

// noState stands for a function without state that runs in eBPF.
type noState struct{}

func (noState) Process(*buffers.Batch) {}
