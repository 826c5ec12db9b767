package sample

import (
	"errors"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// ebpfEvery is sample with every=N in an eBPF flowspace: seen is one
// shared counter whose atomic fetch-and-add numbers the packets (0, 1, …,
// whichever CPU takes them), and the packets whose number is a multiple of
// N pass, as in Go; sampled is per CPU, summed.
type ebpfEvery struct{ every uint64 }

func (s ebpfEvery) StateSlots() int { return 0 }
func (s ebpfEvery) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "seen", Shared: true}, {Name: "sampled"}}
}

func (s ebpfEvery) Emit(e *ebpfgen.Emitter) error {
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 0))
	e.Insns = append(e.Insns, e.Lookup("seen", asm.R1, e.Pass)...)
	e.Insns = append(e.Insns,
		asm.Mov.Imm(asm.R1, 1),
		ebpfgen.Atomic(asm.FetchAdd, asm.R0, asm.R1, asm.DWord, 0), // r1: the packet's number
		asm.LoadImm(asm.R2, int64(s.every), asm.DWord),
		asm.Mod.Reg(asm.R1, asm.R2),
		asm.JNE.Imm(asm.R1, 0, e.Drop),
	)
	e.Insns = append(e.Insns, e.Lookup("sampled", asm.R1, e.Pass)...)
	e.Insns = append(e.Insns,
		asm.Mov.Imm(asm.R1, 1),
		ebpfgen.Atomic(asm.AddAtomic, asm.R0, asm.R1, asm.DWord, 0),
		asm.Ja.Label(e.Pass),
	)
	return nil
}

func ebpfCode(ctx *functions.Context) (ebpfgen.Function, error) {
	if !ctx.Params.Has("every") {
		return nil, errRate
	}
	return ebpfEvery{every: uint64(ctx.Params.Int("every"))}, nil
}

var errRate = errors.New("rate= writes each packet's random number as an annotation, which eBPF code does not carry up: it runs in userspace")

// runs keeps rate= in userspace.
func runs(t functions.Target, p functions.Params) error {
	if (t == functions.TargetKernel || t == functions.TargetXDP) && !p.Has("every") {
		return errRate
	}
	return nil
}
