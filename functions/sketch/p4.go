package sketch

// The classes on a P4 switch. Each computes the packet's key from the
// parsed headers (flowkey.Spec.LowerP4, the words Extract gives) and its
// positions from crc32 and crc16 of them (flowkey.P4Hashes and P4Index:
// a switch has no 64-bit multiplier, and salted CRCs would make every row
// collide where one does), into structures of a power-of-two size kept
// in registers, one per count-min row and per Bloom hash, each read and
// written once per packet by one read-modify-write, as a Tofino's
// stateful ALUs allow. Counts that only the controller reads (nokey) are
// counters. The Go half of a function placed on a switch keeps the same
// layout (the state laid out for functions.TargetP4), reads it with the
// same positions, and, given packets itself, computes what the switch
// computes: the tests compare the two byte for byte.

import (
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// p4Runs refuses in eBPF what ebpfRuns(ebpf) does, and on a switch what
// every measurement class refuses there (measure.P4Runs) and what p4
// refuses.
func p4Runs(ebpf, p4 func(p functions.Params) error) func(functions.Target, functions.Params) error {
	other := ebpfRuns(ebpf)
	return func(t functions.Target, p functions.Params) error {
		if t != functions.TargetP4 {
			if err := measure.SwitchHashRuns(t, p, p4); err != nil {
				return err
			}
			return other(t, p)
		}
		if p4 != nil {
			if err := p4(p); err != nil {
				return err
			}
		}
		return measure.P4Runs(p)
	}
}

// cmsP4Runs: report= of cms stays above the switch. Go tracks the K
// heaviest keys in a heap as each packet updates the sketch, which a
// switch's pipeline cannot keep.
func cmsP4Runs(p functions.Params) error {
	if measure.Reports(p) {
		return errors.New("report= of cms runs above the switch: the K heaviest keys are kept in a heap updated packet by packet, which a switch cannot keep")
	}
	return nil
}

// p4Key reads a packet's key as a switch does, for a Go half that
// computes or reads state kept on a switch.
type p4Key struct {
	sp *flowkey.Spec
	lt functions.LinkType
	k  flowkey.Key
}

// hashes returns the key's hashes (flowkey.P4Hashes), false without a key.
func (p *p4Key) hashes(pkt []byte) (h1 uint32, h2 uint16, ok bool) {
	if !p.sp.Extract(p.lt, pkt, &p.k) {
		return 0, 0, false
	}
	h1, h2 = p.sp.P4Hashes(&p.k)
	return h1, h2, true
}

// positions writes the first len(pos) positions among 2^bits of hashes
// h1, h2 into pos.
func positions(pos []uint32, h1 uint32, h2 uint16, bits int) {
	for i := range pos {
		pos[i] = flowkey.P4Index(h1, h2, uint32(i), bits)
	}
}

// p4Width is a row's width on a switch: width= rounded up to a power of
// two, and its exponent.
func p4Width(p functions.Params) (int, int) {
	n, b := flowkey.Pow2(uint64(p.Int("width")))
	return int(n), b
}

func p4Ethernet(ctx *functions.Context) error {
	if ctx.LinkType != functions.LinkEthernet {
		return fmt.Errorf("a switch reads Ethernet frames, not %v", ctx.LinkType)
	}
	return nil
}

// p4CMS is cms on a switch: a register of width 64-bit counters per row
// (width= rounded up to a power of two: a tighter ε), each packet adding
// its value to its key's counter in every row by one RMW that gives the
// counter's new value; the least of them is the key's estimate, which
// functions after it on the switch read as min. total and nokey are
// counters.
type p4CMS struct {
	params       functions.Params
	sp           *flowkey.Spec
	depth, width int
	bits         int
	bytes        bool
	value        string // value= a number of the packet (an expression), or ""
}

func (c *p4CMS) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, c.params)
	if err != nil {
		return err
	}
	k := c.sp.LowerP4(b)
	nokey := s.Count("nokey", "nokey", "")
	packets, bytes := "total", ""
	if c.bytes {
		packets, bytes = "", "total"
	}
	v := valueOf(c.bytes)
	var total *measure.P4Count
	var sum *measure.P4Reg // the total of value= an expression: a counter counts packets and bytes only
	if c.value != "" {
		x, present, err := match.P4Value(b, c.value, nil)
		if err != nil {
			return err
		}
		vm := b.Meta("v", 64)
		b.Add(p4gen.Assign{Dst: vm, X: p4gen.Mux{Cond: present, Then: x, Else: p4gen.C(0, 64)}})
		v, sum = vm, s.Register("total", 64, 1, "total", 0)
	} else {
		total = s.Count("total", packets, bytes)
	}
	rows := make([]*measure.P4Reg, c.depth)
	cells := make([]p4gen.Ref, c.depth)
	for r := range rows {
		rows[r] = s.Register(fmt.Sprint("row", r), 64, c.width, "counters", r*c.width)
		cells[r] = b.Meta(fmt.Sprint("cell", r), 64)
	}
	h1, h2 := k.Hashes(b)
	pos := flowkey.Positions(b, h1, h2, "pos", c.depth, c.bits)
	var zero []p4gen.Stmt
	for _, cell := range cells {
		zero = append(zero, p4gen.Assign{Dst: cell, X: p4gen.C(0, 64)})
	}
	b.Add(zero...)
	s.Lower(func(h int) []p4gen.Stmt {
		var then []p4gen.Stmt
		if sum != nil {
			then = append(then, sum.RMW(h, p4gen.RMW{Index: p4gen.C(0, 32), New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, v)}))
		} else {
			then = total.Add(h)
		}
		for r := range rows {
			then = append(then, rows[r].RMW(h, p4gen.RMW{Index: pos[r], New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 64}, v), NewTo: &cells[r]}))
		}
		return []p4gen.Stmt{p4gen.If{Cond: k.HasKey(), Then: then, Else: nokey.Add(h)}}
	})
	if measure.Reports(c.params) {
		b.Pass = p4gen.False
	}
	// min, the least of the key's counters as each packet leaves them,
	// is computed by the functions that read it: none that does not.
	b.Export("min", minOf(cells))
	return nil
}

// minOf is the least of xs, as a balanced tree of comparisons.
func minOf(xs []p4gen.Ref) p4gen.Expr {
	es := make([]p4gen.Expr, len(xs))
	for i, x := range xs {
		es[i] = x
	}
	for len(es) > 1 {
		var next []p4gen.Expr
		for i := 0; i+1 < len(es); i += 2 {
			next = append(next, p4gen.Mux{Cond: p4gen.B(p4gen.Lt, es[i], es[i+1]), Then: es[i], Else: es[i+1]})
		}
		if len(es)%2 == 1 {
			next = append(next, es[len(es)-1])
		}
		es = next
	}
	return es[0]
}

// valueOf is what a packet adds: 1, or its length, as bit<64>.
func valueOf(bytes bool) p4gen.Expr {
	if bytes {
		return p4gen.Cast{Bits: 64, X: p4gen.Std("packet_length")}
	}
	return p4gen.C(1, 64)
}

func p4CMSCode(ctx *functions.Context) (p4gen.Function, error) {
	if err := p4Ethernet(ctx); err != nil {
		return nil, err
	}
	d, _ := cmsDims(ctx.Params)
	w, bits := p4Width(ctx.Params)
	c := &p4CMS{params: ctx.Params, sp: measure.Spec(ctx.Params), depth: d, width: w, bits: bits, bytes: measure.Bytes(ctx.Params)}
	if valueExpr(ctx.Params) {
		if err := match.P4Check(ctx.Params.Str("value"), false); err != nil {
			return nil, err
		}
		c.value = ctx.Params.Str("value")
	}
	return c, nil
}

// p4HLL is hll on a switch: a register of 2^p one-byte registers; crc32
// of the key chooses register j (its top p bits) and offers ρ, one more
// than the leading zeros of the rest (HLLPosition32), which a ternary
// table finds (a switch has no count-leading-zeros); the RMW keeps the
// larger of ρ and what the register held. (MAFIA's public code writes ρ
// without the max, which forgets a larger rank.)
type p4HLL struct {
	params functions.Params
	sp     *flowkey.Spec
	p      int
}

func (f *p4HLL) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, f.params)
	if err != nil {
		return err
	}
	k := f.sp.LowerP4(b)
	nokey := s.Count("nokey", "nokey", "")
	regs := s.Register("registers", 8, 1<<f.p, "registers", 0)
	h1, _ := k.Hashes(b)
	j, w, rho := b.Meta("j", 32), b.Meta("w", 32), b.Meta("rho", 8)
	clz := leadingZeros(b, "rank", w, rho, 32-f.p, 1)
	b.Add(
		p4gen.Assign{Dst: j, X: p4gen.Cast{Bits: 32, X: p4gen.Slice{X: h1, Hi: 31, Lo: 32 - f.p}}},
		p4gen.Assign{Dst: w, X: p4gen.B(p4gen.Or, p4gen.B(p4gen.Shl, h1, p4gen.C(uint64(f.p), 32)), p4gen.C(1<<(f.p-1), 32))},
		p4gen.Apply{Table: clz})
	s.Lower(func(h int) []p4gen.Stmt {
		return []p4gen.Stmt{p4gen.If{Cond: k.HasKey(),
			Then: []p4gen.Stmt{regs.RMW(h, p4gen.RMW{Index: j,
				New: p4gen.Mux{Cond: p4gen.B(p4gen.Lt, p4gen.Old{Bits: 8}, rho), Then: rho, Else: p4gen.Old{Bits: 8}}})},
			Else: nokey.Add(h)}}
	})
	if measure.Reports(f.params) {
		b.Pass = p4gen.False
	}
	return nil
}

// leadingZeros declares a const ternary table on x (bit<32>) that sets
// dst to base plus the leading zeros of x, for x with a one among its top
// n+1 bits (a guard bit bounds it).
func leadingZeros(b *p4gen.Builder, name string, x, dst p4gen.Ref, n int, base uint64) *p4gen.Table {
	set := b.Action("set_"+name, []p4gen.Field{{Name: "v", Bits: dst.Bits}}, p4gen.Assign{Dst: dst, X: p4gen.Ref{Path: "v", Bits: dst.Bits}})
	t := &p4gen.Table{Name: name, Keys: []p4gen.TableKey{{X: x, Match: p4gen.Ternary}}, Actions: []*p4gen.Action{set},
		Default: set, DefaultArgs: []uint64{base + uint64(n)}, Size: n + 1, Const: true}
	for l := 0; l <= n; l++ {
		bit := uint64(1) << (31 - l)
		t.Entries = append(t.Entries, p4gen.Entry{Match: []p4gen.Match{{Value: bit, Mask: 0xffffffff &^ (bit - 1)}},
			Priority: int32(n + 1 - l), Action: set, Args: []uint64{base + uint64(l)}})
	}
	return b.Table(t)
}

func p4HLLCode(ctx *functions.Context) (p4gen.Function, error) {
	if err := p4Ethernet(ctx); err != nil {
		return nil, err
	}
	return &p4HLL{params: ctx.Params, sp: measure.Spec(ctx.Params), p: int(ctx.Params.Int("precision"))}, nil
}

// The Go halves on a switch compute, given packets, what the switch does:
// cms adds to its rows at the switch's positions, hll offers crc32.

func (c *CMS) processP4(b *buffers.Batch) {
	c.mode.Lock()
	defer c.mode.Unlock()
	var sum, nokey uint64
	p := b.PBuf
	for _, e := range b.E[:b.N] {
		h1, h2, ok := c.p4.hashes(p.Data(e.Slot))
		if !ok {
			nokey++
			continue
		}
		v := measure.ValueOf(p.Meta(e.Slot), c.bytes)
		if c.value != nil {
			x, _ := c.value.Int(p, e.Slot)
			v = uint64(x)
		}
		sum += v
		positions(c.pos, h1, h2, c.p4bits)
		c.s.AddRows(c.pos, v)
	}
	c.noKey(nokey)
	c.m.Add64(c.total, sum)
	c.pass(b)
}

func (f *HLLFunc) processP4(b *buffers.Batch) { offer32(&f.keyed, f.p4, &f.est, b, f.s.Add32) }

// offer32 offers each packet's crc32 to a cardinality estimator (add
// reports whether it changed), as a switch does.
func offer32(k *keyed, key *p4Key, est *cachedEstimate, b *buffers.Batch, add func(uint32) bool) {
	changed := false
	var nokey uint64
	for _, e := range b.E[:b.N] {
		h1, _, ok := key.hashes(b.PBuf.Data(e.Slot))
		if !ok {
			nokey++
			continue
		}
		if add(h1) {
			changed = true
		}
	}
	k.noKey(nokey)
	if changed {
		est.dirty.Store(true)
	}
	k.pass(b)
}

// p4PCSA is pcsa on a switch: a register of 2^b 32-bit bitmaps (bitmaps=
// rounded up to a power of two); crc32 of the key chooses bitmap j (its
// top b bits) and bit r, the trailing zeros of the rest with a guard bit
// (PCSAPosition32), which a ternary table turns into the bit's mask (a
// switch shifts by constants only); the RMW ors it in.
type p4PCSA struct {
	params functions.Params
	sp     *flowkey.Spec
	m, b   int
}

func (f *p4PCSA) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, f.params)
	if err != nil {
		return err
	}
	k := f.sp.LowerP4(b)
	nokey := s.Count("nokey", "nokey", "")
	bitmaps := s.Register("bitmaps", 32, f.m, "bitmaps", 0)
	h1, _ := k.Hashes(b)
	j, low, mask := b.Meta("j", 32), b.Meta("low", 32), b.Meta("bit", 32)
	ctz := trailingZeros(b, "rank", low, mask, 31-f.b)
	var jx p4gen.Expr = p4gen.C(0, 32)
	if f.b > 0 {
		jx = p4gen.Cast{Bits: 32, X: p4gen.Slice{X: h1, Hi: 31, Lo: 32 - f.b}}
	}
	b.Add(
		p4gen.Assign{Dst: j, X: jx},
		p4gen.Assign{Dst: low, X: p4gen.B(p4gen.Or, p4gen.B(p4gen.And, h1, p4gen.C(1<<(32-f.b)-1, 32)), p4gen.C(1<<(31-f.b), 32))},
		p4gen.Apply{Table: ctz})
	s.Lower(func(h int) []p4gen.Stmt {
		return []p4gen.Stmt{p4gen.If{Cond: k.HasKey(),
			Then: []p4gen.Stmt{bitmaps.RMW(h, p4gen.RMW{Index: j, New: p4gen.B(p4gen.Or, p4gen.Old{Bits: 32}, mask)})},
			Else: nokey.Add(h)}}
	})
	if measure.Reports(f.params) {
		b.Pass = p4gen.False
	}
	return nil
}

// trailingZeros declares a const ternary table on x (bit<32>) that sets
// dst to the bit (1 << r) of the trailing zeros r of x, for x with a one
// among its low n+1 bits.
func trailingZeros(b *p4gen.Builder, name string, x, dst p4gen.Ref, n int) *p4gen.Table {
	set := b.Action("set_"+name, []p4gen.Field{{Name: "v", Bits: dst.Bits}}, p4gen.Assign{Dst: dst, X: p4gen.Ref{Path: "v", Bits: dst.Bits}})
	t := &p4gen.Table{Name: name, Keys: []p4gen.TableKey{{X: x, Match: p4gen.Ternary}}, Actions: []*p4gen.Action{set},
		Default: set, DefaultArgs: []uint64{1 << n}, Size: n + 1, Const: true}
	for r := 0; r <= n; r++ {
		bit := uint64(1) << r
		t.Entries = append(t.Entries, p4gen.Entry{Match: []p4gen.Match{{Value: bit, Mask: bit<<1 - 1}},
			Priority: int32(n + 1 - r), Action: set, Args: []uint64{bit}})
	}
	return b.Table(t)
}

func p4PCSACode(ctx *functions.Context) (p4gen.Function, error) {
	if err := p4Ethernet(ctx); err != nil {
		return nil, err
	}
	m, bits := flowkey.Pow2(uint64(ctx.Params.Int("bitmaps")))
	return &p4PCSA{params: ctx.Params, sp: measure.Spec(ctx.Params), m: int(m), b: bits}, nil
}

func (f *PCSAFunc) processP4(b *buffers.Batch) { offer32(&f.keyed, f.p4, &f.est, b, f.s.Add32) }

// p4Bloom is a membership Bloom filter as a switch keeps it: k
// partitions of 2^bits one-bit cells, one register each, a key's cell in
// partition i at P4Index i of its hashes; the Go half's view of them is
// one byte per cell, partition i at [i·2^bits, (i+1)·2^bits).
type p4Bloom struct {
	cells []uint8
	k     int
	bits  int
}

// add sets the key's cells, reporting whether they all were.
func (p *p4Bloom) add(h1 uint32, h2 uint16) (present bool) {
	present = true
	for i := range p.k {
		c := &p.cells[i<<p.bits+int(flowkey.P4Index(h1, h2, uint32(i), p.bits))]
		if *c == 0 {
			present = false
			*c = 1
		}
	}
	return present
}

func (p *p4Bloom) test(h1 uint32, h2 uint16) bool {
	for i := range p.k {
		if p.cells[i<<p.bits+int(flowkey.P4Index(h1, h2, uint32(i), p.bits))] == 0 {
			return false
		}
	}
	return true
}

// p4BloomBits is a Bloom partition's size on a switch: bits/hashes
// rounded up to a power of two, and its exponent.
func p4BloomBits(p functions.Params) (int, int) {
	k := uint64(p.Int("hashes"))
	n, b := flowkey.Pow2((uint64(p.Int("bits")) + k - 1) / k)
	return int(n), b
}

// p4BloomFilter is membership bloom on a switch: a register of one-bit
// cells per hash (a partitioned Bloom filter: as many bits, the same
// false-positive rate for the same k and m), each set by its RMW, which
// gives the cell's old bit; the key was present when all were set. The
// packets pass= asks for pass; inserted and nokey count.
type p4BloomFilter struct {
	params  functions.Params
	sp      *flowkey.Spec
	k, size int
	bits    int
	pass    string
}

func (f *p4BloomFilter) Lower(b *p4gen.Builder) error {
	s, err := measure.NewP4State(b, f.params)
	if err != nil {
		return err
	}
	k := f.sp.LowerP4(b)
	inserted, nokey := s.Count("inserted", "inserted", ""), s.Count("nokey", "nokey", "")
	parts := make([]*measure.P4Reg, f.k)
	olds := make([]p4gen.Ref, f.k)
	for i := range parts {
		parts[i] = s.Register(fmt.Sprint("hash", i), 1, f.size, "cells", i*f.size)
		olds[i] = b.Meta(fmt.Sprint("old", i), 1)
	}
	pass, member := b.Meta("pass", 1), b.Meta("member", 1)
	h1, h2 := k.Hashes(b)
	pos := flowkey.Positions(b, h1, h2, "pos", f.k, f.bits)
	var all []p4gen.Expr
	for _, o := range olds {
		all = append(all, p4gen.B(p4gen.Eq, o, p4gen.C(1, 1)))
	}
	present := p4gen.AllOf(all...)
	verdict := map[string]p4gen.Expr{"new": p4gen.Unary{Op: p4gen.Not, X: present}, "member": present, "all": p4gen.True}[f.pass]
	b.Add(p4gen.Assign{Dst: pass, X: p4gen.C(0, 1)}, p4gen.Assign{Dst: member, X: p4gen.C(0, 1)})
	s.Lower(func(h int) []p4gen.Stmt {
		var then []p4gen.Stmt
		for i := range parts {
			then = append(then, parts[i].RMW(h, p4gen.RMW{Index: pos[i], New: p4gen.C(1, 1), OldTo: &olds[i]}))
		}
		then = append(then,
			p4gen.If{Cond: p4gen.Unary{Op: p4gen.Not, X: present}, Then: inserted.Add(h)},
			p4gen.Assign{Dst: pass, X: p4gen.Cast{Bits: 1, X: verdict}},
			p4gen.Assign{Dst: member, X: p4gen.C(1, 1)})
		noKey := append(nokey.Add(h), p4gen.Assign{Dst: pass, X: p4gen.C(boolBit(f.pass == "all"), 1)})
		return []p4gen.Stmt{p4gen.If{Cond: k.HasKey(), Then: then, Else: noKey}}
	})
	b.Pass = p4gen.B(p4gen.Eq, pass, p4gen.C(1, 1))
	if measure.Reports(f.params) {
		b.Pass = p4gen.False
	}
	b.Export("member", p4gen.Cast{Bits: 64, X: member})
	return nil
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func p4BloomCode(ctx *functions.Context) (p4gen.Function, error) {
	if err := p4Ethernet(ctx); err != nil {
		return nil, err
	}
	size, bits := p4BloomBits(ctx.Params)
	return &p4BloomFilter{params: ctx.Params, sp: measure.Spec(ctx.Params), k: int(ctx.Params.Int("hashes")), size: size,
		bits: bits, pass: ctx.Params.Str("pass")}, nil
}

func (f *BloomFunc) processP4(b *buffers.Batch) {
	n := 0
	var ins, nokey uint64
	for _, e := range b.E[:b.N] {
		h1, h2, ok := f.p4.hashes(b.PBuf.Data(e.Slot))
		present := false
		if !ok {
			nokey++
		} else if present = f.pb.add(h1, h2); !present {
			ins++
		}
		if f.pass == "all" || ok && (f.pass == "new") != present {
			b.E[n] = e
			n++
		}
	}
	f.noKey(nokey)
	f.m.Add64(f.inserted, ins)
	b.N = n
	f.keyed.pass(b)
}

// bloomP4Runs: a counting Bloom filter stays above the switch.
func bloomP4Runs(p functions.Params) error {
	if counting(p) {
		return errors.New("a counting Bloom filter runs above the switch: its reads (min, max, sum, avg) take every counter of a key, a read-modify-write each")
	}
	return nil
}
