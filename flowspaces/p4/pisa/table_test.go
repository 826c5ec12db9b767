package pisa

import (
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
	"github.com/ffpf-go/ffpf/functions/p4gen/p4gentest"
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

// A packed table of fields whose actions only set metadata to their
// parameters (masked to their width) or constants writes what an
// installed entry's action would, with no call of it (direct): before
// and after its entries and its default change, the digests of what
// it set are the reference's.
func TestDirectTableAsReference(t *testing.T) {
	prog := p4gen.NewProgram("direct")
	k, o, c, n := p4gen.Ref{Path: "meta.k", Bits: 8}, p4gen.Ref{Path: "meta.o", Bits: 8}, p4gen.Ref{Path: "meta.c", Bits: 8}, p4gen.Ref{Path: "meta.n", Bits: 4}
	prog.Metadata = []p4gen.Field{{Name: "k", Bits: 8}, {Name: "o", Bits: 8}, {Name: "c", Bits: 8}, {Name: "n", Bits: 4}}
	set := &p4gen.Action{Name: "set", Params: []p4gen.Field{{Name: "v", Bits: 8}},
		Body: []p4gen.Stmt{p4gen.Assign{Dst: o, X: p4gen.Ref{Path: "v", Bits: 8}}, p4gen.Assign{Dst: c, X: p4gen.C(3, 8)}}}
	w := p4gen.Ref{Path: "w", Bits: 4}
	other := &p4gen.Action{Name: "other", Params: []p4gen.Field{{Name: "w", Bits: 4}},
		Body: []p4gen.Stmt{p4gen.Assign{Dst: p4gen.Ref{Path: "meta.n", Bits: 4}, X: w}}}
	tbl := &p4gen.Table{Name: "t", Keys: []p4gen.TableKey{{X: k, Match: p4gen.Ternary}}, Actions: []*p4gen.Action{set, other},
		Default: set, DefaultArgs: []uint64{9}, Size: 8}
	prog.Actions, prog.Tables = []*p4gen.Action{set, other}, []*p4gen.Table{tbl}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "o", Bits: 8}, {Name: "c", Bits: 8}, {Name: "n", Bits: 4}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Random{Dst: k, Hi: 255},
		p4gen.Apply{Table: tbl},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{o, c, n}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	if err := prog.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := Load(prog, roomy)
	if err != nil {
		t.Fatal(err)
	}
	if !m.tables[tbl].direct {
		t.Fatal("the table is not direct")
	}
	ref := p4gen.NewSwitch(prog)
	install := func(es []p4gen.Entry, def *p4gen.Action, args []uint64) {
		ref.Entries[tbl] = es
		if err := m.SetEntries(tbl, es); err != nil {
			t.Fatal(err)
		}
		tbl.Default, tbl.DefaultArgs = def, args // the reference's
		if err := m.SetDefault(tbl, def, args); err != nil {
			t.Fatal(err)
		}
	}
	install([]p4gen.Entry{
		{Match: []p4gen.Match{{Value: 0x80, Mask: 0x80}}, Action: other, Args: []uint64{0x1f}, Priority: 2}, // 0x1f: past w's 4 bits
		{Match: []p4gen.Match{{Value: 0x01, Mask: 0x03}}, Action: set, Args: []uint64{0x42}, Priority: 1},
	}, set, []uint64{9})
	seen := map[uint64]bool{}
	for i, f := range p4gentest.Frames(3, 300, 20) {
		if i == 150 {
			install([]p4gen.Entry{{Match: []p4gen.Match{{Value: 0x00, Mask: 0x01}}, Action: set, Args: []uint64{0x77}}}, other, []uint64{5})
		}
		a := p4gen.Arrival{Data: f, Port: 1, Time: uint64(i)}
		want, werr := ref.Process(a)
		got, gerr := m.Process(a)
		if werr != nil || gerr != nil {
			t.Fatalf("packet %d: errors %v, %v", i, werr, gerr)
		}
		if dr := diffResult(want, got); dr != "" {
			t.Fatalf("packet %d: %s", i, dr)
		}
		if len(got.Digests) == 1 {
			vs := got.Digests[0].Values
			seen[vs[0]<<16|vs[1]<<8|vs[2]] = true
		}
	}
	if len(seen) < 5 {
		t.Fatalf("only %d outcomes: %v", len(seen), seen)
	}
}
