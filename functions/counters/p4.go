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

// p4Counter is counter on a switch. Its totals are one counter cell of
// packets and bytes. With key=, its table is registers, one per column
// (each key word, the values, the used marks), indexed by the key's slot:
// P4Index 0 of its hashes among a power of two. A switch accesses each
// register once per packet, so it probes no further than that slot: the
// packet claims it when it is free (the used mark's RMW), compares the
// key words stored there with its own (each word's RMW, which writes them
// when it claimed), and adds its value when the slot is its key's; a key
// whose slot holds another counts in dropped, as one that finds no room
// in userspace does (where it probes up to 32 slots).
type p4Counter struct {
	sp    *flowkey.Spec // nil: no key
	bytes bool
	size  int // a power of two
}

func (c *p4Counter) Lower(b *p4gen.Builder) error {
	totals := b.Counter("totals", 1, p4gen.PacketsAndBytes, "packets", "bytes", 0)
	b.Add(p4gen.Count{Counter: totals, Index: p4gen.C(0, 32)})
	if c.sp == nil {
		return nil
	}
	k := c.sp.LowerP4(b)
	nokey := b.Counter("nokey", 1, p4gen.Packets, "nokey", "", 0)
	keys := b.Counter("keys", 1, p4gen.Packets, "keys", "", 0)
	dropped := b.Counter("dropped", 1, p4gen.Packets, "dropped", "", 0)
	h1, h2 := k.Hashes(b)
	_, bits := flowkey.Pow2(uint64(c.size))
	slot := flowkey.Positions(b, h1, h2, "slot", 1, bits)[0]
	nw := len(k.Words)
	used := b.Register("used", 8, c.size, "slots", (nw+1)*c.size)
	value := b.Register("value", 64, c.size, "slots", nw*c.size)
	usedOld := b.Meta("used", 8)
	claim := p4gen.B(p4gen.Eq, usedOld, p4gen.C(0, 8))
	then := []p4gen.Stmt{p4gen.RMW{Reg: used, Index: slot, New: p4gen.C(1, 8), OldTo: &usedOld}}
	var same []p4gen.Expr
	for j, w := range k.Words {
		reg := b.Register(fmt.Sprint("key", j), 64, c.size, "slots", j*c.size)
		old := b.Meta(fmt.Sprint("old", j), 64)
		then = append(then, p4gen.RMW{Reg: reg, Index: slot, New: w, Cond: claim, OldTo: &old})
		same = append(same, p4gen.B(p4gen.Eq, old, w))
	}
	ok := p4gen.B(p4gen.LOr, claim, p4gen.AllOf(same...))
	then = append(then,
		p4gen.RMW{Reg: value, Index: slot, New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, valueOf(c.bytes, 64)), Cond: ok},
		p4gen.If{Cond: claim, Then: []p4gen.Stmt{p4gen.Count{Counter: keys, Index: p4gen.C(0, 32)}}},
		p4gen.If{Cond: p4gen.Unary{Op: p4gen.Not, X: ok}, Then: []p4gen.Stmt{p4gen.Count{Counter: dropped, Index: p4gen.C(0, 32)}}})
	b.Add(p4gen.If{Cond: k.HasKey(), Then: then, Else: []p4gen.Stmt{p4gen.Count{Counter: nokey, Index: p4gen.C(0, 32)}}})
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
	c := &p4Counter{bytes: measure.Bytes(ctx.Params)}
	if ctx.Params.Has("key") {
		c.sp, c.size = measure.Spec(ctx.Params), p4Size(ctx.Params)
	}
	return c, nil
}
