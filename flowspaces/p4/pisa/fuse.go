package pisa

import (
	"math/bits"
	"reflect"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Expressions that only move bits (casts, slices, shifts by constants,
// ands with constants, ors) are compiled as one closure: such an
// expression is the or of a constant and of terms, each a field (or an
// expression of another kind) shifted by a constant and masked. A key
// built from header chunks, ((bit<32>)a << 24 | (bit<32>)b << 16 |
// (bit<32>)c) << 32, is then three loads, shifts and masks, not a tree
// of eleven closures.

// lterm is a term of a bit-moving expression: the value of the field
// in slot (when x is nil) or of x, shifted right by rsh then left by
// lsh, and masked by m.
type lterm struct {
	slot     int
	x        expr
	src      p4gen.Expr // what x computes, in scope sc
	sc       *scope
	rsh, lsh uint
	m        uint64
}

func (t *lterm) eval(p *pkt) uint64 {
	var v uint64
	if t.x == nil {
		v = p.at(t.slot)
	} else {
		v = t.x(p)
	}
	return v >> (t.rsh & 63) << (t.lsh & 63) & t.m
}

// operand is an expression's value, read with no call when it is one
// field moved by constant shifts and masked (a field, a cast or slice
// of one, a field shifted into place) or a constant (the slot that
// always holds all ones, masked by it): an arithmetic, comparison or
// choice reads such operands itself (get, inlined) and calls only for
// the others (x).
type operand struct {
	slot int
	rot  int // the field's net shift left, as a rotation: m clears what wraps
	m    uint64
	x    expr
}

func (o *operand) get(p *pkt) uint64 {
	if o.x != nil {
		return o.x(p)
	}
	return bits.RotateLeft64(p.v[o.slot], o.rot) & o.m
}

// operand compiles x as an operand.
func (c *compiler) operand(x p4gen.Expr, sc *scope) (operand, error) {
	konst := func(k uint64) operand { return operand{slot: c.m.ones, m: k} }
	if !bitwise(x) {
		switch y := x.(type) {
		case p4gen.Const:
			return konst(y.Value), nil
		case p4gen.Ref:
			if s, ok := c.refSlot(y, sc); ok {
				return operand{slot: s, m: ^uint64(0)}, nil
			}
		}
		e, err := c.node(x, sc)
		return operand{x: e}, err
	}
	f, err := c.linear(x, sc)
	if err != nil {
		return operand{}, err
	}
	switch {
	case len(f.terms) == 0:
		return konst(f.k), nil
	case len(f.terms) == 1 && f.terms[0].x == nil && f.k == 0:
		// A right shift's rotation wraps the bits it drops to the top,
		// a left shift's to the bottom: the mask, shifted as the field
		// was, has zeros there.
		t := f.terms[0]
		return operand{slot: t.slot, rot: rot(t), m: t.m}, nil
	}
	return operand{x: c.fusedOf(f)}, nil
}

// slotTerm is a term of a field: its value rotated by its net shift
// and masked (the mask, shifted as the field was, clears what wraps).
type slotTerm struct {
	slot, rot int
	m         uint64
}

func rterm(t lterm) slotTerm { return slotTerm{slot: t.slot, rot: rot(t), m: t.m} }

// rot is term t's net shift, left.
func rot(t lterm) int { return int(t.lsh) - int(t.rsh) }

func (t *slotTerm) get(p *pkt) uint64 { return bits.RotateLeft64(p.at(t.slot), t.rot) & t.m }

// lform is a bit-moving expression: k | the terms.
type lform struct {
	k     uint64
	terms []lterm
}

// bitwise reports whether x's own operation only moves bits.
func bitwise(x p4gen.Expr) bool {
	switch x := x.(type) {
	case p4gen.Cast, p4gen.Slice:
		return true
	case p4gen.Binary:
		switch x.Op {
		case p4gen.Or:
			return true
		case p4gen.And, p4gen.Shl, p4gen.Shr:
			_, ok := x.R.(p4gen.Const)
			return ok
		}
	}
	return false
}

// shift shifts f left by n bits (right when n < 0), then masks it by m.
func (f *lform) shift(n int, m uint64) {
	if n >= 64 || n <= -64 {
		f.k, f.terms = 0, nil
		return
	}
	if n >= 0 {
		f.k = f.k << uint(n) & m
	} else {
		f.k = f.k >> uint(-n) & m
	}
	kept := f.terms[:0]
	for _, t := range f.terms {
		// Net shift: right by rsh, left by lsh; n moves it.
		net := int(t.lsh) - int(t.rsh) + n
		if n >= 0 {
			t.m <<= uint(n)
		} else {
			t.m >>= uint(-n)
		}
		t.m &= m
		if net >= 64 || net <= -64 || t.m == 0 {
			continue
		}
		if net >= 0 {
			t.rsh, t.lsh = 0, uint(net)
		} else {
			t.rsh, t.lsh = uint(-net), 0
		}
		kept = append(kept, t)
	}
	f.terms = kept
}

// or adds g's terms to f, merging those of one field shifted alike.
func (f *lform) or(g lform) {
	f.k |= g.k
next:
	for _, t := range g.terms {
		for i := range f.terms {
			u := &f.terms[i]
			if t.x == nil && u.x == nil && u.slot == t.slot && u.rsh == t.rsh && u.lsh == t.lsh {
				u.m |= t.m
				continue next
			}
		}
		f.terms = append(f.terms, t)
	}
}

// linear returns x as a bit-moving form; what does not only move bits
// is a term of its own, compiled by node.
func (c *compiler) linear(x p4gen.Expr, sc *scope) (lform, error) {
	switch y := x.(type) {
	case p4gen.Const:
		return lform{k: y.Value}, nil
	case p4gen.Ref:
		s, ok := c.refSlot(y, sc)
		if ok {
			return lform{terms: []lterm{{slot: s, m: y.Type().Mask()}}}, nil
		}
	case p4gen.Cast:
		f, err := c.linear(y.X, sc)
		f.shift(0, y.Type().Mask())
		return f, err
	case p4gen.Slice:
		f, err := c.linear(y.X, sc)
		f.shift(-y.Lo, y.Type().Mask())
		return f, err
	case p4gen.Binary:
		if bitwise(y) {
			f, err := c.linear(y.L, sc)
			if err != nil {
				return f, err
			}
			m := y.L.Type().Mask()
			switch y.Op {
			case p4gen.Or:
				g, err := c.linear(y.R, sc)
				f.or(g)
				return f, err
			case p4gen.And:
				f.shift(0, y.R.(p4gen.Const).Value&m)
			case p4gen.Shl:
				f.shift(int(min(y.R.(p4gen.Const).Value, 64)), m)
			case p4gen.Shr:
				f.shift(-int(min(y.R.(p4gen.Const).Value, 64)), m)
			}
			return f, nil
		}
	}
	e, err := c.node(x, sc)
	return lform{terms: []lterm{{slot: -1, x: e, src: x, sc: sc, m: x.Type().Mask()}}}, err
}

// fused compiles a bit-moving expression into one closure.
func (c *compiler) fused(x p4gen.Expr, sc *scope) (expr, error) {
	f, err := c.linear(x, sc)
	if err != nil {
		return nil, err
	}
	return c.fusedOf(f), nil
}

// fusedOf is the closure that computes f.
func (c *compiler) fusedOf(f lform) expr {
	k, ts := f.k, f.terms
	slots := true
	for _, t := range ts {
		slots = slots && t.x == nil
	}
	switch {
	case len(ts) == 0:
		return func(*pkt) uint64 { return k }
	case len(ts) == 1 && k == 0:
		t := ts[0]
		if e := c.sumTerm(t); e != nil {
			return e
		}
		if t.x != nil {
			if t.rsh == 0 && t.lsh == 0 {
				return func(p *pkt) uint64 { return t.x(p) & t.m }
			}
			return func(p *pkt) uint64 { return t.x(p) >> (t.rsh & 63) << (t.lsh & 63) & t.m }
		}
		s, m := t.slot, t.m
		if t.rsh == 0 && t.lsh == 0 {
			return func(p *pkt) uint64 { return p.at(s) & m }
		}
		r := rot(t)
		return func(p *pkt) uint64 { return bits.RotateLeft64(p.at(s), r) & m }
	case len(ts) == 2 && slots:
		a, b := rterm(ts[0]), rterm(ts[1])
		return func(p *pkt) uint64 { return k | a.get(p) | b.get(p) }
	case len(ts) == 3 && slots:
		a, b, d := rterm(ts[0]), rterm(ts[1]), rterm(ts[2])
		return func(p *pkt) uint64 { return k | a.get(p) | b.get(p) | d.get(p) }
	}
	return func(p *pkt) uint64 {
		v := k
		for i := range ts {
			v |= ts[i].eval(p)
		}
		return v
	}
}

// assignFused compiles the assignment of a bit-moving expression x to
// slot d into one closure: of two or three fields, with no call.
func (c *compiler) assignFused(d int, x p4gen.Expr, sc *scope) (op, error) {
	f, err := c.linear(x, sc)
	if err != nil {
		return nil, err
	}
	k, ts := f.k, f.terms
	slots := true
	for _, t := range ts {
		slots = slots && t.x == nil
	}
	switch {
	case len(ts) == 2 && slots:
		a, b := rterm(ts[0]), rterm(ts[1])
		return func(p *pkt) { p.put(d, k|a.get(p)|b.get(p)) }, nil
	case len(ts) == 3 && slots:
		a, b, e := rterm(ts[0]), rterm(ts[1]), rterm(ts[2])
		return func(p *pkt) { p.put(d, k|a.get(p)|b.get(p)|e.get(p)) }, nil
	case len(ts) == 1 && k == 0 && slots:
		s, r, m := ts[0].slot, rot(ts[0]), ts[0].m
		return func(p *pkt) { p.put(d, bits.RotateLeft64(p.at(s), r)&m) }, nil
	}
	if len(ts) == 1 && ts[0].x != nil && ts[0].rsh == 0 && ts[0].lsh == 0 && c.sum(ts[0]) == nil {
		x, m := ts[0].x, ts[0].m // a cast of a condition, a choice (or-ed with k)
		return func(p *pkt) { p.put(d, k|x(p)&m) }, nil
	}
	if len(ts) == 1 && k == 0 {
		if s := c.sum(ts[0]); s != nil {
			a, b, tm, rot, m := s.a, s.b, s.tm, s.rot, s.m
			if a.x == nil && b.x == nil && !s.sub { // a row index: h1 + h2 << k, sliced
				as, ar, am, bs, br, bm := a.slot, a.rot, a.m, b.slot, b.rot, b.m
				return func(p *pkt) {
					p.put(d, bits.RotateLeft64((bits.RotateLeft64(p.at(as), ar)&am+bits.RotateLeft64(p.at(bs), br)&bm)&tm, rot)&m)
				}, nil
			}
			if s.sub {
				return func(p *pkt) { p.put(d, bits.RotateLeft64((a.get(p)-b.get(p))&tm, rot)&m) }, nil
			}
			return func(p *pkt) { p.put(d, bits.RotateLeft64((a.get(p)+b.get(p))&tm, rot)&m) }, nil
		}
	}
	e := c.fusedOf(f)
	return func(p *pkt) { p.put(d, e(p)) }, nil
}

// sumOf is a sum or difference of two operands (masked by tm), moved
// by a rotation and masked by m as a bit-moving term is: a cast or
// slice of an addition (a sketch's row index, h1 + h2 << 16 sliced)
// is one closure with its operands read inline.
type sumOf struct {
	a, b  operand
	sub   bool
	tm, m uint64
	rot   int
}

// sum returns term t as a sumOf when it is an addition or subtraction
// (not saturating); nil for another term.
func (c *compiler) sum(t lterm) *sumOf {
	x, ok := t.src.(p4gen.Binary)
	if !ok || t.x == nil || x.Op != p4gen.Add && x.Op != p4gen.Sub {
		return nil
	}
	// The term's operands were compiled with it (linear): compiling
	// them again as operands marks nothing new and cannot fail.
	a, err := c.operand(x.L, t.sc)
	if err != nil {
		return nil
	}
	b, err := c.operand(x.R, t.sc)
	if err != nil {
		return nil
	}
	return &sumOf{a: a, b: b, sub: x.Op == p4gen.Sub, tm: x.L.Type().Mask(), m: t.m, rot: int(t.lsh) - int(t.rsh)}
}

// sumTerm is sum's closure, or nil.
func (c *compiler) sumTerm(t lterm) expr {
	s := c.sum(t)
	if s == nil {
		return nil
	}
	a, b, tm, rot, m := s.a, s.b, s.tm, s.rot, s.m
	if s.sub {
		return func(p *pkt) uint64 { return bits.RotateLeft64((a.get(p)-b.get(p))&tm, rot) & m }
	}
	return func(p *pkt) uint64 { return bits.RotateLeft64((a.get(p)+b.get(p))&tm, rot) & m }
}

// rmwDirect compiles the read-modify-writes that sketches make, when
// the index is a field and there is no condition, into one closure
// with no closure calls: a count (old + k) and a maximum (old < x ? x
// : old, as hll keeps its ranks). Nil for another.
func rmwDirect[T cell](c *compiler, s p4gen.RMW, sc *scope, cells []T, mask uint64, errIdx error, oldTo, newTo int) op {
	if s.Cond != nil {
		return nil
	}
	is, ok := c.refSlot(s.Index, sc)
	if !ok {
		return nil
	}
	n := uint64(len(cells))
	isOld := func(x p4gen.Expr) bool { _, ok := x.(p4gen.Old); return ok }
	switch x := s.New.(type) {
	case p4gen.Binary:
		k, ok := x.R.(p4gen.Const)
		if x.Op != p4gen.Add || !ok || !isOld(x.L) {
			return nil
		}
		k1, m := k.Value, x.L.Type().Mask()&mask
		return func(p *pkt) {
			i := p.at(is)
			if i >= n {
				p.err = errIdx
				return
			}
			old := uint64(cells[i])
			v := (old + k1) & m
			cells[i] = T(v)
			if oldTo >= 0 {
				p.put(oldTo, old)
			}
			if newTo >= 0 {
				p.put(newTo, v)
			}
		}
	case p4gen.Mux:
		lt, ok := x.Cond.(p4gen.Binary)
		if !ok || lt.Op != p4gen.Lt || !isOld(lt.L) || !isOld(x.Else) || !reflect.DeepEqual(lt.R, x.Then) {
			return nil
		}
		xs, ok := c.refSlot(x.Then, sc)
		if !ok {
			return nil
		}
		return func(p *pkt) {
			i := p.at(is)
			if i >= n {
				p.err = errIdx
				return
			}
			old, v := uint64(cells[i]), p.at(xs)
			if old >= v {
				v = old
			}
			v &= mask
			cells[i] = T(v)
			if oldTo >= 0 {
				p.put(oldTo, old)
			}
			if newTo >= 0 {
				p.put(newTo, v)
			}
		}
	}
	return nil
}
