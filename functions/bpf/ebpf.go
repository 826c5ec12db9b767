package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/asm"
	"github.com/cloudflare/cbpfc"
	xbpf "golang.org/x/net/bpf"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// ebpfFilter is a filter in an eBPF flowspace: libpcap's classic BPF,
// translated to eBPF by cbpfc.
// A load of the packet's type is a constant: the type of a packet at the
// program's hook (insns for a received packet, outgoing for a sent one).
type ebpfFilter struct{ insns, outgoing []xbpf.Instruction }

// newEBPF compiles the expression as for userspace and checks that eBPF can
// express it: a backward jump (libpcap's protochain) is a loop, which the
// verifier refuses, so such a filter stays in userspace.
func newEBPF(ctx *functions.Context) (ebpfgen.Function, error) {
	prog, err := compileContext(ctx)
	if err != nil {
		return nil, err
	}
	if prog.HasBackwardJumps() {
		return nil, errors.New("the filter jumps backwards (protochain), and eBPF cannot loop")
	}
	disassemble := func(raw []Instruction) []xbpf.Instruction {
		insns := make([]xbpf.Instruction, len(raw))
		for i, in := range raw {
			insns[i] = xbpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}.Disassemble()
		}
		return insns
	}
	raw := prog.Instructions()
	f := ebpfFilter{disassemble(withDirection(raw, functions.DirectionIn)), disassemble(withDirection(raw, functions.DirectionOut))}
	// Translate once now, so that what cbpfc cannot express is found at
	// placement, not when the program loads.
	if err := f.Emit(&ebpfgen.Emitter{Prefix: "check", Pass: "pass", Drop: "drop"}); err != nil {
		return nil, err
	}
	return f, nil
}

func (f ebpfFilter) StateSlots() int { return 0 }

func (f ebpfFilter) Emit(e *ebpfgen.Emitter) error {
	result := e.Label("result")
	insns := f.insns
	if e.Outgoing { // the packet's type, for inbound and outbound (direction.go)
		insns = f.outgoing
	}
	code, err := cbpfc.ToEBPF(insns, cbpfc.EBPFOpts{
		PacketStart: ebpfgen.PacketStart,
		PacketEnd:   ebpfgen.PacketEnd,
		Result:      asm.R5,
		ResultLabel: result,
		Working:     [4]asm.Register{asm.R1, asm.R2, asm.R3, asm.R4},
		StackOffset: e.StackOffset,
		LabelPrefix: e.Prefix,
	})
	if err != nil {
		return fmt.Errorf("cannot translate the filter to eBPF: %v", err)
	}
	e.Insns = append(e.Insns, code...)
	e.Insns = append(e.Insns,
		asm.JEq.Imm(asm.R5, 0, e.Drop).WithSymbol(result),
		asm.Ja.Label(e.Pass),
	)
	return nil
}
