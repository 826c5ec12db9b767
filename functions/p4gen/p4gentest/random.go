package p4gentest

import (
	"fmt"
	"math/rand/v2"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Case is a random program with the state a controller would install:
// table entries and clone sessions.
type Case struct {
	Prog     *p4gen.Program
	Entries  map[*p4gen.Table][]p4gen.Entry
	Sessions map[uint32]uint16
}

// CPUPort is the port the random programs' clone session 2 sends to.
const CPUPort = 255

// Random returns a random valid program over the standard headers: its
// metadata, registers, counters, digests, actions and tables, ingress
// and egress statements with every statement and expression kind nested
// a few levels, and entries for its tables. Register indices stay within
// their registers (the reference refuses others), and each register is
// accessed by one statement.
func Random(rng *rand.Rand) Case {
	g := &gen{rng: rng, p: p4gen.NewProgram("random")}
	g.p.UpdateIPv4Checksum = rng.IntN(2) == 0
	for _, h := range g.p.Headers {
		for _, f := range h.Type.Fields {
			if !f.Var {
				g.refs = append(g.refs, p4gen.Ref{Path: "hdr." + h.Name + "." + f.Name, Bits: f.Bits})
			}
		}
	}
	for _, f := range p4gen.StdMeta {
		g.refs = append(g.refs, p4gen.Std(f.Name))
	}
	widths := []int{1, 3, 8, 9, 16, 19, 32, 48, 64}
	for i := range 3 + rng.IntN(6) {
		w := widths[rng.IntN(len(widths))]
		f := p4gen.Field{Name: fmt.Sprintf("m%d", i), Bits: w}
		g.p.Metadata = append(g.p.Metadata, f)
		r := p4gen.Ref{Path: "meta." + f.Name, Bits: w}
		g.refs = append(g.refs, r)
		g.metas = append(g.metas, r)
	}
	for i := range rng.IntN(4) {
		w := []int{1, 8, 16, 32, 64}[rng.IntN(5)]
		g.p.Registers = append(g.p.Registers, &p4gen.Register{Name: fmt.Sprintf("r%d", i), Width: w, Size: 1 << (1 + rng.IntN(6)), Owner: "f#1", Field: "r", Base: 0})
	}
	for i := range rng.IntN(3) {
		g.p.Counters = append(g.p.Counters, &p4gen.Counter{Name: fmt.Sprintf("c%d", i), Size: 1 + rng.IntN(8),
			Type: p4gen.CounterType(1 + rng.IntN(3)), Owner: "f#1", FieldPackets: "p", FieldBytes: "b"})
	}
	for i := range rng.IntN(3) {
		d := &p4gen.DigestType{Name: fmt.Sprintf("d%d_t", i), Owner: "f#1"}
		for j := range 1 + rng.IntN(3) {
			d.Fields = append(d.Fields, p4gen.Field{Name: fmt.Sprintf("v%d", j), Bits: widths[rng.IntN(len(widths))]})
		}
		g.p.Digests = append(g.p.Digests, d)
	}
	for i := range 1 + rng.IntN(4) {
		a := &p4gen.Action{Name: fmt.Sprintf("a%d", i)}
		for j := range rng.IntN(3) {
			a.Params = append(a.Params, p4gen.Field{Name: fmt.Sprintf("p%d", j), Bits: widths[rng.IntN(len(widths))]})
		}
		g.params = a.Params
		for range 1 + rng.IntN(3) {
			a.Body = append(a.Body, g.simple(1))
		}
		g.params = nil
		g.p.Actions = append(g.p.Actions, a)
	}
	c := Case{Prog: g.p, Entries: map[*p4gen.Table][]p4gen.Entry{}, Sessions: map[uint32]uint16{1: 3, 2: CPUPort}}
	for i := range rng.IntN(3) {
		t := &p4gen.Table{Name: fmt.Sprintf("t%d", i), Size: 64}
		kinds := []p4gen.MatchKind{p4gen.Exact, p4gen.Ternary, p4gen.LPM, p4gen.Range}
		lpm := false
		for range 1 + rng.IntN(3) {
			k := kinds[rng.IntN(4)]
			if k == p4gen.LPM {
				if lpm {
					k = p4gen.Ternary
				}
				lpm = true
			}
			var x p4gen.Expr = g.ref()
			if rng.IntN(6) == 0 {
				x = p4gen.Valid{Header: g.header()}
			}
			t.Keys = append(t.Keys, p4gen.TableKey{X: x, Match: k})
		}
		for _, a := range g.p.Actions {
			if rng.IntN(2) == 0 || len(t.Actions) == 0 {
				t.Actions = append(t.Actions, a)
			}
		}
		t.Default = t.Actions[rng.IntN(len(t.Actions))]
		t.DefaultArgs = g.args(t.Default)
		g.p.Tables = append(g.p.Tables, t)
		for range rng.IntN(10) {
			c.Entries[t] = append(c.Entries[t], g.entry(t))
		}
	}
	g.tables = append(g.tables, g.p.Tables...)
	g.regs = append(g.regs, g.p.Registers...)
	for range 3 + rng.IntN(6) {
		g.p.Ingress = append(g.p.Ingress, g.stmt(3, true))
	}
	g.egress = true
	for range rng.IntN(3) {
		g.p.Egress = append(g.p.Egress, g.stmt(2, false))
	}
	if err := g.p.Validate(); err != nil {
		panic("p4gentest: a random program is invalid: " + err.Error())
	}
	return c
}

type gen struct {
	rng    *rand.Rand
	p      *p4gen.Program
	refs   []p4gen.Ref // readable
	metas  []p4gen.Ref
	params []p4gen.Field // of the action being made
	tables []*p4gen.Table
	regs   []*p4gen.Register
	old    int  // bits of the register an RMW's expressions are in, or 0
	egress bool // making egress's statements
}

func (g *gen) header() string { return g.p.Headers[g.rng.IntN(len(g.p.Headers))].Name }

func (g *gen) ref() p4gen.Ref { return g.refs[g.rng.IntN(len(g.refs))] }

// dst is a place to write: metadata mostly, sometimes a header field, the
// egress port or an action's parameter.
func (g *gen) dst() p4gen.Ref {
	switch n := g.rng.IntN(10); {
	case n < 6:
		return g.metas[g.rng.IntN(len(g.metas))]
	case n < 8:
		for {
			r := g.ref()
			if len(r.Path) > 4 && r.Path[:4] == "hdr." {
				return r
			}
		}
	case n < 9 || len(g.params) == 0:
		return p4gen.Std("egress_spec")
	}
	f := g.params[g.rng.IntN(len(g.params))]
	return p4gen.Ref{Path: f.Name, Bits: f.Bits}
}

func (g *gen) konst(w int) p4gen.Const {
	var v uint64
	switch g.rng.IntN(5) {
	case 0:
		v = 0
	case 1:
		v = p4gen.Bit(w).Mask()
	case 2:
		v = uint64(g.rng.IntN(4))
	default:
		v = g.rng.Uint64()
	}
	return p4gen.C(v, w)
}

// leaf is an expression of w bits without operators but casts and slices.
func (g *gen) leaf(w int) p4gen.Expr {
	if g.old > 0 && g.rng.IntN(3) == 0 {
		return g.fit(p4gen.Old{Bits: g.old}, w)
	}
	if len(g.params) > 0 && g.rng.IntN(3) == 0 {
		f := g.params[g.rng.IntN(len(g.params))]
		return g.fit(p4gen.Ref{Path: f.Name, Bits: f.Bits}, w)
	}
	if g.rng.IntN(4) == 0 {
		return g.konst(w)
	}
	return g.fit(g.ref(), w)
}

// fit makes x (of any width) w bits wide: as it is, cast, or sliced.
func (g *gen) fit(x p4gen.Expr, w int) p4gen.Expr {
	xw := x.Type().Bits
	switch {
	case xw == w:
		return x
	case xw > w && g.rng.IntN(2) == 0:
		lo := g.rng.IntN(xw - w + 1)
		return p4gen.Slice{X: x, Hi: lo + w - 1, Lo: lo}
	}
	return p4gen.Cast{Bits: w, X: x}
}

func (g *gen) expr(w, depth int) p4gen.Expr {
	if depth <= 0 || g.rng.IntN(3) == 0 {
		return g.leaf(w)
	}
	switch g.rng.IntN(9) {
	case 0, 1:
		ops := []p4gen.BinOp{p4gen.Add, p4gen.Sub, p4gen.SatAdd, p4gen.And, p4gen.Or, p4gen.Xor}
		return p4gen.B(ops[g.rng.IntN(len(ops))], g.expr(w, depth-1), g.expr(w, depth-1))
	case 2:
		op := []p4gen.BinOp{p4gen.Shl, p4gen.Shr}[g.rng.IntN(2)]
		return p4gen.B(op, g.expr(w, depth-1), p4gen.C(uint64(g.rng.IntN(w+2)), 8))
	case 3:
		return p4gen.Unary{Op: p4gen.Inv, X: g.expr(w, depth-1)}
	case 4:
		return p4gen.Mux{Cond: g.cond(depth - 1), Then: g.expr(w, depth-1), Else: g.expr(w, depth-1)}
	case 5:
		v := 1 + g.rng.IntN(64)
		return g.fit(g.expr(v, depth-1), w)
	case 6:
		return p4gen.Cast{Bits: w, X: g.cond(depth - 1)}
	}
	return g.leaf(w)
}

func (g *gen) cond(depth int) p4gen.Expr {
	if depth <= 0 || g.rng.IntN(4) == 0 {
		if g.rng.IntN(2) == 0 {
			return p4gen.Valid{Header: g.header()}
		}
		return p4gen.Const{Value: uint64(g.rng.IntN(2))}
	}
	switch g.rng.IntN(6) {
	case 0:
		return p4gen.B([]p4gen.BinOp{p4gen.LAnd, p4gen.LOr}[g.rng.IntN(2)], g.cond(depth-1), g.cond(depth-1))
	case 1:
		return p4gen.Unary{Op: p4gen.Not, X: g.cond(depth - 1)}
	case 2:
		return p4gen.B([]p4gen.BinOp{p4gen.Eq, p4gen.Ne}[g.rng.IntN(2)], g.cond(depth-1), g.cond(depth-1))
	}
	w := []int{1, 4, 8, 16, 32, 64}[g.rng.IntN(6)]
	ops := []p4gen.BinOp{p4gen.Eq, p4gen.Ne, p4gen.Lt, p4gen.Le, p4gen.Gt, p4gen.Ge}
	return p4gen.B(ops[g.rng.IntN(len(ops))], g.expr(w, depth-1), g.expr(w, depth-1))
}

// simple is a statement an action may hold.
func (g *gen) simple(depth int) p4gen.Stmt {
	switch g.rng.IntN(10) {
	case 0:
		if len(g.p.Counters) > 0 {
			c := g.p.Counters[g.rng.IntN(len(g.p.Counters))]
			return p4gen.Count{Counter: c, Index: g.index(c.Size)}
		}
	case 1:
		if len(g.p.Digests) > 0 {
			d := g.p.Digests[g.rng.IntN(len(g.p.Digests))]
			var vals []p4gen.Expr
			for _, f := range d.Fields {
				vals = append(vals, g.expr(f.Bits, depth))
			}
			return p4gen.Digest{Type: d, Values: vals}
		}
	case 2:
		return p4gen.SetValid{Header: g.header(), Valid: g.rng.IntN(2) == 0}
	case 3:
		if g.rng.IntN(3) == 0 {
			return p4gen.MarkToDrop{}
		}
		if g.egress && len(g.metas) > 0 && g.rng.IntN(2) == 0 {
			// An egress-to-egress clone preserving some metadata.
			c := p4gen.Clone{Session: uint32(g.rng.IntN(3)), E2E: true}
			for range g.rng.IntN(3) {
				c.Preserve = append(c.Preserve, g.metas[g.rng.IntN(len(g.metas))])
			}
			return c
		}
		return p4gen.Clone{Session: uint32(g.rng.IntN(3))}
	case 4:
		d := g.dst()
		var data []p4gen.Expr
		bits := 0
		for range 1 + g.rng.IntN(3) {
			w := 8 * (1 + g.rng.IntN(4))
			data = append(data, g.expr(w, depth))
			bits += w
		}
		if g.rng.IntN(3) == 0 {
			data = append(data, g.expr(4, depth), g.expr(4, depth))
		}
		var max uint64
		if g.rng.IntN(2) == 0 {
			max = uint64(1 + g.rng.IntN(1000))
		}
		return p4gen.Hash{Dst: d, Algo: p4gen.HashAlgo(1 + g.rng.IntN(3)), Base: uint64(g.rng.IntN(3)), Data: data, Max: max}
	case 5:
		d := g.dst()
		lo := uint64(g.rng.IntN(4)) & d.Type().Mask()
		return p4gen.Random{Dst: d, Lo: lo, Hi: lo + g.upTo(d.Type().Mask()-lo)}
	}
	d := g.dst()
	return p4gen.Assign{Dst: d, X: g.expr(d.Bits, depth)}
}

// index is a bit<32> index below size.
func (g *gen) index(size int) p4gen.Expr {
	bits := 0
	for 1<<(bits+1) <= size {
		bits++
	}
	if bits == 0 {
		return p4gen.C(0, 32)
	}
	return p4gen.Cast{Bits: 32, X: g.expr(bits, 1)}
}

func (g *gen) stmt(depth int, ingress bool) p4gen.Stmt {
	switch n := g.rng.IntN(10); {
	case n < 2 && depth > 0:
		s := p4gen.If{Cond: g.cond(2)}
		for range 1 + g.rng.IntN(3) {
			s.Then = append(s.Then, g.stmt(depth-1, ingress))
		}
		for range g.rng.IntN(3) {
			s.Else = append(s.Else, g.stmt(depth-1, ingress))
		}
		return s
	case n < 4 && ingress && len(g.tables) > 0:
		t := g.tables[0]
		g.tables = g.tables[1:]
		return p4gen.Apply{Table: t}
	case n < 6 && ingress && len(g.regs) > 0:
		r := g.regs[0]
		g.regs = g.regs[1:]
		s := p4gen.RMW{Reg: r, Index: g.index(r.Size)}
		g.old = r.Width
		s.New = g.expr(r.Width, 2)
		if g.rng.IntN(2) == 0 {
			s.Cond = g.cond(2)
		}
		g.old = 0
		if g.rng.IntN(2) == 0 {
			m := g.meta(r.Width)
			s.OldTo = &m
		}
		if g.rng.IntN(2) == 0 {
			m := g.meta(r.Width)
			s.NewTo = &m
		}
		return s
	case n < 7 && len(g.p.Actions) > 0:
		a := g.p.Actions[g.rng.IntN(len(g.p.Actions))]
		var args []p4gen.Expr
		for _, f := range a.Params {
			args = append(args, g.expr(f.Bits, 1))
		}
		return p4gen.Call{Action: a, Args: args}
	}
	return g.simple(2)
}

// meta returns a metadata field of w bits, declaring one if none is.
func (g *gen) meta(w int) p4gen.Ref {
	for _, m := range g.metas {
		if m.Bits == w {
			return m
		}
	}
	f := p4gen.Field{Name: fmt.Sprintf("m%d", len(g.p.Metadata)), Bits: w}
	g.p.Metadata = append(g.p.Metadata, f)
	r := p4gen.Ref{Path: "meta." + f.Name, Bits: w}
	g.metas = append(g.metas, r)
	g.refs = append(g.refs, r)
	return r
}

// upTo is a uniform value in [0, n].
func (g *gen) upTo(n uint64) uint64 {
	if n == ^uint64(0) {
		return g.rng.Uint64()
	}
	return g.rng.Uint64N(n + 1)
}

func (g *gen) args(a *p4gen.Action) []uint64 {
	var out []uint64
	for _, f := range a.Params {
		out = append(out, g.konst(f.Bits).Value)
	}
	return out
}

// entry is a table entry whose values often match the frames of Frames.
func (g *gen) entry(t *p4gen.Table) p4gen.Entry {
	e := p4gen.Entry{Action: t.Actions[g.rng.IntN(len(t.Actions))]}
	e.Args = g.args(e.Action)
	likely := []uint64{0, 1, 6, 17, 80, 443, 0x0800, 0x86dd, 4, 5, 64, 0x0a000001, 2}
	for _, k := range t.Keys {
		w := k.X.Type()
		v := likely[g.rng.IntN(len(likely))]
		if g.rng.IntN(4) == 0 {
			v = g.rng.Uint64()
		}
		v &= w.Mask()
		var m p4gen.Match
		switch k.Match {
		case p4gen.Exact:
			m.Value = v
		case p4gen.Ternary:
			m.Mask = g.rng.Uint64() & w.Mask()
			if g.rng.IntN(2) == 0 {
				m.Mask = w.Mask()
			}
			m.Value = v & m.Mask
		case p4gen.LPM:
			bits := max(w.Bits, 1)
			m.PrefixLen = g.rng.IntN(bits + 1)
			m.Value = v
			if m.PrefixLen < bits {
				m.Value = v &^ (1<<uint(bits-m.PrefixLen) - 1)
			}
		case p4gen.Range:
			m.Lo = v
			m.Hi = v + g.upTo(w.Mask()-v)
			if g.rng.IntN(3) == 0 {
				m.Lo, m.Hi = 0, w.Mask()
			}
		}
		e.Match = append(e.Match, m)
	}
	lpm := false
	for _, k := range t.Keys {
		lpm = lpm || k.Match == p4gen.LPM
	}
	if !lpm {
		e.Priority = int32(1 + g.rng.IntN(4))
	}
	return e
}
