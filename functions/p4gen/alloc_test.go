package p4gen

import (
	"reflect"
	"strings"
	"testing"
)

// sketchFn lowers a count-min-like function of rows registers of size
// cells of 32 bits: a hash per row into metadata, then the row's RMW at
// that index (a match dependency: the RMW is a stage after its hash).
func sketchFn(p *Program, prefix string, rows, size int) (*Builder, []*Register) {
	b := &Builder{Prog: p, ID: prefix, Prefix: prefix, In: True}
	var regs []*Register
	for i := range rows {
		idx := b.Meta("idx"+string(rune('0'+i)), 32)
		r := b.Register("row"+string(rune('0'+i)), 32, size, "c", i*size)
		regs = append(regs, r)
		b.Add(Hash{Dst: idx, Algo: CRC32, Data: []Expr{C(uint64(i), 8), F("ipv4_src_2", "src_2")}, Max: uint64(size)},
			RMW{Reg: r, Index: idx, New: B(Add, Old{32}, C(1, 32))})
	}
	return b, regs
}

func TestAllocDependencies(t *testing.T) {
	p := NewProgram("t")
	b, regs := sketchFn(p, "cms_2", 5, 4096)
	a, err := NewAllocator(Tofino1())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Offer(p, "cms_2", b.Body, nil); err != nil {
		t.Fatal(err)
	}
	// The five hashes are in stage 0 (five actions: an RMW between each
	// two); the RMWs read them, so they start at stage 1, four stateful
	// ALUs a stage: the fifth goes to stage 2.
	for i, r := range regs {
		_, s, ok := a.StageOf(r)
		want := 1
		if i == 4 {
			want = 2
		}
		if !ok || s != want {
			t.Errorf("register %s in stage %d (%v), want %d", r.Name, s, ok, want)
		}
	}
	r := a.Report()
	if r.Depth != 3 || r.Stateful != 5 || r.ALUs != 5 || r.Width != 5 {
		t.Errorf("report: depth %d, stateful %d, ALUs %d, width %d; want 3, 5, 5, 5\n%s", r.Depth, r.Stateful, r.ALUs, r.Width, r)
	}
	// 4096 cells of 32 bits: 4 a word of 128 bits, 1024 words a block.
	if got := r.Ingress[1].SRAM; got != 4 {
		t.Errorf("stage 1 has %d SRAM blocks for four registers of 4096×32 b, want 4", got)
	}

	// A function reading what the sketch wrote (a write-after-read of
	// its index is fine in the reader's stage; a read is after it).
	q := &Builder{Prog: p, ID: "m_3", Prefix: "m_3", In: True}
	out := q.Meta("out", 32)
	q.Add(Assign{Dst: out, X: Ref{Path: "meta.cms_2_idx0", Bits: 32}},
		Assign{Dst: Ref{Path: "meta.cms_2_idx4", Bits: 32}, X: C(0, 32)})
	if err := a.Offer(p, "m_3", q.Body, nil); err != nil {
		t.Fatal(err)
	}
	r = a.Report()
	if len(r.Ingress) < 3 || !strings.Contains(strings.Join(r.Ingress[1].Units, ";"), "m_3") && !strings.Contains(strings.Join(r.Ingress[2].Units, ";"), "m_3") {
		t.Errorf("m_3 is not after stage 0:\n%s", r)
	}
}

func TestAllocRefusals(t *testing.T) {
	small := Tofino1()
	small.SRAMBlocks = 20
	p := NewProgram("t")
	hll := &Builder{Prog: p, ID: "hll_3", Prefix: "hll_3", In: True}
	big := hll.Register("regs", 32, 65536, "r", 0)
	hll.Add(RMW{Reg: big, Index: C(0, 32), New: Old{32}})
	a, err := NewAllocator(small)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Offer(p, "hll_3", hll.Body, nil); err != nil {
		t.Fatal(err)
	}

	// A second 2 Mb register does not fit beside the first in stage 0
	// (16 of 20 blocks taken) but fits in stage 1: it goes there.
	cms := &Builder{Prog: p, ID: "cms_2", Prefix: "cms_2", In: True}
	row := cms.Register("row0", 32, 65536, "c", 0)
	cms.Add(RMW{Reg: row, Index: C(1, 32), New: Old{32}})
	if err := a.Offer(p, "cms_2", cms.Body, nil); err != nil {
		t.Fatal(err)
	}
	if _, s, _ := a.StageOf(row); s != 1 {
		t.Errorf("cms_2_row0 in stage %d, want 1", s)
	}

	// One too big for any stage is refused in the resource's terms, and
	// the allocation stays as it was.
	huge := cms.Register("row1", 32, 1<<20, "c", 0)
	b2 := &Builder{Prog: p, ID: "cms_4", Prefix: "cms_4", In: True}
	b2.Add(RMW{Reg: huge, Index: C(1, 32), New: Old{32}})
	mid := a.Report()
	err = a.Offer(p, "cms_4", b2.Body, nil)
	want := "register cms_2_row1 of 1048576×32 b needs 256 SRAM blocks, 1 stateful ALU, 1 logical table; a stage has 20 SRAM blocks"
	if err == nil || err.Error() != want {
		t.Errorf("refusal: %v\nwant: %s", err, want)
	}
	if !reflect.DeepEqual(a.Report(), mid) {
		t.Error("a refused offer changed the allocation")
	}

	// A register that fits a stage but not the one its dependency allows
	// and none after: the message names the stage, what is left, and
	// who took it.
	one := small
	one.Stages = 2
	a2, _ := NewAllocator(one)
	if err := a2.Offer(p, "hll_3", hll.Body, nil); err != nil {
		t.Fatal(err)
	}
	dep := &Builder{Prog: p, ID: "cms_5", Prefix: "cms_5", In: True}
	idx := dep.Meta("idx", 32)
	r5 := dep.Register("row0", 32, 65536, "c", 0)
	dep.Add(Assign{Dst: idx, X: C(3, 32)}, RMW{Reg: r5, Index: idx, New: Old{32}})
	if err := a2.Offer(p, "cms_5", dep.Body, nil); err != nil {
		t.Fatalf("cms_5 should fit in stage 1: %v", err)
	}
	dep2 := &Builder{Prog: p, ID: "cms_6", Prefix: "cms_6", In: True}
	r6 := dep2.Register("row0", 32, 65536, "c", 0)
	dep2.Add(RMW{Reg: r6, Index: C(0, 32), New: Old{32}})
	err = a2.Offer(p, "cms_6", dep2.Body, nil)
	want = "register cms_6_row0 of 65536×32 b needs 16 SRAM blocks, 1 stateful ALU, 1 logical table; stage 0 has 4 SRAM blocks left after hll_3, cms_5, and stage 1 has no room either"
	if err == nil || err.Error() != want {
		t.Errorf("refusal: %v\nwant: %s", err, want)
	}

	// Pipeline depth: a chain of dependent statements longer than the
	// stages.
	deep := NewProgram("deep")
	d := &Builder{Prog: deep, ID: "x", Prefix: "x", In: True}
	prev := d.Meta("m0", 8)
	for i := 1; i <= 3; i++ {
		next := d.Meta("m"+string(rune('0'+i)), 8)
		d.Add(Assign{Dst: next, X: B(Add, prev, C(1, 8))})
		prev = next
	}
	a3, _ := NewAllocator(one)
	err = a3.Offer(deep, "x", d.Body, nil)
	if err == nil || !strings.Contains(err.Error(), "would need stage 2 of the ingress pipeline (it reads meta.x_m2, written in stage 1); the switch has 2 stages") {
		t.Errorf("depth: %v", err)
	}
}

// Accesses to one register on exclusive branches share its stage: the
// stage the latest of them needs (the first access, which could be
// earlier, waits for it); one whose inputs come later than the pipeline's
// last stage is refused.
func TestAllocRegisterOnBranches(t *testing.T) {
	p := NewProgram("t")
	b := &Builder{Prog: p, ID: "w", Prefix: "w", In: True}
	r := b.Register("r", 16, 1024, "r", 0)
	i1 := b.Meta("i1", 32)
	b.Add(If{Cond: Valid{"tcp_urg"},
		Then: []Stmt{RMW{Reg: r, Index: C(0, 32), New: C(1, 16)}},
		Else: []Stmt{Assign{Dst: i1, X: C(1, 32)}, RMW{Reg: r, Index: i1, New: C(2, 16)}}})
	a, _ := NewAllocator(Tofino1())
	if err := a.Offer(p, "w", b.Body, nil); err != nil {
		t.Fatal(err)
	}
	if gress, s, ok := a.StageOf(r); !ok || gress != "ingress" || s != 1 {
		t.Errorf("register w_r in %s stage %d, want ingress stage 1 (where its later access can be)", gress, s)
	}
	one := Tofino1()
	one.Stages = 1
	a, _ = NewAllocator(one)
	err := a.Offer(p, "w", b.Body, nil)
	if err == nil || !strings.Contains(err.Error(), "must be in stage 0, where register w_r is, but it reads meta.w_i1, written in stage 0") {
		t.Errorf("one stage: %v", err)
	}
	p2 := NewProgram("t")
	b2 := &Builder{Prog: p2, ID: "w", Prefix: "w", In: True}
	r2 := b2.Register("r", 16, 1024, "r", 0)
	b2.Add(If{Cond: Valid{"tcp_urg"},
		Then: []Stmt{RMW{Reg: r2, Index: C(0, 32), New: C(1, 16)}},
		Else: []Stmt{RMW{Reg: r2, Index: C(1, 32), New: C(2, 16)}}})
	a2, _ := NewAllocator(Tofino1())
	if err := a2.Offer(p2, "w", b2.Body, nil); err != nil {
		t.Fatal(err)
	}
	rep := a2.Report()
	if rep.Depth != 1 || rep.ALUs != 1 || rep.Stateful != 2 || rep.SRAM != 1 {
		t.Errorf("two accesses of one register: %s", rep)
	}
}

func TestAllocTables(t *testing.T) {
	p := NewProgram("t")
	b := &Builder{Prog: p, ID: "f", Prefix: "f", In: True}
	fwd := b.Action("fwd", []Field{{Name: "port", Bits: 9}}, Assign{Dst: Std("egress_spec"), X: Ref{Path: "port", Bits: 9}})
	ex := b.Table(&Table{Name: "ex", Keys: []TableKey{{X: hdr("ipv4.dst"), Match: Exact}}, Actions: []*Action{fwd}, Default: fwd, DefaultArgs: []uint64{1}, Size: 4096})
	tc := b.Table(&Table{Name: "tc", Keys: []TableKey{{X: hdr("ipv4.dst"), Match: LPM}, {X: F("l4_dport", "dst_port"), Match: Range}}, Actions: []*Action{fwd}, Default: fwd, DefaultArgs: []uint64{1}, Size: 1024})
	b.Add(Apply{Table: ex}, Apply{Table: tc})
	a, _ := NewAllocator(Tofino1())
	if err := a.Offer(p, "f", b.Body, nil); err != nil {
		t.Fatal(err)
	}
	r := a.Report()
	// ex: 32-bit key + 9-bit parameter = 41 bits, 3 a 128-bit word: 1366
	// words, 2 blocks. tc: 48 key bits in 44-bit TCAM words (2 wide) ×
	// 1024/512 deep = 4 TCAM blocks, action data 9 bits × 1024 in 1 block.
	// Both write egress_spec: tc is a stage after ex.
	if r.Depth != 2 || r.Ingress[0].SRAM != 2 || r.Ingress[1].TCAM != 4 || r.Ingress[1].SRAM != 1 {
		t.Errorf("tables:\n%s", r)
	}
	if !strings.Contains(r.String(), "pipeline depth 2 of 12 stages") {
		t.Errorf("report text:\n%s", r)
	}
}

func TestAllocRegisterWidth(t *testing.T) {
	p := NewProgram("t")
	b := &Builder{Prog: p, ID: "f", Prefix: "f", In: True}
	r := b.Register("wide", 64, 1024, "r", 0)
	b.Add(RMW{Reg: r, Index: C(0, 32), New: Old{64}})
	a, _ := NewAllocator(Tofino1())
	if err := a.Offer(p, "f", b.Body, nil); err != nil {
		t.Fatal(err)
	}
	if got := a.Report().ALUs; got != 2 {
		t.Errorf("a 64-bit register as a pair takes %d stateful ALUs, want 2", got)
	}
	prof := Tofino1()
	prof.PairedWidth = 0
	a2, _ := NewAllocator(prof)
	err := a2.Offer(p, "f", b.Body, nil)
	if err == nil || err.Error() != "register f_wide is 64 bits wide; this switch has registers of 1, 8, 16, 32 bits" {
		t.Errorf("%v", err)
	}
}
