package pisa

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// regWidths are the widths a switch's registers have.
var regWidths = []int{1, 8, 16, 32, 64}

// widthRMWs is a program with, for width w, a count that wraps (old +
// mask), a maximum and a conditional write of a random value, over three
// registers of w bits whose old and new values a digest carries.
func widthRMWs(w int) *p4gen.Program {
	prog := p4gen.NewProgram(fmt.Sprintf("rmw%d", w))
	ref := func(n string, bits int) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: bits} }
	i, x := ref("i", 32), ref("x", w)
	prog.Metadata = []p4gen.Field{{Name: "i", Bits: 32}, {Name: "x", Bits: w}}
	var outs []p4gen.Ref
	var df []p4gen.Field
	for _, n := range []string{"o1", "n1", "o2", "n2", "o3", "n3"} {
		prog.Metadata = append(prog.Metadata, p4gen.Field{Name: n, Bits: w})
		df = append(df, p4gen.Field{Name: n, Bits: w})
		outs = append(outs, ref(n, w))
	}
	mask := p4gen.Bit(w).Mask()
	cnt := &p4gen.Register{Name: "cnt", Width: w, Size: 5}
	top := &p4gen.Register{Name: "top", Width: w, Size: 5}
	cond := &p4gen.Register{Name: "cond", Width: w, Size: 5}
	prog.Registers = []*p4gen.Register{cnt, top, cond}
	d := &p4gen.DigestType{Name: "d_t", Fields: df}
	prog.Digests = []*p4gen.DigestType{d}
	old := p4gen.Old{Bits: w}
	var vals []p4gen.Expr
	for _, o := range outs {
		vals = append(vals, o)
	}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Random{Dst: i, Hi: 4},
		p4gen.Random{Dst: x, Hi: mask},
		p4gen.RMW{Reg: cnt, Index: i, New: p4gen.B(p4gen.Add, old, p4gen.C(mask, w)), OldTo: &outs[0], NewTo: &outs[1]},
		p4gen.RMW{Reg: top, Index: i, New: p4gen.Mux{Cond: p4gen.B(p4gen.Lt, old, x), Then: x, Else: old}, OldTo: &outs[2], NewTo: &outs[3]},
		p4gen.RMW{Reg: cond, Index: i, New: x, Cond: p4gen.B(p4gen.Gt, x, old), OldTo: &outs[4], NewTo: &outs[5]},
		p4gen.Digest{Type: d, Values: vals},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	return prog
}

// A register's cells are stored at its declared width (one byte for 1
// and 8 bits, two, four, eight), and every read-modify-write on them,
// the direct ones (a wrapping count, a maximum) and the general one,
// comes out as the reference's, cells and digests, at every width.
func TestRegisterWidthsAsReference(t *testing.T) {
	for _, w := range regWidths {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			prog := widthRMWs(w)
			m := sameAsReference(t, prog, nil, splitReads)
			for _, r := range prog.Registers {
				g := m.regs[m.regIdx[r]]
				bytes := map[int]int{1: 1, 8: 1, 16: 2, 32: 4, 64: 8}[w]
				if got := len(g.c8) + 2*len(g.c16) + 4*len(g.c32) + 8*len(g.c64); got != bytes*r.Size {
					t.Fatalf("register %s of %d bits: %d bytes for %d cells", r.Name, w, got, r.Size)
				}
				nonzero := 0
				for _, v := range m.Register(r) {
					if v != 0 {
						nonzero++
					}
				}
				if nonzero == 0 {
					t.Fatalf("register %s: no cell changed", r.Name)
				}
			}
		})
	}
}

// SetRegister writes one cell or all, masked to the register's width,
// refuses an index past the end; Register returns a copy.
func TestSetRegister(t *testing.T) {
	for _, w := range regWidths {
		prog := widthRMWs(w)
		m, err := Load(prog, roomy)
		if err != nil {
			t.Fatal(err)
		}
		r := prog.Registers[0]
		mask := p4gen.Bit(w).Mask()
		if err := m.SetRegister(r, -1, 0x0123456789abcdef); err != nil {
			t.Fatal(err)
		}
		if err := m.SetRegister(r, 2, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
		got := m.Register(r)
		for j, v := range got {
			want := 0x0123456789abcdef & mask
			if j == 2 {
				want = mask
			}
			if v != want {
				t.Fatalf("%d bits: cell %d is %#x, want %#x", w, j, v, want)
			}
		}
		got[0] = 7
		if m.Register(r)[0] == 7 && mask != 7 {
			t.Fatalf("%d bits: Register's result writes the register", w)
		}
		if err := m.SetRegister(r, r.Size, 1); err == nil {
			t.Fatalf("%d bits: index %d of %d cells written", w, r.Size, r.Size)
		}
		if err := m.SetRegister(&p4gen.Register{Name: "other", Width: w, Size: 1}, 0, 1); err == nil {
			t.Fatal("a register not in the program written")
		}
	}
}

// A packet's varbit field is empty unless its parser extracted it: a
// header made valid in ingress after a packet with IPv4 options (whose
// header it is) is deparsed with no options, as in the reference.
func TestVarbitClearedBetweenPackets(t *testing.T) {
	prog := p4gen.NewProgram("varbit")
	prog.Ingress = []p4gen.Stmt{
		p4gen.SetValid{Header: "ipv4_opts", Valid: true},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
}

// The variants table tells keys apart by every word: keys of two words
// that share the first find their own variants, and a key not added
// finds none.
func TestVariantsKeys(t *testing.T) {
	for _, words := range []int{1, 2, 3} {
		var vs variants
		var added []*variant
		for i := range 40 {
			k := make([]uint64, words)
			k[0] = uint64(i % 4)
			k[words-1] |= uint64(i) << 8
			v := &variant{key: k}
			vs.add(v)
			added = append(added, v)
		}
		for _, v := range added {
			if got := vs.find(append([]uint64(nil), v.key...)); got != v {
				t.Fatalf("%d words: key %x found %v", words, v.key, got)
			}
		}
		k := make([]uint64, words)
		k[0], k[words-1] = 1, k[words-1]|99<<8
		if got := vs.find(k); got != nil {
			t.Fatalf("%d words: key %x not added found %x", words, k, got.key)
		}
	}
}

// Variants whose ingress folds to the same statements run the same
// closures (compiled once): on the benchmark's trace, the variants'
// top-level ops are fewer distinct closures than ops.
func TestVariantsShareCode(t *testing.T) {
	m, err := Load(cmsHLL(t), deep())
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range p4gentest.Frames(1, 4096, 10000) {
		if _, err := m.Process(p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ops, distinct := 0, map[unsafe.Pointer]bool{}
	for _, sl := range m.vars.slots {
		if sl.v == nil {
			continue
		}
		for _, o := range sl.v.ops {
			ops++
			distinct[*(*unsafe.Pointer)(unsafe.Pointer(&o))] = true
		}
	}
	if m.vars.n < 10 || len(distinct) > ops/2 {
		t.Fatalf("%d variants: %d ops, %d distinct closures", m.vars.n, ops, len(distinct))
	}
	t.Logf("%d variants: %d ops, %d distinct closures", m.vars.n, ops, len(distinct))
}

// Counts in a row (a count-min sketch's rows: a constant added at an
// index in a field, nothing copied out) run as one op per run of one
// cell type: rows of every width, wrapping, one of them indexed past its
// cells for some packets (the error stops the rows after it, as the
// reference stops), come out as the reference's cells and errors.
func TestCountRowsAsReference(t *testing.T) {
	prog := p4gen.NewProgram("rows")
	i := p4gen.Ref{Path: "meta.i", Bits: 32}
	prog.Metadata = []p4gen.Field{{Name: "i", Bits: 32}}
	prog.Ingress = []p4gen.Stmt{p4gen.Random{Dst: i, Hi: 4}}
	for n, w := range []int{64, 64, 32, 8, 8, 1, 16} {
		size := 5
		if n == 0 {
			size = 4 // index 4 is past it: an error, before row 1 counts
		}
		r := &p4gen.Register{Name: fmt.Sprintf("row%d", n), Width: w, Size: size}
		prog.Registers = append(prog.Registers, r)
		prog.Ingress = append(prog.Ingress,
			p4gen.RMW{Reg: r, Index: i, New: p4gen.B(p4gen.Add, p4gen.Old{Bits: w}, p4gen.C(p4gen.Bit(w).Mask()-uint64(n), w))})
	}
	prog.Ingress = append(prog.Ingress, p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)})
	m := sameAsReference(t, prog, nil, splitReads)
	runs := 0
	for _, sl := range m.vars.slots {
		if sl.v != nil {
			runs = max(runs, len(sl.v.ops))
		}
	}
	// random, then the runs 64 64 | 32 | 8 8 1 | 16, then egress_spec.
	if runs != 6 {
		t.Fatalf("a variant of %d ops, not 6", runs)
	}
}
