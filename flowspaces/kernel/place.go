package kernel

// Placement: whether a function can run here, asked once per function
// before anything is instantiated. The verifier is asked too, by loading
// the function's code alone, so that a refusal is a placement reason and
// not a failed run.

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

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
		if n.Budget != nil {
			return fmt.Errorf("its request has a packet limit of its own, which %s does not count yet", fs.Name())
		}
		if err := fs.hookFree(n); err != nil {
			return err
		}
		if err := fs.oneCapture(n); err != nil {
			return err
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
	if err := fs.verify(n, fn); err != nil {
		return err
	}
	size, err := mapBytes(fs.target, n, fn)
	if err != nil {
		return err
	}
	return fs.state.Admit(fs, n, size)
}

// StateLimit is the bound on the memory of the state maps of the
// functions placed here together, in bytes (≤ 0: none), and how much of
// it they take.
func (fs *Flowspace) StateLimit() (limit, used int64) { return fs.state.Limit, fs.state.Used(fs) }

// mapBytes is the memory of the state maps fn keeps: 8 bytes per value,
// on every possible CPU for a per-CPU map (what the kernel allocates), and
// twice over with window= (a copy per epoch parity, window.go); and a
// Drained function's two flow maps.
func mapBytes(t functions.Target, n *flowspaces.Node, fn ebpfgen.Function) (int64, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return 0, err
	}
	var flows int64
	if d, ok := fn.(ebpfgen.Drained); ok {
		// Two flow maps (one per epoch parity), each entry a key and a
		// value per CPU.
		fm := d.FlowMap()
		v := int64(fm.ValueSize)
		if fm.PerCPU {
			v *= int64(cpus)
		}
		flows = 2 * int64(fm.Entries) * (int64(fm.KeySize) + v)
	}
	mf, ok := fn.(ebpfgen.Mapped)
	if !ok {
		return flows, nil
	}
	fields, _, err := n.Class.State.Layout(t, n.Ctx.Params)
	if err != nil {
		return 0, err
	}
	var size int64
	for _, m := range mf.MapFields() {
		for _, f := range fields {
			if f.Name != m.Name {
				continue
			}
			b := int64(max(f.Count, 1)) * 8
			if !m.Shared && mergeOf(n.Class, m.Name) != functions.MergeShared {
				b *= int64(cpus)
			}
			size += b
		}
	}
	if windowed(n) {
		size *= 2
	}
	return size + flows, nil
}

// mergeOf is the merge the class declares for state field name.
func mergeOf(c *functions.Class, name string) functions.Merge {
	if c.State != nil {
		for _, d := range c.State.Fields {
			if d.Name == name {
				return d.Merge
			}
		}
	}
	return 0
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

// oneCapture refuses a second capture of an interface when the run's
// packet limit counts packets at the ends of the graph (-c): a program
// takes one unit of the limit per packet, and the capture's stream is the
// one that holds it on the way up. The capture goes to the next placement.
func (fs *Flowspace) oneCapture(n *flowspaces.Node) error {
	if !fs.budget.AtEnds() {
		return nil
	}
	iface := n.Class.Interface(n.Ctx.Params)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, k := range fs.nodes {
		if k.Node != n && k.iface == iface && !slices.Contains(fs.removed, k.Node) {
			return fmt.Errorf("%s captures %s already, and with -c a program counts one capture of an interface", k.ID, iface)
		}
	}
	for _, o := range fs.offered {
		if o != n && o.Flowspace == flowspaces.Flowspace(fs) && o.Class.IsSource() && o.Class.Interface(o.Ctx.Params) == iface {
			return fmt.Errorf("%s captures %s already, and with -c a program counts one capture of an interface", o.ID, iface)
		}
	}
	return nil
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
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(8 + 2*fn.StateSlots())})
	if err != nil {
		return fmt.Errorf("%s cannot create maps: %w", fs.Name(), err)
	}
	defer m.Close()
	fields, _, err := n.Class.State.Layout(fs.target, n.Ctx.Params)
	if err != nil {
		return err
	}
	win, err := windowOf(n, fn)
	if err != nil {
		return err
	}
	defer win.close()
	maps, err := newStateMaps(n.Class, fields, fn, win.halves())
	if err != nil {
		return err
	}
	defer closeMaps(maps)
	clock, off, err := newClockMap()
	if err != nil {
		return err
	}
	defer clock.Close()
	p := &progSpec{kind: fs.opts.Kind, iface: "probe", counters: m, snap: ringbuf.Snap, progName: "ffpf_verify", clock: clock, offset: off,
		nodes: []progNode{{node: n, iface: "probe", in: true, slot: 0}, {node: n, fn: fn, inputs: []int{0}, slot: 2, maps: maps, win: win}}}
	for w := range n.Class.Annotates {
		p.ann = append(p.ann, n.Ctx.Ann+w)
	}
	if t, ok := fn.(ebpfgen.Timed); ok && t.Timed() {
		p.timed = true
	}
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
