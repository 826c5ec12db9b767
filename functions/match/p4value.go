package match

import (
	"fmt"
	"math/big"
	"strconv"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Values on a switch: what MAFIA's programs compute from a packet (a
// tag's value, a register's new cell, a sketch's value) lowers as a
// predicate's sides do, to a linear form of the switch's values, and then
// to one bit<64> expression: whole coefficients by shifts and adds (a
// switch has no multiplier), | and & of values, max and min by a
// comparison, bloom's mask by a hash unit and a table per position (a
// switch shifts by constants only).

// P4Value lowers expr, a number, into b: its value as bit<64> and the
// condition that the packet has the fields it reads. names gives the
// bare names their values (a register's old: p4gen.Old).
func P4Value(b *p4gen.Builder, expr string, names map[string]p4gen.Expr) (x, present p4gen.Expr, err error) {
	n, err := parseNames(expr, nameList(names))
	if err != nil {
		return nil, nil, err
	}
	c := &p4c{b: b, names: names}
	v, err := c.node(n)
	if err != nil {
		return nil, nil, err
	}
	if v.k != kInt && v.k != kFloat {
		return nil, nil, errAt(n.pos, "%q is %s, not a number", expr, kindName[v.k])
	}
	return c.expr(v.num, n)
}

// P4Cond lowers expr, a condition, into b.
func P4Cond(b *p4gen.Builder, expr string, names map[string]p4gen.Expr) (p4gen.Expr, error) {
	n, err := parseNames(expr, nameList(names))
	if err != nil {
		return nil, err
	}
	return (&p4c{b: b, names: names}).cond(n)
}

// P4Check reports whether expr, a number or (cond) a condition over the
// bare names, lowers to a switch, without a switch's program: named state
// and the switch's own values are taken as there (the program that
// assembles the function resolves them, or refuses it then).
func P4Check(expr string, cond bool, names ...string) error {
	n, err := parseNames(expr, names)
	if err != nil {
		return err
	}
	vals := map[string]p4gen.Expr{}
	for _, name := range names {
		vals[name] = p4gen.C(0, 64)
	}
	c := &p4c{b: &p4gen.Builder{Prog: p4gen.NewProgram("check"), Prefix: "check", StateOf: func(string) (map[string]p4gen.Expr, bool) {
		return nil, false
	}}, checking: true, names: vals}
	if cond {
		_, err = c.cond(n)
		return err
	}
	v, err := c.node(n)
	if err != nil {
		return err
	}
	_, _, err = c.expr(v.num, n)
	return err
}

func nameList(names map[string]p4gen.Expr) []string {
	var out []string
	for k := range names {
		out = append(out, k)
	}
	return out
}

// expr turns a linear form into one bit<64> expression: the terms with a
// positive coefficient added, those with a negative one subtracted (mod
// 2^64, as Go's int64 arithmetic wraps), the constant last. A coefficient
// must be whole.
func (c *p4c) expr(f form, n *node) (x, present p4gen.Expr, err error) {
	if !f.c.IsInt() || !f.c.Num().IsInt64() {
		return nil, nil, errAt(n.pos, "%v: the constant %v is not a whole number of 64 bits", errP4Arith, f.c)
	}
	var pos, neg []p4gen.Expr
	var pres []p4gen.Expr
	for _, name := range sortedTerms(f) {
		k := f.terms[name]
		if !k.IsInt() {
			return nil, nil, errAt(n.pos, "%v: %s is multiplied by %v, not a whole number", errP4Arith, name, k)
		}
		a := f.atoms[name]
		pres = append(pres, a.present)
		side := &pos
		kk := new(big.Int).Set(k.Num())
		if kk.Sign() < 0 {
			kk.Neg(kk)
			side = &neg
		}
		t, err := times(a.x, kk, n)
		if err != nil {
			return nil, nil, err
		}
		*side = append(*side, t)
	}
	cst := f.c.Num().Int64()
	var out p4gen.Expr
	for _, t := range pos {
		if out == nil {
			out = t
		} else {
			out = p4gen.B(p4gen.Add, out, t)
		}
	}
	if out == nil {
		out = p4gen.C(0, 64)
		if cst != 0 {
			out, cst = p4gen.C(uint64(cst), 64), 0
		}
	}
	for _, t := range neg {
		out = p4gen.B(p4gen.Sub, out, t)
	}
	if cst > 0 {
		out = p4gen.B(p4gen.Add, out, p4gen.C(uint64(cst), 64))
	} else if cst < 0 {
		out = p4gen.B(p4gen.Sub, out, p4gen.C(uint64(-cst), 64))
	}
	if len(pres) == 0 {
		return out, p4gen.True, nil
	}
	return out, p4gen.AllOf(pres...), nil
}

func sortedTerms(f form) []string {
	names := make([]string, 0, len(f.terms))
	for n := range f.terms {
		names = append(names, n)
	}
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return names
}

// atomOf makes one value of a form (a new atom), named by what it
// computes so that equal sub-expressions share it.
func (c *p4c) atomOf(n *node, f form) (atom, error) {
	if a, ok := f.single(); ok {
		return a, nil
	}
	x, present, err := c.expr(f, n)
	if err != nil {
		return atom{}, err
	}
	return atom{x: x, present: present}, nil
}

// bitOr lowers x | y.
func (c *p4c) bitOr(n *node, l, r form) (p4val, error) {
	if l.isConst() && r.isConst() {
		if !l.c.IsInt() || !r.c.IsInt() {
			return p4val{}, errAt(n.pos, "| applies to whole numbers")
		}
		return p4val{k: kInt, num: constForm(new(big.Rat).SetInt(new(big.Int).Or(l.c.Num(), r.c.Num())))}, nil
	}
	a, err := c.atomOf(n, l)
	if err != nil {
		return p4val{}, err
	}
	b, err := c.atomOf(n, r)
	if err != nil {
		return p4val{}, err
	}
	x := p4gen.B(p4gen.Or, a.x, b.x)
	return p4val{k: kInt, num: atomForm(fmt.Sprintf("(%v)|(%v)", a.x, b.x), atom{x: x, present: p4gen.AllOf(a.present, b.present)})}, nil
}

// call lowers max, min and bloom.
func (c *p4c) call(n *node) (p4val, error) {
	var kids []form
	for _, k := range n.kids {
		v, err := c.node(k)
		if err != nil {
			return p4val{}, err
		}
		if v.k != kInt && v.k != kFloat {
			return p4val{}, errAt(k.pos, "%s takes numbers, not %s", n.name, kindName[v.k])
		}
		kids = append(kids, v.num)
	}
	switch n.name {
	case "max", "min":
		a, err := c.atomOf(n, kids[0])
		if err != nil {
			return p4val{}, err
		}
		b, err := c.atomOf(n, kids[1])
		if err != nil {
			return p4val{}, err
		}
		op := p4gen.Gt
		if n.name == "min" {
			op = p4gen.Lt
		}
		x := p4gen.Mux{Cond: p4gen.B(op, a.x, b.x), Then: a.x, Else: b.x}
		return p4val{k: kInt, num: atomForm(fmt.Sprintf("%s(%v,%v)", n.name, a.x, b.x), atom{x: x, present: p4gen.AllOf(a.present, b.present)})}, nil
	case "bloom":
		return c.bloom(n, kids)
	}
	return p4val{}, errAt(n.pos, "%s does not lower to a switch", n.name)
}

// bloom lowers bloom(M, K, v…): crc32 and crc16 of the values (bit<64>
// each) into metadata, each position the top log2 M bits of crc32 +
// i·(crc16 << 16), and each position's bit by a const table (the mask is
// the or of K table hits).
func (c *p4c) bloom(n *node, kids []form) (p4val, error) {
	if !kids[0].isConst() || !kids[1].isConst() || !kids[0].c.IsInt() || !kids[1].c.IsInt() {
		return p4val{}, errAt(n.pos, "bloom's bits and positions are constants")
	}
	m, k := kids[0].c.Num().Uint64(), int(kids[1].c.Num().Int64())
	bits := 0
	for uint64(1)<<bits < m {
		bits++
	}
	if c.checking {
		return p4val{k: kInt, num: atomForm("bloom", atom{x: p4gen.C(0, 64), present: p4gen.True})}, nil
	}
	var data []p4gen.Expr
	var pres []p4gen.Expr
	for _, f := range kids[2:] {
		a, err := c.atomOf(n, f)
		if err != nil {
			return p4val{}, err
		}
		data, pres = append(data, p4gen.Cast{Bits: 64, X: a.x}), append(pres, a.present)
	}
	// Named after the program's metadata so far: unique however many
	// expressions a lowering makes.
	name := "bloom" + strconv.Itoa(len(c.b.Prog.Metadata))
	h1, h2 := c.b.Meta(name+"_h1", 32), c.b.Meta(name+"_h2", 16)
	c.b.Add(p4gen.Hash{Dst: h1, Algo: p4gen.CRC32, Data: data}, p4gen.Hash{Dst: h2, Algo: p4gen.CRC16, Data: data})
	mask := c.b.Meta(name, 64)
	c.b.Add(p4gen.Assign{Dst: mask, X: p4gen.C(0, 64)})
	step := p4gen.B(p4gen.Shl, p4gen.Cast{Bits: 32, X: h2}, p4gen.C(16, 32))
	for i := range k {
		var g p4gen.Expr = h1
		for j := 0; i>>j != 0; j++ {
			if i>>j&1 == 1 {
				t := p4gen.Expr(step)
				if j > 0 {
					t = p4gen.B(p4gen.Shl, step, p4gen.C(uint64(j), 32))
				}
				g = p4gen.B(p4gen.Add, g, t)
			}
		}
		pos := c.b.Meta(fmt.Sprintf("%s_pos%d", name, i), 32)
		var px p4gen.Expr = p4gen.C(0, 32)
		if bits > 0 {
			px = p4gen.Cast{Bits: 32, X: p4gen.Slice{X: g, Hi: 31, Lo: 32 - bits}}
		}
		bit := c.b.Meta(fmt.Sprintf("%s_bit%d", name, i), 64)
		set := c.b.Action(fmt.Sprintf("%s_set%d", name, i), []p4gen.Field{{Name: "v", Bits: 64}}, p4gen.Assign{Dst: bit, X: p4gen.Ref{Path: "v", Bits: 64}})
		t := &p4gen.Table{Name: fmt.Sprintf("%s_bits%d", name, i), Keys: []p4gen.TableKey{{X: pos, Match: p4gen.Exact}},
			Actions: []*p4gen.Action{set}, Default: set, DefaultArgs: []uint64{0}, Size: int(m), Const: true}
		for p := range m {
			t.Entries = append(t.Entries, p4gen.Entry{Match: []p4gen.Match{{Value: p}}, Action: set, Args: []uint64{1 << p}})
		}
		c.b.Add(p4gen.Assign{Dst: pos, X: px}, p4gen.Apply{Table: c.b.Table(t)},
			p4gen.Assign{Dst: mask, X: p4gen.B(p4gen.Or, mask, bit)})
	}
	return p4val{k: kInt, num: atomForm(name, atom{x: mask, present: p4gen.AllOf(pres...)})}, nil
}

// switchField lowers a switch's own values, when the program has them.
func (c *p4c) switchField(n *node) (p4val, error) {
	w64 := func(x p4gen.Expr) p4val {
		return p4val{k: kInt, num: atomForm(n.name, atom{x: p4gen.Cast{Bits: 64, X: x}, present: p4gen.True})}
	}
	if c.checking {
		return w64(p4gen.C(0, 64)), nil
	}
	switch n.name {
	case "pkt.inport":
		return w64(p4gen.Std("ingress_port")), nil
	case "pkt.outport":
		if c.b.OutPort == nil {
			return p4val{}, errAt(n.pos, "pkt.outport: this switch chooses a packet's port after its functions (a switch on a path, ffpf p4 net, forwards first)")
		}
		return w64(c.b.OutPort), nil
	case "pkt.qdepth":
		if c.b.QDepth == nil {
			return p4val{}, errAt(n.pos, "pkt.qdepth: the depth of the queue a packet joins is known in egress, where this switch runs no function (a switch on a path, ffpf p4 net, does)")
		}
		return w64(c.b.QDepth), nil
	case "switch.id":
		if c.b.SwitchID == nil {
			return p4val{}, errAt(n.pos, "switch.id: this switch's program is built without its id (a switch on a path, ffpf p4 net, has one)")
		}
		return w64(c.b.SwitchID), nil
	}
	return p4val{}, errAt(n.pos, "%s is not a field a switch has", n.name)
}
