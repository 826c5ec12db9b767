package kernel

// Attach: the programs go on their interfaces through BPF links (XDP in
// the driver or generic, TCX at tc ingress), or, on kernels without TCX,
// as a tc filter on a clsact qdisc. A new Connect replaces a program in
// place, so that the functions that stay lose nothing.

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/flowspaces"
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

// clsactFilter is a program attached as a direct-action tc filter on the
// ingress of a clsact qdisc: how kernels without TCX (before 6.6) run tc
// eBPF. Unlike a BPF link, a filter outlives the process that added it:
// Close removes it, but a crash leaves it until the next run on the
// interface replaces it (it has a fixed handle) or the interface goes.
type clsactFilter struct {
	filter *netlink.BpfFilter
}

// clsactHandle identifies ffpf's filter, so that a new run replaces one a
// crashed run left behind.
const clsactHandle = 0xff0f

func attachClsact(ifindex int, p *ebpf.Program) (*clsactFilter, error) {
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := netlink.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS,
		Handle: clsactHandle, Protocol: unix.ETH_P_ALL, Priority: 1}, Fd: p.FD(), Name: "ffpf", DirectAction: true}
	if err := netlink.FilterReplace(f); err != nil {
		return nil, err
	}
	return &clsactFilter{f}, nil
}

// Update replaces the program in place.
func (c *clsactFilter) Update(p *ebpf.Program) error {
	c.filter.Fd = p.FD()
	return netlink.FilterReplace(c.filter)
}

// Close removes the filter (the clsact qdisc stays: others may use it).
func (c *clsactFilter) Close() error { return netlink.FilterDel(c.filter) }
