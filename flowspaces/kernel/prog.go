package kernel

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"

	"github.com/ffpf-go/ffpf/bridges/afxdp"
	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// A program chains the functions of one flowspace for packets arriving on
// one interface. Per function it keeps a pass flag on the stack: a source
// (the hook) passes when the packet came in on its interface; another
// function sees the packet when one of its inputs passed it, and counts it
// in and, if it keeps it, out. Packets that pass a function the flowspace
// above asked for go up through the ring buffer, at most once, with a mask
// of those functions. The verdict lets the packet on to the kernel stack:
// the flowgraph observes. Two parameters of the capture change that: with
// steal, exported packets leave through AF_XDP (XDP only); with drop, the
// packets the graph filters out, those that no function at an end of the
// graph kept and none above asked for, are dropped at the hook.

// maxNodes bounds the functions of one program: their pass flags live on
// the 512-byte stack beside cBPF's scratch memory.
const maxNodes = 40

// Stack layout, below the frame pointer.
const (
	stackKey   = -8  // u32 map key
	stackValue = -16 // u64 value being added to a slot
	stackMask  = -24 // u64 export mask
	stackVlan  = -32 // u32: the tc program put a VLAN tag back into the packet
	stackFlags = -40 // pass flag (u32, 0 or 1) of node i at stackFlags - 8*i
)

// progNode is a node as the program generator sees it.
type progNode struct {
	node   *flowspaces.Node
	fn     ebpfgen.Function     // nil for a source
	iface  string               // a source's interface
	in     bool                 // a source captures received packets
	out    bool                 // a source captures sent packets
	inputs []int                // indices of its inputs among the program's nodes
	slot   int                  // first counter slot: in, out, then state
	maps   map[string]*stateMap // its state maps by field (ebpfgen.Mapped)
	win    *epochs              // with window=: its state double-buffers (window.go)
}

// producer reports whether the node outputs records: the packets it
// measured end there.
func (n progNode) producer() bool { return n.node != nil && n.node.Class != nil && n.node.Producer() }

// progSpec is everything one program needs.
type progSpec struct {
	kind     flowspaces.Kind
	iface    string // the interface the program is attached to
	egress   bool   // it runs at tc egress, on the packets iface sends (else at ingress: XDP or tc)
	port     int    // its number among the flowspace's interfaces
	nodes    []progNode
	exports  []int // node indices whose outputs go up, bit i = exports[i]
	snap     int   // bytes of each packet copied up
	counters *ebpf.Map
	ring     *ebpf.Map // nil without exports
	ringOf   *ebpf.Map // the ring of each CPU, when there are several (else ring)
	xsk      *ebpf.Map // set when exported packets leave through AF_XDP (XDP only)
	budget   *ebpf.Map // the run's packet limit (-c), when it has one
	// atEnds says that the limit counts packets at the ends of the graph
	// (-c; else at capture): ends are the nodes whose passing a packet ends
	// it (budget.go).
	atEnds   bool
	ends     []int
	labels   int       // code labels handed out (settle)
	clock    *ebpf.Map // the packet clock, for windows (window.go)
	progName string    // the kernel's name for the program: "ffpf" when empty
	// testClock makes windows read the time from the clock map (set by a
	// test), not from bpf_ktime_get_ns.
	testClock bool

	// sent is a per-CPU u64: when the CPU last sent a clock-only record
	// (ring buffer only; nil for none). ann are the annotation words the
	// functions here write, carried up in each record's header in this
	// order; timed says a function reads the packet's time, which the
	// program then reads once (readsTime); offset turns that time into
	// the packet clock's (ringbuf.Offset: the value the clock map holds).
	sent   *ebpf.Map
	ann    []int
	timed  bool
	offset int64

	hooks []hookSlots // the sources on iface: their state counts verdicts and losses
	drop  bool        // filtered packets are dropped: every source on iface asks for it
	keep  []int       // node indices whose passing a packet keeps it from the drop
}

// hookSlots is a source on the program's interface: its first counter slot and
// the export bits of the functions it feeds (its stream's packets).
type hookSlots struct {
	slot int
	mask uint64
}

func flag(i int) int16 { return int16(stackFlags - 8*i) }

// frame is the stack below the pass flags: the packet's time (when a
// function reads it) and its annotation words (when a function here writes
// any); used is how many bytes below the frame pointer the program takes.
type frame struct {
	time int16 // 0 without
	ann  int16 // word w at ann + 8w; 0 without
	// a Drained function's packet epoch and packet clock (window.go's
	// prologue writes them); 0 without
	epoch, clock int16
	used         int
}

// readsTime says the program reads the packet's time once, at its start:
// when a function reads it (timed) or a window's epoch is computed from it
// (unless a test fixes the windows' clock). The timestamps, the windows'
// parity, the records' times and the clock-only records then all carry
// the same nanoseconds.
func (p *progSpec) readsTime() bool {
	if p.timed {
		return true
	}
	return !p.testClock && slices.ContainsFunc(p.nodes, func(n progNode) bool { return n.win != nil })
}

func (p *progSpec) frame() frame {
	f := frame{used: -int(flag(len(p.nodes) - 1))}
	if p.readsTime() {
		f.used += 8
		f.time = int16(-f.used)
	}
	if len(p.ann) > 0 {
		f.used += 8 * (slices.Max(p.ann) + 1) // words 0 to the last written
		f.ann = int16(-f.used)
	}
	if slices.ContainsFunc(p.nodes, func(n progNode) bool { return n.win != nil && n.win.flow != nil }) {
		f.used += 16
		f.epoch, f.clock = int16(-f.used), int16(-f.used+8)
	}
	return f
}

// annAt is the stack offset of annotation word w.
func (f frame) annAt(w int) int16 { return f.ann + int16(8*w) }

// addState returns code that adds register r to counter slot.
func (p *progSpec) addState(label string) func(slot int, r asm.Register) asm.Instructions {
	n := 0
	return func(slot int, r asm.Register) asm.Instructions {
		n++
		skip := fmt.Sprintf("%s_add%d", label, n)
		return asm.Instructions{
			asm.StoreMem(asm.RFP, stackValue, r, asm.DWord),
			asm.StoreImm(asm.RFP, stackKey, int64(slot), asm.Word),
			asm.LoadMapPtr(asm.R1, p.counters.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackKey),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, skip),
			asm.LoadMem(asm.R1, asm.RFP, stackValue, asm.DWord),
			asm.LoadMem(asm.R2, asm.R0, 0, asm.DWord),
			asm.Add.Reg(asm.R2, asm.R1),
			asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(skip),
		}
	}
}

// build generates the program's instructions.
func (p *progSpec) build() (asm.Instructions, error) {
	if len(p.nodes) > maxNodes {
		return nil, fmt.Errorf("more than %d functions in one eBPF program", maxNodes)
	}
	in := asm.Instructions{asm.Mov.Reg(ebpfgen.Ctx, asm.R1)}
	if p.budget != nil {
		in = append(in, p.take("unbudgeted")...)
	}
	fr := p.frame()
	if p.readsTime() {
		in = append(in, asm.FnKtimeGetNs.Call(), asm.StoreMem(asm.RFP, fr.time, asm.R0, asm.DWord))
	}
	if len(p.ann) > 0 {
		// The words go up whether or not their writer saw the packet:
		// the verifier wants them written.
		in = append(in, asm.Mov.Imm(asm.R1, 0))
		for _, w := range p.ann {
			in = append(in, asm.StoreMem(asm.RFP, fr.annAt(w), asm.R1, asm.DWord))
		}
	}
	if p.kind == flowspaces.KindXDP {
		in = append(in,
			asm.LoadMem(ebpfgen.PacketStart, ebpfgen.Ctx, 0, asm.Word), // xdp_md.data
			asm.LoadMem(ebpfgen.PacketEnd, ebpfgen.Ctx, 4, asm.Word),   // xdp_md.data_end
			asm.Mov.Reg(ebpfgen.WireLen, ebpfgen.PacketEnd),
			asm.Sub.Reg(ebpfgen.WireLen, ebpfgen.PacketStart),
		)
	} else {
		// At the tc hook the kernel has taken a VLAN tag out of the
		// packet (into the skb's metadata); libpcap's filters expect it in
		// place, as on the wire. Pushing the same tag puts it back into the
		// data (the pop before the verdict restores the skb as it was).
		// Then make the whole packet directly readable, and read
		// __sk_buff's len, data and data_end.
		in = append(in,
			asm.StoreImm(asm.RFP, stackVlan, 0, asm.Word),
			asm.LoadMem(asm.R1, ebpfgen.Ctx, 20, asm.Word), // vlan_present
			asm.JEq.Imm(asm.R1, 0, "untagged"),
			asm.Mov.Reg(asm.R1, ebpfgen.Ctx),
			asm.LoadMem(asm.R2, ebpfgen.Ctx, 28, asm.Word), // vlan_proto
			asm.LoadMem(asm.R3, ebpfgen.Ctx, 24, asm.Word), // vlan_tci
			asm.FnSkbVlanPush.Call(),
			asm.JNE.Imm(asm.R0, 0, "untagged"),
			asm.StoreImm(asm.RFP, stackVlan, 1, asm.Word),
			asm.Mov.Reg(asm.R1, ebpfgen.Ctx).WithSymbol("untagged"),
			asm.LoadMem(asm.R2, ebpfgen.Ctx, 0, asm.Word),
			asm.FnSkbPullData.Call(),
			asm.LoadMem(ebpfgen.WireLen, ebpfgen.Ctx, 0, asm.Word),
			asm.LoadMem(ebpfgen.PacketStart, ebpfgen.Ctx, 76, asm.Word),
			asm.LoadMem(ebpfgen.PacketEnd, ebpfgen.Ctx, 80, asm.Word),
		)
	}
	add := p.addState("main")
	for i, n := range p.nodes {
		next := fmt.Sprintf("n%d_next", i)
		if n.fn == nil {
			if n.iface != p.iface || (p.egress && !n.out) || (!p.egress && !n.in) {
				in = append(in, asm.StoreImm(asm.RFP, flag(i), 0, asm.Word))
				continue
			}
			in = append(in, asm.StoreImm(asm.RFP, flag(i), 1, asm.Word), asm.Mov.Imm(asm.R1, 1))
			in = append(in, add(n.slot, asm.R1)...)
			in = append(in, asm.Mov.Imm(asm.R1, 1))
			in = append(in, add(n.slot+1, asm.R1)...)
			continue
		}
		pass, drop := fmt.Sprintf("n%d_pass", i), fmt.Sprintf("n%d_drop", i)
		in = append(in, asm.Mov.Imm(asm.R1, 0))
		for _, j := range n.inputs {
			in = append(in, asm.LoadMem(asm.R2, asm.RFP, flag(j), asm.Word), asm.Or.Reg(asm.R1, asm.R2))
		}
		in = append(in, asm.StoreImm(asm.RFP, flag(i), 0, asm.Word), asm.JEq.Imm(asm.R1, 0, next))
		in = append(in, add(n.slot, asm.R1)...) // in += 1 (r1 is 1: flags are 0 or 1)
		// emit generates the function's code on the maps and slots of one
		// epoch parity (the only ones without window=).
		emit := func(prefix string, maps func(string) int, slot0, flow int) (asm.Instructions, error) {
			state := p.addState(prefix + "_state")
			e := &ebpfgen.Emitter{Prefix: prefix, Pass: pass, Drop: drop, Outgoing: p.egress,
				StackOffset: fr.used, // the flags, time and annotations end here
				AddState:    func(k int, r asm.Register) asm.Instructions { return state(slot0+k, r) },
				Map:         maps, KeySlot: stackKey,
				Time: fr.time, ClockOffset: p.offset,
				FlowMap: flow, Epoch: fr.epoch, Clock: fr.clock}
			if len(p.ann) > 0 && n.node.Class.Annotates > 0 {
				e.Ann = fr.annAt
			}
			if err := n.fn.Emit(e); err != nil {
				return nil, fmt.Errorf("%s: %v", n.node.ID, err)
			}
			return e.Insns, nil
		}
		late := fmt.Sprintf("n%d_late", i)
		flowFD := func(h int) int {
			if n.win == nil || n.win.fmaps[h] == nil {
				return -1
			}
			return n.win.fmaps[h].FD()
		}
		code, err := emit(fmt.Sprintf("n%d", i), fds(n.maps), n.slot+2, flowFD(0))
		if err != nil {
			return nil, err
		}
		if n.win != nil {
			// Windowed: the code twice, on the maps and slots of each
			// parity, so that each copy's map lookups are the kernel's
			// inlined array lookups of one known map.
			if p.clock == nil {
				return nil, fmt.Errorf("%s: a window needs the flowspace's clock", n.node.ID)
			}
			oddMaps, oddSlot := oddFds(n.maps), n.slot+2+n.win.slots
			if n.win.flow != nil { // its counter slots and state maps are one copy
				oddMaps, oddSlot = fds(n.maps), n.slot+2
			}
			oddCode, err := emit(fmt.Sprintf("n%do", i), oddMaps, oddSlot, flowFD(1))
			if err != nil {
				return nil, err
			}
			odd := fmt.Sprintf("n%d_odd", i)
			in = append(in, p.prologue(n.win, late)...)
			in = append(in, asm.LoadMem(asm.R1, asm.RFP, stackHalf, asm.Word), asm.JNE.Imm(asm.R1, 0, odd))
			code = append(append(code, asm.Mov.Imm(asm.R0, 0).WithSymbol(odd)), oddCode...)
		}
		in = append(in, code...)
		if n.producer() {
			// A producer's output is its records (its Go half's), as in
			// Go: the packets it measured end here.
			in = append(in, asm.Mov.Imm(asm.R0, 0).WithSymbol(pass))
		} else {
			in = append(in, asm.StoreImm(asm.RFP, flag(i), 1, asm.Word).WithSymbol(pass), asm.Mov.Imm(asm.R1, 1))
			in = append(in, add(n.slot+1, asm.R1)...) // out += 1
		}
		if _, dropped := code.ReferenceOffsets()[drop]; dropped {
			// The verifier refuses dead code: only a function that can
			// filter gets a drop block.
			in = append(in, asm.Ja.Label(next), asm.Mov.Imm(asm.R0, 0).WithSymbol(drop))
		}
		if n.win != nil {
			// Its half was not ready: the packet is not measured, and
			// counts as the function's dropped.
			in = append(in, asm.Ja.Label(next), asm.Mov.Imm(asm.R1, 1).WithSymbol(late))
			in = append(in, add(n.slot+n.win.lateSlot(), asm.R1)...)
		}
		in = append(in, asm.Mov.Imm(asm.R0, 0).WithSymbol(next))
	}
	in = append(in, p.ended()...)
	if len(p.exports) > 0 {
		in = append(in, p.export()...)
	}
	verdict := p.discard()
	if p.kind == flowspaces.KindXDP {
		verdict = append(verdict, asm.Mov.Imm(asm.R0, xdpPass).WithSymbol(p.keepLabel()), asm.Return())
	} else {
		verdict = append(verdict,
			asm.LoadMem(asm.R1, asm.RFP, stackVlan, asm.Word).WithSymbol(p.keepLabel()),
			asm.JEq.Imm(asm.R1, 0, "return"),
			asm.Mov.Reg(asm.R1, ebpfgen.Ctx),
			asm.FnSkbVlanPop.Call(),
			asm.Mov.Imm(asm.R0, -1).WithSymbol("return"), // TCX_NEXT: on to the next program, or the stack
			asm.Return(),
		)
	}
	verdict[0] = verdict[0].WithSymbol("verdict")
	in = append(in, verdict...)
	if p.budget != nil {
		// Over the limit: the packet goes on as if nothing were attached.
		code := int32(xdpPass)
		if p.kind != flowspaces.KindXDP {
			code = -1 // TCX_NEXT
		}
		in = append(in, asm.Mov.Imm(asm.R0, code).WithSymbol("unbudgeted"), asm.Return())
	}
	return in, nil
}

// Verdicts (XDP's; tc's drop is TC_ACT_SHOT, also 2).
const (
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
	tcDrop      = 2
)

// keepLabel is where a packet that stays goes: the verdict itself unless
// filtered packets are dropped.
func (p *progSpec) keepLabel() string {
	if p.drop {
		return "keep"
	}
	return "verdict"
}

// discard drops the packet when no function that keeps it passed it, and
// counts it in the state of the interface's sources; otherwise it falls
// through to "keep".
func (p *progSpec) discard() asm.Instructions {
	if !p.drop {
		return nil
	}
	add := p.addState("discard")
	in := asm.Instructions{asm.Mov.Imm(asm.R1, 0)}
	for _, i := range p.keep {
		in = append(in, asm.LoadMem(asm.R2, asm.RFP, flag(i), asm.Word), asm.Or.Reg(asm.R1, asm.R2))
	}
	in = append(in, asm.JNE.Imm(asm.R1, 0, "keep"))
	for _, h := range p.hooks {
		in = append(in, asm.Mov.Imm(asm.R1, 1))
		in = append(in, add(h.slot+slotDiscarded, asm.R1)...)
	}
	// At tc the tag pushed for the filters may stay: the packet is gone.
	code := int32(xdpDrop)
	if p.kind != flowspaces.KindXDP {
		code = tcDrop
	}
	return append(in, asm.Mov.Imm(asm.R0, code), asm.Return())
}

// export copies the packet into the ring buffer when an exported function
// passed it.
func (p *progSpec) export() asm.Instructions {
	in := asm.Instructions{asm.Mov.Imm(asm.R1, 0)}
	for b, i := range p.exports {
		in = append(in, asm.LoadMem(asm.R2, asm.RFP, flag(i), asm.Word))
		if b > 0 {
			in = append(in, asm.LSh.Imm(asm.R2, int32(b)))
		}
		in = append(in, asm.Or.Reg(asm.R1, asm.R2))
	}
	passed := "verdict"
	if p.sent != nil && p.xsk == nil {
		passed = "clock"
	}
	in = append(in, asm.JNE.Imm(asm.R1, 0, "exported"))
	in = append(in, p.giveBack(passed)...) // it goes nowhere
	in = append(in, asm.StoreMem(asm.RFP, stackMask, asm.R1, asm.DWord).WithSymbol("exported"))
	if p.counts() && len(p.ends) > 0 {
		// It reached an end here, and goes up too: it counts here.
		in = append(in, p.endedInto(asm.R1)...)
		in = append(in,
			asm.JEq.Imm(asm.R1, 0, "unended"),
			asm.LoadMem(asm.R1, asm.RFP, stackMask, asm.DWord),
			asm.LoadImm(asm.R2, math.MinInt64, asm.DWord), // inproc.EndedBit
			asm.Or.Reg(asm.R1, asm.R2),
			asm.StoreMem(asm.RFP, stackMask, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("unended"),
		)
	}
	if p.xsk != nil {
		return append(in, p.redirect()...)
	}
	// A record's size must be a constant: three sizes, so that small
	// packets take little of the ring.
	var sizes []int
	for _, t := range recordTiers {
		if t < p.snap {
			sizes = append(sizes, t)
		}
	}
	sizes = append(sizes, p.snap)
	for k, size := range sizes {
		var tier asm.Instructions
		if k < len(sizes)-1 { // larger packets: the next size
			tier = append(tier, asm.JGT.Imm(ebpfgen.WireLen, int32(size), fmt.Sprintf("record%d", k+1)))
		}
		tier = append(tier, p.record(k, size)...)
		if k > 0 {
			tier[0] = tier[0].WithSymbol(fmt.Sprintf("record%d", k))
		}
		in = append(in, tier...)
	}
	if passed == "clock" {
		in = append(in, p.clockOnly()...)
	}
	return in
}

// clockOnly sends a clock-only record (mask 0: no packet) for a packet no
// exported function passed, when this CPU's last one is older than
// ringbuf.ClockEvery: the flowspace above learns that time moved although
// everything here was filtered. It costs a map lookup and the coarse
// clock per filtered packet (about 5 ns: BenchmarkClockOnly), a record
// per CPU and ClockEvery at most; a record the ring has no room for is not
// a packet, and is not counted.
//
// The coarse clock (CLOCK_MONOTONIC_COARSE, the same time base, behind by
// at most a scheduler tick) costs a fraction of bpf_ktime_get_ns; a clock
// record only needs to say that time moved, and the clock above never
// goes back. Its granularity is the tick (1 to 10 ms), so records come at
// most once per tick.
func (p *progSpec) clockOnly() asm.Instructions {
	fr := p.frame()
	in := asm.Instructions{
		asm.StoreImm(asm.RFP, stackKey, 0, asm.Word).WithSymbol("clock"),
		asm.LoadMapPtr(asm.R1, p.sent.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "verdict"),
		// The packet pointers are not needed any more: R7 holds the
		// CPU's last clock.
		asm.Mov.Reg(ebpfgen.PacketStart, asm.R0),
	}
	if p.readsTime() {
		in = append(in, asm.LoadMem(asm.R0, asm.RFP, fr.time, asm.DWord))
	} else {
		in = append(in, clockHelper(p.kind).Call())
	}
	in = append(in,
		asm.LoadMem(asm.R1, ebpfgen.PacketStart, 0, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R0),
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.JLT.Imm(asm.R2, int32(ringbuf.ClockEvery.Nanoseconds()), "verdict"),
		asm.StoreMem(ebpfgen.PacketStart, 0, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, stackValue, asm.R0, asm.DWord),
	)
	in = append(in, p.ringPtr("verdict")...)
	return append(in,
		asm.Mov.Imm(asm.R2, ringbuf.HeaderLen),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(asm.R0, 0, "verdict"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R0, ringbuf.OffMask, asm.R1, asm.DWord),
		asm.StoreImm(asm.R0, ringbuf.OffWireLen, 0, asm.Word),
		asm.StoreImm(asm.R0, ringbuf.OffCapLen, 0, asm.Word),
		asm.StoreImm(asm.R0, ringbuf.OffPort, int64(p.port), asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, stackValue, asm.DWord),
		asm.StoreMem(asm.R0, ringbuf.OffTime, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRingbufSubmit.Call(),
		asm.Ja.Label("verdict"),
	)
}

// clockHelper is the helper that reads the time for clock-only records:
// bpf_ktime_get_coarse_ns where the kernel has it (5.11), or
// bpf_ktime_get_ns.
func clockHelper(kind flowspaces.Kind) asm.BuiltinFunc {
	coarseOnce.Do(func() {
		coarse = map[ebpf.ProgramType]bool{}
		for _, t := range []ebpf.ProgramType{ebpf.XDP, ebpf.SchedCLS} {
			coarse[t] = features.HaveProgramHelper(t, asm.FnKtimeGetCoarseNs) == nil
		}
	})
	t := ebpf.SchedCLS
	if kind == flowspaces.KindXDP {
		t = ebpf.XDP
	}
	if coarse[t] {
		return asm.FnKtimeGetCoarseNs
	}
	return asm.FnKtimeGetNs
}

var (
	coarseOnce sync.Once
	coarse     map[ebpf.ProgramType]bool
)

// recordTiers are the smaller record sizes (bytes of packet) the ring
// buffer is asked for; the largest is the snap length. A packet takes the
// smallest that holds it: at most four times its size, or a 4 KB record
// for a full 1,514-byte frame.
var recordTiers = []int{128, 512, 1536, 4096, 16384, 65536}

// record copies up to size bytes of the packet into a ring buffer record
// of that size and submits it, then goes to the verdict.
func (p *progSpec) record(k, size int) asm.Instructions {
	reserved, caplen, submit := fmt.Sprintf("reserved%d", k), fmt.Sprintf("caplen%d", k), fmt.Sprintf("submit%d", k)
	header, fr := ringbuf.Header(len(p.ann)), p.frame()
	noRing := fmt.Sprintf("noring%d", k)
	in := p.ringPtr(noRing)
	in = append(in,
		asm.Mov.Imm(asm.R2, int32(header+size)),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JNE.Imm(asm.R0, 0, reserved),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(noRing),
	)
	in = append(in, p.perHook(fmt.Sprintf("lost%d", k), slotLost)...)
	in = append(in, p.giveBack("verdict")...)
	in = append(in,
		// The packet pointers are not needed any more: R7 holds the record.
		asm.Mov.Reg(ebpfgen.PacketStart, asm.R0).WithSymbol(reserved),
		asm.LoadMem(asm.R1, asm.RFP, stackMask, asm.DWord),
		asm.StoreMem(ebpfgen.PacketStart, ringbuf.OffMask, asm.R1, asm.DWord),
		asm.StoreMem(ebpfgen.PacketStart, ringbuf.OffWireLen, ebpfgen.WireLen, asm.Word),
		asm.StoreImm(ebpfgen.PacketStart, ringbuf.OffPort, int64(p.port), asm.Word),
	)
	if p.readsTime() { // the time the functions saw
		in = append(in, asm.LoadMem(asm.R0, asm.RFP, fr.time, asm.DWord))
	} else {
		in = append(in, asm.FnKtimeGetNs.Call())
	}
	in = append(in, asm.StoreMem(ebpfgen.PacketStart, ringbuf.OffTime, asm.R0, asm.DWord))
	for i, w := range p.ann {
		in = append(in,
			asm.LoadMem(asm.R1, asm.RFP, fr.annAt(w), asm.DWord),
			asm.StoreMem(ebpfgen.PacketStart, int16(ringbuf.OffAnn+8*i), asm.R1, asm.DWord))
	}
	in = append(in,
		asm.Mov.Reg(asm.R4, ebpfgen.WireLen),
		asm.JLE.Imm(asm.R4, int32(size), caplen),
		asm.Mov.Imm(asm.R4, int32(size)),
		asm.StoreMem(ebpfgen.PacketStart, ringbuf.OffCapLen, asm.R4, asm.Word).WithSymbol(caplen),
		asm.JEq.Imm(asm.R4, 0, submit),
		asm.Mov.Reg(asm.R1, ebpfgen.Ctx),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, ebpfgen.PacketStart),
		asm.Add.Imm(asm.R3, int32(header)),
	)
	if p.kind == flowspaces.KindXDP {
		in = append(in, asm.FnXdpLoadBytes.Call())
	} else {
		in = append(in, asm.FnSkbLoadBytes.Call())
	}
	return append(in,
		asm.Mov.Reg(asm.R1, ebpfgen.PacketStart).WithSymbol(submit),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRingbufSubmit.Call(),
		asm.Ja.Label("verdict"),
	)
}

// ringPtr leaves in R1 the ring buffer the packet's record goes into: the
// one ring, or, with a ring per CPU (ringOf), this CPU's; without one it
// jumps to fail. It uses the stack's key slot and R0 to R5.
func (p *progSpec) ringPtr(fail string) asm.Instructions {
	if p.ringOf == nil {
		return asm.Instructions{asm.LoadMapPtr(asm.R1, p.ring.FD())}
	}
	return asm.Instructions{
		asm.FnGetSmpProcessorId.Call(),
		asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.Word),
		asm.LoadMapPtr(asm.R1, p.ringOf.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, fail),
		asm.Mov.Reg(asm.R1, asm.R0),
	}
}

// redirect sends the packet up through the AF_XDP socket of its receive
// queue, with the export mask in front of it (XDP metadata); without a
// socket on that queue, or when it is longer than a socket's frame
// (afxdp.MaxFrame: then it counts as lost on the way up), it goes on to
// the stack.
func (p *progSpec) redirect() asm.Instructions {
	// A frame longer than a socket's frame cannot go up: it stays in the
	// kernel, lost to the bridge.
	in := asm.Instructions{asm.JLE.Imm(ebpfgen.WireLen, afxdp.MaxFrame, "fits")}
	in = append(in, p.perHook("toolong", slotLost)...)
	in = append(in, p.giveBack(p.keepLabel())...)
	// The metadata: the annotation words functions above read, then the
	// mask (afxdp.Meta).
	ml, fr := afxdp.Meta(len(p.ann)), p.frame()
	in = append(in,
		asm.Mov.Reg(asm.R1, ebpfgen.Ctx).WithSymbol("fits"),
		asm.Mov.Imm(asm.R2, int32(-ml)),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, "unsent"),
		asm.LoadMem(asm.R2, ebpfgen.Ctx, 8, asm.Word), // data_meta
		asm.LoadMem(asm.R3, ebpfgen.Ctx, 0, asm.Word), // data
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, int32(ml)),
		asm.JGT.Reg(asm.R4, asm.R3, "unsent"),
	)
	for i, w := range p.ann {
		in = append(in,
			asm.LoadMem(asm.R1, asm.RFP, fr.annAt(w), asm.DWord),
			asm.StoreMem(asm.R2, int16(8*i), asm.R1, asm.DWord))
	}
	in = append(in,
		asm.LoadMem(asm.R1, asm.RFP, stackMask, asm.DWord),
		asm.StoreMem(asm.R2, int16(ml-afxdp.MetaLen), asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, p.xsk.FD()),
		asm.LoadMem(asm.R2, ebpfgen.Ctx, 16, asm.Word), // rx_queue_index
		asm.Mov.Imm(asm.R3, xdpPass),                   // when no socket is bound to the queue
		asm.FnRedirectMap.Call(),
		asm.JNE.Imm(asm.R0, xdpRedirect, "unstolen"),
	)
	in = append(in, p.perHook("stolen", slotStolen)...)
	in = append(in, asm.Mov.Imm(asm.R0, xdpRedirect), asm.Return())
	// It did not go up: its unit comes back.
	unsent := p.giveBack("verdict")
	unsent[0] = unsent[0].WithSymbol("unsent")
	unstolen := p.giveBack(p.keepLabel())
	unstolen[0] = unstolen[0].WithSymbol("unstolen")
	return append(append(in, unsent...), unstolen...)
}

// perHook adds 1 to counter slot k of each source whose functions the
// export mask (on the stack) names: a packet that went up, or was lost on
// the way, counts once for each source's stream it belonged to, as the
// bridge counts them.
func (p *progSpec) perHook(label string, k int) asm.Instructions {
	add := p.addState(label)
	var in asm.Instructions
	for i, h := range p.hooks {
		skip := fmt.Sprintf("%s_hook%d", label, i)
		in = append(in,
			asm.LoadMem(asm.R1, asm.RFP, stackMask, asm.DWord),
			asm.LoadImm(asm.R2, int64(h.mask), asm.DWord),
			asm.And.Reg(asm.R1, asm.R2),
			asm.JEq.Imm(asm.R1, 0, skip),
			asm.Mov.Imm(asm.R1, 1),
		)
		in = append(in, add(h.slot+k, asm.R1)...)
		in = append(in, asm.Mov.Imm(asm.R0, 0).WithSymbol(skip))
	}
	return in
}

// load builds and loads the program; a verifier error names the flowspace.
func (p *progSpec) load(name string) (*ebpf.Program, error) {
	insns, err := p.build()
	if err != nil {
		return nil, err
	}
	typ := ebpf.XDP
	if p.kind != flowspaces.KindXDP {
		typ = ebpf.SchedCLS
	}
	progName := p.progName
	if progName == "" {
		progName = "ffpf"
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName, Type: typ, Instructions: insns, License: "GPL"})
	// The instructions name the maps by their fds, as numbers: a map that
	// only p holds must not be finalized (its fd closed, and reused) while
	// the kernel loads the program.
	runtime.KeepAlive(p)
	if err != nil {
		return nil, fmt.Errorf("the kernel refuses the program for %s: %w", name, err)
	}
	return prog, nil
}

// captureSnap is the most bytes of a packet capture n keeps: its snap
// length, bounded by the run's (-s) and by what the ring buffer carries.
func captureSnap(n *flowspaces.Node) int {
	snap := ringbuf.Snap
	if sl := int(n.Ctx.Params.Int("snaplen")); sl > 0 {
		snap = min(snap, sl)
	}
	if n.Ctx.Snaplen > 0 {
		snap = min(snap, n.Ctx.Snaplen)
	}
	return snap
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

// spec describes the program for iface: at its ingress hook (XDP, or tc
// in the kernel flowspace), or with egress at its tc egress hook, where
// an XDP flowspace too sees the packets the interface sends.
func (fs *Flowspace) spec(nodes []*node, iface string, port int, egress bool) (*progSpec, error) {
	p := &progSpec{kind: fs.opts.Kind, iface: iface, egress: egress, port: port, counters: fs.counters, ring: fs.ring, ringOf: fs.ringOf,
		progName: fs.progName, budget: fs.budgetM, clock: fs.clock, sent: fs.sent, offset: fs.offset, ann: annWords(nodes)}
	if egress {
		p.kind = flowspaces.KindKernel
	}
	idx := map[*flowspaces.Node]int{}
	snap := 0 // the longest snap length of the captures on iface
	for i, k := range nodes {
		idx[k.Node] = i
		pn := progNode{node: k.Node, fn: k.fn, iface: k.iface, slot: k.slot, maps: k.maps, win: k.win}
		if t, ok := k.fn.(ebpfgen.Timed); ok && t.Timed() {
			p.timed = true
		}
		if k.iface != "" {
			pn.in, pn.out = directions(k.Node)
		}
		for _, in := range k.Inputs {
			j, ok := idx[in]
			if !ok {
				return nil, fmt.Errorf("%s: its input %s is not in %s", k.ID, in.ID, fs.Name())
			}
			pn.inputs = append(pn.inputs, j)
		}
		if k.iface == iface {
			snap = max(snap, captureSnap(k.Node))
		}
		p.nodes = append(p.nodes, pn)
	}
	for _, w := range packetsOf(fs.want) {
		if i, ok := idx[w]; ok {
			p.exports = append(p.exports, i)
		}
	}
	p.snap = max(snap, 1)
	if len(p.exports) > 63 { // the mask's last bit is inproc.EndedBit
		return nil, fmt.Errorf("%s: more than 63 functions send packets up", fs.Name())
	}
	if steals(nodes) && p.kind == flowspaces.KindXDP {
		p.xsk = fs.xsks
		if len(p.ann) > afxdp.MaxAnn {
			return nil, fmt.Errorf("%s: its functions write %d annotation words, and a frame that goes up through AF_XDP carries %d (steal=true)", fs.Name(), len(p.ann), afxdp.MaxAnn)
		}
	}
	p.verdicts(nodes)
	p.drop = p.drop && !egress // drop=true keeps received packets from the stack, never sent ones
	if p.atEnds = fs.budget.AtEnds(); p.atEnds {
		p.ends = p.endsOf()
		if p.xsk != nil && len(p.ends) > 0 && len(p.exports) > 0 {
			// A frame the kernel loses on its way to a socket cannot say
			// whether it had counted.
			return nil, fmt.Errorf("%s: with -c and steal=true, the packets that go up through AF_XDP cannot also reach an end of the graph in XDP: end every branch above, or count with --capture-count", fs.Name())
		}
	}
	return p, nil
}

// endsOf returns the nodes whose passing a packet ends it: those that feed
// none here and that the flowspace above does not ask for (an end of the
// graph), and the inputs of producers (the packets end there: a producer's
// output is records).
func (p *progSpec) endsOf() []int {
	feeds := make([]bool, len(p.nodes))
	var ends []int
	for _, pn := range p.nodes {
		for _, j := range pn.inputs {
			feeds[j] = true
			if pn.producer() && !slices.Contains(ends, j) {
				ends = append(ends, j)
			}
		}
	}
	for i, pn := range p.nodes {
		if !feeds[i] && !slices.Contains(p.exports, i) && !pn.producer() {
			ends = append(ends, i)
		}
	}
	slices.Sort(ends)
	return ends
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

// annWords are the annotation words the functions placed here write, in
// order: each packet's record carries them up.
func annWords(nodes []*node) []int {
	var used [buffers.AnnWords]bool
	for _, k := range nodes {
		if k.fn != nil {
			for w := range k.Class.Annotates {
				used[k.Ctx.Ann+w] = true
			}
		}
	}
	var out []int
	for w, u := range used {
		if u {
			out = append(out, w)
		}
	}
	return out
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
