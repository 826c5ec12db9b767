package kernel

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("loading eBPF programs needs root")
		}
		t.Skip("loading eBPF programs needs root")
	}
}

// mapTest keeps one field of each merge in a map: per packet of wire length
// L, hist[L%8] += 1 (sum), reg[L%8] = max(reg, L/8) (max), bits |= 1<<(L%64)
// (or) and last = L (shared), beside a counter slot n += 1.
type mapTest struct{}

func (mapTest) StateSlots() int { return 1 }
func (mapTest) MapFields() []ebpfgen.MapField {
	return []ebpfgen.MapField{{Name: "hist"}, {Name: "reg"}, {Name: "bits"}, {Name: "last"}}
}

func (mapTest) Emit(e *ebpfgen.Emitter) error {
	l := e.Label
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1))
	e.Insns = append(e.Insns, e.AddState(0, asm.R1)...)
	e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen), asm.And.Imm(asm.R1, 7))
	e.Insns = append(e.Insns, e.Lookup("hist", asm.R1, l("miss"))...)
	e.Insns = append(e.Insns, asm.Mov.Imm(asm.R1, 1), asm.StoreXAdd(asm.R0, asm.R1, asm.DWord))
	e.Insns = append(e.Insns, asm.Mov.Reg(asm.R1, ebpfgen.WireLen), asm.And.Imm(asm.R1, 7))
	e.Insns = append(e.Insns, e.Lookup("reg", asm.R1, l("miss"))...)
	e.Insns = append(e.Insns,
		asm.Mov.Reg(asm.R1, ebpfgen.WireLen), asm.RSh.Imm(asm.R1, 3), asm.And.Imm(asm.R1, 0xff),
		asm.LoadMem(asm.R2, asm.R0, 0, asm.DWord),
		asm.JGE.Reg(asm.R2, asm.R1, l("bits")),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0).WithSymbol(l("bits")),
	)
	e.Insns = append(e.Insns, e.Lookup("bits", asm.R1, l("miss"))...)
	e.Insns = append(e.Insns,
		asm.Mov.Imm(asm.R1, 1), asm.Mov.Reg(asm.R2, ebpfgen.WireLen), asm.And.Imm(asm.R2, 63),
		asm.LSh.Reg(asm.R1, asm.R2),
		asm.LoadMem(asm.R2, asm.R0, 0, asm.DWord), asm.Or.Reg(asm.R2, asm.R1), asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
	)
	e.Insns = append(e.Insns, e.Lookup("last", asm.R1, l("miss"))...)
	e.Insns = append(e.Insns, asm.StoreMem(asm.R0, 0, ebpfgen.WireLen, asm.DWord),
		asm.Ja.Label(e.Pass).WithSymbol(l("miss")))
	return nil
}

var mapTestClass = &functions.Class{Name: "maptest", State: &functions.State{Fields: []functions.StateField{
	{Name: "n", Type: buffers.U64, Merge: functions.MergeSum},
	{Name: "hist", Type: buffers.U64, Len: 8, Merge: functions.MergeSum},
	{Name: "reg", Type: buffers.U8, Len: 8, Merge: functions.MergeMax},
	{Name: "bits", Type: buffers.U64, Merge: functions.MergeOr},
	{Name: "last", Type: buffers.U32, Merge: functions.MergeShared},
}}}

// TestStateMapsMerge: a function's state maps, per-CPU or shared as its
// class declares, reach its MBuf with each field's merge: the CPUs' copies
// summed, their maximum, their bits or'ed; a shared map as it is.
func TestStateMapsMerge(t *testing.T) {
	needRoot(t)
	mbuf, err := mapTestClass.State.NewMBuf(functions.TargetXDP, functions.Params{})
	if err != nil {
		t.Fatal(err)
	}
	maps, err := newStateMaps(mapTestClass, mbuf.Fields(), mapTest{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps(maps)
	if maps["last"].m.Type() != ebpf.Array || maps["reg"].m.Type() != ebpf.PerCPUArray {
		t.Fatalf("map types: last %v, reg %v", maps["last"].m.Type(), maps["reg"].m.Type())
	}
	ncpu := ebpf.MustPossibleCPU()
	// Other CPUs' copies, as if they had seen packets: the merge must
	// combine them with what this run adds on its CPU.
	other := make([]uint64, ncpu)
	if ncpu > 1 {
		other[ncpu-1] = 100
	}
	for i := range uint32(8) {
		maps["hist"].m.Update(i, other, ebpf.UpdateAny)
		maps["reg"].m.Update(i, other, ebpf.UpdateAny)
	}
	bits := make([]uint64, ncpu)
	if ncpu > 1 {
		bits[ncpu-1] = 1 << 63
	}
	maps["bits"].m.Update(uint32(0), bits, ebpf.UpdateAny)

	counters, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer counters.Close()
	p := &progSpec{kind: flowspaces.KindXDP, iface: "t", counters: counters, snap: ringbuf.Snap, progName: "ffpf_test",
		nodes: []progNode{{iface: "t", in: true, slot: 0}, {node: &flowspaces.Node{ID: "maptest"}, fn: mapTest{}, inputs: []int{0}, slot: 2, maps: maps}}}
	prog, err := p.load("test")
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	var hist [8]uint64
	var reg [8]uint8
	var or uint64
	lens := []int{60, 64, 77, 1514, 1000, 61, 333, 128, 129, 64}
	for _, l := range lens {
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, l)}); err != nil {
			t.Fatal(err)
		}
		hist[l%8]++
		reg[l%8] = max(reg[l%8], uint8(l/8))
		or |= 1 << (l % 64)
	}
	if ncpu > 1 {
		for i := range hist {
			hist[i] += 100
			reg[i] = max(reg[i], 100)
		}
		or |= 1 << 63
	}
	for _, s := range maps {
		if err := s.read(mbuf); err != nil {
			t.Fatal(err)
		}
	}
	f := func(name string) buffers.Field { return functions.FieldOf(mbuf, name) }
	if got := mbuf.Uint64s(f("hist")); [8]uint64(got) != hist {
		t.Errorf("hist %v, want %v", got, hist)
	}
	if got := mbuf.Uint8s(f("reg")); [8]uint8(got) != reg {
		t.Errorf("reg %v, want %v", got, reg)
	}
	if got := mbuf.Load64(f("bits").Offset); got != or {
		t.Errorf("bits %#x, want %#x", got, or)
	}
	if got := mbuf.Uint32(f("last").Offset); got != uint32(lens[len(lens)-1]) {
		t.Errorf("last %d, want %d", got, lens[len(lens)-1])
	}
}

// TestStateMapsRefused: a map field the class does not declare, or one
// that is also a counter slot, is refused with the field named.
func TestStateMapsRefused(t *testing.T) {
	needRoot(t)
	fields, _, err := mapTestClass.State.Layout(functions.TargetXDP, functions.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newStateMaps(mapTestClass, fields[:2], mapTest{}, 1); err == nil {
		t.Error("a map field the layout lacks was accepted")
	}
	if _, err := newStateMaps(mapTestClass, fields, slotAndMap{}, 1); err == nil {
		t.Error("a field both a slot and a map was accepted")
	}
}

type slotAndMap struct{ mapTest }

func (slotAndMap) MapFields() []ebpfgen.MapField { return []ebpfgen.MapField{{Name: "n"}} }
