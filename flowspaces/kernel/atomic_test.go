package kernel

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// TestAtomics: the atomic operations the classes use do what they say in
// the kernel: a fetch-and-add returns the old value, an or sets bits (an
// add would carry), a compare-and-swap swaps only on a match and returns
// the old value.
func TestAtomics(t *testing.T) {
	needRoot(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8 * 5, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// v[0]: counter; v[1]: the old value fetched; v[2]: bits; v[3]: swap
	// target; v[4]: what the swap returned.
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.StoreImm(asm.RFP, -8, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(), asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Reg(asm.R6, asm.R0),
		asm.Mov.Imm(asm.R1, 1),
		ebpfgen.Atomic(asm.FetchAdd, asm.R6, asm.R1, asm.DWord, 0),
		asm.StoreMem(asm.R6, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 5),
		ebpfgen.Atomic(asm.OrAtomic, asm.R6, asm.R1, asm.DWord, 16),
		asm.Mov.Imm(asm.R0, 0), // swap 0 → 9: only the first run
		asm.Mov.Imm(asm.R1, 9),
		ebpfgen.Atomic(asm.CmpXchg, asm.R6, asm.R1, asm.DWord, 24),
		asm.StoreMem(asm.R6, 32, asm.R0, asm.DWord),
		asm.Mov.Imm(asm.R0, 2).WithSymbol("out"), asm.Return(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for run := range uint64(3) {
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 60)}); err != nil {
			t.Fatal(err)
		}
		var v [5]uint64
		if err := m.Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		swapped := uint64(0)
		if run > 0 {
			swapped = 9
		}
		if want := [5]uint64{run + 1, run, 5, 9, swapped}; v != want {
			t.Fatalf("run %d: %v, want %v", run, v, want)
		}
	}
}
