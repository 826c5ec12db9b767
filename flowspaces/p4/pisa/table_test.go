package pisa

import (
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A table whose keys (ternary, LPM, exact; a field or an expression)
// fit one word looks up its entries packed, and finds what the
// entry-by-entry lookup finds: values past a key's width never match,
// priorities and prefix lengths order the entries.
func TestPackedTableAsEntries(t *testing.T) {
	prog := p4gen.NewProgram("packed")
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: 8}, {Name: "b", Bits: 3}, {Name: "c", Bits: 1}}
	ma, mb, mc := p4gen.Ref{Path: "meta.a", Bits: 8}, p4gen.Ref{Path: "meta.b", Bits: 3}, p4gen.Ref{Path: "meta.c", Bits: 1}
	acts := make([]*p4gen.Action, 4)
	for i := range acts {
		acts[i] = &p4gen.Action{Name: string(rune('p' + i)), Body: []p4gen.Stmt{p4gen.Assign{Dst: ma, X: p4gen.C(uint64(i), 8)}}}
	}
	prog.Actions = acts
	rng := rand.New(rand.NewPCG(7, 19))
	for _, kinds := range [][]p4gen.MatchKind{
		{p4gen.Ternary, p4gen.Exact, p4gen.Ternary, p4gen.Ternary},
		{p4gen.LPM, p4gen.Exact, p4gen.Exact, p4gen.Exact},
		{p4gen.Ternary},
	} {
		xs := []p4gen.Expr{ma, mb, mc, p4gen.B(p4gen.Add, mb, p4gen.C(1, 3))}
		tbl := &p4gen.Table{Name: "t", Actions: acts, Default: acts[0], Size: 64}
		for i, k := range kinds {
			tbl.Keys = append(tbl.Keys, p4gen.TableKey{X: xs[i], Match: k})
		}
		prog.Tables = []*p4gen.Table{tbl}
		m, err := Load(prog, roomy)
		if err != nil {
			t.Fatal(err)
		}
		var es []p4gen.Entry
		for range 40 {
			e := p4gen.Entry{Action: acts[1+rng.IntN(3)], Priority: rng.Int32N(8)}
			for i, k := range kinds {
				w := xs[i].Type().Bits
				v := rng.Uint64() & p4gen.Bit(w+1).Mask() // now and then past the width
				mt := p4gen.Match{Value: v, Mask: rng.Uint64() & p4gen.Bit(w+1).Mask(), PrefixLen: rng.IntN(w + 1)}
				if k == p4gen.LPM {
					mt.Value &= p4gen.Bit(w).Mask()
				}
				e.Match = append(e.Match, mt)
			}
			es = append(es, e)
		}
		if err := m.SetEntries(tbl, es); err != nil {
			t.Fatal(err)
		}
		tb := m.tables[tbl]
		if !tb.packed || len(tb.masked) != len(es) {
			t.Fatalf("%v: packed %v, %d packed entries of %d", kinds, tb.packed, len(tb.masked), len(es))
		}
		byEntry := *tb
		byEntry.packed = false
		hits := map[*action]int{}
		vals := make([]uint64, len(kinds))
		for range 4000 {
			for i := range vals {
				vals[i] = rng.Uint64() & xs[i].Type().Mask()
			}
			a, _ := tb.find(vals)
			if b, _ := byEntry.find(vals); a != b {
				t.Fatalf("%v: keys %v: packed %s, entry by entry %s", kinds, vals, a.a.Name, b.a.Name)
			}
			hits[a]++
		}
		if len(hits) < 3 {
			t.Fatalf("%v: only %d actions found", kinds, len(hits))
		}
	}
}
