package pisa

import (
	"fmt"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// bitExpr makes a random expression of w bits that mostly only moves
// bits (what fused compiles into one closure), over g's fields, with
// now and then an addition, which is a term of its own.
func (g *exprGen) bitExpr(w, depth int) p4gen.Expr {
	if depth <= 0 || g.rng.IntN(5) == 0 {
		return g.leaf(w, 4)
	}
	switch g.rng.IntN(8) {
	case 0:
		return p4gen.Cast{Bits: w, X: g.bitExpr(foldWidths[g.rng.IntN(len(foldWidths))], depth-1)}
	case 1:
		if w < 64 {
			lo := g.rng.IntN(64 - w + 1)
			return p4gen.Slice{X: g.bitExpr(64, depth-1), Hi: lo + w - 1, Lo: lo}
		}
	case 2:
		return p4gen.B(p4gen.And, g.bitExpr(w, depth-1), g.konst(w))
	case 3:
		return p4gen.B(p4gen.Shl, g.bitExpr(w, depth-1), p4gen.C(uint64(g.rng.IntN(w+2)), w))
	case 4:
		return p4gen.B(p4gen.Shr, g.bitExpr(w, depth-1), p4gen.C(uint64(g.rng.IntN(w+2)), w))
	case 5:
		return p4gen.B(p4gen.Add, g.bitExpr(w, depth-1), g.bitExpr(w, depth-1))
	case 6:
		// One field's bits taken apart and put together again.
		x := g.refs[w][g.rng.IntN(len(g.refs[w]))]
		k := g.konst(w)
		n := p4gen.C(uint64(g.rng.IntN(w)), w)
		return p4gen.B(p4gen.Or, p4gen.B(p4gen.And, x, k), p4gen.B(p4gen.Shl, p4gen.B(p4gen.Shr, x, n), n))
	}
	return p4gen.B(p4gen.Or, g.bitExpr(w, depth-1), g.bitExpr(w, depth-1))
}

// Expressions that move bits, compiled into one closure each, compute
// what the reference does: random fields (drawn by random, so unknown
// to the specialiser), random expressions over them in digests, or
// assigned to fields that are.
func TestFusedAsReference(t *testing.T) {
	prog := p4gen.NewProgram("fused")
	g := newExprGen(prog, 5)
	for _, w := range foldWidths {
		for _, r := range g.refs[w] {
			prog.Ingress = append(prog.Ingress, p4gen.Random{Dst: r, Hi: r.Type().Mask()})
		}
	}
	for _, w := range foldWidths {
		prog.Metadata = append(prog.Metadata, p4gen.Field{Name: fmt.Sprintf("out%d", w), Bits: w})
	}
	for i := range 60 {
		d := &p4gen.DigestType{Name: fmt.Sprintf("d%d_t", i)}
		var vals []p4gen.Expr
		for j, w := range foldWidths {
			d.Fields = append(d.Fields, p4gen.Field{Name: fmt.Sprintf("v%d", j), Bits: w})
			x := g.bitExpr(w, 5)
			if i%2 == 1 { // assigned first, then sent
				out := p4gen.Ref{Path: fmt.Sprintf("meta.out%d", w), Bits: w}
				prog.Ingress = append(prog.Ingress, p4gen.Assign{Dst: out, X: x})
				x = out
			}
			vals = append(vals, x)
		}
		prog.Digests = append(prog.Digests, d)
		prog.Ingress = append(prog.Ingress, p4gen.Digest{Type: d, Values: vals})
	}
	prog.Ingress = append(prog.Ingress, p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)})
	sameAsReference(t, prog, nil, splitReads)
}

// The read-modify-writes sketches make (a count, a maximum) run as one
// closure each: the cells, the old and new values they give back, and
// an index past the end (an error, as in the reference) come out as the
// reference's.
func TestSketchRMWAsReference(t *testing.T) {
	prog := p4gen.NewProgram("rmw")
	ref := func(n string, bits int) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: bits} }
	i, x := ref("i", 32), ref("x", 16)
	o1, n1, o2, n2 := ref("o1", 16), ref("n1", 16), ref("o2", 16), ref("n2", 16)
	prog.Metadata = []p4gen.Field{{Name: "i", Bits: 32}, {Name: "x", Bits: 16}, {Name: "o1", Bits: 16},
		{Name: "n1", Bits: 16}, {Name: "o2", Bits: 16}, {Name: "n2", Bits: 16}}
	cnt := &p4gen.Register{Name: "cnt", Width: 16, Size: 8}
	top := &p4gen.Register{Name: "top", Width: 16, Size: 9}
	prog.Registers = []*p4gen.Register{cnt, top}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "o1", Bits: 16}, {Name: "n1", Bits: 16},
		{Name: "o2", Bits: 16}, {Name: "n2", Bits: 16}}}
	prog.Digests = []*p4gen.DigestType{d}
	old := p4gen.Old{Bits: 16}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Random{Dst: i, Hi: 8}, // 8 is past cnt's end
		p4gen.Random{Dst: x, Hi: 5},
		p4gen.RMW{Reg: cnt, Index: i, New: p4gen.B(p4gen.Add, old, p4gen.C(0x7fff, 16)), OldTo: &o1, NewTo: &n1},
		p4gen.RMW{Reg: top, Index: i, New: p4gen.Mux{Cond: p4gen.B(p4gen.Lt, old, x), Then: x, Else: old}, OldTo: &o2, NewTo: &n2},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{o1, n1, o2, n2}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
}

// After the parser, a variant zeroes the metadata its ingress may read
// before writing it (and only that): a field written on one side of a
// branch, then read and written, comes out as the reference's for
// packets of one variant that take either side.
func TestZeroedUnlessWritten(t *testing.T) {
	prog := p4gen.NewProgram("zero")
	prog.Metadata = []p4gen.Field{{Name: "m", Bits: 16}}
	m := p4gen.Ref{Path: "meta.m", Bits: 16}
	tl := p4gen.F("ipv4_len", "total_len")
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "m", Bits: 16}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.If{Cond: p4gen.B(p4gen.Gt, tl, p4gen.C(60, 16)), Then: []p4gen.Stmt{p4gen.Assign{Dst: m, X: tl}}},
		p4gen.Assign{Dst: m, X: p4gen.B(p4gen.Add, m, p4gen.C(1, 16))},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{m}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
}

// An arithmetic or comparison of two variable operands reads an operand
// that is a field from its slot (compile.go's slotBinary): each op with
// fields on both sides, on the left, on the right and on neither, over
// random values (small ones, so that ties and wraps happen), computes
// what the reference does.
func TestSlotOperandsAsReference(t *testing.T) {
	prog := p4gen.NewProgram("slots")
	w := 8
	ref := func(n string) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: w} }
	a, b, z := ref("a"), ref("b"), ref("z")
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: w}, {Name: "b", Bits: w}, {Name: "z", Bits: w}}
	// notSlot is a field's value as an expression that is no field: z
	// is 0, drawn at random (unknown to the specialiser).
	notSlot := func(x p4gen.Ref) p4gen.Expr { return p4gen.B(p4gen.Add, x, z) }
	d := &p4gen.DigestType{Name: "d_t"}
	var vals []p4gen.Expr
	for _, op := range []p4gen.BinOp{p4gen.Add, p4gen.Sub, p4gen.Eq, p4gen.Ne, p4gen.Lt, p4gen.Le, p4gen.Gt, p4gen.Ge} {
		for _, lr := range [][2]p4gen.Expr{{a, b}, {a, notSlot(b)}, {notSlot(a), b}, {notSlot(a), notSlot(b)}} {
			x := p4gen.B(op, lr[0], lr[1])
			d.Fields = append(d.Fields, p4gen.Field{Name: fmt.Sprintf("v%d", len(vals)), Bits: x.Type().Bits})
			vals = append(vals, x)
		}
	}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Random{Dst: a, Hi: 3},
		p4gen.Random{Dst: b, Hi: 3},
		p4gen.Random{Dst: z, Hi: 0},
		p4gen.Assign{Dst: a, X: p4gen.B(p4gen.Add, a, p4gen.C(254, 8))}, // 254..1: wraps
		p4gen.Digest{Type: d, Values: vals},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
}

// An assignment of a choice on a field against a constant tests the
// field inline (compile.go's rangeTest), and one of a sum or difference
// reads its operands inline (assignNode, sum): each comparison, at the
// constants at the ends of the field's range (where a range's bounds
// wrap), a field shifted and masked, and 64-bit fields at their top,
// computes what the reference does.
func TestInlineChoicesAsReference(t *testing.T) {
	prog := p4gen.NewProgram("choices")
	a, b := p4gen.Ref{Path: "meta.a", Bits: 8}, p4gen.Ref{Path: "meta.b", Bits: 64}
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: 8}, {Name: "b", Bits: 64}}
	d := &p4gen.DigestType{Name: "d_t"}
	var vals []p4gen.Expr
	ingress := []p4gen.Stmt{
		p4gen.Random{Dst: a, Hi: 3},
		p4gen.Assign{Dst: a, X: p4gen.B(p4gen.Add, a, p4gen.C(253, 8))}, // 253, 254, 255, 0
		p4gen.Random{Dst: b, Lo: ^uint64(0) - 2, Hi: ^uint64(0)},
	}
	out := func(x p4gen.Expr) {
		f := p4gen.Field{Name: fmt.Sprintf("v%d", len(vals)), Bits: x.Type().Bits}
		prog.Metadata = append(prog.Metadata, f)
		dst := p4gen.Ref{Path: "meta." + f.Name, Bits: f.Bits}
		ingress = append(ingress, p4gen.Assign{Dst: dst, X: x})
		d.Fields = append(d.Fields, f)
		vals = append(vals, dst)
	}
	for _, op := range []p4gen.BinOp{p4gen.Eq, p4gen.Ne, p4gen.Lt, p4gen.Le, p4gen.Gt, p4gen.Ge} {
		for _, k := range []uint64{0, 1, 254, 255} {
			out(p4gen.Mux{Cond: p4gen.B(op, a, p4gen.C(k, 8)), Then: p4gen.C(1, 8), Else: a})
			hi := p4gen.Slice{X: a, Hi: 7, Lo: 4} // a's top four bits
			out(p4gen.Mux{Cond: p4gen.B(op, hi, p4gen.C(k&15, 4)), Then: b, Else: p4gen.C(7, 64)})
		}
		for _, k := range []uint64{0, ^uint64(0) - 1, ^uint64(0)} {
			out(p4gen.Mux{Cond: p4gen.B(op, b, p4gen.C(k, 64)), Then: p4gen.C(1, 8), Else: p4gen.C(2, 8)})
		}
	}
	sh := p4gen.B(p4gen.Shl, p4gen.Cast{Bits: 16, X: a}, p4gen.C(4, 16))
	out(p4gen.B(p4gen.Add, p4gen.Cast{Bits: 16, X: a}, sh))
	out(p4gen.B(p4gen.Sub, p4gen.Cast{Bits: 16, X: a}, sh))
	out(p4gen.Slice{X: p4gen.B(p4gen.Add, p4gen.Cast{Bits: 16, X: a}, sh), Hi: 11, Lo: 3})
	out(p4gen.Slice{X: p4gen.B(p4gen.Sub, b, p4gen.C(1, 64)), Hi: 63, Lo: 60})
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = append(ingress,
		p4gen.Digest{Type: d, Values: vals},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)})
	sameAsReference(t, prog, nil, splitReads)
}
