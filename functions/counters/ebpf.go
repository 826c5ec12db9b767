package counters

import (
	"fmt"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// ebpfCounter is pktcount or bytecount in an eBPF flowspace: it adds 1, or
// the packet's wire length, to its one state slot and passes the packet.
type ebpfCounter struct{ bytes bool }

func (c ebpfCounter) StateSlots() int { return 1 }

func (c ebpfCounter) Emit(e *ebpfgen.Emitter) error {
	if c.bytes {
		e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen))
	} else {
		e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	}
	e.Insns = append(e.Insns, e.AddState(0, asm.R1)...)
	e.Insns = append(e.Insns, asm.Ja.Label(e.Pass))
	return nil
}

func ebpfPktCount(*functions.Context) (ebpfgen.Function, error) { return ebpfCounter{}, nil }
func ebpfByteCount(*functions.Context) (ebpfgen.Function, error) {
	return ebpfCounter{bytes: true}, nil
}

// ebpfKeyed is counter in an eBPF flowspace: packets and bytes in slots,
// and, with key=, the table of the Go counter (open addressing, linear
// probing of at most maxProbe entries, the same hash and start) in one
// shared map, so that each key has one entry whichever CPU saw it. An
// empty entry is claimed by compare-and-swap of its used mark (0, then 2
// while its key is written, then 1); a key that meets an entry being
// written by another CPU at that moment is counted as dropped, as one
// that finds no room is.
type ebpfKeyed struct {
	sp    *flowkey.Spec
	bytes bool
	size  uint32
}

// Slots: the first fields of counterState.
const (
	slotPackets = iota
	slotBytes
	slotKeys
	slotDropped
	slotNoKey
)

func (c *ebpfKeyed) StateSlots() int {
	if c.sp == nil {
		return 2
	}
	return 5
}

func (c *ebpfKeyed) MapFields() []ebpfgen.MapField {
	if c.sp == nil {
		return nil
	}
	return []ebpfgen.MapField{{Name: "table", Shared: true}}
}

func (c *ebpfKeyed) Emit(e *ebpfgen.Emitter) error {
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	e.Insns = append(e.Insns, e.AddState(slotPackets, asm.R1)...)
	e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen))
	e.Insns = append(e.Insns, e.AddState(slotBytes, asm.R1)...)
	if c.sp == nil {
		e.Insns = append(e.Insns, asm.Ja.Label(e.Pass))
		return nil
	}
	base := int16(-e.StackOffset - flowkey.EBPFStack)
	hash, slot := base-8, base-16
	if slot < -512 {
		return fmt.Errorf("no room on the stack for the key (%d bytes taken)", e.StackOffset)
	}
	noKey, dropped, add := e.Label("nokey"), e.Label("dropped"), e.Label("add")
	if err := c.sp.EmitEBPF(e, functions.LinkEthernet, base, noKey); err != nil {
		return err
	}
	nw := int32(c.sp.Words())
	words := nw + 2
	c.sp.EmitHash(e, base, 0, asm.R1)
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, hash, asm.R1, asm.DWord))
	flowkey.EmitIndex(e, asm.R2, asm.R1, asm.R3, 0, c.size)
	e.Insns = append(e.Insns, asm.StoreMem(asm.RFP, slot, asm.R2, asm.DWord))
	// entry(j) looks up word j of the current slot's entry into R0.
	entry := func(j int32, miss string) asm.Instructions {
		in := asm.Instructions{
			asm.LoadMem(asm.R2, asm.RFP, slot, asm.DWord),
			asm.Mul.Imm(asm.R2, words),
		}
		if j > 0 {
			in = append(in, asm.Add.Imm(asm.R2, j))
		}
		return append(in, e.Lookup("table", asm.R2, miss)...)
	}
	for p := range min(maxProbe, int(c.size)) {
		compare, next := e.Label(fmt.Sprintf("cmp%d", p)), e.Label(fmt.Sprintf("next%d", p))
		e.Insns = append(e.Insns, entry(nw+1, dropped)...)
		e.Insns = append(e.Insns,
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.JEq.Imm(asm.R1, 1, compare),
			asm.JNE.Imm(asm.R1, 0, dropped),
			// Claim the empty entry: used 0 → 2.
			asm.Mov.Reg(asm.R3, asm.R0),
			asm.Mov.Imm(asm.R0, 0),
			asm.Mov.Imm(asm.R1, 2),
			ebpfgen.Atomic(asm.CmpXchg, asm.R3, asm.R1, asm.DWord, 0),
			asm.JNE.Imm(asm.R0, 0, dropped),
		)
		for j := range nw {
			e.Insns = append(e.Insns, entry(j, dropped)...)
			e.Insns = append(e.Insns,
				asm.LoadMem(asm.R1, asm.RFP, base+int16(8*j), asm.DWord),
				asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord))
		}
		e.Insns = append(e.Insns, entry(nw+1, dropped)...)
		e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord))
		e.Insns = append(e.Insns, e.AddState(slotKeys, asm.R1)...)
		e.Insns = append(e.Insns, asm.Ja.Label(add))
		// A used entry: its key?
		for j := range nw {
			in := entry(j, dropped)
			if j == 0 {
				in[0] = in[0].WithSymbol(compare)
			}
			e.Insns = append(e.Insns, in...)
			e.Insns = append(e.Insns,
				asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
				asm.LoadMem(asm.R2, asm.RFP, base+int16(8*j), asm.DWord),
				asm.JNE.Reg(asm.R1, asm.R2, next))
		}
		e.Insns = append(e.Insns, asm.Ja.Label(add))
		wrap := e.Label(fmt.Sprintf("wrap%d", p))
		e.Insns = append(e.Insns,
			asm.LoadMem(asm.R1, asm.RFP, slot, asm.DWord).WithSymbol(next),
			asm.Add.Imm(asm.R1, 1),
			asm.JNE.Imm(asm.R1, int32(c.size), wrap),
			asm.Mov.Imm(asm.R1, 0),
			// The verifier forgets the slot (r1 ^= x twice, x unknown), so
			// that the wrapped and the unwrapped path are one state.
			asm.Mov.Reg(asm.R4, ebpfgen.PacketEnd).WithSymbol(wrap),
			asm.Sub.Reg(asm.R4, ebpfgen.PacketStart),
			asm.And.Imm(asm.R4, 1<<24-1),
			asm.Xor.Reg(asm.R1, asm.R4),
			asm.Xor.Reg(asm.R1, asm.R4),
			asm.StoreMem(asm.RFP, slot, asm.R1, asm.DWord),
		)
	}
	e.Insns = append(e.Insns, asm.Ja.Label(dropped))
	in := entry(nw, dropped)
	in[0] = in[0].WithSymbol(add)
	e.Insns = append(e.Insns, in...)
	if c.bytes {
		e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen))
	} else {
		e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	}
	e.Insns = append(e.Insns, ebpfgen.Atomic(asm.AddAtomic, asm.R0, asm.R1, asm.DWord, 0), asm.Ja.Label(e.Pass))
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1).WithSymbol(dropped))
	e.Insns = append(e.Insns, e.AddState(slotDropped, asm.R1)...)
	e.Insns = append(e.Insns, asm.Ja.Label(e.Pass), asm.Mov.Imm(asm.R1, 1).WithSymbol(noKey))
	e.Insns = append(e.Insns, e.AddState(slotNoKey, asm.R1)...)
	e.Insns = append(e.Insns, asm.Ja.Label(e.Pass))
	return nil
}

func ebpfCounterCode(ctx *functions.Context) (ebpfgen.Function, error) {
	c := &ebpfKeyed{bytes: measure.Bytes(ctx.Params)}
	if ctx.Params.Has("key") {
		if ctx.LinkType != functions.LinkEthernet {
			return nil, fmt.Errorf("flow keys in eBPF read Ethernet frames, not %v", ctx.LinkType)
		}
		c.sp, c.size = measure.Spec(ctx.Params), uint32(ctx.Params.Int("size"))
	}
	return c, nil
}

// counterRuns: in eBPF a window double-buffers by epoch and the Go half
// reports it (sweeping the table for report=K), so what stays in
// userspace is a window too short for the Go half to close.
func counterRuns(t functions.Target, p functions.Params) error {
	if err := measure.SwitchHashRuns(t, p, nil); err != nil {
		return err
	}
	switch t {
	case functions.TargetKernel, functions.TargetXDP:
		return measure.EBPFWindow(p)
	case functions.TargetP4:
		return measure.P4Runs(p)
	}
	return nil
}
