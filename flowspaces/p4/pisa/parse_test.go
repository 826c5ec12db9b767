package pisa

import (
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A select whose values fit one word matches a case by one compare:
// masked cases, a case whose value is past its key's width (never
// matched), and a select too wide for a word (matched key by key) go
// where the reference's do. Each state sets a metadata field, which a
// digest sends up, so that which one ran shows.
func TestSelectAsReference(t *testing.T) {
	prog := p4gen.NewProgram("select")
	var start *p4gen.ParserState
	prog.Parser = append([]*p4gen.ParserState(nil), prog.Parser...)
	for i, s := range prog.Parser {
		if s.Name == "start" {
			c := *s
			start, prog.Parser[i] = &c, &c
		}
	}
	if start == nil {
		t.Fatal("no start state")
	}
	etype, dst := p4gen.F("eth_type", "ether_type"), p4gen.F("eth_dst_1", "dst_1")
	// Two keys (16 + 32 bits): masked, never and exact cases before the
	// library's own ether type cases.
	wide := p4gen.Cast{Bits: 64, X: dst}
	cases := []p4gen.Case{
		{Values: []uint64{0x0800, 0x10000}, Masks: []uint64{0xffff, 0x10000}, Next: p4gen.Accept}, // odd flows' IPv4 is not parsed
		{Values: []uint64{0x10806, 0}, Masks: []uint64{0x1ffff, 0}, Next: p4gen.Reject},           // past 16 bits: never
		{Values: []uint64{0x86dd, 3}, Next: p4gen.Reject},
	}
	for _, c := range start.Cases {
		cases = append(cases, p4gen.Case{Values: []uint64{c.Values[0], 0}, Masks: []uint64{0xffff, 0}, Next: c.Next})
	}
	start.Select = []p4gen.Expr{etype, p4gen.Cast{Bits: 32, X: dst}}
	start.Cases = cases
	prog.Metadata = []p4gen.Field{{Name: "v4", Bits: 1}}
	v4 := p4gen.Ref{Path: "meta.v4", Bits: 1}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "v4", Bits: 1}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: v4, X: p4gen.Cast{Bits: 1, X: p4gen.Valid{Header: "ipv4_proto"}}},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{v4}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
	// The same, the select too wide for one word.
	start.Select[1] = wide
	sameAsReference(t, prog, nil, splitReads)
}
