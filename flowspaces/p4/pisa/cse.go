package pisa

import (
	"fmt"
	"maps"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A residual's straight-line statements often compute one value twice:
// the HyperLogLog's key word is the bits of the count-min sketch's
// destination word, built again from the same fields. cse makes the
// second assignment a copy of the first place, and a read of a copy a
// read of the place it copies, while neither is written; dce then drops
// the copy nothing reads.

// avail is the state cse carries along statements: the place that holds
// each expression computed (by its printed value, with the places it
// reads), and the places that hold a copy of another.
type avail struct {
	exprs  map[string]availExpr
	copies map[string]p4gen.Ref
}

type availExpr struct {
	dst   p4gen.Ref
	reads map[string]bool
}

func (a *avail) clone() *avail {
	return &avail{exprs: maps.Clone(a.exprs), copies: maps.Clone(a.copies)}
}

// kill forgets what a write of path makes stale.
func (a *avail) kill(path string) {
	for k, e := range a.exprs {
		if e.dst.Path == path || e.reads[path] {
			delete(a.exprs, k)
		}
	}
	delete(a.copies, path)
	for d, src := range a.copies {
		if src.Path == path {
			delete(a.copies, d)
		}
	}
}

func (a *avail) killAll() {
	clear(a.exprs)
	clear(a.copies)
}

// subst is x with its reads of copies made reads of what they copy.
func (a *avail) subst(x p4gen.Expr) p4gen.Expr {
	if len(a.copies) == 0 {
		return x
	}
	switch y := x.(type) {
	case p4gen.Ref:
		if src, ok := a.copies[y.Path]; ok {
			return p4gen.Ref{Path: src.Path, Bits: y.Bits}
		}
	case p4gen.Unary:
		return p4gen.Unary{Op: y.Op, X: a.subst(y.X)}
	case p4gen.Binary:
		return p4gen.Binary{Op: y.Op, L: a.subst(y.L), R: a.subst(y.R)}
	case p4gen.Cast:
		return p4gen.Cast{Bits: y.Bits, X: a.subst(y.X)}
	case p4gen.Slice:
		return p4gen.Slice{X: a.subst(y.X), Hi: y.Hi, Lo: y.Lo}
	case p4gen.Mux:
		return p4gen.Mux{Cond: a.subst(y.Cond), Then: a.subst(y.Then), Else: a.subst(y.Else)}
	}
	return x
}

func (a *avail) substAll(xs []p4gen.Expr) []p4gen.Expr {
	out := make([]p4gen.Expr, len(xs))
	for i, x := range xs {
		out[i] = a.subst(x)
	}
	return out
}

// cse rewrites ss as the comment above says, a being what holds before
// them (updated).
func (sp *specializer) cse(ss []p4gen.Stmt, a *avail) []p4gen.Stmt {
	out := make([]p4gen.Stmt, 0, len(ss))
	for _, s := range ss {
		switch s := s.(type) {
		case p4gen.Assign:
			x := a.subst(s.X)
			key := ""
			switch x.(type) {
			case p4gen.Const, p4gen.Ref:
			default:
				key = fmt.Sprintf("%#v", x)
				if e, ok := a.exprs[key]; ok && e.dst.Path != s.Dst.Path {
					x, key = p4gen.Ref{Path: e.dst.Path, Bits: s.Dst.Bits}, ""
				}
			}
			a.kill(s.Dst.Path)
			r := map[string]bool{}
			reads(x, r)
			switch {
			case r[s.Dst.Path]: // x reads what it writes: nothing holds x now
			case key != "":
				a.exprs[key] = availExpr{dst: s.Dst, reads: r}
			default:
				if src, ok := x.(p4gen.Ref); ok && isMeta(s.Dst.Path) {
					a.copies[s.Dst.Path] = src
				}
			}
			out = append(out, p4gen.Assign{Dst: s.Dst, X: x})
		case p4gen.Hash:
			s.Data = a.substAll(s.Data)
			a.kill(s.Dst.Path)
			out = append(out, s)
		case p4gen.RMW:
			s.Index, s.New = a.subst(s.Index), a.subst(s.New)
			if s.Cond != nil {
				s.Cond = a.subst(s.Cond)
			}
			if s.OldTo != nil {
				a.kill(s.OldTo.Path)
			}
			if s.NewTo != nil {
				a.kill(s.NewTo.Path)
			}
			out = append(out, s)
		case p4gen.Count:
			s.Index = a.subst(s.Index)
			out = append(out, s)
		case p4gen.Digest:
			s.Values = a.substAll(s.Values)
			out = append(out, s)
		case p4gen.Random:
			a.kill(s.Dst.Path)
			out = append(out, s)
		case p4gen.If:
			s.Cond = a.subst(s.Cond)
			s.Then, s.Else = sp.cse(s.Then, a.clone()), sp.cse(s.Else, a.clone())
			a.killAll()
			out = append(out, s)
		case p4gen.Call:
			s.Args = a.substAll(s.Args)
			for w := range sp.writes(s.Action, nil) {
				a.kill(w)
			}
			out = append(out, s)
		case p4gen.Apply:
			for w := range sp.writes(nil, s.Table) {
				a.kill(w)
			}
			out = append(out, s)
		case p4gen.MarkToDrop:
			a.kill("standard_metadata.egress_spec")
			out = append(out, s)
		case p4gen.Clone:
			out = append(out, s)
		default: // SetValid, and what is to come
			a.killAll()
			out = append(out, s)
		}
	}
	return out
}
