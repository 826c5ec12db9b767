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
// positions are crc32 of a 32-bit salt followed by the key's words (v1model
// hash over {salt, words}, IEEE, the fields packed most significant first:
// P4Hash), reduced to a power of two by its low bits. A function placed
// on a switch indexes its state so, and its Go half reads that state with
// P4Hash.

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
		parts = append(parts, shl(l.Proto, ProtoShift))
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
		isL4 := p4gen.AnyOf(is(l.Proto, protoTCP), is(l.Proto, protoUDP), is(l.Proto, protoSCTP))
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
	zero := make([]p4gen.Stmt, len(k.Words))
	for i, w := range k.Words {
		zero[i] = p4gen.Assign{Dst: w, X: c64(0)}
	}
	b.Add(p4gen.If{Cond: has, Then: append([]p4gen.Stmt{p4gen.Assign{Dst: k.Has, X: p4gen.C(1, 1)}}, ss...),
		Else: append([]p4gen.Stmt{p4gen.Assign{Dst: k.Has, X: p4gen.C(0, 1)}}, zero...)})
	return k
}

// HasKey is the condition that the packet has a key.
func (k *P4Key) HasKey() p4gen.Expr { return p4gen.B(p4gen.Eq, k.Has, p4gen.C(1, 1)) }

// Hash returns the statement that sets dst to P4Hash(salt) of the
// packet's key reduced to its low log2(n) bits (n a power of two; 0
// keeps all 32).
func (k *P4Key) Hash(dst p4gen.Ref, salt uint32, n uint64) p4gen.Stmt {
	data := []p4gen.Expr{p4gen.C(uint64(salt), 32)}
	for _, w := range k.Words {
		data = append(data, w)
	}
	return p4gen.Hash{Dst: dst, Algo: p4gen.CRC32, Data: data, Max: n}
}

// P4Hash is the hash a switch computes of key k of spec sp with salt:
// crc32 (IEEE) of the salt and the spec's words, each big-endian.
func (sp *Spec) P4Hash(k *Key, salt uint32) uint32 {
	var buf [4 + 8*MaxWords]byte
	binary.BigEndian.PutUint32(buf[:], salt)
	for i, w := range k[:sp.words] {
		binary.BigEndian.PutUint64(buf[4+8*i:], w)
	}
	return crc32.ChecksumIEEE(buf[:4+8*sp.words])
}

// IsPow2 reports whether n is a power of two: the sizes a switch indexes
// by a hash's low bits.
func IsPow2(n uint64) bool { return n > 0 && n&(n-1) == 0 }

// Pow2 returns the least power of two ≥ n (n ≥ 1).
func Pow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}
