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

// ebpfRate is sample with rate=P in an eBPF flowspace: each packet passes
// when a number from bpf_get_prandom_u32 is below P·2^32 (every packet
// with rate=1), independently, as in Go; seen and sampled are counter
// slots, summed over CPUs. The kernel's generator is not Go's seeded one:
// the sample has the same rate, not the same packets, and writes no rand
// annotation.
type ebpfRate struct {
	limit uint64 // a packet passes when its number is below it
	all   bool
}

func (s ebpfRate) StateSlots() int { return 2 } // seen, sampled

func (s ebpfRate) Emit(e *ebpfgen.Emitter) error {
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	e.Insns = append(e.Insns, e.AddState(0, asm.R1)...)
	if !s.all {
		e.Insns = append(e.Insns,
			asm.FnGetPrandomU32.Call(),
			asm.LoadImm(asm.R1, int64(s.limit), asm.DWord),
			asm.JGE.Reg(asm.R0, asm.R1, e.Drop),
		)
	}
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	e.Insns = append(e.Insns, e.AddState(1, asm.R1)...)
	e.Insns = append(e.Insns, asm.Ja.Label(e.Pass))
	return nil
}

func ebpfCode(ctx *functions.Context) (ebpfgen.Function, error) {
	if err := runs(functions.TargetKernel, ctx.Params); err != nil {
		return nil, err
	}
	if !ctx.Params.Has("every") {
		rate := ctx.Params.Float("rate")
		return ebpfRate{limit: uint64(rate * (1 << 32)), all: rate >= 1}, nil
	}
	return ebpfEvery{every: uint64(ctx.Params.Int("every"))}, nil
}

var errSeed = errors.New("seed= asks for the sample of the seeded generator, which only Go draws: it runs in userspace (without seed=, rate= runs in eBPF on the kernel's generator)")

// runs keeps rate= with an explicit seed= in userspace: a user who gives
// the seed wants that generator's sample (and the same one on every run).
func runs(t functions.Target, p functions.Params) error {
	switch {
	case (t == functions.TargetKernel || t == functions.TargetXDP) && p.Has("rate") && p.Has("seed"):
		return errSeed
	case t == functions.TargetP4 && p.Has("rate") && p.Has("seed"):
		return errSeedP4
	}
	return nil
}
