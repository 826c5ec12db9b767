package pisa

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
)

// exprGen makes random expressions over a few metadata fields of each
// width, the validity of two headers and constants.
type exprGen struct {
	rng  *rand.Rand
	refs map[int][]p4gen.Ref
}

var foldWidths = []int{1, 3, 8, 16, 32, 64}

// newExprGen returns a generator seeded with seed over three metadata
// fields of each width of foldWidths, which it declares in prog.
func newExprGen(prog *p4gen.Program, seed uint64) *exprGen {
	g := &exprGen{rng: rand.New(rand.NewPCG(seed, seed+1)), refs: map[int][]p4gen.Ref{}}
	for _, w := range foldWidths {
		for i := range 3 {
			f := p4gen.Field{Name: fmt.Sprintf("w%d_%d", w, i), Bits: w}
			prog.Metadata = append(prog.Metadata, f)
			g.refs[w] = append(g.refs[w], p4gen.Ref{Path: "meta." + f.Name, Bits: w})
		}
	}
	return g
}

func (g *exprGen) konst(w int) p4gen.Expr {
	switch g.rng.IntN(4) {
	case 0:
		return p4gen.C(0, w)
	case 1:
		return p4gen.C(^uint64(0), w)
	case 2:
		return p4gen.C(uint64(g.rng.IntN(4)), w)
	}
	return p4gen.C(g.rng.Uint64(), w)
}

// leaf is a constant one time in n, else one of the fields of w bits.
func (g *exprGen) leaf(w, n int) p4gen.Expr {
	if g.rng.IntN(n) == 0 {
		return g.konst(w)
	}
	rs := g.refs[w]
	return rs[g.rng.IntN(len(rs))]
}

func (g *exprGen) expr(w, depth int) p4gen.Expr {
	if depth <= 0 || g.rng.IntN(4) == 0 {
		return g.leaf(w, 3)
	}
	switch g.rng.IntN(7) {
	case 0:
		return p4gen.Unary{Op: p4gen.Inv, X: g.expr(w, depth-1)}
	case 1:
		return p4gen.Mux{Cond: g.cond(depth - 1), Then: g.expr(w, depth-1), Else: g.expr(w, depth-1)}
	case 2:
		from := foldWidths[g.rng.IntN(len(foldWidths))]
		return p4gen.Cast{Bits: w, X: g.expr(from, depth-1)}
	case 3:
		if w < 64 {
			lo := g.rng.IntN(64 - w + 1)
			return p4gen.Slice{X: g.expr(64, depth-1), Hi: lo + w - 1, Lo: lo}
		}
	case 4:
		ops := []p4gen.BinOp{p4gen.Shl, p4gen.Shr}
		return p4gen.B(ops[g.rng.IntN(2)], g.expr(w, depth-1), p4gen.C(uint64(g.rng.IntN(w+2)), w))
	}
	ops := []p4gen.BinOp{p4gen.Add, p4gen.Sub, p4gen.SatAdd, p4gen.And, p4gen.Or, p4gen.Xor}
	return p4gen.B(ops[g.rng.IntN(len(ops))], g.expr(w, depth-1), g.expr(w, depth-1))
}

func (g *exprGen) cond(depth int) p4gen.Expr {
	if depth <= 0 || g.rng.IntN(5) == 0 {
		if g.rng.IntN(2) == 0 {
			return p4gen.Const{Value: uint64(g.rng.IntN(2))}
		}
		return p4gen.Valid{Header: []string{"eth_type", "ipv4_proto"}[g.rng.IntN(2)]}
	}
	switch g.rng.IntN(4) {
	case 0:
		return p4gen.Unary{Op: p4gen.Not, X: g.cond(depth - 1)}
	case 1:
		return p4gen.B([]p4gen.BinOp{p4gen.LAnd, p4gen.LOr}[g.rng.IntN(2)], g.cond(depth-1), g.cond(depth-1))
	}
	w := foldWidths[g.rng.IntN(len(foldWidths))]
	ops := []p4gen.BinOp{p4gen.Eq, p4gen.Ne, p4gen.Lt, p4gen.Le, p4gen.Gt, p4gen.Ge}
	return p4gen.B(ops[g.rng.IntN(len(ops))], g.expr(w, depth-1), g.expr(w, depth-1))
}

// Folding an expression under what is known of some of its fields gives
// one whose value is the expression's wherever those fields hold what is
// known: random expressions, random knowledge, both compiled and run on
// packets that agree with it.
func TestFoldAsCompiled(t *testing.T) {
	prog := p4gen.NewProgram("fold")
	g := newExprGen(prog, 3)
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	sp := &specializer{m: m, c: m.comp}
	p := m.newPkt()
	folded, consts := 0, 0
	for i := range 20000 {
		var x p4gen.Expr
		if i%2 == 0 {
			x = g.cond(4)
		} else {
			x = g.expr(foldWidths[i/2%len(foldWidths)], 4)
		}
		e := &penv{known: map[string]uint64{}}
		for _, rs := range g.refs {
			for _, r := range rs {
				v := g.rng.Uint64() & r.Type().Mask()
				if g.rng.IntN(3) == 0 {
					v = uint64(g.rng.IntN(2))
				}
				p.v[m.comp.slots[r.Path]] = v
				if g.rng.IntN(2) == 0 {
					e.known[r.Path] = v
				}
			}
		}
		for _, h := range []string{"eth_type", "ipv4_proto"} {
			hd := m.header(h)
			valid := g.rng.IntN(2) == 0
			if valid {
				p.vbits[hd.index>>6] |= 1 << uint(hd.index&63)
			} else {
				p.vbits[hd.index>>6] &^= 1 << uint(hd.index&63)
			}
			if g.rng.IntN(2) == 0 {
				e.known["valid:"+h] = b2u(valid)
			}
		}
		fx := sp.fold(x, e)
		if fx.Type() != x.Type() {
			t.Fatalf("%s folds to %s of type %v, not %v", ex(x), ex(fx), fx.Type(), x.Type())
		}
		want, err := m.comp.expr(x, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.comp.expr(fx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if w, g := want(&p), got(&p); w != g {
			t.Fatalf("%s = %d; folded to %s = %d", ex(x), w, ex(fx), g)
		}
		if ex(fx) != ex(x) {
			folded++
		}
		if _, ok := fx.(p4gen.Const); ok {
			consts++
		}
	}
	if folded < 5000 || consts < 2000 {
		t.Fatalf("only %d of 20000 expressions folded, %d to constants", folded, consts)
	}
}

// sameAsReference runs prog on the model, its ingress specialised, and
// on p4gen.Switch over random frames, and requires the same results,
// registers and counters; it returns the model.
func sameAsReference(t *testing.T, prog *p4gen.Program, entries map[*p4gen.Table][]p4gen.Entry, splitReads int) *Model {
	t.Helper()
	if err := prog.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	m.splitReads = splitReads
	ref := p4gen.NewSwitch(prog)
	for tb, es := range entries {
		ref.Entries[tb] = es
		if err := m.SetEntries(tb, es); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range p4gentest.Frames(9, 400, 20) {
		a := p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}
		want, werr := ref.Process(a)
		got, gerr := m.Process(a)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("packet %d: reference error %v, model %v", i, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if d := diffResult(want, got); d != "" {
			t.Fatalf("packet %d (%x): %s", i, f, d)
		}
		for _, r := range prog.Registers {
			if fmt.Sprint(ref.Regs[r]) != fmt.Sprint(m.Register(r)) {
				t.Fatalf("packet %d: register %s %v, model %v", i, r.Name, ref.Regs[r], m.Register(r))
			}
		}
	}
	if m.vars.n < 5 {
		t.Fatalf("only %d variants", m.vars.n)
	}
	return m
}

// residualOf is the residual ingress of the model for the valid headers
// of an Ethernet/IPv4/TCP frame.
func residualOf(t *testing.T, m *Model) []p4gen.Stmt {
	t.Helper()
	for _, f := range p4gentest.Frames(9, 400, 20) {
		if len(f) > 54 && f[12] == 8 && f[13] == 0 && f[23] == 6 && f[14] == 0x45 {
			p := m.newPkt()
			m.arrive(&p, p4gen.Arrival{Data: f}, true)
			if err := m.parse(&p); err != nil {
				t.Fatal(err)
			}
			return m.residual(p.vbits)
		}
	}
	t.Fatal("no IPv4/TCP frame")
	return nil
}

func countIn(ss []p4gen.Stmt, pred func(p4gen.Stmt) bool) int {
	n := 0
	for _, s := range ss {
		if pred(s) {
			n++
		}
		if i, ok := s.(p4gen.If); ok {
			n += countIn(i.Then, pred) + countIn(i.Else, pred)
		}
	}
	return n
}

// After an assignment of a bit that later statements read often, they
// are specialised for each of its values: is its TTL 6? decides
// what a counter, a register and a digest get.
func TestSplitOnBit(t *testing.T) {
	prog := p4gen.NewProgram("split")
	prog.Metadata = []p4gen.Field{{Name: "tcp", Bits: 1}, {Name: "x", Bits: 16}}
	tcp, x := p4gen.Ref{Path: "meta.tcp", Bits: 1}, p4gen.Ref{Path: "meta.x", Bits: 16}
	// The TTL, which no select of the parser fixes (facts.go): whether
	// it is 6 stays to be tested in a residual.
	proto := p4gen.F("ipv4_ttl", "ttl")
	c := &p4gen.Counter{Name: "c", Size: 2, Type: p4gen.Packets}
	r := &p4gen.Register{Name: "r", Width: 16, Size: 4}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "v", Bits: 16}}}
	prog.Counters, prog.Registers, prog.Digests = []*p4gen.Counter{c}, []*p4gen.Register{r}, []*p4gen.DigestType{d}
	isTCP := p4gen.B(p4gen.Eq, tcp, p4gen.C(1, 1))
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: tcp, X: p4gen.Cast{Bits: 1, X: p4gen.AllOf(p4gen.Valid{Header: "ipv4_ttl"}, p4gen.B(p4gen.Eq, proto, p4gen.C(6, 8)))}},
		p4gen.Assign{Dst: x, X: p4gen.Mux{Cond: isTCP, Then: p4gen.C(7, 16), Else: p4gen.C(9, 16)}},
		p4gen.Count{Counter: c, Index: p4gen.Cast{Bits: 32, X: tcp}},
		p4gen.RMW{Reg: r, Index: p4gen.Mux{Cond: isTCP, Then: p4gen.C(1, 32), Else: p4gen.C(2, 32)}, New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 16}, x)},
		p4gen.If{Cond: isTCP, Then: []p4gen.Stmt{p4gen.Digest{Type: d, Values: []p4gen.Expr{x}}}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	m := sameAsReference(t, prog, nil, splitReads)
	res := residualOf(t, m)
	split := countIn(res, func(s p4gen.Stmt) bool {
		i, ok := s.(p4gen.If)
		return ok && ex(i.Cond) == "(meta.tcp == 1)"
	})
	muxes := countIn(res, func(s p4gen.Stmt) bool {
		a, ok := s.(p4gen.Assign)
		return ok && a.Dst.Path == "meta.x" && ex(a.X) != "7" && ex(a.X) != "9"
	})
	if split != 1 || muxes != 0 {
		t.Fatalf("the residual splits %d times on meta.tcp and computes meta.x %d times", split, muxes)
	}
}

// An action called with constant arguments runs inlined, unless it
// writes one of its parameters (then it is called, and a table that
// would run it is applied); a table whose keys are known, or whose
// unknown keys (a few bits) all lead to actions that do one thing, is
// replaced by what it does; one whose outcomes differ stays, and what
// its actions write is no longer known after it.
func TestInlineAndFoldTables(t *testing.T) {
	prog := p4gen.NewProgram("inline")
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: 8}, {Name: "b", Bits: 8}, {Name: "k", Bits: 1}, {Name: "o", Bits: 8}}
	ma, mb, mk, mo := p4gen.Ref{Path: "meta.a", Bits: 8}, p4gen.Ref{Path: "meta.b", Bits: 8}, p4gen.Ref{Path: "meta.k", Bits: 1}, p4gen.Ref{Path: "meta.o", Bits: 8}
	proto := p4gen.F("ipv4_ttl", "ttl") // no select fixes it (facts.go)
	pp := p4gen.Ref{Path: "p", Bits: 8}
	// set(p): a = p + 1; and twice(p): p = p + p; b = p (writes its parameter).
	set := &p4gen.Action{Name: "set", Params: []p4gen.Field{{Name: "p", Bits: 8}},
		Body: []p4gen.Stmt{p4gen.Assign{Dst: ma, X: p4gen.B(p4gen.Add, pp, p4gen.C(1, 8))}}}
	twice := &p4gen.Action{Name: "twice", Params: []p4gen.Field{{Name: "p", Bits: 8}},
		Body: []p4gen.Stmt{p4gen.Assign{Dst: pp, X: p4gen.B(p4gen.Add, pp, pp)}, p4gen.Assign{Dst: mb, X: pp}}}
	// same0/same1 do one thing; other another.
	same := func(n string) *p4gen.Action {
		return &p4gen.Action{Name: n, Body: []p4gen.Stmt{p4gen.Assign{Dst: mo, X: p4gen.B(p4gen.Add, ma, p4gen.C(2, 8))}}}
	}
	same0, same1 := same("same0"), same("same1")
	other := &p4gen.Action{Name: "other", Body: []p4gen.Stmt{p4gen.Assign{Dst: mo, X: proto}}}
	bump := &p4gen.Action{Name: "bump", Body: []p4gen.Stmt{p4gen.Assign{Dst: mb, X: p4gen.B(p4gen.Add, proto, p4gen.C(1, 8))}}}
	folds := &p4gen.Table{Name: "folds", Keys: []p4gen.TableKey{{X: mk, Match: p4gen.Ternary}, {X: mb, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{same0, same1}, Default: same0, Size: 4}
	stays := &p4gen.Table{Name: "stays", Keys: []p4gen.TableKey{{X: mk, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{same0, other, bump}, Default: same0, Size: 4}
	// known: its key is (meta.a is 5), and its entry's action writes its
	// parameter.
	known := &p4gen.Table{Name: "known", Keys: []p4gen.TableKey{{X: ma, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{twice}, Default: twice, DefaultArgs: []uint64{1}, Size: 4}
	prog.Actions = []*p4gen.Action{set, twice, same0, same1, other, bump}
	prog.Tables = []*p4gen.Table{folds, stays, known}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Call{Action: set, Args: []p4gen.Expr{p4gen.C(4, 8)}},
		p4gen.Call{Action: twice, Args: []p4gen.Expr{p4gen.C(3, 8)}},
		p4gen.Assign{Dst: mk, X: p4gen.Cast{Bits: 1, X: p4gen.B(p4gen.Eq, proto, p4gen.C(6, 8))}},
		p4gen.Apply{Table: known},
		p4gen.Apply{Table: folds},
		p4gen.Assign{Dst: mb, X: p4gen.C(6, 8)},
		p4gen.Apply{Table: stays},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.B(p4gen.Add, p4gen.Cast{Bits: 9, X: mo}, p4gen.Cast{Bits: 9, X: mb})},
	}
	entries := map[*p4gen.Table][]p4gen.Entry{
		folds: {
			{Match: []p4gen.Match{{Value: 1, Mask: 1}, {Value: 6}}, Action: same1, Priority: 2},
			{Match: []p4gen.Match{{Value: 0, Mask: 0}, {Value: 7}}, Action: same0, Priority: 1},
		},
		stays: {{Match: []p4gen.Match{{Value: 1}}, Action: bump}, {Match: []p4gen.Match{{Value: 0}}, Action: other}},
		known: {{Match: []p4gen.Match{{Value: 5}}, Action: twice, Args: []uint64{3}}},
	}
	m := sameAsReference(t, prog, entries, splitReads)
	res := residualOf(t, m)
	calls := countIn(res, func(s p4gen.Stmt) bool { c, ok := s.(p4gen.Call); return ok && c.Action == twice })
	inlined := countIn(res, func(s p4gen.Stmt) bool {
		a, ok := s.(p4gen.Assign)
		return ok && a.Dst.Path == "meta.a" && ex(a.X) == "5"
	})
	applies := map[string]int{}
	countIn(res, func(s p4gen.Stmt) bool {
		if a, ok := s.(p4gen.Apply); ok {
			applies[a.Table.Name]++
		}
		return false
	})
	if calls != 1 || inlined != 1 || applies["folds"] != 0 || applies["stays"] != 1 || applies["known"] != 1 {
		t.Fatalf("twice called %d times, set inlined %d times, tables applied %v", calls, inlined, applies)
	}
	// Entries change: the variants go, and the table that folded now
	// does two things.
	entries[folds] = append(entries[folds], p4gen.Entry{Match: []p4gen.Match{{Value: 0, Mask: 1}, {Value: 6}}, Action: same0, Priority: 3})
	folds.Actions = append(folds.Actions, other)
	m2 := sameAsReference(t, prog, entries, splitReads)
	if m2.vars.n == 0 {
		t.Fatal("no variants")
	}
}

// ex prints an expression for the tests' messages.
func ex(x p4gen.Expr) string {
	switch x := x.(type) {
	case p4gen.Const:
		return fmt.Sprint(x.Value)
	case p4gen.Ref:
		return x.Path
	case p4gen.Valid:
		return x.Header + ".isValid()"
	case p4gen.Old:
		return "old"
	case p4gen.Unary:
		if x.Op == p4gen.Not {
			return "!" + ex(x.X)
		}
		return "~" + ex(x.X)
	case p4gen.Binary:
		return "(" + ex(x.L) + " " + x.Op.String() + " " + ex(x.R) + ")"
	case p4gen.Cast:
		return fmt.Sprintf("(bit<%d>)%s", x.Bits, ex(x.X))
	case p4gen.Slice:
		return fmt.Sprintf("%s[%d:%d]", ex(x.X), x.Hi, x.Lo)
	case p4gen.Mux:
		return "(" + ex(x.Cond) + " ? " + ex(x.Then) + " : " + ex(x.Else) + ")"
	}
	return fmt.Sprintf("%T", x)
}
