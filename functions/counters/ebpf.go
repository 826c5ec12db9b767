package counters

import (
	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
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
