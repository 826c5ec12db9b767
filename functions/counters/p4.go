package counters

import (
	"fmt"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4Count is pktcount or bytecount on a switch: a counter of one cell,
// packets or bytes (packet_length, the frame as it arrived), which the
// controller reads into the MBuf field it names. Counters, not
// registers: every P4Runtime target reads them (bmv2 too).
type p4Count struct{ bytes bool }

func (c p4Count) Lower(b *p4gen.Builder) error {
	var ctr *p4gen.Counter
	if c.bytes {
		ctr = b.Counter("bytes", 1, p4gen.Bytes, "", "bytes", 0)
	} else {
		ctr = b.Counter("packets", 1, p4gen.Packets, "packets", "", 0)
	}
	b.Add(p4gen.Count{Counter: ctr, Index: p4gen.C(0, 32)})
	return nil
}

func p4PktCount(*functions.Context) (p4gen.Function, error)  { return p4Count{}, nil }
func p4ByteCount(*functions.Context) (p4gen.Function, error) { return p4Count{bytes: true}, nil }

// p4Counter is counter on a switch. Its totals are one count of packets
// and bytes. With key=, its table is registers, one per column (each key
// word, the values, the used marks), indexed by the key's slot: P4Index 0
// of its hashes among a power of two. A switch accesses each register once
// per packet, so it probes no further than that slot: the packet claims
// it when it is free (the used mark's RMW), compares the key words stored
// there with its own (each word's RMW, which writes them when it claimed),
// and adds its value when the slot is its key's; a key whose slot holds
// another counts in dropped, as one that finds no room in userspace does
// (where it probes up to 32 slots). With window= the state is kept per
// window parity (measure.P4State); with report= the function passes no
// packet on (its output is the reports its Go half makes).
type p4Counter struct {
	params functions.Params
	sp     *flowkey.Spec // nil: no key
	bytes  bool
	size   int // a power of two
}

func (c *p4Counter) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, c.params)
	if err != nil {
		return err
	}
	totals := s.Count("totals", "packets", "bytes")
	if measure.Reports(c.params) {
		b.Pass = p4gen.False
	}
	if c.sp == nil {
		// value: the total value= counts, in a register too, so that the
		// functions after it on the switch read it in the pipeline.
		total, sum := s.Register("value", 64, 1, "", 0), b.Meta("value", 64)
		b.Add(p4gen.Assign{Dst: sum, X: p4gen.C(0, 64)})
		s.Lower(func(h int) []p4gen.Stmt {
			return append(totals.Add(h), total.RMW(h, p4gen.RMW{Index: p4gen.C(0, 32),
				New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, valueOf(c.bytes, 64)), NewTo: &sum}))
		})
		b.Export("value", sum)
		b.Export(map[bool]string{false: "packets", true: "bytes"}[c.bytes], sum)
		return nil
	}
	k := c.sp.LowerP4(b)
	nokey, keys, dropped := s.Count("nokey", "nokey", ""), s.Count("keys", "keys", ""), s.Count("dropped", "dropped", "")
	h1, h2 := k.Hashes(b)
	_, bits := flowkey.Pow2(uint64(c.size))
	slot := flowkey.Positions(b, h1, h2, "slot", 1, bits)[0]
	nw := len(k.Words)
	used := s.Register("used", 8, c.size, "slots", (nw+1)*c.size)
	value := s.Register("value", 64, c.size, "slots", nw*c.size)
	words := make([]*measure.P4Reg, nw)
	olds := make([]p4gen.Ref, nw)
	for j := range k.Words {
		words[j] = s.Register(fmt.Sprint("key", j), 64, c.size, "slots", j*c.size)
		olds[j] = b.Meta(fmt.Sprint("old", j), 64)
	}
	usedOld, sum := b.Meta("used", 8), b.Meta("value", 64)
	claim := p4gen.B(p4gen.Eq, usedOld, p4gen.C(0, 8))
	var same []p4gen.Expr
	for j, w := range k.Words {
		same = append(same, p4gen.B(p4gen.Eq, olds[j], w))
	}
	ok := p4gen.B(p4gen.LOr, claim, p4gen.AllOf(same...))
	b.Add(p4gen.Assign{Dst: sum, X: p4gen.C(0, 64)})
	s.Lower(func(h int) []p4gen.Stmt {
		then := []p4gen.Stmt{used.RMW(h, p4gen.RMW{Index: slot, New: p4gen.C(1, 8), OldTo: &usedOld})}
		for j, w := range k.Words {
			then = append(then, words[j].RMW(h, p4gen.RMW{Index: slot, New: w, Cond: claim, OldTo: &olds[j]}))
		}
		then = append(then,
			value.RMW(h, p4gen.RMW{Index: slot, New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, valueOf(c.bytes, 64)), Cond: ok, NewTo: &sum}),
			p4gen.If{Cond: claim, Then: keys.Add(h)},
			p4gen.If{Cond: p4gen.Unary{Op: p4gen.Not, X: ok}, Then: dropped.Add(h)})
		return append(totals.Add(h), p4gen.If{Cond: k.HasKey(), Then: then, Else: nokey.Add(h)})
	})
	// value: the count of the packet's key (0 for a packet without one,
	// or whose key the table does not hold), as the Go half reads it.
	b.Export("value", p4gen.Mux{Cond: p4gen.AllOf(k.HasKey(), ok), Then: sum, Else: p4gen.C(0, 64)})
	return nil
}

// valueOf is what a packet adds, in bits bits: 1, or its length.
func valueOf(bytes bool, bits int) p4gen.Expr {
	if bytes {
		return p4gen.Cast{Bits: bits, X: p4gen.Std("packet_length")}
	}
	return p4gen.C(1, bits)
}

func p4CounterCode(ctx *functions.Context) (p4gen.Function, error) {
	if ctx.LinkType != functions.LinkEthernet {
		return nil, fmt.Errorf("a switch reads Ethernet frames, not %v", ctx.LinkType)
	}
	c := &p4Counter{params: ctx.Params, bytes: measure.Bytes(ctx.Params)}
	if ctx.Params.Has("key") {
		c.sp, c.size = measure.Spec(ctx.Params), p4Size(ctx.Params)
	}
	return c, nil
}
