package p4gen

import "fmt"

// The header library and parser every program starts from (NewProgram):
// Ethernet, up to four VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8, 0x9100),
// ARP and RARP, IPv4 with its options, IPv6 with up to eight extension
// headers (hop-by-hop, routing, destination options, fragment), and TCP,
// UDP, SCTP, ICMP and ICMPv6: the layers, and the bounds, that ffpf's flow
// keys and predicates read (flowkey, match) and libpcap's filters load.
//
// Headers are cut into chunks. A switch extracts a header whole or not at
// all, while libpcap reads a frame's bytes up to its captured end: a frame
// cut at 24 bytes still has its IPv4 protocol for "ip proto 6", and one of
// bogus IHL 3 has its "ports" at bytes 26 to 29, inside the source
// address. So every header is extracted as a run of small headers, cut
// where the loads of libpcap's primitives end (the frame's first byte for
// "ether multicast", the IPv4 address bytes that a bogus IHL turns into
// ports or an ICMP type), and a frame cut anywhere keeps every chunk that
// ends before the cut. A value that spans chunks (an IPv4 address is
// src_0 ++ src_1 ++ src_2) is read with Field. With IHL 1 to 4 the
// transport header libpcap reads starts inside the IPv4 header: the
// parser extracts what follows the IPv4 header as the rest of that TCP
// (or UDP) header, the chunks from the byte it has reached, so that
// "tcp[13]" is a chunk for every IHL.
//
// Values are at most 64 bits: an IPv6 address is four 32-bit chunks (the
// destination's first byte a chunk of its own, for "ip6 multicast"), and
// Field gives its two 64-bit halves.

// A chunk is one header instance of the library: its fields, first to
// last on the wire.
type chunk struct {
	inst   string
	typ    *HeaderType
	offset int // bytes from the start of its protocol's header
}

func hdrType(name string, fields ...Field) *HeaderType {
	return &HeaderType{Name: name, Fields: fields}
}

func bits(name string, n int) Field { return Field{Name: name, Bits: n} }

// Header types of the library, shared by the instances of one kind (the
// four VLAN tags, the eight extension headers).
var (
	tVLANTCI  = hdrType("vlan_tci_t", bits("pcp", 3), bits("dei", 1), bits("vid", 12))
	tVLANType = hdrType("vlan_type_t", bits("ether_type", 16))
	tExtNH    = hdrType("ipv6_ext_nh_t", bits("next_hdr", 8))
	tExtLen   = hdrType("ipv6_ext_len_t", bits("hdr_ext_len", 8))
	tExtOpt   = hdrType("ipv6_ext_opt_t", Field{Name: "data", Bits: (255*8 + 6) * 8, Var: true})
	tExtFrag  = hdrType("ipv6_ext_frag_t", bits("frag_offset", 13), bits("res", 2), bits("m", 1))
	tExtID    = hdrType("ipv6_ext_id_t", bits("id", 32))
)

// MaxVLANTags and MaxIPv6Ext bound the parser's walk, as flowkey's and
// match's: a fifth tag leaves no network layer, and after the eighth
// extension header the next header is the upper layer's.
const (
	MaxVLANTags = 4
	MaxIPv6Ext  = 8
)

// protoChunks lists each protocol's chunks in wire order.
var protoChunks = func() map[string][]chunk {
	m := map[string][]chunk{}
	own := func(proto string, defs ...any) {
		off := 0
		for i := 0; i < len(defs); i += 2 {
			inst := defs[i].(string)
			t := hdrType(inst+"_t", defs[i+1].([]Field)...)
			m[proto] = append(m[proto], chunk{inst: inst, typ: t, offset: off})
			off += t.Bits() / 8
		}
	}
	f := func(fs ...Field) []Field { return fs }
	own("ethernet",
		"eth_dst_0", f(bits("dst_0", 8)),
		"eth_dst_1", f(bits("dst_1", 40)),
		"eth_src", f(bits("src", 48)),
		"eth_type", f(bits("ether_type", 16)))
	for i := range MaxVLANTags {
		m["vlan"+fmt.Sprint(i)] = []chunk{
			{inst: fmt.Sprintf("vlan%d_tci", i), typ: tVLANTCI},
			{inst: fmt.Sprintf("vlan%d_type", i), typ: tVLANType, offset: 2}}
	}
	own("ipv4",
		"ipv4_vihl", f(bits("version", 4), bits("ihl", 4)),
		"ipv4_tos", f(bits("diffserv", 8)),
		"ipv4_len", f(bits("total_len", 16)),
		"ipv4_id_0", f(bits("id_0", 8)),
		"ipv4_id_1", f(bits("id_1", 8)),
		"ipv4_frag", f(bits("flags", 3), bits("frag_offset", 13)),
		"ipv4_ttl", f(bits("ttl", 8)),
		"ipv4_proto", f(bits("protocol", 8)),
		"ipv4_csum", f(bits("hdr_checksum", 16)),
		"ipv4_src_0", f(bits("src_0", 8)),
		"ipv4_src_1", f(bits("src_1", 8)),
		"ipv4_src_2", f(bits("src_2", 16)),
		"ipv4_dst_0", f(bits("dst_0", 8)),
		"ipv4_dst_1", f(bits("dst_1", 8)),
		"ipv4_dst_2", f(bits("dst_2", 16)))
	own("ipv4_options", "ipv4_opts", f(Field{Name: "options", Bits: 320, Var: true}))
	own("ipv6",
		"ipv6_vtf", f(bits("version", 4), bits("traffic_class", 8), bits("flow_label", 20)),
		"ipv6_plen", f(bits("payload_len", 16)),
		"ipv6_nh", f(bits("next_hdr", 8)),
		"ipv6_hlim", f(bits("hop_limit", 8)),
		"ipv6_src_0", f(bits("src_0", 32)),
		"ipv6_src_1", f(bits("src_1", 32)),
		"ipv6_src_2", f(bits("src_2", 32)),
		"ipv6_src_3", f(bits("src_3", 32)),
		"ipv6_dst_0", f(bits("dst_0", 8)),
		"ipv6_dst_1", f(bits("dst_1", 24)),
		"ipv6_dst_2", f(bits("dst_2", 32)),
		"ipv6_dst_3", f(bits("dst_3", 32)),
		"ipv6_dst_4", f(bits("dst_4", 32)))
	for i := range MaxIPv6Ext {
		ext := func(name string, t *HeaderType, off int) chunk {
			return chunk{inst: fmt.Sprintf("ext%d_%s", i, name), typ: t, offset: off}
		}
		m[fmt.Sprintf("ext%d", i)] = []chunk{ext("nh", tExtNH, 0), ext("len", tExtLen, 1), ext("opt", tExtOpt, 2),
			ext("frag", tExtFrag, 2), ext("id", tExtID, 4)}
	}
	own("arp",
		"arp_fixed", f(bits("htype", 16), bits("ptype", 16), bits("hlen", 8), bits("plen", 8), bits("oper", 16)),
		"arp_sha", f(bits("sha", 48)),
		"arp_spa", f(bits("spa", 32)),
		"arp_tha", f(bits("tha", 48)),
		"arp_tpa", f(bits("tpa", 32)))
	own("l4", "l4_sport", f(bits("src_port", 16)), "l4_dport", f(bits("dst_port", 16)))
	own("tcp",
		"tcp_seq", f(bits("seq_no", 32)),
		"tcp_ack", f(bits("ack_no", 32)),
		"tcp_off", f(bits("data_offset", 4), bits("res", 4)),
		"tcp_flags", f(bits("flags", 8)),
		"tcp_win", f(bits("window", 16)),
		"tcp_csum", f(bits("checksum", 16)),
		"tcp_urg", f(bits("urgent_ptr", 16)))
	own("udp", "udp_len", f(bits("length", 16)), "udp_csum", f(bits("checksum", 16)))
	own("icmp", "icmp_type", f(bits("icmp_type", 8)), "icmp_code", f(bits("code", 8)), "icmp_csum", f(bits("checksum", 16)))
	// TCP and UDP chunks sit after the ports: offsets within the header.
	for _, p := range []string{"tcp", "udp"} {
		for i := range m[p] {
			m[p][i].offset += 4
		}
	}
	return m
}()

// stdOrder is the order of the protocols' chunks on every route through
// the parser, so the deparser emits what was extracted as it was.
var stdOrder = func() []string {
	o := []string{"ethernet"}
	for i := range MaxVLANTags {
		o = append(o, fmt.Sprint("vlan", i))
	}
	o = append(o, "ipv4", "ipv4_options", "ipv6")
	for i := range MaxIPv6Ext {
		o = append(o, fmt.Sprint("ext", i))
	}
	return append(o, "arp", "l4", "tcp", "udp", "icmp")
}()

func stdHeaders() ([]*HeaderType, []*Header) {
	var types []*HeaderType
	seen := map[*HeaderType]bool{}
	var hs []*Header
	for _, p := range stdOrder {
		for _, c := range protoChunks[p] {
			if !seen[c.typ] {
				seen[c.typ] = true
				types = append(types, c.typ)
			}
			hs = append(hs, &Header{Name: c.inst, Type: c.typ})
		}
	}
	return types, hs
}

func stdChunk(inst string) (chunk, bool) {
	for _, cs := range protoChunks {
		for _, c := range cs {
			if c.inst == inst {
				return c, true
			}
		}
	}
	return chunk{}, false
}

// F returns the Ref of field name of the library's header instance inst
// ("ipv4_proto", "protocol" → hdr.ipv4_proto.protocol, bit<8>); it panics
// on a name the library lacks, which is a lowering's bug.
func F(inst, name string) Ref {
	if c, ok := stdChunk(inst); ok {
		if f, ok := c.typ.Field(name); ok && !f.Var {
			return Ref{Path: "hdr." + inst + "." + name, Bits: f.Bits}
		}
	}
	panic("p4gen: the standard headers have no field " + inst + "." + name)
}

// Ethertypes and IP protocols the parser branches on.
const (
	EtherIPv4  = 0x0800
	EtherIPv6  = 0x86dd
	EtherARP   = 0x0806
	EtherRARP  = 0x8035
	ProtoICMP  = 1
	ProtoTCP   = 6
	ProtoUDP   = 17
	ProtoICMP6 = 58
	ProtoSCTP  = 132
)

// VLANTypes are the ethertypes of a VLAN tag: 802.1Q, 802.1ad and the
// older QinQ 0x9100, as libpcap's "vlan" and flowkey take them.
var VLANTypes = []uint64{0x8100, 0x88a8, 0x9100}

// IPv6 extension headers the walk crosses.
const (
	ExtHopByHop = 0
	ExtRouting  = 43
	ExtFragment = 44
	ExtDestOpts = 60
)

func extract(proto string) []string {
	var out []string
	for _, c := range protoChunks[proto] {
		out = append(out, c.inst)
	}
	return out
}

// NewProgram returns a program named name with the standard headers, their
// parser and deparser, and nothing else: the flowspace adds the functions.
func NewProgram(name string) *Program {
	types, hs := stdHeaders()
	p := &Program{Name: name, HeaderTypes: types, Headers: hs}
	for _, h := range hs {
		p.Deparse = append(p.Deparse, h.Name)
	}
	p.Parser = stdParser()
	return p
}

func cases(vals []uint64, next string) []Case {
	var cs []Case
	for _, v := range vals {
		cs = append(cs, Case{Values: []uint64{v}, Next: next})
	}
	return cs
}

// ethertypeCases are the transitions on an ethertype: a tag to tag (the
// next VLAN state, or accept past the last), IPv4, IPv6, ARP and RARP.
func ethertypeCases(tag string) []Case {
	cs := cases(VLANTypes, tag)
	cs = append(cs, Case{Values: []uint64{EtherIPv4}, Next: "parse_ipv4"}, Case{Values: []uint64{EtherIPv6}, Next: "parse_ipv6"},
		Case{Values: []uint64{EtherARP}, Next: "parse_arp"}, Case{Values: []uint64{EtherRARP}, Next: "parse_arp"})
	return cs
}

// ipv6Next are the transitions on an IPv6 next header: the transport
// headers, and the extension headers to extension level ext (MaxIPv6Ext:
// the walk's end, where they are the upper layer).
func ipv6Next(ext int) []Case {
	cs := []Case{{Values: []uint64{ProtoTCP}, Next: "parse_tcp"}, {Values: []uint64{ProtoUDP}, Next: "parse_udp"},
		{Values: []uint64{ProtoSCTP}, Next: "parse_sctp"}, {Values: []uint64{ProtoICMP6}, Next: "parse_icmp"}}
	if ext < MaxIPv6Ext {
		opt, frag := fmt.Sprintf("parse_ext%d_opt", ext), fmt.Sprintf("parse_ext%d_frag", ext)
		cs = append(cs, cases([]uint64{ExtHopByHop, ExtRouting, ExtDestOpts}, opt)...)
		cs = append(cs, Case{Values: []uint64{ExtFragment}, Next: frag})
	}
	return cs
}

func stdParser() []*ParserState {
	ps := []*ParserState{{Name: "start", Extract: extract("ethernet"),
		Select: []Expr{F("eth_type", "ether_type")}, Cases: ethertypeCases("parse_vlan0"), Default: Accept}}
	for i := range MaxVLANTags {
		next := fmt.Sprintf("parse_vlan%d", i+1)
		if i == MaxVLANTags-1 {
			next = Accept // a fifth tag: no network layer
		}
		ps = append(ps, &ParserState{Name: fmt.Sprintf("parse_vlan%d", i), Extract: extract(fmt.Sprint("vlan", i)),
			Select: []Expr{F(fmt.Sprintf("vlan%d_type", i), "ether_type")}, Cases: ethertypeCases(next), Default: Accept})
	}
	ihl, frag, proto := F("ipv4_vihl", "ihl"), F("ipv4_frag", "frag_offset"), F("ipv4_proto", "protocol")
	l4 := func(p uint64, next string) []Case {
		return []Case{{Values: []uint64{p, 0}, Next: next}}
	}
	v4L4 := func() []Case { // on (frag_offset, protocol): first fragments only
		var cs []Case
		cs = append(cs, l4(ProtoTCP, "parse_tcp")...)
		cs = append(cs, l4(ProtoUDP, "parse_udp")...)
		cs = append(cs, l4(ProtoSCTP, "parse_sctp")...)
		cs = append(cs, l4(ProtoICMP, "parse_icmp")...)
		for i := range cs {
			cs[i].Values = []uint64{0, cs[i].Values[0]}
		}
		return cs
	}
	// On (ihl, frag_offset, protocol): IHL 5 goes to the transport, IHL 1
	// to 4 to the rest of the TCP (UDP) header libpcap finds inside the
	// IPv4 header, 0 nowhere, 6 to 15 to the options.
	var ipv4Cases []Case
	for _, c := range v4L4() {
		ipv4Cases = append(ipv4Cases, Case{Values: append([]uint64{5}, c.Values...), Next: c.Next})
	}
	ipv4Cases = append(ipv4Cases, Case{Values: []uint64{5, 0, 0}, Masks: []uint64{0xf, 0, 0}, Next: Accept})
	for v := 1; v <= 4; v++ {
		ipv4Cases = append(ipv4Cases, Case{Values: []uint64{uint64(v), 0, ProtoTCP}, Next: fmt.Sprintf("parse_tcp_at%d", 20-4*v)})
	}
	ipv4Cases = append(ipv4Cases, Case{Values: []uint64{4, 0, ProtoUDP}, Next: "parse_udp_at4"},
		Case{Values: []uint64{0, 0, 0}, Masks: []uint64{0xc, 0, 0}, Next: Accept}, // 0..3
		Case{Values: []uint64{4, 0, 0}, Masks: []uint64{0xf, 0, 0}, Next: Accept})
	ps = append(ps,
		&ParserState{Name: "parse_ipv4", Extract: extract("ipv4"), Select: []Expr{ihl, frag, proto},
			Cases: ipv4Cases, Default: "parse_ipv4_options"},
		&ParserState{Name: "parse_ipv4_options", Extract: extract("ipv4_options"),
			VarBits: B(Shl, Cast{Bits: 32, X: B(Sub, ihl, C(5, 4))}, C(5, 32)),
			Select:  []Expr{frag, proto}, Cases: v4L4(), Default: Accept},
		&ParserState{Name: "parse_ipv6", Extract: extract("ipv6"), Select: []Expr{F("ipv6_nh", "next_hdr")},
			Cases: ipv6Next(0), Default: Accept})
	for i := range MaxIPv6Ext {
		nh := F(fmt.Sprintf("ext%d_nh", i), "next_hdr")
		name := func(s string) string { return fmt.Sprintf("ext%d_%s", i, s) }
		fragCases := ipv6Next(i + 1)
		for j := range fragCases {
			fragCases[j].Values = []uint64{0, fragCases[j].Values[0]}
		}
		ps = append(ps,
			&ParserState{Name: "parse_" + name("opt"), Extract: []string{name("nh"), name("len"), name("opt")},
				// (hdr_ext_len+1)·8 bytes, of which 2 are nh and len.
				VarBits: B(Add, B(Shl, Cast{Bits: 32, X: F(name("len"), "hdr_ext_len")}, C(6, 32)), C(48, 32)),
				Select:  []Expr{nh}, Cases: ipv6Next(i + 1), Default: Accept},
			&ParserState{Name: "parse_" + name("frag"), Extract: []string{name("nh"), name("len"), name("frag"), name("id")},
				Select: []Expr{F(name("frag"), "frag_offset"), nh}, Cases: fragCases, Default: Accept})
	}
	tcp := extract("tcp")
	ps = append(ps,
		&ParserState{Name: "parse_arp", Extract: extract("arp"), Default: Accept},
		&ParserState{Name: "parse_tcp", Extract: append(extract("l4"), tcp...), Default: Accept},
		&ParserState{Name: "parse_udp", Extract: append(extract("l4"), extract("udp")...), Default: Accept},
		&ParserState{Name: "parse_sctp", Extract: extract("l4"), Default: Accept},
		&ParserState{Name: "parse_icmp", Extract: extract("icmp"), Default: Accept},
		&ParserState{Name: "parse_udp_at4", Extract: extract("udp"), Default: Accept})
	for _, t0 := range []int{4, 8, 12, 16} {
		var from []string
		for _, c := range protoChunks["tcp"] {
			if c.offset >= t0 {
				from = append(from, c.inst)
			}
		}
		ps = append(ps, &ParserState{Name: fmt.Sprintf("parse_tcp_at%d", t0), Extract: from, Default: Accept})
	}
	return ps
}

// IPv4Chunks are the chunks of the fixed IPv4 header, in order: a packet
// whose last one is valid has them all.
var IPv4Chunks = extract("ipv4")

// IPv4ChecksumField is the IPv4 header checksum.
var IPv4ChecksumField = F("ipv4_csum", "hdr_checksum")

// Concat is xs side by side, the first the most significant (P4's ++):
// a value of their widths' sum, at most 64 bits.
func Concat(xs ...Expr) Expr {
	total := 0
	for _, x := range xs {
		total += x.Type().Bits
	}
	if len(xs) == 1 {
		return xs[0]
	}
	var out Expr
	at := total
	for _, x := range xs {
		at -= x.Type().Bits
		part := Expr(Cast{Bits: total, X: x})
		if at > 0 {
			part = B(Shl, part, C(uint64(at), total))
		}
		if out == nil {
			out = part
		} else {
			out = B(Or, out, part)
		}
	}
	return out
}

// stdFields are the values of the library that span chunks, or that
// lowerings name by their protocol's name, as match names them: the
// chunks' fields, first to last.
var stdFields = map[string][][2]string{
	"eth.dst":        {{"eth_dst_0", "dst_0"}, {"eth_dst_1", "dst_1"}},
	"eth.src":        {{"eth_src", "src"}},
	"eth.type":       {{"eth_type", "ether_type"}},
	"ipv4.version":   {{"ipv4_vihl", "version"}},
	"ipv4.ihl":       {{"ipv4_vihl", "ihl"}},
	"ipv4.tos":       {{"ipv4_tos", "diffserv"}},
	"ipv4.len":       {{"ipv4_len", "total_len"}},
	"ipv4.id":        {{"ipv4_id_0", "id_0"}, {"ipv4_id_1", "id_1"}},
	"ipv4.frag":      {{"ipv4_frag", "frag_offset"}},
	"ipv4.ttl":       {{"ipv4_ttl", "ttl"}},
	"ipv4.proto":     {{"ipv4_proto", "protocol"}},
	"ipv4.checksum":  {{"ipv4_csum", "hdr_checksum"}},
	"ipv4.src":       {{"ipv4_src_0", "src_0"}, {"ipv4_src_1", "src_1"}, {"ipv4_src_2", "src_2"}},
	"ipv4.dst":       {{"ipv4_dst_0", "dst_0"}, {"ipv4_dst_1", "dst_1"}, {"ipv4_dst_2", "dst_2"}},
	"ipv6.version":   {{"ipv6_vtf", "version"}},
	"ipv6.tc":        {{"ipv6_vtf", "traffic_class"}},
	"ipv6.plen":      {{"ipv6_plen", "payload_len"}},
	"ipv6.nh":        {{"ipv6_nh", "next_hdr"}},
	"ipv6.hlim":      {{"ipv6_hlim", "hop_limit"}},
	"ipv6.src_hi":    {{"ipv6_src_0", "src_0"}, {"ipv6_src_1", "src_1"}},
	"ipv6.src_lo":    {{"ipv6_src_2", "src_2"}, {"ipv6_src_3", "src_3"}},
	"ipv6.dst_hi":    {{"ipv6_dst_0", "dst_0"}, {"ipv6_dst_1", "dst_1"}, {"ipv6_dst_2", "dst_2"}},
	"ipv6.dst_lo":    {{"ipv6_dst_3", "dst_3"}, {"ipv6_dst_4", "dst_4"}},
	"vlan.id":        {{"vlan0_tci", "vid"}},
	"vlan.pcp":       {{"vlan0_tci", "pcp"}},
	"l4.sport":       {{"l4_sport", "src_port"}},
	"l4.dport":       {{"l4_dport", "dst_port"}},
	"tcp.seq":        {{"tcp_seq", "seq_no"}},
	"tcp.ack":        {{"tcp_ack", "ack_no"}},
	"tcp.flags":      {{"tcp_flags", "flags"}},
	"tcp.win":        {{"tcp_win", "window"}},
	"udp.len":        {{"udp_len", "length"}},
	"icmp.type":      {{"icmp_type", "icmp_type"}},
	"icmp.code":      {{"icmp_code", "code"}},
	"arp.spa":        {{"arp_spa", "spa"}},
	"arp.tpa":        {{"arp_tpa", "tpa"}},
	"ipv4.dscp_ecn":  {{"ipv4_tos", "diffserv"}},
	"ipv6.flowlabel": {{"ipv6_vtf", "flow_label"}},
}

// HdrParts returns the chunk fields a value of the standard headers is
// made of (Hdr's concatenation), most significant first: what a lowering
// assigns to write the value (a tag's ipv4.id is id_0 and id_1).
func HdrParts(name string) []Ref {
	parts, ok := stdFields[name]
	if !ok {
		panic("p4gen: the standard headers have no value " + name)
	}
	out := make([]Ref, len(parts))
	for i, p := range parts {
		out[i] = F(p[0], p[1])
	}
	return out
}

// Hdr returns a value of the standard headers by its name in stdFields
// ("ipv4.src", "tcp.flags", "ipv6.src_hi"), and the header whose validity
// says the packet has it: its last chunk. It panics on another name,
// which is a lowering's bug.
func Hdr(name string) (Expr, Valid) {
	parts, ok := stdFields[name]
	if !ok {
		panic("p4gen: the standard headers have no value " + name)
	}
	xs := make([]Expr, len(parts))
	for i, p := range parts {
		xs[i] = F(p[0], p[1])
	}
	return Concat(xs...), Valid{Header: parts[len(parts)-1][0]}
}
