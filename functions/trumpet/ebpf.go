package trumpet

// Phase 1 in eBPF. In an eBPF flowspace (XDP, tc) the code reads each
// packet's 5-tuple (flowkey's "5tuple" words, the monitor's Key) and the
// values of the summarisable variables as monitor.Parse reads them (the
// volume from the IP and L4 header lengths, IPv6 extension headers walked
// as flowkey walks them; the TTL or hop limit; the ECN field), and adds
// them to the flow's summary of the packet's epoch: an entry of a per-CPU
// hash map, one map per epoch parity (ebpfgen.Drained). The Go half, this
// function in the process, drains the map of each epoch once it has
// ended, merges the CPUs' copies into one monitor.Summary per flow and
// feeds them to its monitor (monitor.Summarise), whose sweep reports as
// in userspace. A flow the full map has no room for is counted
// (mapfull), never silently.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/trumpet/monitor"
)

// MinEBPFEpoch is the shortest epoch trumpet keeps in eBPF: its Go half
// drains an epoch's flow map, and feeds and sweeps the monitor, after the
// epoch's end and a grace of 2 ms, and must be done before the epoch
// after next begins. BenchmarkTrumpetDrain measured 7.3 to 7.9 ms for
// 16,384 flows on 2 CPUs (4.4 to 4.9 ms reading the map, 2.6 to 3.1 ms
// in Go) on a shared 2-core machine: 10 ms holds that many flows an
// epoch, with little room; a drain that comes late makes the packets of
// the epoch after next find their map not ready, and they are counted
// (the function's dropped), never lost silently. A shorter epoch runs in
// userspace.
const MinEBPFEpoch = 10 * time.Millisecond

// The words of a flow's entry in the flow map, per CPU (u64, native byte
// order): the epoch it holds, the time of its first packet there (the
// order flows enter the monitor in, as their packets would), then the
// summary.
const (
	wEpoch = iota
	wFirst
	wPackets
	wVolSum
	wVolSq
	wVolMin
	wVolMax
	wCE
	wTTLSum
	wTTLSq
	wTTLMin
	wTTLMax
	wBytes
	valueWords
)

// keyWords is the 5-tuple key's size in words.
const keyWords = len(monitor.Key{})

// The counter slots of the eBPF code: the first fields of the state.
const (
	slotPackets = iota
	slotNoKey
	slotOverflow
	nSlots
)

// ebpfTrumpet is trumpet's phase 1 in eBPF.
type ebpfTrumpet struct {
	sp    *flowkey.Spec
	epoch time.Duration
	flows int
}

func ebpfCode(ctx *functions.Context) (ebpfgen.Function, error) {
	if ctx.LinkType != functions.LinkEthernet {
		return nil, fmt.Errorf("trumpet in eBPF reads Ethernet frames, not %v", ctx.LinkType)
	}
	if err := ebpfRuns(ctx.Params); err != nil {
		return nil, err
	}
	sp, err := flowkey.Parse("5tuple")
	if err != nil {
		return nil, err
	}
	if sp.Words() != keyWords {
		return nil, fmt.Errorf("flowkey's 5-tuple has %d words, the monitor's key %d", sp.Words(), keyWords)
	}
	return &ebpfTrumpet{sp: sp, epoch: ctx.Params.Duration("epoch"), flows: int(ctx.Params.Int("flows"))}, nil
}

func (c *ebpfTrumpet) StateSlots() int { return nSlots }

func (c *ebpfTrumpet) FlowMap() ebpfgen.FlowMap {
	return ebpfgen.FlowMap{Epoch: c.epoch, KeySize: 8 * keyWords, ValueSize: 8 * valueWords, Entries: c.flows, PerCPU: true}
}

// maxOff bounds an offset into the packet, for the verifier.
const maxOff = ebpfgen.MaxPacketOffset

// Scratch words, after the key's words in flowkey's stack area (free once
// the key is extracted).
const (
	xL3 = iota
	xLen
	xEnd
	xL4
	xFirst
	xVol
	xTTL
	xCE
	nScratch
)

type gen struct {
	e       *ebpfgen.Emitter
	base    int16 // key word i at base+8i
	bad     string
	n       int
	pending string // the label of the next instruction
}

func (g *gen) add(in ...asm.Instruction) {
	if g.pending != "" && len(in) > 0 {
		in[0] = in[0].WithSymbol(g.pending)
		g.pending = ""
	}
	g.e.Insns = append(g.e.Insns, in...)
}

// at labels the next instruction.
func (g *gen) at(label string) {
	if g.pending != "" {
		panic("trumpet: two labels on one instruction")
	}
	g.pending = label
}
func (g *gen) x(i int) int16            { return g.base + int16(8*(keyWords+i)) }
func (g *gen) ld(r asm.Register, i int) { g.add(asm.LoadMem(r, asm.RFP, g.x(i), asm.DWord)) }
func (g *gen) st(i int, r asm.Register) { g.add(asm.StoreMem(asm.RFP, g.x(i), r, asm.DWord)) }

func (g *gen) label(s string) string {
	g.n++
	return g.e.Label(fmt.Sprintf("%s%d", s, g.n))
}

// load reads size bytes at offset off (a register, or asm.RFP for none)
// plus k, big-endian, into dst, or goes to bad (ebpfgen.LoadPacket).
func (g *gen) load(dst, off asm.Register, k int, size asm.Size) {
	g.add(ebpfgen.LoadPacket(dst, off, k, size, g.bad)...)
}

func (c *ebpfTrumpet) Emit(e *ebpfgen.Emitter) error {
	if e.FlowMap < 0 || e.Epoch == 0 || e.Clock == 0 {
		return fmt.Errorf("trumpet's phase 1 needs its flow maps and the packet's epoch")
	}
	base := int16(-e.StackOffset - flowkey.EBPFStack)
	vbase := base - 8*valueWords
	if vbase < -512 || 8*(keyWords+nScratch) > flowkey.EBPFStack {
		return fmt.Errorf("no room on the stack for the flow's key and entry (%d bytes taken)", e.StackOffset)
	}
	noKey, bad := e.Label("nokey"), e.Label("bad")
	g := &gen{e: e, base: base, bad: bad}
	g.add(asm.Mov.Imm(asm.R1, 1))
	g.add(e.AddState(slotPackets, asm.R1)...)
	if err := c.sp.EmitEBPF(e, functions.LinkEthernet, base, noKey); err != nil {
		return err
	}
	g.values()
	g.update(vbase)
	g.add(asm.Mov.Imm(asm.R1, 1).WithSymbol(noKey))
	g.add(e.AddState(slotNoKey, asm.R1)...)
	g.add(asm.Ja.Label(e.Pass))
	// Unreachable for a packet whose key was found (its headers were
	// read): for the verifier, counted as without a key.
	g.add(asm.Ja.Label(noKey).WithSymbol(bad))
	return nil
}

// values computes the packet's volume, TTL and CE mark into xVol, xTTL and
// xCE, as monitor.Parse does, for a packet whose key was found.
func (g *gen) values() {
	g.add(asm.Mov.Reg(asm.R1, ebpfgen.PacketEnd), asm.Sub.Reg(asm.R1, ebpfgen.PacketStart))
	g.st(xLen, asm.R1)
	// The network header's offset, after the VLAN tags (flowkey.Network).
	l3 := g.label("l3")
	g.load(asm.R3, asm.RFP, 12, asm.Half)
	for i := range flowkey.MaxVLANTags + 1 {
		off := 14 + 4*i
		g.add(asm.Mov.Imm(asm.R1, int32(off)))
		g.st(xL3, asm.R1)
		if i == flowkey.MaxVLANTags {
			break
		}
		tag := g.label("tag")
		g.add(
			asm.JEq.Imm(asm.R3, 0x8100, tag),
			asm.JEq.Imm(asm.R3, 0x88a8, tag),
			asm.JEq.Imm(asm.R3, 0x9100, tag),
			asm.Ja.Label(l3),
		)
		g.at(tag)
		g.load(asm.R3, asm.RFP, off+2, asm.Half)
	}
	g.at(l3)
	g.ld(asm.R2, xL3)
	g.add(ebpfgen.Blur(asm.R2, 0x3f)...)
	g.st(xL3, asm.R2)
	g.add(asm.Mov.Imm(asm.R1, 1))
	g.st(xFirst, asm.R1)
	// The family, from the key's header word.
	v6, l4 := g.label("v6"), g.label("l4")
	g.add(
		asm.LoadMem(asm.R1, asm.RFP, g.base, asm.DWord),
		asm.RSh.Imm(asm.R1, flowkey.FamilyShift),
		asm.And.Imm(asm.R1, 0xff),
		asm.JEq.Imm(asm.R1, 6, v6),
	)
	// IPv4.
	g.load(asm.R0, asm.R2, 0, asm.Byte)
	g.add(asm.And.Imm(asm.R0, 0x0f), asm.LSh.Imm(asm.R0, 2), asm.Add.Reg(asm.R0, asm.R2))
	g.st(xL4, asm.R0)
	g.load(asm.R0, asm.R2, 1, asm.Byte)
	g.add(asm.And.Imm(asm.R0, 3))
	g.st(xCE, asm.R0)
	g.load(asm.R0, asm.R2, 8, asm.Byte)
	g.st(xTTL, asm.R0)
	g.load(asm.R0, asm.R2, 2, asm.Half)
	tot := g.label("tot")
	g.add(asm.JNE.Imm(asm.R0, 0, tot)) // TSO: to the end of the frame
	g.ld(asm.R0, xLen)
	g.add(asm.Sub.Reg(asm.R0, asm.R2))
	g.add(asm.Add.Reg(asm.R0, asm.R2).WithSymbol(tot))
	g.st(xEnd, asm.R0)
	g.load(asm.R0, asm.R2, 6, asm.Half)
	g.add(asm.And.Imm(asm.R0, 0x1fff), asm.JEq.Imm(asm.R0, 0, l4), asm.Mov.Imm(asm.R0, 0))
	g.st(xFirst, asm.R0)
	g.add(asm.Ja.Label(l4))
	// IPv6.
	g.at(v6)
	g.load(asm.R0, asm.R2, 0, asm.Half)
	g.add(asm.RSh.Imm(asm.R0, 4), asm.And.Imm(asm.R0, 3))
	g.st(xCE, asm.R0)
	g.load(asm.R0, asm.R2, 7, asm.Byte)
	g.st(xTTL, asm.R0)
	g.load(asm.R0, asm.R2, 4, asm.Half)
	jumbo, endSet := g.label("jumbo"), g.label("endset")
	g.add(asm.JEq.Imm(asm.R0, 0, jumbo), asm.Add.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 40), asm.Ja.Label(endSet))
	g.at(jumbo)
	g.ld(asm.R0, xLen)
	g.at(endSet)
	g.st(xEnd, asm.R0)
	// The extension headers, walked as flowkey and Parse walk them, within
	// the datagram's limit: R3 the next header, R2 its offset.
	g.load(asm.R3, asm.R2, 6, asm.Byte)
	g.add(asm.Add.Imm(asm.R2, 40))
	stop := g.label("stop")
	limit := func() { // R1 = min(end, len)
		lim := g.label("lim")
		g.ld(asm.R1, xEnd)
		g.ld(asm.R0, xLen)
		g.add(asm.JLE.Reg(asm.R1, asm.R0, lim), asm.Mov.Reg(asm.R1, asm.R0))
		g.at(lim)
	}
	for range flowkey.MaxIPv6Ext {
		ext, frag, next := g.label("ext"), g.label("frag"), g.label("next")
		g.add(
			asm.JEq.Imm(asm.R3, 0, ext),
			asm.JEq.Imm(asm.R3, 43, ext),
			asm.JEq.Imm(asm.R3, 60, ext),
			asm.JEq.Imm(asm.R3, 44, frag),
			asm.Ja.Label(stop),
		)
		// hop-by-hop, routing, destination options
		g.at(ext)
		limit()
		g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 2), asm.JGT.Reg(asm.R0, asm.R1, stop))
		g.load(asm.R3, asm.R2, 0, asm.Byte)
		g.load(asm.R0, asm.R2, 1, asm.Byte)
		g.add(asm.Add.Imm(asm.R0, 1), asm.LSh.Imm(asm.R0, 3), asm.Add.Reg(asm.R2, asm.R0), asm.Ja.Label(next))
		// fragment: a non-first one ends the walk
		g.at(frag)
		limit()
		g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 8), asm.JGT.Reg(asm.R0, asm.R1, stop))
		g.load(asm.R0, asm.R2, 2, asm.Half)
		g.load(asm.R3, asm.R2, 0, asm.Byte)
		g.add(asm.Add.Imm(asm.R2, 8), asm.RSh.Imm(asm.R0, 3), asm.JEq.Imm(asm.R0, 0, next), asm.Mov.Imm(asm.R0, 0))
		g.st(xFirst, asm.R0)
		g.add(asm.Ja.Label(stop))
		g.at(next)
		g.add(ebpfgen.Blur(asm.R2, maxOff)...)
	}
	g.at(stop)
	g.st(xL4, asm.R2)
	// The payload: the datagram's end less the L4 header's start, less a
	// first fragment's TCP data offset or UDP header.
	done, udp := g.label("done"), g.label("udp")
	g.at(l4)
	g.ld(asm.R2, xL4)
	g.ld(asm.R0, xEnd)
	g.add(asm.Sub.Reg(asm.R0, asm.R2))
	g.st(xVol, asm.R0)
	g.ld(asm.R1, xFirst)
	g.add(
		asm.JEq.Imm(asm.R1, 0, done),
		asm.LoadMem(asm.R3, asm.RFP, g.base, asm.DWord),
		asm.RSh.Imm(asm.R3, flowkey.ProtoShift),
		asm.And.Imm(asm.R3, 0xff),
		asm.JEq.Imm(asm.R3, 17, udp),
		asm.JNE.Imm(asm.R3, 6, done),
	)
	limit()
	g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 20), asm.JGT.Reg(asm.R0, asm.R1, done))
	g.load(asm.R0, asm.R2, 12, asm.Byte)
	g.add(asm.RSh.Imm(asm.R0, 4), asm.LSh.Imm(asm.R0, 2), asm.JLT.Imm(asm.R0, 20, done))
	g.ld(asm.R1, xVol)
	g.add(asm.Sub.Reg(asm.R1, asm.R0))
	g.st(xVol, asm.R1)
	g.add(asm.Ja.Label(done))
	g.at(udp)
	g.ld(asm.R1, xVol)
	g.add(asm.Sub.Imm(asm.R1, 8))
	g.st(xVol, asm.R1)
	pos := g.label("pos")
	g.at(done)
	g.ld(asm.R1, xVol)
	g.add(asm.JSGE.Imm(asm.R1, 0, pos), asm.Mov.Imm(asm.R1, 0))
	g.at(pos)
	g.st(xVol, asm.R1)
	g.ld(asm.R1, xCE)
	g.add(asm.RSh.Imm(asm.R1, 1), asm.LoadMem(asm.R0, asm.RFP, g.x(xCE), asm.DWord), asm.And.Reg(asm.R1, asm.R0))
	g.st(xCE, asm.R1) // 1 when the ECN field is 3 (CE)
}

// update adds the packet to its flow's entry in the flow map of its
// epoch's parity: a new flow's entry is inserted (zero), an entry of
// another epoch is reset, then the packet's values are added.
func (g *gen) update(vbase int16) {
	e := g.e
	have, acc, full := g.label("have"), g.label("acc"), g.label("full")
	lookup := func() {
		g.add(
			asm.LoadMapPtr(asm.R1, e.FlowMap),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, int32(g.base)),
			asm.FnMapLookupElem.Call(),
		)
	}
	lookup()
	g.add(asm.JNE.Imm(asm.R0, 0, have))
	g.add(asm.Mov.Imm(asm.R1, 0))
	for i := range valueWords {
		g.add(asm.StoreMem(asm.RFP, vbase+int16(8*i), asm.R1, asm.DWord))
	}
	g.add(
		asm.LoadMapPtr(asm.R1, e.FlowMap),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(g.base)),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, int32(vbase)),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST: another CPU may have inserted it
		asm.FnMapUpdateElem.Call(),
	)
	lookup()
	g.add(asm.JEq.Imm(asm.R0, 0, full))
	at := func(w int) int16 { return int16(8 * w) }
	g.add(
		asm.LoadMem(asm.R1, asm.R0, at(wEpoch), asm.DWord).WithSymbol(have),
		asm.LoadMem(asm.R2, asm.RFP, e.Epoch, asm.DWord),
		asm.JEq.Reg(asm.R1, asm.R2, acc),
		// The flow's first packet of the epoch on this CPU.
		asm.StoreMem(asm.R0, at(wEpoch), asm.R2, asm.DWord),
		asm.LoadMem(asm.R1, asm.RFP, e.Clock, asm.DWord),
		asm.StoreMem(asm.R0, at(wFirst), asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
		asm.Mov.Imm(asm.R2, -1), // the largest u64
	)
	for w := wPackets; w < valueWords; w++ {
		r := asm.R1
		if w == wVolMin || w == wTTLMin {
			r = asm.R2
		}
		g.add(asm.StoreMem(asm.R0, at(w), r, asm.DWord))
	}
	addTo := func(w int, r asm.Register) {
		g.add(asm.LoadMem(asm.R3, asm.R0, at(w), asm.DWord), asm.Add.Reg(asm.R3, r), asm.StoreMem(asm.R0, at(w), asm.R3, asm.DWord))
	}
	minMax := func(lo, hi int, r asm.Register) {
		a, b := g.label("min"), g.label("max")
		g.add(asm.LoadMem(asm.R3, asm.R0, at(lo), asm.DWord), asm.JLE.Reg(asm.R3, r, a), asm.StoreMem(asm.R0, at(lo), r, asm.DWord))
		g.add(asm.LoadMem(asm.R3, asm.R0, at(hi), asm.DWord).WithSymbol(a), asm.JGE.Reg(asm.R3, r, b), asm.StoreMem(asm.R0, at(hi), r, asm.DWord))
		g.add(asm.Mov.Imm(asm.R3, 0).WithSymbol(b))
	}
	g.add(asm.Mov.Imm(asm.R1, 1).WithSymbol(acc))
	addTo(wPackets, asm.R1)
	for _, v := range []struct{ x, sum, sq, lo, hi int }{{xVol, wVolSum, wVolSq, wVolMin, wVolMax}, {xTTL, wTTLSum, wTTLSq, wTTLMin, wTTLMax}} {
		g.ld(asm.R1, v.x)
		addTo(v.sum, asm.R1)
		g.add(asm.Mov.Reg(asm.R2, asm.R1), asm.Mul.Reg(asm.R2, asm.R1))
		addTo(v.sq, asm.R2)
		minMax(v.lo, v.hi, asm.R1)
	}
	g.ld(asm.R1, xCE)
	addTo(wCE, asm.R1)
	addTo(wBytes, ebpfgen.WireLen)
	g.add(asm.Ja.Label(e.Pass))
	// No room for a new flow: its packet is counted.
	g.add(asm.Mov.Imm(asm.R1, 1).WithSymbol(full))
	g.add(e.AddState(slotOverflow, asm.R1)...)
	g.add(asm.Ja.Label(e.Pass))
}

// entry is one CPU's copy of a flow's entry.
type entry [valueWords]uint64

// FlowSummaries decodes the entries of a drained flow map of epoch e (n
// keys, cpus values each) into one summary per flow, the CPUs' copies
// merged (only those stamped with e), and calls f with each in the order
// of the flows' first packets in the epoch.
func FlowSummaries(e int64, keys, values []byte, n, cpus int, f func(k *monitor.Key, s *monitor.Summary)) {
	var sc scratch
	sc.summaries(e, keys, values, n, cpus)
	for _, o := range sc.order {
		f(&sc.keys[o.i], &sc.sums[o.i])
	}
}

// scratch is the Go half's working memory for a drain, kept between
// drains.
type scratch struct {
	keys  []monitor.Key
	sums  []monitor.Summary
	order []flowAt
}

// flowAt is a flow (its index in scratch) and the time of its first
// packet in the epoch.
type flowAt struct {
	first int64
	i     int32
}

func (sc *scratch) summaries(e int64, keys, values []byte, n, cpus int) {
	sc.keys, sc.sums, sc.order = sc.keys[:0], sc.sums[:0], sc.order[:0]
	ks, vs := 8*keyWords, 8*valueWords
	for i := range n {
		var k monitor.Key
		for j := range keyWords {
			k[j] = buffers.Native.Uint64(keys[i*ks+8*j:])
		}
		var s monitor.Summary
		first := int64(math.MaxInt64)
		for c := range cpus {
			v := (*entry)(unsafe.Pointer(&values[(i*cpus+c)*vs]))
			if int64(v[wEpoch]) != e || v[wPackets] == 0 {
				continue
			}
			first = min(first, int64(v[wFirst]))
			s.Merge(&monitor.Summary{Packets: v[wPackets], VolSum: v[wVolSum], VolSq: v[wVolSq], VolMin: v[wVolMin], VolMax: v[wVolMax],
				CE: v[wCE], TTLSum: v[wTTLSum], TTLSq: v[wTTLSq], TTLMin: v[wTTLMin], TTLMax: v[wTTLMax], Bytes: v[wBytes]})
		}
		if s.Packets == 0 {
			continue
		}
		sc.order = append(sc.order, flowAt{first, int32(len(sc.keys))})
		sc.keys, sc.sums = append(sc.keys, k), append(sc.sums, s)
	}
	// Flows whose first packets came at the same time (on two CPUs) keep
	// the map's order.
	slices.SortFunc(sc.order, func(a, b flowAt) int {
		if c := cmp.Compare(a.first, b.first); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
}
