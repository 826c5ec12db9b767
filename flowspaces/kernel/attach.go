package kernel

// Attach: the programs go on their interfaces through BPF links (XDP in
// the driver or generic, TCX at tc ingress and egress), or, on kernels
// without TCX, as tc filters on a clsact qdisc. A new Connect replaces a
// program in place, so that the functions that stay lose nothing.
//
// A capture sees both directions unless it says otherwise (tcpdump's
// default): received packets at the ingress hook, sent ones at tc egress,
// which an XDP flowspace uses too (XDP has no egress). Several captures
// share an interface as tcpdump's do: TCX and clsact hold several
// programs per hook, each passing packets on to the next; the XDP hook
// holds one, so a capture finds it taken by another program (another
// ffpf run, or any other tool) at placement and runs at the next
// placement, which the run's attachments say (Host, xdpTaken). Instantiate
// takes the XDP hook at once, with a placeholder that passes every packet
// (reserve), and Activate puts the program in its place: a run that finds
// the hook taken since placement (two captures started together) is
// placed again, at tc.

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

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

// Hooks are named in fs.attached, fs.modes and the programs Connect loads
// by their interface (its ingress: XDP or tc) or by the interface and
// egressSuffix (its tc egress). An interface name holds no "/".
const egressSuffix = "/egress"

// hookKey names a hook of iface.
func hookKey(iface string, egress bool) string {
	if egress {
		return iface + egressSuffix
	}
	return iface
}

// splitHook is the interface and direction of a hook's key.
func splitHook(key string) (iface string, egress bool) {
	if iface, ok := strings.CutSuffix(key, egressSuffix); ok {
		return iface, true
	}
	return key, false
}

// directions says which packets a source captures: received ones (in),
// sent ones (out), or both, the default (the dev class's direction
// parameter, which its capture description carries).
func directions(n *flowspaces.Node) (in, out bool) {
	d := functions.DirectionInOut
	if len(n.Ctx.Captures) == 1 && n.Ctx.Captures[0].Direction != "" {
		d = n.Ctx.Captures[0].Direction
	}
	return d != functions.DirectionOut, d != functions.DirectionIn
}

// load generates and loads the programs of iface into progs: one at its
// ingress when a source there captures received packets, one at its tc
// egress when one captures sent packets; fs.mu is held.
func (fs *Flowspace) load(nodes []*node, iface string, port int, progs map[string]*ebpf.Program) error {
	var in, out bool
	for _, k := range nodes {
		if k.iface == iface {
			i, o := directions(k.Node)
			in, out = in || i, out || o
		}
	}
	for _, egress := range []bool{false, true} {
		if (!egress && !in) || (egress && !out) {
			continue
		}
		spec, err := fs.spec(nodes, iface, port, egress)
		if err != nil {
			return err
		}
		if egress && sendsUp(nodes, iface, spec) && steals(nodes) && fs.opts.Kind == flowspaces.KindXDP {
			// The reader of a capture that steals reads the AF_XDP
			// sockets, not the ring buffer tc egress would fill.
			return fmt.Errorf("%s: sent packets of %s cannot go up beside the received ones a capture steals through AF_XDP: capture direction=in beside steal=true", fs.Name(), iface)
		}
		p, err := spec.load(fs.Name())
		if err != nil {
			return err
		}
		progs[hookKey(iface, egress)] = p
	}
	return nil
}

// sendsUp reports whether the program p sends packets up: a capture of
// sent packets on iface reaches a function it exports.
func sendsUp(nodes []*node, iface string, p *progSpec) bool {
	var reach flowspaces.Reach
	for _, k := range nodes {
		if _, out := directions(k.Node); k.iface != iface || !out {
			continue
		}
		for _, e := range p.exports {
			if reach.Reaches(k.Node, p.nodes[e].node) {
				return true
			}
		}
	}
	return false
}

// attach puts the programs on their hooks, replacing the programs of an
// earlier Connect in place; fs.mu is held.
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

// attachNew links p to the hook key names: XDP in the driver if it can,
// else generic; tc through TCX (after the programs already there), else a
// clsact filter.
func (fs *Flowspace) attachNew(key string, p *ebpf.Program) (*attachment, error) {
	iface, egress := splitHook(key)
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("cannot capture on %s: %v", iface, err)
	}
	if fs.opts.Kind == flowspaces.KindXDP && !egress {
		if r := fs.reserved[iface]; r != nil {
			// The hook is ours since Instantiate: the program takes the
			// placeholder's place.
			if err := r.link.Update(p); err != nil {
				return nil, fmt.Errorf("cannot attach XDP to %s: %w", iface, err)
			}
			r.prog.Close()
			delete(fs.reserved, iface)
			return &attachment{prog: p, link: r.link, mode: r.mode}, nil
		}
		return attachXDP(ifc, p)
	}
	where, at := "ingress", ebpf.AttachTCXIngress
	if egress {
		where, at = "egress", ebpf.AttachTCXEgress
	}
	if os.Getenv("FFPF_NO_TCX") == "" {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: p, Attach: at, Anchor: link.Tail()})
		if err == nil {
			return &attachment{prog: p, link: l, mode: "tcx"}, nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("cannot attach to the tc %s hook of %s: %w", where, iface, err)
		}
	}
	// Kernels before 6.6 have no TCX: a tc filter on a clsact qdisc.
	h, err := attachClsact(ifc.Index, p, egress)
	if err != nil {
		return nil, fmt.Errorf("cannot attach to the tc %s hook of %s: %w", where, iface, err)
	}
	return &attachment{prog: p, link: h, mode: "clsact"}, nil
}

// attachXDP links p to the XDP hook of ifc: in the driver if it can, else
// generic. An error wraps flowspaces.ErrPlaceAgain when another program
// holds the hook.
func attachXDP(ifc *net.Interface, p *ebpf.Program) (*attachment, error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPDriverMode})
	if err == nil {
		return &attachment{prog: p, link: l, mode: "native"}, nil
	}
	l, err2 := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPGenericMode})
	if err2 != nil {
		if id, taken := xdpTaken(ifc.Name); taken {
			return nil, fmt.Errorf("the XDP hook of %s is taken by program %d (another capture, or another tool) since this run was placed: %w", ifc.Name, id, flowspaces.ErrPlaceAgain)
		}
		return nil, fmt.Errorf("cannot attach XDP to %s: native: %v; generic: %v", ifc.Name, err, err2)
	}
	return &attachment{prog: p, link: l, mode: "generic"}, nil
}

// reserve takes the XDP hook of the interface source n captures received
// packets of, with a placeholder that passes every packet, until Activate
// puts the program there (attachNew): nothing can take the hook between
// this run's placement and its start but before this call, which then
// fails with flowspaces.ErrPlaceAgain. fs.mu is held.
func (fs *Flowspace) reserve(n *flowspaces.Node) error {
	iface, needs := fs.needsXDP(n)
	if !needs || fs.ownsXDP(iface) {
		return nil
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("cannot capture on %s: %v", iface, err)
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: HoldName, Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()}})
	if err != nil {
		return fmt.Errorf("%s: cannot load the program that holds the XDP hook of %s: %w", fs.Name(), iface, err)
	}
	a, err := attachXDP(ifc, p)
	if err != nil {
		p.Close()
		return err
	}
	if fs.reserved == nil {
		fs.reserved = map[string]*attachment{}
	}
	fs.reserved[iface] = a
	return nil
}

// HoldName is the kernel's name for the placeholder that holds an XDP
// hook from Instantiate to Activate (reserve).
const HoldName = "ffpf_hold"

// release gives up the XDP hooks held for interfaces no capture in nodes
// needs any more (all of them with nodes nil); fs.mu is held.
func (fs *Flowspace) release(nodes []*node) {
	for iface, r := range fs.reserved {
		if slices.ContainsFunc(nodes, func(k *node) bool { return k.iface == iface }) {
			continue
		}
		r.link.Close()
		r.prog.Close()
		delete(fs.reserved, iface)
	}
}

// needsXDP returns the interface whose XDP hook source n needs, if it
// needs one: it runs in an XDP flowspace and captures received packets
// (sent ones are captured at tc egress).
func (fs *Flowspace) needsXDP(n *flowspaces.Node) (iface string, needs bool) {
	if in, _ := directions(n); fs.opts.Kind != flowspaces.KindXDP || !in {
		return "", false
	}
	return n.Class.Interface(n.Ctx.Params), true
}

// ownsXDP reports whether the XDP hook of iface is this flowspace's: its
// program is attached there, or a placeholder holds it; fs.mu is held.
func (fs *Flowspace) ownsXDP(iface string) bool {
	a := fs.attached[iface]
	return a != nil && a.link != nil || fs.reserved[iface] != nil
}

// hookFree refuses a source that needs the XDP hook of its interface
// when another program holds it (another ffpf run, or any other tool):
// XDP holds one program per interface, so the capture goes to the next
// placement (tc, where programs share the hook), and Attachments says why.
func (fs *Flowspace) hookFree(n *flowspaces.Node) error {
	iface, needs := fs.needsXDP(n)
	if !needs {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.ownsXDP(iface) {
		return nil
	}
	id, taken := xdpTaken(iface)
	if !taken {
		return nil
	}
	fs.taken = fmt.Sprintf("%s: nothing (its XDP hook is taken by program %d, another capture or another tool: the capture runs at the next placement)", iface, id)
	return fmt.Errorf("the XDP hook of %s is taken by program %d (another capture, or another tool), and XDP holds one program per interface: %w", iface, id, flowspaces.ErrPlaceAgain)
}

// xdpTaken reports whether a program is attached to the XDP hook of iface,
// and its id.
func xdpTaken(iface string) (id uint32, taken bool) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return 0, false
	}
	if x := l.Attrs().Xdp; x != nil && (x.Attached || x.ProgId != 0) {
		return x.ProgId, true
	}
	return 0, false
}

// Attachments says where the flowspace's programs are (or were) attached
// and how: "fb: XDP in the driver (native)", "fb: XDP generic (the driver
// has no XDP support)", "fb: tc ingress (TCX)", "fb: tc egress (TCX)";
// and, for an XDP flowspace whose hook another program held, that the
// capture went elsewhere.
func (fs *Flowspace) Attachments() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for _, key := range slices.Sorted(maps.Keys(fs.modes)) {
		iface, egress := splitHook(key)
		where := "tc ingress"
		if egress {
			where = "tc egress"
		}
		switch fs.modes[key] {
		case "native":
			out = append(out, iface+": XDP in the driver (native)")
		case "generic":
			out = append(out, iface+": XDP generic (the driver runs no XDP of its own)")
		case "clsact":
			out = append(out, iface+": "+where+" (a clsact filter: the kernel has no TCX)")
		default:
			out = append(out, iface+": "+where+" (TCX)")
		}
	}
	if fs.taken != "" {
		out = append(out, fs.taken)
	}
	if fs.sockets != "" {
		out = append(out, fs.sockets)
	}
	if fs.ringsUp != "" {
		out = append(out, fs.ringsUp)
	}
	return out
}

// clsactFilter is a program attached as a direct-action tc filter on the
// ingress or egress of a clsact qdisc: how kernels without TCX (before
// 6.6) run tc eBPF. Each filter has a handle of its own, so that several
// runs share the hook (the program's TC_ACT_UNSPEC passes the packet on to
// the next filter). Unlike a BPF link, a filter outlives the process that
// added it: Close removes it, but a crash leaves it until the next run on
// the hook finds that the process named in the filter's name is gone.
type clsactFilter struct {
	filter *netlink.BpfFilter
	qdisc  qdiscKey
}

// qdiscKey is an interface in a network namespace.
type qdiscKey struct {
	netns   uint64 // the namespace's inode
	ifindex int
}

var (
	clsactMu sync.Mutex
	// ownQdiscs are the clsact qdiscs this process added: the last of its
	// filters to go removes one when no filter is left on it (a qdisc
	// that was there before, or that others' filters use, stays).
	ownQdiscs   = map[qdiscKey]bool{}
	clsactFresh uint32 // the handle of the next filter
)

// clsactName names ffpf's filters: the process's pid namespace and pid.
func clsactName() string { return fmt.Sprintf("ffpf:%d:%d", nsInode("pid"), os.Getpid()) }

// nsInode is the inode of the calling thread's namespace of kind ("net",
// "pid"), 0 if it cannot be read.
func nsInode(kind string) uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/"+kind, &st) != nil {
		return 0
	}
	return st.Ino
}

func clsactQdisc(ifindex int) *netlink.GenericQdisc {
	return &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
}

func attachClsact(ifindex int, p *ebpf.Program, egress bool) (*clsactFilter, error) {
	clsactMu.Lock()
	defer clsactMu.Unlock()
	key := qdiscKey{nsInode("net"), ifindex}
	if err := netlink.QdiscAdd(clsactQdisc(ifindex)); err == nil {
		ownQdiscs[key] = true
		recordQdisc(key)
	} else if !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if egress {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	removeStale(ifindex, parent)
	c := &clsactFilter{qdisc: key}
	for range 256 {
		// A handle of this process's own, unless another run took it.
		clsactFresh++
		h := uint32(os.Getpid())<<8 | clsactFresh&0xff
		f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent,
			Handle: h, Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: p.FD(), Name: clsactName(), DirectAction: true}
		err := netlink.FilterAdd(f)
		if err == nil {
			c.filter = f
			return c, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			c.release()
			return nil, err
		}
	}
	c.release()
	return nil, errors.New("no free filter handle")
}

// removeStale removes the filters of ffpf runs that ended without removing
// theirs (a crash): those named after a process of this pid namespace
// that is gone. It returns the names of those it removed.
func removeStale(ifindex int, parent uint32) (removed []string) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return nil
	}
	fs, err := netlink.FilterList(l, parent)
	if err != nil {
		return nil
	}
	ns := nsInode("pid")
	for _, f := range fs {
		b, ok := f.(*netlink.BpfFilter)
		if !ok {
			continue
		}
		var fns uint64
		var pid int
		if n, _ := fmt.Sscanf(b.Name, "ffpf:%d:%d", &fns, &pid); n != 2 || fns != ns || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH && netlink.FilterDel(b) == nil {
			removed = append(removed, b.Name)
		}
	}
	return removed
}

// Update replaces the program in place.
func (c *clsactFilter) Update(p *ebpf.Program) error {
	c.filter.Fd = p.FD()
	return netlink.FilterReplace(c.filter)
}

// Close removes the filter, and the clsact qdisc if this process added it
// and no filter is left on it.
func (c *clsactFilter) Close() error {
	clsactMu.Lock()
	defer clsactMu.Unlock()
	err := netlink.FilterDel(c.filter)
	c.release()
	return err
}

// release removes the qdisc of c's interface when this process added it
// and nothing uses it any more; clsactMu is held.
func (c *clsactFilter) release() {
	if !ownQdiscs[c.qdisc] {
		return
	}
	l, err := netlink.LinkByIndex(c.qdisc.ifindex)
	if err != nil {
		delete(ownQdiscs, c.qdisc) // the interface is gone, and its qdiscs with it
		return
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		if fs, err := netlink.FilterList(l, parent); err != nil || len(fs) > 0 {
			return // in use (or unknown: keep it)
		}
	}
	if netlink.QdiscDel(clsactQdisc(c.qdisc.ifindex)) == nil {
		delete(ownQdiscs, c.qdisc)
	}
}
