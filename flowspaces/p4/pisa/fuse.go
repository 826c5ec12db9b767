package pisa

import (
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
	rsh, lsh uint
	m        uint64
}

func (t *lterm) eval(p *pkt) uint64 {
	var v uint64
	if t.x == nil {
		v = p.v[t.slot]
	} else {
		v = t.x(p)
	}
	return v >> t.rsh << t.lsh & t.m
}

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
	return lform{terms: []lterm{{slot: -1, x: e, m: x.Type().Mask()}}}, err
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
		if t.x != nil {
			if t.rsh == 0 && t.lsh == 0 {
				return func(p *pkt) uint64 { return t.x(p) & t.m }
			}
			return func(p *pkt) uint64 { return t.x(p) >> t.rsh << t.lsh & t.m }
		}
		s, m := t.slot, t.m
		if t.rsh == 0 && t.lsh == 0 {
			return func(p *pkt) uint64 { return p.v[s] & m }
		}
		r, l := t.rsh, t.lsh
		return func(p *pkt) uint64 { return p.v[s] >> r << l & m }
	case len(ts) == 2 && slots:
		a, b := ts[0], ts[1]
		return func(p *pkt) uint64 {
			return k | p.v[a.slot]>>a.rsh<<a.lsh&a.m | p.v[b.slot]>>b.rsh<<b.lsh&b.m
		}
	case len(ts) == 3 && slots:
		a, b, d := ts[0], ts[1], ts[2]
		return func(p *pkt) uint64 {
			return k | p.v[a.slot]>>a.rsh<<a.lsh&a.m | p.v[b.slot]>>b.rsh<<b.lsh&b.m | p.v[d.slot]>>d.rsh<<d.lsh&d.m
		}
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
		a, b := ts[0], ts[1]
		return func(p *pkt) {
			p.v[d] = k | p.v[a.slot]>>a.rsh<<a.lsh&a.m | p.v[b.slot]>>b.rsh<<b.lsh&b.m
		}, nil
	case len(ts) == 3 && slots:
		a, b, e := ts[0], ts[1], ts[2]
		return func(p *pkt) {
			p.v[d] = k | p.v[a.slot]>>a.rsh<<a.lsh&a.m | p.v[b.slot]>>b.rsh<<b.lsh&b.m | p.v[e.slot]>>e.rsh<<e.lsh&e.m
		}, nil
	case len(ts) == 1 && k == 0 && slots:
		s, r, l, m := ts[0].slot, ts[0].rsh, ts[0].lsh, ts[0].m
		return func(p *pkt) { p.v[d] = p.v[s] >> r << l & m }, nil
	}
	e := c.fusedOf(f)
	return func(p *pkt) { p.v[d] = e(p) }, nil
}

// rmwDirect compiles the read-modify-writes that sketches make, when
// the index is a field and there is no condition, into one closure
// with no closure calls: a count (old + k) and a maximum (old < x ? x
// : old, as hll keeps its ranks). Nil for another.
func (c *compiler) rmwDirect(s p4gen.RMW, sc *scope, cells []uint64, mask uint64, errIdx error, oldTo, newTo int) op {
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
			i := p.v[is]
			if i >= n {
				p.err = errIdx
				return
			}
			old := cells[i]
			v := (old + k1) & m
			cells[i] = v
			if oldTo >= 0 {
				p.v[oldTo] = old
			}
			if newTo >= 0 {
				p.v[newTo] = v
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
			i := p.v[is]
			if i >= n {
				p.err = errIdx
				return
			}
			old, v := cells[i], p.v[xs]
			if old >= v {
				v = old
			}
			v &= mask
			cells[i] = v
			if oldTo >= 0 {
				p.v[oldTo] = old
			}
			if newTo >= 0 {
				p.v[newTo] = v
			}
		}
	}
	return nil
}
