package sample

import (
	"errors"
	"math"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4Sample is sample on a switch. every=N: a register counts the packets
// modulo N by one RMW (0, 1, …, N−1, 0, …) and the packet that finds 0
// passes, the same packets as in userspace. rate=P: v1model's random
// draws a 32-bit number per packet and the packet passes below P·2^32
// (every packet with rate=1): the same rate as in userspace, not the
// same packets (the switch's generator is not Go's seeded one), and no
// rand to read. seen and sampled are counters.
type p4Sample struct {
	every uint64 // 0: rate
	limit uint64 // a drawn number below it passes
	all   bool
}

func (s p4Sample) Lower(b *p4gen.Builder) error {
	seen := b.Counter("seen", 1, p4gen.Packets, "seen", "", 0)
	sampled := b.Counter("sampled", 1, p4gen.Packets, "sampled", "", 0)
	pass := b.Meta("pass", 1)
	b.Add(p4gen.Count{Counter: seen, Index: p4gen.C(0, 32)})
	switch {
	case s.every > 0:
		w := 32
		if s.every > math.MaxUint32 {
			w = 64
		}
		n, i := b.Register("n", w, 1, "", 0), b.Meta("n", w)
		old := p4gen.Old{Bits: w}
		next := p4gen.B(p4gen.Add, old, p4gen.C(1, w))
		b.Add(p4gen.RMW{Reg: n, Index: p4gen.C(0, 32), OldTo: &i,
			New: p4gen.Mux{Cond: p4gen.B(p4gen.Eq, next, p4gen.C(s.every, w)), Then: p4gen.C(0, w), Else: next}},
			p4gen.Assign{Dst: pass, X: p4gen.Cast{Bits: 1, X: p4gen.B(p4gen.Eq, i, p4gen.C(0, w))}})
	case s.all:
		b.Add(p4gen.Assign{Dst: pass, X: p4gen.C(1, 1)})
	default:
		r := b.Meta("rand", 32)
		b.Add(p4gen.Random{Dst: r, Lo: 0, Hi: math.MaxUint32},
			p4gen.Assign{Dst: pass, X: p4gen.Cast{Bits: 1, X: p4gen.B(p4gen.Lt, p4gen.Cast{Bits: 33, X: r}, p4gen.C(s.limit, 33))}})
	}
	b.Add(p4gen.If{Cond: p4gen.B(p4gen.Eq, pass, p4gen.C(1, 1)), Then: []p4gen.Stmt{p4gen.Count{Counter: sampled, Index: p4gen.C(0, 32)}}})
	b.Pass = p4gen.B(p4gen.Eq, pass, p4gen.C(1, 1))
	return nil
}

func p4Code(ctx *functions.Context) (p4gen.Function, error) {
	if err := runs(functions.TargetP4, ctx.Params); err != nil {
		return nil, err
	}
	if ctx.Params.Has("every") {
		return p4Sample{every: uint64(ctx.Params.Int("every"))}, nil
	}
	rate := ctx.Params.Float("rate")
	return p4Sample{limit: uint64(rate * (1 << 32)), all: rate >= 1}, nil
}

var errSeedP4 = errors.New("seed= keeps rate= above the switch: a switch draws from its own generator, not from Go's seeded one")
