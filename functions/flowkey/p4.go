package flowkey

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Keys on a P4 switch. LowerP4 computes a packet's key into metadata, the
// same words as Extract (Key's layout), from the switch's layers
// (p4gen.StdLayers: the tags, the IP header and the extension headers
// walked as Extract walks them), so the key a switch computes for a frame
// is the key the host computes for it, word for word. A switch has no
// 64-bit multiplier, so it does not hash as Hash does: a structure's
// positions come from crc32 and crc16 of the key's words (v1model hash,
// the fields packed most significant first: P4Hashes), by double hashing
// into a power of two (P4Index). A function placed on a switch indexes
// its state so, and its Go half reads that state with the same two.

// P4Key is a key spec lowered for a switch: the words of the packet's
// key, and whether it has one.
type P4Key struct {
	Spec  *Spec
	Words []p4gen.Ref // bit<64>, Words() of them
	Has   p4gen.Ref   // bit<1>
}

// LowerP4 computes the spec's key of each packet into metadata of b
// (<prefix>_key0…, <prefix>_haskey), as Extract computes it for the frame.
func (sp *Spec) LowerP4(b *p4gen.Builder) *P4Key {
	l := p4gen.StdLayers(b.Prog)
	k := &P4Key{Spec: sp, Has: b.Meta("haskey", 1)}
	for i := range sp.words {
		k.Words = append(k.Words, b.Meta(fmt.Sprint("key", i), 64))
	}
	c64 := func(v uint64) p4gen.Const { return p4gen.C(v, 64) }
	w64 := func(x p4gen.Expr) p4gen.Expr { return p4gen.Cast{Bits: 64, X: x} }
	shl := func(x p4gen.Expr, n int) p4gen.Expr { return p4gen.B(p4gen.Shl, w64(x), c64(uint64(n))) }
	is := func(x p4gen.Expr, v uint64) p4gen.Expr { return p4gen.B(p4gen.Eq, x, p4gen.C(v, x.Type().Bits)) }
	v4, v6 := is(l.Ver, 4), is(l.Ver, 6)
	has := p4gen.Expr(l.Eth)
	if sp.needIP {
		has = p4gen.AllOf(has, p4gen.B(p4gen.Ne, l.Ver, p4gen.C(0, 8)))
	}
	var ss []p4gen.Stmt
	// Word 0: the fields the spec names, and their present bits.
	var parts []p4gen.Expr
	if sp.has[SrcIP] || sp.has[DstIP] {
		parts = append(parts, shl(l.Ver, FamilyShift))
	}
	if sp.has[Proto] {
		parts = append(parts, shl(l.Proto(), ProtoShift))
	}
	if sp.has[SrcPort] || sp.has[DstPort] {
		ports := p4gen.Expr(c64(PortsPresent))
		if sp.has[SrcPort] {
			sport, _ := p4gen.Hdr("l4.sport")
			ports = p4gen.B(p4gen.Or, ports, shl(sport, SrcPortShift))
		}
		if sp.has[DstPort] {
			dport, _ := p4gen.Hdr("l4.dport")
			ports = p4gen.B(p4gen.Or, ports, shl(dport, DstPortShift))
		}
		isL4 := p4gen.AnyOf(is(l.Proto(), protoTCP), is(l.Proto(), protoUDP), is(l.Proto(), protoSCTP))
		_, present := l.L4Value("l4.dport", isL4)
		parts = append(parts, p4gen.Mux{Cond: present, Then: ports, Else: c64(0)})
	}
	if sp.has[VLAN] {
		vid, _ := p4gen.Hdr("vlan.id")
		parts = append(parts, p4gen.Mux{Cond: l.VLAN, Then: p4gen.B(p4gen.Or, shl(vid, VLANShift), c64(VLANPresent)), Else: c64(0)})
	}
	word0 := p4gen.Expr(c64(0))
	for i, x := range parts {
		if i == 0 {
			word0 = x
		} else {
			word0 = p4gen.B(p4gen.Or, word0, x)
		}
	}
	ss = append(ss, p4gen.Assign{Dst: k.Words[0], X: word0})
	addr := func(w int, pf prefix, v4f string, v6hi, v6lo string) {
		a4, _ := p4gen.Hdr(v4f)
		hi, _ := p4gen.Hdr(v6hi)
		lo, _ := p4gen.Hdr(v6lo)
		ss = append(ss,
			p4gen.Assign{Dst: k.Words[w], X: p4gen.Mux{Cond: v4, Then: p4gen.B(p4gen.And, shl(a4, 32), c64(pf.m4)),
				Else: p4gen.Mux{Cond: v6, Then: p4gen.B(p4gen.And, hi, c64(pf.m6hi)), Else: c64(0)}}},
			p4gen.Assign{Dst: k.Words[w+1], X: p4gen.Mux{Cond: v6, Then: p4gen.B(p4gen.And, lo, c64(pf.m6lo)), Else: c64(0)}})
	}
	if sp.srcW >= 0 {
		addr(sp.srcW, sp.pfx[0], "ipv4.src", "ipv6.src_hi", "ipv6.src_lo")
	}
	if sp.dstW >= 0 {
		addr(sp.dstW, sp.pfx[1], "ipv4.dst", "ipv6.dst_hi", "ipv6.dst_lo")
	}
	if sp.smacW >= 0 {
		mac, _ := p4gen.Hdr("eth.src")
		ss = append(ss, p4gen.Assign{Dst: k.Words[sp.smacW], X: w64(mac)})
	}
	if sp.dmacW >= 0 {
		mac, _ := p4gen.Hdr("eth.dst")
		ss = append(ss, p4gen.Assign{Dst: k.Words[sp.dmacW], X: w64(mac)})
	}
	// The words are computed for every packet, side by side (a packet
	// without a key has words no one reads): no statement waits for has.
	b.Add(append([]p4gen.Stmt{p4gen.Assign{Dst: k.Has, X: p4gen.Cast{Bits: 1, X: has}}}, ss...)...)
	return k
}

// HasKey is the condition that the packet has a key.
func (k *P4Key) HasKey() p4gen.Expr { return p4gen.B(p4gen.Eq, k.Has, p4gen.C(1, 1)) }

// Hashes computes the key's two hashes into metadata (<prefix>_h1,
// <prefix>_h2), as P4Hashes computes them: crc32 and crc16 of the words,
// the two standard algorithms of a switch's hash units.
func (k *P4Key) Hashes(b *p4gen.Builder) (h1, h2 p4gen.Ref) {
	h1, h2 = b.Meta("h1", 32), b.Meta("h2", 16)
	data := make([]p4gen.Expr, len(k.Words))
	for i, w := range k.Words {
		data[i] = w
	}
	b.Add(p4gen.Hash{Dst: h1, Algo: p4gen.CRC32, Data: data}, p4gen.Hash{Dst: h2, Algo: p4gen.CRC16, Data: data})
	return h1, h2
}

// Positions computes the first n positions of the key among 2^bits, as
// P4Index does, into metadata <prefix>_<name>0…: position i is the top
// bits of h1 + i·(h2 << 16), i·(h2 << 16) by shifts and adds (a switch
// has no multiplier), each position on its own, side by side.
func Positions(b *p4gen.Builder, h1, h2 p4gen.Ref, name string, n, bits int) []p4gen.Ref {
	step := p4gen.B(p4gen.Shl, p4gen.Cast{Bits: 32, X: h2}, p4gen.C(16, 32))
	out := make([]p4gen.Ref, n)
	for i := range n {
		var g p4gen.Expr = h1
		for k := 0; i>>k != 0; k++ {
			if i>>k&1 == 1 {
				t := p4gen.Expr(step)
				if k > 0 {
					t = p4gen.B(p4gen.Shl, step, p4gen.C(uint64(k), 32))
				}
				g = p4gen.B(p4gen.Add, g, t)
			}
		}
		out[i] = b.Meta(fmt.Sprint(name, i), 32)
		var pos p4gen.Expr = p4gen.C(0, 32)
		if bits > 0 {
			pos = p4gen.Cast{Bits: 32, X: p4gen.Slice{X: g, Hi: 31, Lo: 32 - bits}}
		}
		b.Add(p4gen.Assign{Dst: out[i], X: pos})
	}
	return out
}

// P4Hashes returns the key's hashes as a switch computes them: crc32
// (IEEE) and crc16 (CRC-16/ARC) of the spec's words, each big-endian.
//
// Why two algorithms and no salts: a CRC is affine, crc(a ⊕ b) = crc(a) ⊕
// crc(b) ⊕ crc(0), so crc(salt ‖ key) and crc(salt' ‖ key) differ by a
// constant whatever the key, and rows indexed by salted CRCs are
// translates of one another: two keys that meet in one row meet in all.
// Double hashing of two CRCs of different polynomials (P4Index) gives
// rows whose collisions differ, as flowkey.Index does on the host.
func (sp *Spec) P4Hashes(k *Key) (h1 uint32, h2 uint16) {
	var buf [8 * MaxWords]byte
	for i, w := range k[:sp.words] {
		binary.BigEndian.PutUint64(buf[8*i:], w)
	}
	b := buf[:8*sp.words]
	return crc32.ChecksumIEEE(b), p4gen.CRC16ARC(b)
}

// P4Index returns position i of a key with hashes h1, h2 among 2^bits
// (bits ≤ 32): the top bits of h1 + i·(h2 << 16), mod 2^32. It is
// flowkey.Index with a power of two for n, which a switch computes
// without a multiplier.
func P4Index(h1 uint32, h2 uint16, i uint32, bits int) uint32 {
	if bits == 0 {
		return 0
	}
	return (h1 + i*(uint32(h2)<<16)) >> (32 - bits)
}

// IsPow2 reports whether n is a power of two: the sizes a switch indexes
// by a hash's top bits.
func IsPow2(n uint64) bool { return n > 0 && n&(n-1) == 0 }

// Pow2 returns the least power of two ≥ n (n ≥ 1), and its exponent.
func Pow2(n uint64) (uint64, int) {
	p, k := uint64(1), 0
	for p < n {
		p <<= 1
		k++
	}
	return p, k
}
