package kernel

// The packet limit of a run (ffpf run -c) in eBPF. The run's Budget moves
// what is left into a one-entry array map that the process maps into its
// memory: each program takes one packet from it with an atomic add before
// it counts anything, and lets the packet on uncounted once it is spent,
// so that the sources of every flowspace together read exactly the limit.
// The flowspace ends its capture when the budget is spent.

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

// take is the code that takes one packet from the budget: when none is
// left it gives the packet back and goes to label over (the packet goes
// on, uncounted).
func (p *progSpec) take(over string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, stackKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, p.budget.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, over),
		asm.Mov.Imm(asm.R1, -1),
		fetchAdd(asm.R0, asm.R1), // r1 = what was left
		asm.JSGT.Imm(asm.R1, 0, "taken"),
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
		asm.Ja.Label(over),
		asm.Mov.Reg(asm.R1, ebpfgen.Ctx).WithSymbol("taken"),
	}
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
