package kernel

// The packet limit of a run (ffpf run -c, or --capture-count) in eBPF.
// The run's Budget moves its word (what is held and what is left) into a
// one-entry array map that the process maps into its memory: each program
// takes one unit from it with an atomic add before it counts anything,
// and lets the packet on uncounted when none is left.
//
// Counting at the ends of the graph (-c), the unit stays held while the
// program runs: a packet that passed an end here (a function that feeds
// none, nor goes up) or reached a producer spends it; one that goes up,
// through the ring buffer or AF_XDP, keeps it for the flowspace above,
// and one that does neither (filtered, or lost on its way up) gives it
// back. A packet that reached an end and goes up too carries
// inproc.EndedBit in its mask, so that it counts once. Counting at
// capture (--capture-count), the unit is spent when it is taken.
//
// So exactly the limit reaches the ends, and a hook never passes a packet
// into the graph once the limit is counted. The sharp edge: while the last
// units are held by packets on their way up, a hook lets the packets that
// arrive on uncounted; should some of those on their way not reach an end
// above, later packets take their units. The flowspace ends its capture
// when the budget is spent.

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// budgetMap is the map that holds what is left of a run's budget, and its
// mapping in the process.
type budgetMap struct {
	m   *ebpf.Map
	mem []byte
}

// SetBudget implements flowspaces.Limited: the captures here take their
// packets from b (call it before Activate).
func (fs *Flowspace) SetBudget(b *flowspaces.Budget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.budget = b
}

// budgetMap returns the map of the run's budget, creating it on the first
// call of any flowspace of the run; nil without a limit. fs.mu is held.
func (fs *Flowspace) budgetMap() (*ebpf.Map, error) {
	if fs.budget == nil {
		return nil, nil
	}
	v, err := fs.budget.Shared(func() (*atomic.Int64, any, error) {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_budget", Type: ebpf.Array, KeySize: 4, ValueSize: 8,
			MaxEntries: 1, Flags: unix.BPF_F_MMAPABLE})
		if err != nil {
			return nil, nil, err
		}
		mem, err := unix.Mmap(m.FD(), 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			m.Close()
			return nil, nil, err
		}
		bm := &budgetMap{m: m, mem: mem}
		// The programs and the budget's claims use it as long as the
		// budget lives.
		runtime.AddCleanup(fs.budget, func(bm *budgetMap) {
			unix.Munmap(bm.mem)
			bm.m.Close()
		}, bm)
		return (*atomic.Int64)(unsafe.Pointer(&mem[0])), bm, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: cannot share the packet limit (-c) with its programs: %w", fs.Name(), err)
	}
	return v.(*budgetMap).m, nil
}

// take is the code that takes one unit from the budget: when none is
// left it gives it back and goes to label over (the packet goes on,
// uncounted).
func (p *progSpec) take(over string) asm.Instructions {
	unit := flowspaces.TakeUnit // held until the packet's fate is known
	if !p.atEnds {
		unit = -1 // spent at once
	}
	return append(p.word(over),
		asm.LoadImm(asm.R1, unit, asm.DWord),
		fetchAdd(asm.R0, asm.R1), // r1 = the word as it was
		// What was left is the low word, signed.
		asm.LSh.Imm(asm.R1, 32),
		asm.ArSh.Imm(asm.R1, 32),
		asm.JSGT.Imm(asm.R1, 0, "taken"),
		asm.LoadImm(asm.R1, -unit, asm.DWord),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
		asm.Ja.Label(over),
		asm.Mov.Reg(asm.R1, ebpfgen.Ctx).WithSymbol("taken"),
	)
}

// word is the code that points R0 at the budget's word, or goes to label
// none when the map has no entry.
func (p *progSpec) word(none string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, stackKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, p.budget.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, none),
	}
}

// settle is the code that ends the packet's unit, counting at the ends:
// add (flowspaces.SpendUnit or ReturnUnit) to the budget's word, once
// the packet's fate is known.
func (p *progSpec) settle(add int64) asm.Instructions {
	p.labels++
	skip := fmt.Sprintf("settle%d", p.labels)
	return append(p.word(skip),
		asm.LoadImm(asm.R1, add, asm.DWord),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(skip),
	)
}

// counts says that the program counts packets at the ends of the graph.
func (p *progSpec) counts() bool { return p.budget != nil && p.atEnds }

// endedInto sets r to 1 when the packet reached an end here (the pass
// flags of p.ends), else 0; it uses R2.
func (p *progSpec) endedInto(r asm.Register) asm.Instructions {
	in := asm.Instructions{asm.Mov.Imm(r, 0)}
	for _, i := range p.ends {
		in = append(in, asm.LoadMem(asm.R2, asm.RFP, flag(i), asm.Word), asm.Or.Reg(r, asm.R2))
	}
	return in
}

// giveBack is the code that gives the packet's unit back when it reached
// no end here, counting at the ends: it went nowhere (its way up failed,
// or it did not go up). Then it goes to label to.
func (p *progSpec) giveBack(to string) asm.Instructions {
	if !p.counts() {
		return asm.Instructions{asm.Ja.Label(to)}
	}
	in := p.endedInto(asm.R1)
	in = append(in, asm.JNE.Imm(asm.R1, 0, to))
	in = append(in, p.settle(flowspaces.ReturnUnit)...)
	return append(in, asm.Ja.Label(to))
}

// ended is the code after the functions, counting at the ends: a packet
// that reached an end spends its unit; one that reached none and cannot go
// up gives it back; one that may go up keeps it (export decides).
func (p *progSpec) ended() asm.Instructions {
	if !p.counts() {
		return nil
	}
	in := p.endedInto(asm.R1)
	if len(p.exports) == 0 {
		in = append(in, asm.JNE.Imm(asm.R1, 0, "spend"))
		in = append(in, p.settle(flowspaces.ReturnUnit)...)
		in = append(in, asm.Ja.Label("settled"))
	} else {
		in = append(in, asm.JEq.Imm(asm.R1, 0, "settled"))
	}
	spend := p.settle(flowspaces.SpendUnit)
	spend[0] = spend[0].WithSymbol("spend")
	in = append(in, spend...)
	return append(in, asm.Mov.Imm(asm.R0, 0).WithSymbol("settled"))
}

// fetchAdd is *(u64 *)dst += src, with what was there in src. cilium/ebpf
// v0.22.0 writes the atomic operation's immediate (BPF_ADD | BPF_FETCH)
// only when the instruction already carries it: without it the kernel
// would add and leave src as it was.
func fetchAdd(dst, src asm.Register) asm.Instruction {
	ins := asm.FetchAdd.Mem(dst, src, asm.DWord, 0)
	ins.Constant = int64(asm.FetchAdd >> 8)
	return ins
}
