package pisa

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A value computed twice is computed once (cse.go): the second
// assignment becomes a copy, and what reads the copy reads the first
// place (a digest, a hash). Not when a field the value reads, or the
// place that holds it, was written in between, or the first was
// computed in a branch: the digests of all of them are the reference's.
func TestCSEAsReference(t *testing.T) {
	prog := p4gen.NewProgram("cse")
	ref := func(n string) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: 16} }
	a, b, x1, x2, y1, y2, z1, z2, w1, w2, h := ref("a"), ref("b"), ref("x1"), ref("x2"), ref("y1"), ref("y2"), ref("z1"), ref("z2"), ref("w1"), ref("w2"), ref("h")
	for _, n := range []string{"a", "b", "x1", "x2", "y1", "y2", "z1", "z2", "w1", "w2", "h"} {
		prog.Metadata = append(prog.Metadata, p4gen.Field{Name: n, Bits: 16})
	}
	sum := p4gen.B(p4gen.Add, a, p4gen.B(p4gen.Shl, b, p4gen.C(3, 16)))
	d := &p4gen.DigestType{Name: "d_t"}
	vals := []p4gen.Expr{x1, x2, y1, y2, z1, z2, w1, w2, h}
	for _, v := range vals {
		d.Fields = append(d.Fields, p4gen.Field{Name: v.(p4gen.Ref).Path[5:], Bits: 16})
	}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Random{Dst: a, Hi: 1000},
		p4gen.Random{Dst: b, Hi: 1000},
		p4gen.Assign{Dst: x1, X: sum},
		p4gen.Assign{Dst: x2, X: sum}, // a copy of x1
		p4gen.Hash{Dst: h, Algo: p4gen.CRC16, Data: []p4gen.Expr{x2, p4gen.C(7, 16)}},
		p4gen.Assign{Dst: y1, X: sum},
		p4gen.Assign{Dst: a, X: p4gen.B(p4gen.Add, a, p4gen.C(1, 16))},
		p4gen.Assign{Dst: y2, X: sum},                                    // a changed: computed again
		p4gen.Assign{Dst: z1, X: sum},                                    // a copy of y2
		p4gen.Assign{Dst: z1, X: p4gen.B(p4gen.Add, z1, p4gen.C(5, 16))}, // y2 + 5
		p4gen.Assign{Dst: z2, X: sum},                                    // z1 no longer holds it: a copy of y2
		p4gen.If{Cond: p4gen.B(p4gen.Gt, b, p4gen.C(500, 16)), Then: []p4gen.Stmt{p4gen.Assign{Dst: w1, X: sum}}},
		p4gen.Assign{Dst: w2, X: sum}, // w1 holds it on one branch only: computed again
		p4gen.Digest{Type: d, Values: vals},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	m := sameAsReference(t, prog, nil, splitReads)
	res := residualOf(t, m)
	sums := countIn(res, func(s p4gen.Stmt) bool {
		as, ok := s.(p4gen.Assign)
		_, isRef := as.X.(p4gen.Ref)
		return ok && !isRef && ex(as.X) == ex(sum)
	})
	// x1, y2 and w2: the others are copies.
	if sums != 3 {
		t.Fatalf("the sum is computed %d times, not 3: %v", sums, res)
	}
	hashes := countIn(res, func(s p4gen.Stmt) bool {
		hs, ok := s.(p4gen.Hash)
		return ok && ex(hs.Data[0]) == "meta.x1"
	})
	if hashes != 1 {
		t.Fatal("the hash does not read x1")
	}
}
