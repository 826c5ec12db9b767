package p4gen

import "fmt"

// Layers is a packet as ffpf's flow keys and predicates read it
// (flowkey.Extract and match, on Ethernet frames), computed from the
// standard headers once per packet at the start of ingress: the link
// layer, the network layer when its header is valid by their rules (an
// IPv4 header of version 4, IHL ≥ 5 and a total length that holds it, or
// 0; an IPv6 header of version 6), the upper-layer protocol after at most
// MaxIPv6Ext extension headers walked within the captured bytes and the
// payload length, and how many bytes of the transport header lie within
// the captured bytes and the datagram. A value of the transport header
// (a chunk ending at byte n of it) is there exactly when L4 holds and
// L4Len ≥ n: the parser extracted that chunk.
type Layers struct {
	Eth    Expr // bool: the Ethernet header is captured (14 bytes)
	Tagged Expr // bool: the frame's type field is a VLAN tag's
	VLAN   Expr // bool: the outermost tag is captured whole (4 bytes)
	Ver    Ref  // bit<8>: 4 or 6 when a valid IP header is captured, else 0
	Proto  Ref  // bit<8>: the IPv4 protocol, or IPv6's upper-layer next header
	L4     Ref  // bit<1>: the transport header starts where the parser extracted it (a first fragment, a walk that reached the upper layer)
	L4Len  Ref  // bit<32>: its bytes within the captured bytes and the datagram
}

// layerMeta is the metadata of StdLayers, the first of which marks a
// program that has them.
const layerMeta = "ffpf_ver"

// StdLayers returns the packet's layers in p, declaring their metadata
// and putting the statements that compute them at the head of p.Ingress
// the first time (later calls return the same values): so a flowspace
// appends the functions' statements to p.Ingress, after what their
// lowering put there.
func StdLayers(p *Program) *Layers {
	meta := func(name string, bits int) Ref { return Ref{Path: "meta." + name, Bits: bits} }
	l := &Layers{
		Eth:    Valid{"eth_type"},
		Tagged: B(LAnd, Valid{"eth_type"}, isTag(F("eth_type", "ether_type"))),
		VLAN:   Valid{"vlan0_type"},
		Ver:    meta(layerMeta, 8), Proto: meta("ffpf_proto", 8), L4: meta("ffpf_l4", 1), L4Len: meta("ffpf_l4len", 32),
	}
	for _, f := range p.Metadata {
		if f.Name == layerMeta {
			return l
		}
	}
	l3, lim, ptr, nh, walk := meta("ffpf_l3", 32), meta("ffpf_lim", 32), meta("ffpf_p", 32), meta("ffpf_nh", 8), meta("ffpf_walk", 2)
	for _, r := range []Ref{l.Ver, l.Proto, l.L4, l.L4Len, l3, lim, ptr, nh, walk} {
		p.Metadata = append(p.Metadata, Field{Name: r.Path[len("meta."):], Bits: r.Bits})
	}
	c32 := func(v uint64) Const { return C(v, 32) }
	w32 := func(x Expr) Expr { return Cast{Bits: 32, X: x} }
	length := Std("packet_length")
	var ss []Stmt
	for _, r := range []Ref{l.Ver, l.Proto, l.L4, l.L4Len, ptr, nh, walk} {
		ss = append(ss, Assign{Dst: r, X: C(0, r.Bits)})
	}
	// The network header starts after the tags the parser walked.
	ss = append(ss, Assign{Dst: l3, X: c32(14)})
	for i := range MaxVLANTags {
		ss = append(ss, If{Cond: Valid{fmt.Sprintf("vlan%d_type", i)}, Then: []Stmt{Assign{Dst: l3, X: B(Add, l3, c32(4))}}})
	}
	capL3 := B(Sub, length, l3) // the network header is captured: no wrap
	// IPv4.
	ihl, tot := F("ipv4_vihl", "ihl"), F("ipv4_len", "total_len")
	hl := B(Shl, w32(ihl), c32(2))
	eff := Mux{Cond: B(Eq, tot, C(0, 16)), Then: capL3, Else: w32(tot)}
	ss = append(ss, If{
		Cond: AllOf(Valid{IPv4Chunks[len(IPv4Chunks)-1]}, B(Eq, F("ipv4_vihl", "version"), C(4, 4)), B(Ge, ihl, C(5, 4)),
			AnyOf(B(Eq, tot, C(0, 16)), B(Ge, tot, B(Shl, Cast{Bits: 16, X: ihl}, C(2, 16))))),
		Then: []Stmt{
			Assign{Dst: l.Ver, X: C(4, 8)},
			Assign{Dst: l.Proto, X: F("ipv4_proto", "protocol")},
			Assign{Dst: lim, X: eff},
			If{Cond: B(Gt, lim, capL3), Then: []Stmt{Assign{Dst: lim, X: capL3}}},
			If{Cond: B(Eq, F("ipv4_frag", "frag_offset"), C(0, 13)), Then: []Stmt{
				Assign{Dst: l.L4, X: C(1, 1)},
				Assign{Dst: l.L4Len, X: Mux{Cond: B(Ge, lim, hl), Then: B(Sub, lim, hl), Else: c32(0)}},
			}},
		}})
	// IPv6: the extension headers walked as flowkey walks them.
	plen := F("ipv6_plen", "payload_len")
	isExt := func(x Expr) Expr {
		return AnyOf(B(Eq, x, C(ExtHopByHop, 8)), B(Eq, x, C(ExtRouting, 8)), B(Eq, x, C(ExtDestOpts, 8)))
	}
	const (
		stopped = 0 // the walk stopped before the upper layer
		walking = 1
		reached = 2 // at the upper layer
	)
	v6 := []Stmt{
		Assign{Dst: l.Ver, X: C(6, 8)},
		Assign{Dst: lim, X: Mux{Cond: B(Ne, plen, C(0, 16)), Then: B(Add, w32(plen), c32(40)), Else: capL3}},
		If{Cond: B(Gt, lim, capL3), Then: []Stmt{Assign{Dst: lim, X: capL3}}},
		Assign{Dst: ptr, X: c32(40)},
		Assign{Dst: nh, X: F("ipv6_nh", "next_hdr")},
		Assign{Dst: walk, X: C(walking, 2)},
	}
	for i := range MaxIPv6Ext {
		ext := func(s string) string { return fmt.Sprintf("ext%d_%s", i, s) }
		step := If{Cond: isExt(nh),
			Then: []Stmt{If{Cond: B(Gt, B(Add, ptr, c32(2)), lim),
				Then: []Stmt{Assign{Dst: walk, X: C(stopped, 2)}},
				Else: []Stmt{
					Assign{Dst: ptr, X: B(Add, ptr, B(Shl, B(Add, w32(F(ext("len"), "hdr_ext_len")), c32(1)), c32(3)))},
					Assign{Dst: nh, X: F(ext("nh"), "next_hdr")},
				}}},
			Else: []Stmt{If{Cond: B(Eq, nh, C(ExtFragment, 8)),
				Then: []Stmt{If{Cond: B(Gt, B(Add, ptr, c32(8)), lim),
					Then: []Stmt{Assign{Dst: walk, X: C(stopped, 2)}},
					Else: []Stmt{
						Assign{Dst: ptr, X: B(Add, ptr, c32(8))},
						Assign{Dst: nh, X: F(ext("nh"), "next_hdr")},
						If{Cond: B(Ne, F(ext("frag"), "frag_offset"), C(0, 13)), Then: []Stmt{Assign{Dst: walk, X: C(stopped, 2)}}},
					}}},
				Else: []Stmt{Assign{Dst: walk, X: C(reached, 2)}}}},
		}
		v6 = append(v6, If{Cond: B(Eq, walk, C(walking, 2)), Then: []Stmt{step}})
	}
	// After MaxIPv6Ext extension headers the next header is the upper
	// layer's, unless it is one more extension header.
	v6 = append(v6,
		If{Cond: AllOf(B(Eq, walk, C(walking, 2)), Unary{Op: Not, X: isExt(nh)}, B(Ne, nh, C(ExtFragment, 8))),
			Then: []Stmt{Assign{Dst: walk, X: C(reached, 2)}}},
		Assign{Dst: l.Proto, X: nh},
		If{Cond: B(Eq, walk, C(reached, 2)), Then: []Stmt{
			Assign{Dst: l.L4, X: C(1, 1)},
			Assign{Dst: l.L4Len, X: Mux{Cond: B(Ge, lim, ptr), Then: B(Sub, lim, ptr), Else: c32(0)}},
		}})
	ss = append(ss, If{Cond: AllOf(Valid{"ipv6_dst_4"}, B(Eq, F("ipv6_vtf", "version"), C(6, 4))), Then: v6})
	p.Ingress = append(ss, p.Ingress...)
	return l
}

func isTag(x Expr) Expr {
	var cs []Expr
	for _, t := range VLANTypes {
		cs = append(cs, B(Eq, x, C(t, 16)))
	}
	return AnyOf(cs...)
}

// L4Value returns a value of the transport header, by its name in
// stdFields ("tcp.flags", "l4.dport"), and the condition under which the
// packet has it: the transport header is there, the protocol is proto,
// and the chunk's bytes lie within the captured bytes and the datagram.
func (l *Layers) L4Value(name string, proto Expr) (Expr, Expr) {
	x, v := Hdr(name)
	c, _ := stdChunk(v.Header)
	end := c.offset + c.typ.Bits()/8
	return x, AllOf(B(Eq, l.L4, C(1, 1)), proto, B(Ge, l.L4Len, C(uint64(end), 32)))
}
