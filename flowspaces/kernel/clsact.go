package kernel

import (
	"errors"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

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
