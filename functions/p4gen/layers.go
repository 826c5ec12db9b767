package p4gen

import "fmt"

// Layers is a packet as ffpf's flow keys and predicates read it
// (flowkey.Extract and match, on Ethernet frames), computed from the
// standard headers at the start of ingress: the link layer, the network
// layer when its header is valid by their rules (an IPv4 header of
// version 4, IHL ≥ 5 and a total length that holds it, or 0; an IPv6
// header of version 6), and, when a function asks for it (Proto, L4,
// L4Len, L4Value), the upper-layer protocol after at most MaxIPv6Ext
// extension headers walked within the captured bytes and the payload
// length, and how many bytes of the transport header lie within the
// captured bytes and the datagram. A value of the transport header (a
// chunk ending at byte n of it) is there exactly when L4 holds and L4Len
// ≥ n: the parser extracted that chunk.
//
// Written for a pipeline of few stages: every metadata field is written
// once, by statements that depend on one another as little as they can.
// The extension headers' offsets are prefix sums of their sizes (three
// additions deep, not eight), each level's overrun of the limit one
// comparison, all levels side by side, and where the walk stops a const
// ternary table on those bits, whose action picks the level's next header
// and offset.
type Layers struct {
	Eth    Expr // bool: the Ethernet header is captured (14 bytes)
	Tagged Expr // bool: the frame's type field is a VLAN tag's
	VLAN   Expr // bool: the outermost tag is captured whole (4 bytes)
	Ver    Expr // bit<8>: 4 or 6 when a valid IP header is captured, else 0

	p  *Program
	v4 Ref // bit<1>
	l3 Ref // bit<32>: where the network header starts
	t  *transport
}

// transport is the transport layer's values, once computed.
type transport struct {
	proto, l4, l4len Expr
}

// layerMeta marks a program that computes its layers.
const layerMeta = "ffpf_v4"

func meta(name string, bits int) Ref { return Ref{Path: "meta." + name, Bits: bits} }

func declare(p *Program, rs ...Ref) {
	for _, r := range rs {
		p.Metadata = append(p.Metadata, Field{Name: r.Path[len("meta."):], Bits: r.Bits})
	}
}

func declared(p *Program, name string) bool {
	for _, f := range p.Metadata {
		if f.Name == name {
			return true
		}
	}
	return false
}

// StdLayers returns the packet's layers in p, declaring their metadata
// and putting the statements that compute them at the head of p.Ingress
// the first time (later calls compute nothing more): so a flowspace
// appends the functions' statements to p.Ingress, after what their
// lowering put there.
func StdLayers(p *Program) *Layers {
	v4, v6, l3 := meta(layerMeta, 1), meta("ffpf_v6", 1), meta("ffpf_l3", 32)
	l := &Layers{
		Eth:    Valid{"eth_type"},
		Tagged: B(LAnd, Valid{"eth_type"}, isTag(F("eth_type", "ether_type"))),
		VLAN:   Valid{"vlan0_type"},
		Ver:    Mux{Cond: B(Eq, v4, C(1, 1)), Then: C(4, 8), Else: Mux{Cond: B(Eq, v6, C(1, 1)), Then: C(6, 8), Else: C(0, 8)}},
		p:      p, v4: v4, l3: l3,
	}
	if declared(p, layerMeta) {
		return l
	}
	declare(p, v4, v6, l3)
	ihl, tot := F("ipv4_vihl", "ihl"), F("ipv4_len", "total_len")
	var tags Expr = C(14, 32)
	for i := range MaxVLANTags {
		tags = B(Add, tags, Mux{Cond: Valid{fmt.Sprintf("vlan%d_type", i)}, Then: C(4, 32), Else: C(0, 32)})
	}
	p.Ingress = append([]Stmt{
		Assign{Dst: v4, X: Cast{Bits: 1, X: AllOf(Valid{IPv4Chunks[len(IPv4Chunks)-1]}, B(Eq, F("ipv4_vihl", "version"), C(4, 4)),
			B(Ge, ihl, C(5, 4)), AnyOf(B(Eq, tot, C(0, 16)), B(Ge, tot, B(Shl, Cast{Bits: 16, X: ihl}, C(2, 16)))))}},
		Assign{Dst: v6, X: Cast{Bits: 1, X: AllOf(Valid{"ipv6_dst_4"}, B(Eq, F("ipv6_vtf", "version"), C(6, 4)))}},
		Assign{Dst: l3, X: tags},
	}, p.Ingress...)
	return l
}

func isTag(x Expr) Expr {
	var cs []Expr
	for _, t := range VLANTypes {
		cs = append(cs, B(Eq, x, C(t, 16)))
	}
	return AnyOf(cs...)
}

// Proto is the IPv4 protocol, or IPv6's upper-layer next header after
// the extension headers walked (bit<8>; meaningful when Ver is not 0).
func (l *Layers) Proto() Expr { return l.transport().proto }

// L4 holds when the transport header starts where the parser extracted
// it: a first fragment, a walk that reached the upper layer.
func (l *Layers) L4() Expr { return l.transport().l4 }

// L4Len is how many bytes of the transport header lie within the
// captured bytes and the datagram (bit<32>).
func (l *Layers) L4Len() Expr { return l.transport().l4len }

// L4Value returns a value of the transport header, by its name in
// stdFields ("tcp.flags", "l4.dport"), and the condition under which the
// packet has it: the transport header is there, the protocol is proto,
// and the chunk's bytes lie within the captured bytes and the datagram.
func (l *Layers) L4Value(name string, proto Expr) (Expr, Expr) {
	x, v := Hdr(name)
	c, _ := stdChunk(v.Header)
	end := c.offset + c.typ.Bits()/8
	return x, AllOf(B(Ne, l.Ver, C(0, 8)), l.L4(), proto, B(Ge, l.L4Len(), C(uint64(end), 32)))
}

// transport computes the transport layer's values, the first time.
func (l *Layers) transport() *transport {
	if l.t != nil {
		return l.t
	}
	p := l.p
	c32 := func(v uint64) Const { return C(v, 32) }
	w32 := func(x Expr) Expr { return Cast{Bits: 32, X: x} }
	isOne := func(r Ref) Expr { return B(Eq, r, C(1, 1)) }
	bit := func(x Expr) Expr { return Cast{Bits: 1, X: x} }
	capL3, lim4, len4 := meta("ffpf_cap", 32), meta("ffpf_lim4", 32), meta("ffpf_l4len4", 32)
	lim6, proto6, ok6, len6 := meta("ffpf_lim6", 32), meta("ffpf_proto6", 8), meta("ffpf_l4ok6", 1), meta("ffpf_l4len6", 32)
	ihl, tot, plen := F("ipv4_vihl", "ihl"), F("ipv4_len", "total_len"), F("ipv6_plen", "payload_len")
	hl := B(Shl, w32(ihl), c32(2))
	t := &transport{
		proto: Mux{Cond: isOne(l.v4), Then: F("ipv4_proto", "protocol"), Else: proto6},
		l4:    Mux{Cond: isOne(l.v4), Then: B(Eq, F("ipv4_frag", "frag_offset"), C(0, 13)), Else: isOne(ok6)},
		l4len: Mux{Cond: isOne(l.v4), Then: len4, Else: len6},
	}
	l.t = t
	if declared(p, "ffpf_cap") {
		return t
	}
	declare(p, capL3, lim4, len4, lim6, proto6, ok6, len6)
	// The extension headers: level i's next header, whether it is an
	// extension header (a fragment header), a later fragment, its size.
	nh := make([]Expr, MaxIPv6Ext+1)
	nh[0] = F("ipv6_nh", "next_hdr")
	for i := 1; i <= MaxIPv6Ext; i++ {
		nh[i] = F(fmt.Sprintf("ext%d_nh", i-1), "next_hdr")
	}
	var ext, frag, later, sz, a, b, c, bad [MaxIPv6Ext + 1]Ref
	s0, s1, s2, s3, s4 := []Stmt{}, []Stmt{}, []Stmt{}, []Stmt{}, []Stmt{}
	for i := 0; i <= MaxIPv6Ext; i++ {
		ext[i] = meta(fmt.Sprint("ffpf_ext", i), 1)
		declare(p, ext[i])
		s0 = append(s0, Assign{Dst: ext[i], X: bit(AnyOf(B(Eq, nh[i], C(ExtHopByHop, 8)), B(Eq, nh[i], C(ExtRouting, 8)),
			B(Eq, nh[i], C(ExtDestOpts, 8)), B(Eq, nh[i], C(ExtFragment, 8))))})
		if i == MaxIPv6Ext {
			break
		}
		frag[i], later[i], sz[i] = meta(fmt.Sprint("ffpf_frag", i), 1), meta(fmt.Sprint("ffpf_later", i), 1), meta(fmt.Sprint("ffpf_sz", i), 32)
		a[i], b[i], c[i], bad[i] = meta(fmt.Sprint("ffpf_a", i), 32), meta(fmt.Sprint("ffpf_b", i), 32), meta(fmt.Sprint("ffpf_c", i), 32), meta(fmt.Sprint("ffpf_bad", i), 1)
		declare(p, frag[i], later[i], sz[i], a[i], b[i], c[i], bad[i])
		isFrag := B(Eq, nh[i], C(ExtFragment, 8))
		s0 = append(s0,
			Assign{Dst: frag[i], X: bit(isFrag)},
			Assign{Dst: later[i], X: bit(AllOf(Valid{fmt.Sprintf("ext%d_frag", i)}, B(Ne, F(fmt.Sprintf("ext%d_frag", i), "frag_offset"), C(0, 13))))},
			Assign{Dst: sz[i], X: Mux{Cond: isFrag, Then: c32(8), Else: B(Shl, B(Add, w32(F(fmt.Sprintf("ext%d_len", i), "hdr_ext_len")), c32(1)), c32(3))}})
	}
	// Prefix sums of the sizes, three additions deep: c[i] is the size of
	// levels 0 to i, so level i starts at 40 + c[i−1].
	for i := range MaxIPv6Ext {
		var x Expr = sz[i]
		if i >= 1 {
			x = B(Add, sz[i], sz[i-1])
		}
		s1 = append(s1, Assign{Dst: a[i], X: x})
		x = a[i]
		if i >= 2 {
			x = B(Add, a[i], a[i-2])
		}
		s2 = append(s2, Assign{Dst: b[i], X: x})
		x = b[i]
		if i >= 4 {
			x = B(Add, b[i], b[i-4])
		}
		s3 = append(s3, Assign{Dst: c[i], X: x})
	}
	start := func(i int) Expr { // level i's offset in the IPv6 packet
		if i == 0 {
			return c32(40)
		}
		return B(Add, c[i-1], c32(40))
	}
	// A level overruns the limit when the bytes the walk reads of it (2,
	// or a fragment header's 8) end past it.
	for i := range MaxIPv6Ext {
		need := Mux{Cond: isOne(frag[i]), Then: c32(8), Else: c32(2)}
		s4 = append(s4, Assign{Dst: bad[i], X: bit(B(Gt, B(Add, start(i), need), lim6))})
	}
	// Where the walk stops, by a const ternary table on the levels' bits:
	// at the first level that is not an extension header (the upper
	// layer), or that overruns the limit, or after a later fragment.
	var keys []TableKey
	for i := 0; i <= MaxIPv6Ext; i++ {
		keys = append(keys, TableKey{X: ext[i], Match: Ternary})
	}
	for i := range MaxIPv6Ext {
		keys = append(keys, TableKey{X: bad[i], Match: Ternary}, TableKey{X: later[i], Match: Ternary})
	}
	tb := &Table{Name: "ffpf_walk", Keys: keys, Size: 3 * (MaxIPv6Ext + 1), Const: true}
	entry := func(k int, extK, badK, laterK int64) []Match {
		m := make([]Match, len(keys))
		set := func(j int, v uint64) { m[j] = Match{Value: v, Mask: 1} }
		for j := range k { // the levels before: crossed
			set(j, 1)
			set(MaxIPv6Ext+1+2*j, 0)
			set(MaxIPv6Ext+1+2*j+1, 0)
		}
		if extK >= 0 {
			set(k, uint64(extK))
		}
		if badK >= 0 {
			set(MaxIPv6Ext+1+2*k, uint64(badK))
		}
		if laterK >= 0 {
			set(MaxIPv6Ext+1+2*k+1, uint64(laterK))
		}
		return m
	}
	action := func(name string, body ...Stmt) *Action {
		act := &Action{Name: name, Body: body}
		p.Actions = append(p.Actions, act)
		tb.Actions = append(tb.Actions, act)
		return act
	}
	pri := int32(3 * (MaxIPv6Ext + 1))
	for k := 0; k <= MaxIPv6Ext; k++ {
		upper := action(fmt.Sprint("ffpf_upper", k), Assign{Dst: proto6, X: nh[k]}, Assign{Dst: ok6, X: C(1, 1)},
			Assign{Dst: len6, X: Mux{Cond: B(Ge, lim6, start(k)), Then: B(Sub, lim6, start(k)), Else: c32(0)}})
		stop := action(fmt.Sprint("ffpf_stop", k), Assign{Dst: proto6, X: nh[k]}, Assign{Dst: ok6, X: C(0, 1)}, Assign{Dst: len6, X: c32(0)})
		if k == MaxIPv6Ext {
			tb.Entries = append(tb.Entries, Entry{Match: entry(k, 0, -1, -1), Priority: pri, Action: upper},
				Entry{Match: entry(k, 1, -1, -1), Priority: pri - 1, Action: stop})
			break
		}
		after := action(fmt.Sprint("ffpf_later", k), Assign{Dst: proto6, X: nh[k+1]}, Assign{Dst: ok6, X: C(0, 1)}, Assign{Dst: len6, X: c32(0)})
		tb.Entries = append(tb.Entries,
			Entry{Match: entry(k, 0, -1, -1), Priority: pri, Action: upper},
			Entry{Match: entry(k, 1, 1, -1), Priority: pri - 1, Action: stop},
			Entry{Match: entry(k, 1, 0, 1), Priority: pri - 2, Action: after})
		pri -= 3
	}
	tb.Default = tb.Actions[0]
	p.Tables = append(p.Tables, tb)
	var ss []Stmt
	ss = append(ss, s0...)
	ss = append(ss, Assign{Dst: capL3, X: B(Sub, Std("packet_length"), l.l3)})
	ss = append(ss, s1...)
	ss = append(ss,
		Assign{Dst: lim4, X: Mux{Cond: AnyOf(B(Eq, tot, C(0, 16)), B(Gt, w32(tot), capL3)), Then: capL3, Else: w32(tot)}},
		Assign{Dst: lim6, X: Mux{Cond: AllOf(B(Ne, plen, C(0, 16)), B(Lt, B(Add, w32(plen), c32(40)), capL3)), Then: B(Add, w32(plen), c32(40)), Else: capL3}})
	ss = append(ss, s2...)
	ss = append(ss, s3...)
	ss = append(ss, s4...)
	ss = append(ss, Assign{Dst: len4, X: Mux{Cond: B(Ge, lim4, hl), Then: B(Sub, lim4, hl), Else: c32(0)}}, Apply{Table: tb})
	// After the layers' own statements, which compute l3.
	at := 0
	for i, st := range p.Ingress {
		if a, ok := st.(Assign); ok && a.Dst == l.l3 {
			at = i + 1
		}
	}
	p.Ingress = append(p.Ingress[:at:at], append(ss, p.Ingress[at:]...)...)
	return t
}
