package annotate

import (
	"errors"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// timestamp and tag on a switch. Each computes its word for the packet
// and exports it to the functions after it on the switch, which read it
// as LABEL.ts or LABEL.value. The word stays on the switch: the link up
// carries the packet's bytes, not its annotation area, so a reader above
// the switch sees it only when the P4 flowspace carries it up.

// p4Timestamp exports the switch's time of the packet, in ns: its clock
// (ingress_global_timestamp, µs: the capture time for a port replaying a
// capture file, the switch's own otherwise) times 1000, by shifts (a
// switch has no multiplier).
type p4Timestamp struct{}

func (p4Timestamp) Lower(b *p4gen.Builder) error {
	ts := b.Meta("ts", 64)
	t := p4gen.Cast{Bits: 64, X: b.Time}
	shl := func(n uint64) p4gen.Expr { return p4gen.B(p4gen.Shl, t, p4gen.C(n, 64)) }
	// t·1000 = t·1024 − t·16 − t·8
	b.Add(p4gen.Assign{Dst: ts, X: p4gen.B(p4gen.Sub, p4gen.B(p4gen.Sub, shl(10), shl(4)), shl(3))})
	b.Export("ts", ts)
	return nil
}

// p4Tag exports the tag: value=, or with key= crc32 of the key's words
// (flowkey.P4Hashes: one tag per flow, as on the host, but other numbers
// than flowkey's hash), 0 for a packet without the key, which counts in
// nokey.
type p4Tag struct {
	value uint64
	sp    *flowkey.Spec
}

func (t p4Tag) Lower(b *p4gen.Builder) error {
	v := b.Meta("value", 64)
	if t.sp == nil {
		b.Add(p4gen.Assign{Dst: v, X: p4gen.C(t.value, 64)})
		b.Export("value", v)
		return nil
	}
	k := t.sp.LowerP4(b)
	nokey := b.Counter("nokey", 1, p4gen.Packets, "nokey", "", 0)
	h1, _ := k.Hashes(b)
	b.Add(p4gen.If{Cond: k.HasKey(),
		Then: []p4gen.Stmt{p4gen.Assign{Dst: v, X: p4gen.Cast{Bits: 64, X: h1}}},
		Else: []p4gen.Stmt{p4gen.Assign{Dst: v, X: p4gen.C(0, 64)}, p4gen.Count{Counter: nokey, Index: p4gen.C(0, 32)}}})
	b.Export("value", v)
	return nil
}

func p4TagCode(ctx *functions.Context) (p4gen.Function, error) {
	if err := tagRuns(functions.TargetP4, ctx.Params); err != nil {
		return nil, err
	}
	if !ctx.Params.Has("key") {
		v, ok := constValue(ctx.Params.Str("value"))
		if !ok {
			return nil, errors.New("on a switch tag writes a constant or its flow's tag, not an expression")
		}
		return p4Tag{value: v}, nil
	}
	if ctx.LinkType != functions.LinkEthernet {
		return nil, errors.New("a switch reads Ethernet frames")
	}
	return p4Tag{sp: measure.Spec(ctx.Params)}, nil
}

// tagRuns: on a switch, tag rewrites no copies, and its flows' tags are
// crc32's, not seeded.
func tagRuns(t functions.Target, p functions.Params) error {
	if t != functions.TargetP4 {
		return nil
	}
	switch {
	case p.Has("field"):
		return errors.New("tag with field= runs above the switch: its output is rewritten copies of the packets")
	case p.Has("seed") && p.Int("seed") != 0:
		return errors.New("seed= keeps tag above the switch: a switch tags a flow with crc32 of its key, which takes no seed")
	}
	return nil
}
