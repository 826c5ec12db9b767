package sketch

import (
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4Store is store on a switch: a register of width 64-bit cells per row
// (width= rounded up to a power of two), each packet writing its value
// into its key's cell of every row by one RMW, which gives the cell as
// it was; any and all compare those with the value. The key's positions
// are crc32's and crc16's (flowkey.P4Index), as cms's on a switch.
type p4Store struct {
	params       functions.Params
	sp           *flowkey.Spec
	value, pass  string
	depth, width int
	bits         int
}

func (f *p4Store) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, f.params)
	if err != nil {
		return err
	}
	k := f.sp.LowerP4(b)
	nokey := s.Count("nokey", "nokey", "")
	missing := s.Count("missing", "missing", "")
	changes := s.Count("changes", "changes", "")
	x, present, err := match.P4Value(b, f.value, nil)
	if err != nil {
		return err
	}
	v := b.Meta("v", 64)
	b.Add(p4gen.Assign{Dst: v, X: x})
	h1, h2 := k.Hashes(b)
	pos := flowkey.Positions(b, h1, h2, "pos", f.depth, f.bits)
	rows := make([]*measure.P4Reg, f.depth)
	olds := make([]p4gen.Ref, f.depth)
	var anyOf, allOf []p4gen.Expr
	for r := range rows {
		rows[r] = s.Register(fmt.Sprint("row", r), 64, f.width, "cells", r*f.width)
		olds[r] = b.Meta(fmt.Sprint("old", r), 64)
		eq := p4gen.B(p4gen.Eq, olds[r], v)
		anyOf, allOf = append(anyOf, eq), append(allOf, eq)
	}
	anyM, allM, stored := b.Meta("any", 1), b.Meta("all", 1), b.Meta("stored", 1)
	b.Add(p4gen.Assign{Dst: stored, X: p4gen.C(0, 1)}, p4gen.Assign{Dst: anyM, X: p4gen.C(0, 1)}, p4gen.Assign{Dst: allM, X: p4gen.C(0, 1)})
	s.Lower(func(h int) []p4gen.Stmt {
		var then []p4gen.Stmt
		for r := range rows {
			then = append(then, rows[r].RMW(h, p4gen.RMW{Index: pos[r], New: v, OldTo: &olds[r]}))
		}
		then = append(then,
			p4gen.Assign{Dst: stored, X: p4gen.C(1, 1)},
			p4gen.Assign{Dst: anyM, X: p4gen.Cast{Bits: 1, X: p4gen.AnyOf(anyOf...)}},
			p4gen.Assign{Dst: allM, X: p4gen.Cast{Bits: 1, X: p4gen.AllOf(allOf...)}},
			p4gen.If{Cond: p4gen.B(p4gen.Eq, anyM, p4gen.C(0, 1)), Then: changes.Add(h)})
		return []p4gen.Stmt{p4gen.If{Cond: k.HasKey(),
			Then: []p4gen.Stmt{p4gen.If{Cond: present, Then: then, Else: missing.Add(h)}},
			Else: nokey.Add(h)}}
	})
	isStored := p4gen.B(p4gen.Eq, stored, p4gen.C(1, 1))
	switch f.pass {
	case "new":
		b.Pass = p4gen.AllOf(isStored, p4gen.B(p4gen.Eq, anyM, p4gen.C(0, 1)))
	case "old":
		b.Pass = p4gen.AllOf(isStored, p4gen.B(p4gen.Eq, anyM, p4gen.C(1, 1)))
	}
	if measure.Reports(f.params) {
		b.Pass = p4gen.False
	}
	b.Export("any", anyM)
	b.Export("all", allM)
	return nil
}

func p4StoreCode(ctx *functions.Context) (p4gen.Function, error) {
	if err := p4Ethernet(ctx); err != nil {
		return nil, err
	}
	if err := match.P4Check(ctx.Params.Str("value"), false); err != nil {
		return nil, err
	}
	d, _ := cmsDims(ctx.Params)
	w, bits := p4Width(ctx.Params)
	return &p4Store{params: ctx.Params, sp: measure.Spec(ctx.Params), value: ctx.Params.Str("value"),
		pass: ctx.Params.Str("pass"), depth: d, width: w, bits: bits}, nil
}

// processP4 is the Go half of a store on a switch, given packets: the
// switch's positions, the same writes.
func (s *Store) processP4(b *buffers.Batch) {
	p := b.PBuf
	n := 0
	var nokey, miss, changes uint64
	for _, e := range b.E[:b.N] {
		p.Ann(e.Slot)[s.at] = 0
		h1, h2, ok := s.p4.hashes(p.Data(e.Slot))
		var v int64
		if !ok {
			nokey++
		} else if v, ok = s.value.Int(p, e.Slot); !ok {
			miss++
		}
		if !ok {
			if s.pass == "all" {
				b.E[n] = e
				n++
			}
			continue
		}
		positions(s.pos, h1, h2, s.p4bits)
		anyHeld, allHeld := false, true
		for r, i := range s.pos {
			j := uint32(r)*s.width + i
			old := s.cells[j]
			s.cells[j] = uint64(v)
			anyHeld = anyHeld || old == uint64(v)
			allHeld = allHeld && old == uint64(v)
		}
		if !anyHeld {
			changes++
		}
		if s.mark(p, e.Slot, anyHeld, allHeld) {
			b.E[n] = e
			n++
		}
	}
	s.done(b, n, nokey, miss, changes)
}
