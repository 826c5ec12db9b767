package flowkey

// The key in eBPF. EmitEBPF generates the code of Extract for an Ethernet
// frame (what the eBPF flowspaces see) and EmitHash that of Hash, with the
// same bounds as the Go code (MaxVLANTags and MaxIPv6Ext unrolled), so that
// a function in the kernel computes the same key words and hash as its Go
// twin on the same frame. The offsets and lengths are computed as Extract
// computes them, on the frame's length; each load is also checked against
// the packet's end, for the verifier (a check that the first ones make
// redundant: it never fails).

import (
	"fmt"

	"github.com/cilium/ebpf/asm"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// EBPFStack is how many bytes of stack the key code takes: the key's words
// first, then its scratch.
const EBPFStack = 8 * (MaxWords + 10)

// maxOff bounds an offset into the packet, for the verifier.
const maxOff = ebpfgen.MaxPacketOffset

// keyGen generates the key code of one spec.
type keyGen struct {
	sp    *Spec
	e     *ebpfgen.Emitter
	base  int16 // key word i at base + 8i
	nokey string
	n     int
}

// Scratch variables, 8 bytes each after the key words.
const (
	vLen   = iota // bytes of the frame
	vH            // the header word being built
	vL3           // offset of the network header
	vIHL          // IPv4 header length
	vLimit        // end of the datagram within the frame
	vP            // IPv6: offset of the next header
	vNH           // IPv6: the next header
	vProto        // the protocol found
	vPorts        // offset of the ports, or -1
)

func (g *keyGen) v(i int) int16 { return g.base + int16(8*(MaxWords+i)) }
func (g *keyGen) w(i int) int16 { return g.base + int16(8*i) }

func (g *keyGen) label(s string) string {
	g.n++
	return g.e.Label(fmt.Sprintf("fk_%s%d", s, g.n))
}

func (g *keyGen) add(in ...asm.Instruction) { g.e.Insns = append(g.e.Insns, in...) }

func (g *keyGen) ld(r asm.Register, v int) { g.add(asm.LoadMem(r, asm.RFP, g.v(v), asm.DWord)) }
func (g *keyGen) st(v int, r asm.Register) { g.add(asm.StoreMem(asm.RFP, g.v(v), r, asm.DWord)) }

// load reads size bytes at offset off (a register, or asm.RFP for none)
// plus k, big-endian, into dst, or goes to nokey (ebpfgen.LoadPacket).
func (g *keyGen) load(dst, off asm.Register, k int, size asm.Size) {
	g.add(ebpfgen.LoadPacket(dst, off, k, size, g.nokey)...)
}

// EmitEBPF appends code that extracts the key of the frame into Words()
// words of the stack, word i at offset base + 8i (base is negative, below
// the frame pointer; the code uses EBPFStack bytes from base), and goes to
// nokey when Extract returns false. lt must be Ethernet. The code clobbers
// R0 to R5.
func (sp *Spec) EmitEBPF(e *ebpfgen.Emitter, lt functions.LinkType, base int16, nokey string) error {
	if lt != functions.LinkEthernet {
		return fmt.Errorf("flow keys in eBPF read Ethernet frames, not %v", lt)
	}
	if int(base)+EBPFStack > 0 || int(base) < -512 {
		return fmt.Errorf("flow key stack at %d does not fit", base)
	}
	g := &keyGen{sp: sp, e: e, base: base, nokey: nokey}
	g.add(
		asm.Mov.Reg(asm.R1, ebpfgen.PacketEnd),
		asm.Sub.Reg(asm.R1, ebpfgen.PacketStart),
	)
	g.st(vLen, asm.R1)
	g.add(asm.Mov.Imm(asm.R0, 0))
	for i := range sp.words {
		g.add(asm.StoreMem(asm.RFP, g.w(i), asm.R0, asm.DWord))
	}
	g.st(vH, asm.R0)
	g.add(asm.JLT.Imm(asm.R1, 14, nokey))
	if sp.dmacW >= 0 {
		g.mac(sp.dmacW, 0)
	}
	if sp.smacW >= 0 {
		g.mac(sp.smacW, 6)
	}
	linkOnly, done := g.label("linkonly"), g.label("done")
	g.vlans(linkOnly)
	// R3 is the inner ethertype; vL3 where the network layer starts.
	v4, v6 := g.label("v4"), g.label("v6")
	g.add(
		asm.JEq.Imm(asm.R3, ethTypeIPv4, v4),
		asm.JEq.Imm(asm.R3, ethTypeIPv6, v6),
		asm.Ja.Label(linkOnly),
	)
	if sp.needIP {
		ports := g.label("ports")
		g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(v4))
		g.ipv4(ports)
		g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(v6))
		g.ipv6(ports)
		g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(ports))
		g.ports(done)
		g.add(asm.Ja.Label(nokey).WithSymbol(linkOnly))
	} else {
		// The link layer is all the spec needs.
		g.add(
			asm.Mov.Imm(asm.R0, 0).WithSymbol(v4),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(v6),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(linkOnly),
		)
		g.ld(asm.R1, vH)
	}
	g.add(asm.LoadImm(asm.R2, int64(sp.header), asm.DWord).WithSymbol(done))
	g.add(asm.And.Reg(asm.R1, asm.R2), asm.StoreMem(asm.RFP, g.w(0), asm.R1, asm.DWord))
	// Every path to done holds the header word in R1: the IP paths load it
	// before they jump there. The scratch is cleared, so that the paths
	// through the headers (each with its own offsets, which the verifier
	// tracks) end in one state, and the code after the key is verified
	// once rather than once per path.
	g.add(asm.Mov.Imm(asm.R0, 0))
	for v := vLen; v <= vPorts; v++ {
		g.st(v, asm.R0)
	}
	return nil
}

// mac stores the 6 bytes at off as key word w.
func (g *keyGen) mac(w, off int) {
	g.load(asm.R0, asm.RFP, off, asm.Half)
	g.load(asm.R1, asm.RFP, off+2, asm.Word)
	g.add(asm.LSh.Imm(asm.R0, 32), asm.Or.Reg(asm.R0, asm.R1), asm.StoreMem(asm.RFP, g.w(w), asm.R0, asm.DWord))
}

// vlans walks the tags (offsets are constants: the loop is unrolled),
// records the outermost tag's ID in the header word, and leaves the inner
// ethertype in R3 and the network header's offset in vL3; a cut tag goes
// to linkOnly.
func (g *keyGen) vlans(linkOnly string) {
	g.load(asm.R3, asm.RFP, 12, asm.Half)
	l3 := g.label("l3")
	for i := range MaxVLANTags + 1 {
		off := 14 + 4*i
		g.add(asm.Mov.Imm(asm.R1, int32(off)))
		g.st(vL3, asm.R1)
		if i == MaxVLANTags {
			break
		}
		tag := g.label("tag")
		g.add(
			asm.JEq.Imm(asm.R3, 0x8100, tag),
			asm.JEq.Imm(asm.R3, 0x88a8, tag),
			asm.JEq.Imm(asm.R3, 0x9100, tag),
			asm.Ja.Label(l3),
		)
		g.ld(asm.R1, vLen)
		g.add(asm.JLT.Imm(asm.R1, int32(off+4), linkOnly))
		g.e.Insns[len(g.e.Insns)-2] = g.e.Insns[len(g.e.Insns)-2].WithSymbol(tag)
		if i == 0 {
			g.load(asm.R1, asm.RFP, off, asm.Half)
			g.add(
				asm.And.Imm(asm.R1, 0x0fff),
				asm.LSh.Imm(asm.R1, VLANShift),
				asm.LoadImm(asm.R2, int64(VLANPresent), asm.DWord),
				asm.Or.Reg(asm.R1, asm.R2),
			)
			g.st(vH, asm.R1)
		}
		g.load(asm.R3, asm.RFP, off+2, asm.Half)
	}
	g.add(asm.LoadMem(asm.R1, asm.RFP, g.v(vL3), asm.DWord).WithSymbol(l3))
	g.blur(asm.R1, 0x3f)
	g.st(vL3, asm.R1)
}

// blur makes the verifier forget r's value (ebpfgen.Blur); it clobbers R4.
func (g *keyGen) blur(r asm.Register, mask int32) { g.add(ebpfgen.Blur(r, mask)...) }

// addr stores the address in R0 (and R1, IPv6's second word) masked as
// the spec's prefix p says, in key words w and w+1; it clobbers R3.
func (g *keyGen) addr(w int, p prefix, v6 bool) {
	if w < 0 {
		return
	}
	if !v6 {
		g.add(asm.LoadImm(asm.R3, int64(p.m4), asm.DWord), asm.And.Reg(asm.R0, asm.R3),
			asm.StoreMem(asm.RFP, g.w(w), asm.R0, asm.DWord))
		return
	}
	g.add(asm.LoadImm(asm.R3, int64(p.m6hi), asm.DWord), asm.And.Reg(asm.R0, asm.R3),
		asm.StoreMem(asm.RFP, g.w(w), asm.R0, asm.DWord),
		asm.LoadImm(asm.R3, int64(p.m6lo), asm.DWord), asm.And.Reg(asm.R1, asm.R3),
		asm.StoreMem(asm.RFP, g.w(w+1), asm.R1, asm.DWord))
}

// ipv4 is ipv4() of extract.go. It sets vProto, vLimit and vPorts (the
// offset of the ports when a first fragment of TCP, UDP or SCTP) and goes
// to ports.
func (g *keyGen) ipv4(ports string) {
	nok := g.nokey
	g.ld(asm.R1, vLen)
	g.ld(asm.R2, vL3)
	g.add(asm.Mov.Reg(asm.R3, asm.R2), asm.Add.Imm(asm.R3, 20), asm.JGT.Reg(asm.R3, asm.R1, nok))
	g.load(asm.R0, asm.R2, 0, asm.Byte)
	g.add(asm.Mov.Reg(asm.R1, asm.R0), asm.RSh.Imm(asm.R1, 4), asm.JNE.Imm(asm.R1, 4, nok),
		asm.And.Imm(asm.R0, 0x0f), asm.LSh.Imm(asm.R0, 2))
	g.st(vIHL, asm.R0)
	g.add(asm.JLT.Imm(asm.R0, 20, nok))
	g.load(asm.R1, asm.R2, 2, asm.Half) // total length
	tot := g.label("tot")
	g.add(asm.JNE.Imm(asm.R1, 0, tot))
	g.ld(asm.R1, vLen)
	g.add(asm.Sub.Reg(asm.R1, asm.R2))
	g.add(asm.JLT.Reg(asm.R1, asm.R0, nok).WithSymbol(tot))
	// limit = min(off+tot, len)
	lim := g.label("lim")
	g.add(asm.Add.Reg(asm.R1, asm.R2))
	g.ld(asm.R3, vLen)
	g.add(asm.JLE.Reg(asm.R1, asm.R3, lim), asm.Mov.Reg(asm.R1, asm.R3))
	g.add(asm.StoreMem(asm.RFP, g.v(vLimit), asm.R1, asm.DWord).WithSymbol(lim))
	g.load(asm.R3, asm.R2, 9, asm.Byte)
	g.st(vProto, asm.R3)
	g.add(asm.Mov.Imm(asm.R1, 4))
	g.header(asm.R1)
	g.load(asm.R0, asm.R2, 12, asm.Word)
	g.add(asm.LSh.Imm(asm.R0, 32))
	g.addr(g.sp.srcW, g.sp.pfx[0], false)
	g.load(asm.R0, asm.R2, 16, asm.Word)
	g.add(asm.LSh.Imm(asm.R0, 32))
	g.addr(g.sp.dstW, g.sp.pfx[1], false)
	// Ports at off+ihl of a first fragment.
	g.add(asm.Mov.Imm(asm.R1, -1))
	g.st(vPorts, asm.R1)
	g.load(asm.R1, asm.R2, 6, asm.Half)
	g.add(asm.And.Imm(asm.R1, 0x1fff), asm.JNE.Imm(asm.R1, 0, ports))
	g.ld(asm.R1, vIHL)
	g.add(asm.Add.Reg(asm.R1, asm.R2))
	g.st(vPorts, asm.R1)
	g.add(asm.Ja.Label(ports))
}

// header ors the family in r (clobbered) into the header word.
func (g *keyGen) header(r asm.Register) {
	g.ld(asm.R0, vH)
	g.add(asm.Or.Reg(asm.R0, r))
	g.st(vH, asm.R0)
}

// ipv6 is ipv6() of extract.go, the extension headers walked at most
// MaxIPv6Ext times.
func (g *keyGen) ipv6(ports string) {
	nok := g.nokey
	g.ld(asm.R1, vLen)
	g.ld(asm.R2, vL3)
	g.add(asm.Mov.Reg(asm.R3, asm.R2), asm.Add.Imm(asm.R3, 40), asm.JGT.Reg(asm.R3, asm.R1, nok))
	g.load(asm.R0, asm.R2, 0, asm.Byte)
	g.add(asm.RSh.Imm(asm.R0, 4), asm.JNE.Imm(asm.R0, 6, nok))
	g.load(asm.R0, asm.R2, 8, asm.DWord)
	g.load(asm.R1, asm.R2, 16, asm.DWord)
	g.addr(g.sp.srcW, g.sp.pfx[0], true)
	g.load(asm.R0, asm.R2, 24, asm.DWord)
	g.load(asm.R1, asm.R2, 32, asm.DWord)
	g.addr(g.sp.dstW, g.sp.pfx[1], true)
	g.add(asm.Mov.Imm(asm.R1, 6))
	g.header(asm.R1)
	// limit: off+40+plen within the frame, or the frame when plen is 0.
	g.ld(asm.R1, vLen)
	g.load(asm.R0, asm.R2, 4, asm.Half)
	lim := g.label("lim")
	g.add(
		asm.JEq.Imm(asm.R0, 0, lim),
		asm.Add.Reg(asm.R0, asm.R2),
		asm.Add.Imm(asm.R0, 40),
		asm.JGE.Reg(asm.R0, asm.R1, lim),
		asm.Mov.Reg(asm.R1, asm.R0),
	)
	g.add(asm.StoreMem(asm.RFP, g.v(vLimit), asm.R1, asm.DWord).WithSymbol(lim))
	g.load(asm.R3, asm.R2, 6, asm.Byte) // next header
	g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 40))
	g.add(asm.Mov.Imm(asm.R1, -1))
	g.st(vPorts, asm.R1)
	// R3: next header; R2: its offset p (bounded: each step adds at most
	// 2048 bytes).
	g.add(asm.Mov.Reg(asm.R2, asm.R0))
	stop := g.label("stop")
	for range MaxIPv6Ext {
		ext, frag, next := g.label("ext"), g.label("frag"), g.label("next")
		g.add(
			asm.JEq.Imm(asm.R3, ipv6HopByHop, ext),
			asm.JEq.Imm(asm.R3, ipv6Routing, ext),
			asm.JEq.Imm(asm.R3, ipv6DestOpts, ext),
			asm.JEq.Imm(asm.R3, ipv6Fragment, frag),
			asm.Ja.Label(stop),
		)
		// hop-by-hop, routing, destination options: p+2 within limit.
		g.ld(asm.R1, vLimit)
		g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 2), asm.JGT.Reg(asm.R0, asm.R1, stop))
		g.e.Insns[len(g.e.Insns)-4] = g.e.Insns[len(g.e.Insns)-4].WithSymbol(ext)
		g.load(asm.R3, asm.R2, 0, asm.Byte)
		g.load(asm.R0, asm.R2, 1, asm.Byte)
		g.add(asm.Add.Imm(asm.R0, 1), asm.LSh.Imm(asm.R0, 3), asm.Add.Reg(asm.R2, asm.R0), asm.Ja.Label(next))
		// fragment: p+8 within limit; a non-first fragment ends the walk
		// with its next header as the protocol, and no ports.
		g.ld(asm.R1, vLimit)
		g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 8), asm.JGT.Reg(asm.R0, asm.R1, stop))
		g.e.Insns[len(g.e.Insns)-4] = g.e.Insns[len(g.e.Insns)-4].WithSymbol(frag)
		g.load(asm.R0, asm.R2, 2, asm.Half)
		g.load(asm.R3, asm.R2, 0, asm.Byte)
		g.add(asm.Add.Imm(asm.R2, 8), asm.RSh.Imm(asm.R0, 3))
		g.add(asm.JNE.Imm(asm.R0, 0, g.label("nonfirst")))
		nonFirst := g.e.Insns[len(g.e.Insns)-1].Reference()
		g.add(asm.Ja.Label(next))
		g.st(vProto, asm.R3)
		g.e.Insns[len(g.e.Insns)-1] = g.e.Insns[len(g.e.Insns)-1].WithSymbol(nonFirst)
		g.add(asm.Ja.Label(ports)) // vPorts is -1
		g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(next))
		g.blur(asm.R2, 0x7fff)
	}
	g.st(vProto, asm.R3)
	g.e.Insns[len(g.e.Insns)-1] = g.e.Insns[len(g.e.Insns)-1].WithSymbol(stop)
	g.st(vPorts, asm.R2)
	g.add(asm.Ja.Label(ports))
}

// ports reads the ports at vPorts when it is set, the protocol carries
// ports and their 4 bytes lie within the limit, then puts the protocol in
// the header word, loads the header word into R1 and goes to done.
func (g *keyGen) ports(done string) {
	none := g.label("noports")
	g.ld(asm.R3, vProto)
	g.ld(asm.R2, vPorts)
	g.add(
		asm.JEq.Imm(asm.R2, -1, none),
		asm.JEq.Imm(asm.R3, protoTCP, g.label("l4")),
	)
	l4 := g.e.Insns[len(g.e.Insns)-1].Reference()
	g.add(
		asm.JEq.Imm(asm.R3, protoUDP, l4),
		asm.JEq.Imm(asm.R3, protoSCTP, l4),
		asm.Ja.Label(none),
	)
	g.ld(asm.R1, vLimit)
	g.add(asm.Mov.Reg(asm.R0, asm.R2), asm.Add.Imm(asm.R0, 4), asm.JGT.Reg(asm.R0, asm.R1, none))
	g.e.Insns[len(g.e.Insns)-4] = g.e.Insns[len(g.e.Insns)-4].WithSymbol(l4)
	g.load(asm.R0, asm.R2, 0, asm.Half)
	g.load(asm.R1, asm.R2, 2, asm.Half)
	g.add(
		asm.LSh.Imm(asm.R0, SrcPortShift),
		asm.LSh.Imm(asm.R1, DstPortShift),
		asm.Or.Reg(asm.R0, asm.R1),
		asm.LoadImm(asm.R1, int64(PortsPresent), asm.DWord),
		asm.Or.Reg(asm.R0, asm.R1),
	)
	g.ld(asm.R1, vH)
	g.add(asm.Or.Reg(asm.R1, asm.R0))
	g.st(vH, asm.R1)
	g.ld(asm.R3, vProto)
	g.add(asm.Mov.Imm(asm.R0, 0).WithSymbol(none))
	g.add(asm.LSh.Imm(asm.R3, ProtoShift))
	g.ld(asm.R1, vH)
	g.add(asm.Or.Reg(asm.R1, asm.R3), asm.Ja.Label(done))
}

// EmitHash appends code that sets dst (R0 to R3) to Hash of the key words
// at base (as EmitEBPF left them) with seed. It clobbers R0 to R3.
func (sp *Spec) EmitHash(e *ebpfgen.Emitter, base int16, seed uint64, dst asm.Register) {
	h, t, m := asm.R0, asm.R1, asm.R2
	in := asm.Instructions{asm.LoadImm(h, int64(seed^HashInit), asm.DWord)}
	for i := range sp.words {
		in = append(in,
			asm.LoadMem(t, asm.RFP, base+int16(8*i), asm.DWord),
			asm.Xor.Reg(h, t),
			asm.LoadImm(m, u64(HashMul), asm.DWord), asm.Mul.Reg(h, m),
			asm.Mov.Reg(t, h), asm.RSh.Imm(t, 29), asm.Xor.Reg(h, t),
			asm.LoadImm(m, u64(HashMul2), asm.DWord), asm.Mul.Reg(h, m),
		)
	}
	in = append(in, fmix(h, t, m)...)
	if dst != h {
		in = append(in, asm.Mov.Reg(dst, h))
	}
	e.Insns = append(e.Insns, in...)
}

func fmix(h, t, m asm.Register) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(t, h), asm.RSh.Imm(t, 33), asm.Xor.Reg(h, t),
		asm.LoadImm(m, u64(FmixMul1), asm.DWord), asm.Mul.Reg(h, m),
		asm.Mov.Reg(t, h), asm.RSh.Imm(t, 33), asm.Xor.Reg(h, t),
		asm.LoadImm(m, u64(FmixMul2), asm.DWord), asm.Mul.Reg(h, m),
		asm.Mov.Reg(t, h), asm.RSh.Imm(t, 33), asm.Xor.Reg(h, t),
	}
}

// EmitIndex appends code that sets dst to Index(h, i, n), h a register
// other than dst and scratch, which it clobbers.
func EmitIndex(e *ebpfgen.Emitter, dst, h, scratch asm.Register, i, n uint32) {
	e.Insns = append(e.Insns,
		asm.Mov.Reg(scratch, h), asm.RSh.Imm(scratch, 32),
		asm.LoadImm(dst, int64(i), asm.DWord), asm.Mul.Reg(scratch, dst),
		asm.Mov.Reg32(dst, h), asm.Add.Reg(dst, scratch), asm.Mov.Reg32(dst, dst),
		asm.LoadImm(scratch, int64(n), asm.DWord), asm.Mul.Reg(dst, scratch), asm.RSh.Imm(dst, 32),
	)
}

// u64 passes a 64-bit constant to LoadImm.
func u64(v uint64) int64 { return int64(v) }
