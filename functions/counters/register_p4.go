package counters

import (
	"fmt"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// register on a switch: one stateful ALU access per register per packet,
// as the class's model says. Without a key, one register of one cell: a
// read-modify-write whose condition is if= (over Old, the cell read) and
// whose new value is set=. With a key, the counter's table on a switch: a
// slot per key (the top bits of crc32 and crc16 of its words), columns of
// registers (each key word, the cells, the used marks). A packet whose
// key's slot is free finds its cell 0, so whether it writes is known
// before the cell is read (if= and set= with old 0): it claims the slot
// then, in the used mark's access, and writes its key's words; a packet
// of the key the slot holds reads and writes the cell; a packet whose
// slot holds another key, and that would write, counts in dropped. The
// packet clock set= and if= may read (pkt.ts) is the switch's, in ns, as
// timestamp gives it. What the packet found (old) and left (value) are
// exported to the functions after it.
type p4Register struct {
	set, cond string
	sp        *flowkey.Spec
	size      int // a power of two
}

// switchNS is the switch's clock in ns (its µs times 1000, by shifts).
func switchNS(b *p4gen.Builder) p4gen.Expr {
	t := p4gen.Cast{Bits: 64, X: b.Time}
	shl := func(n uint64) p4gen.Expr { return p4gen.B(p4gen.Shl, t, p4gen.C(n, 64)) }
	return p4gen.B(p4gen.Sub, p4gen.B(p4gen.Sub, shl(10), shl(4)), shl(3))
}

func (r *p4Register) Lower(b *p4gen.Builder) error {
	updates := b.Counter("updates", 1, p4gen.Packets, "updates", "", 0)
	missing := b.Counter("missing", 1, p4gen.Packets, "missing", "", 0)
	old, val := b.Meta("old", 64), b.Meta("value", 64)
	count := func(c *p4gen.Counter) p4gen.Stmt { return p4gen.Count{Counter: c, Index: p4gen.C(0, 32)} }
	names := func(o p4gen.Expr) map[string]p4gen.Expr {
		return map[string]p4gen.Expr{"old": o, "pkt.ts": switchNS(b)}
	}
	// if= over the cell's old value o (true without if=).
	cond := func(o p4gen.Expr) (p4gen.Expr, error) {
		if r.cond == "" {
			return p4gen.True, nil
		}
		return match.P4Cond(b, r.cond, names(o))
	}
	set, present, err := match.P4Value(b, r.set, names(p4gen.Old{Bits: 64}))
	if err != nil {
		return err
	}
	inRMW, err := cond(p4gen.Old{Bits: 64})
	if err != nil {
		return err
	}
	after, err := cond(old) // the same, on the value read, after the access
	if err != nil {
		return err
	}
	wrote := p4gen.AllOf(after, present)
	accounting := p4gen.If{Cond: wrote, Then: []p4gen.Stmt{count(updates)},
		Else: []p4gen.Stmt{p4gen.If{Cond: p4gen.Unary{Op: p4gen.Not, X: present}, Then: []p4gen.Stmt{count(missing)}}}}
	b.Add(p4gen.Assign{Dst: old, X: p4gen.C(0, 64)})
	if r.sp == nil {
		cell := b.Register("cell", 64, 1, "cell", 0)
		b.Add(p4gen.RMW{Reg: cell, Index: p4gen.C(0, 32), New: set, Cond: p4gen.AllOf(inRMW, present), OldTo: &old, NewTo: &val},
			accounting)
		b.Export("value", val)
		b.Export("old", old)
		return nil
	}
	keys := b.Counter("keys", 1, p4gen.Packets, "keys", "", 0)
	dropped := b.Counter("dropped", 1, p4gen.Packets, "dropped", "", 0)
	nokey := b.Counter("nokey", 1, p4gen.Packets, "nokey", "", 0)
	k := r.sp.LowerP4(b)
	h1, h2 := k.Hashes(b)
	_, bits := flowkey.Pow2(uint64(r.size))
	slot := flowkey.Positions(b, h1, h2, "slot", 1, bits)[0]
	nw := len(k.Words)
	used := b.Register("used", 8, r.size, "slots", (nw+1)*r.size)
	cells := b.Register("cells", 64, r.size, "slots", nw*r.size)
	words := make([]*p4gen.Register, nw)
	olds := make([]p4gen.Ref, nw)
	for j := range k.Words {
		words[j] = b.Register(fmt.Sprint("key", j), 64, r.size, "slots", j*r.size)
		olds[j] = b.Meta(fmt.Sprint("kold", j), 64)
	}
	// Whether a packet that finds its cell 0 (a key new to the table)
	// writes: if= with old 0, and set='s fields.
	cond0, err := cond(p4gen.C(0, 64))
	if err != nil {
		return err
	}
	writes0 := b.Meta("writes0", 1)
	usedOld := b.Meta("used", 8)
	claim := p4gen.AllOf(p4gen.B(p4gen.Eq, usedOld, p4gen.C(0, 8)), p4gen.B(p4gen.Eq, writes0, p4gen.C(1, 1)))
	var same []p4gen.Expr
	for j, w := range k.Words {
		same = append(same, p4gen.B(p4gen.Eq, olds[j], w))
	}
	mine := p4gen.AllOf(append([]p4gen.Expr{p4gen.B(p4gen.Eq, usedOld, p4gen.C(1, 8))}, same...)...)
	ours := b.Meta("ours", 1)
	then := []p4gen.Stmt{
		p4gen.Assign{Dst: writes0, X: p4gen.Cast{Bits: 1, X: p4gen.AllOf(cond0, present)}},
		p4gen.RMW{Reg: used, Index: slot, New: p4gen.Mux{Cond: claim, Then: p4gen.C(1, 8), Else: p4gen.Old{Bits: 8}}, OldTo: &usedOld},
	}
	for j, w := range k.Words {
		then = append(then, p4gen.RMW{Reg: words[j], Index: slot, New: w, Cond: claim, OldTo: &olds[j]})
	}
	isOurs := p4gen.B(p4gen.Eq, ours, p4gen.C(1, 1))
	then = append(then,
		p4gen.Assign{Dst: ours, X: p4gen.Cast{Bits: 1, X: p4gen.B(p4gen.LOr, claim, mine)}},
		p4gen.If{Cond: isOurs,
			Then: []p4gen.Stmt{
				p4gen.RMW{Reg: cells, Index: slot, New: set, Cond: p4gen.AllOf(inRMW, present), OldTo: &old, NewTo: &val},
				accounting,
				p4gen.If{Cond: claim, Then: []p4gen.Stmt{count(keys)}}},
			Else: []p4gen.Stmt{
				p4gen.Assign{Dst: val, X: p4gen.C(0, 64)},
				p4gen.If{Cond: p4gen.B(p4gen.Eq, writes0, p4gen.C(1, 1)), Then: []p4gen.Stmt{count(dropped)},
					Else: []p4gen.Stmt{p4gen.If{Cond: p4gen.Unary{Op: p4gen.Not, X: present}, Then: []p4gen.Stmt{count(missing)}}}}}})
	b.Add(p4gen.If{Cond: k.HasKey(), Then: then,
		Else: []p4gen.Stmt{p4gen.Assign{Dst: val, X: p4gen.C(0, 64)}, count(nokey)}})
	b.Export("value", val)
	b.Export("old", old)
	return nil
}

func p4RegisterCode(ctx *functions.Context) (p4gen.Function, error) {
	r := &p4Register{set: ctx.Params.Str("set")}
	if ctx.Params.Has("if") {
		r.cond = ctx.Params.Str("if")
	}
	if ctx.Params.Has("key") {
		if ctx.LinkType != functions.LinkEthernet {
			return nil, fmt.Errorf("a switch reads Ethernet frames, not %v", ctx.LinkType)
		}
		r.sp, r.size = measure.Spec(ctx.Params), p4Size(ctx.Params)
	}
	// Check what lowers without a program: the expressions' arithmetic.
	if err := match.P4Check(r.set, false, "old", "pkt.ts"); err != nil {
		return nil, err
	}
	if r.cond != "" {
		if err := match.P4Check(r.cond, true, "old", "pkt.ts"); err != nil {
			return nil, err
		}
	}
	return r, nil
}
