package p4gen

// The header library and parser every program starts from (NewProgram):
// Ethernet, up to two VLAN tags, IPv4 with its options, IPv6 without
// extension headers, TCP, UDP and ICMP. An IPv6 address is two 64-bit
// fields (hi, lo), so that every value fits 64 bits.
var (
	Ethernet = &HeaderType{Name: "ethernet_t", Fields: []Field{
		{Name: "dst_addr", Bits: 48}, {Name: "src_addr", Bits: 48}, {Name: "ether_type", Bits: 16}}}
	VLAN = &HeaderType{Name: "vlan_t", Fields: []Field{
		{Name: "pcp", Bits: 3}, {Name: "dei", Bits: 1}, {Name: "vid", Bits: 12}, {Name: "ether_type", Bits: 16}}}
	IPv4 = &HeaderType{Name: "ipv4_t", Fields: []Field{
		{Name: "version", Bits: 4}, {Name: "ihl", Bits: 4}, {Name: "diffserv", Bits: 8}, {Name: "total_len", Bits: 16},
		{Name: "identification", Bits: 16}, {Name: "flags", Bits: 3}, {Name: "frag_offset", Bits: 13},
		{Name: "ttl", Bits: 8}, {Name: "protocol", Bits: 8}, {Name: "hdr_checksum", Bits: 16},
		{Name: "src_addr", Bits: 32}, {Name: "dst_addr", Bits: 32}}}
	IPv4Options = &HeaderType{Name: "ipv4_options_t", Fields: []Field{{Name: "options", Bits: 320, Var: true}}}
	IPv6        = &HeaderType{Name: "ipv6_t", Fields: []Field{
		{Name: "version", Bits: 4}, {Name: "traffic_class", Bits: 8}, {Name: "flow_label", Bits: 20},
		{Name: "payload_len", Bits: 16}, {Name: "next_hdr", Bits: 8}, {Name: "hop_limit", Bits: 8},
		{Name: "src_hi", Bits: 64}, {Name: "src_lo", Bits: 64}, {Name: "dst_hi", Bits: 64}, {Name: "dst_lo", Bits: 64}}}
	TCP = &HeaderType{Name: "tcp_t", Fields: []Field{
		{Name: "src_port", Bits: 16}, {Name: "dst_port", Bits: 16}, {Name: "seq_no", Bits: 32}, {Name: "ack_no", Bits: 32},
		{Name: "data_offset", Bits: 4}, {Name: "res", Bits: 4}, {Name: "flags", Bits: 8}, {Name: "window", Bits: 16},
		{Name: "checksum", Bits: 16}, {Name: "urgent_ptr", Bits: 16}}}
	UDP = &HeaderType{Name: "udp_t", Fields: []Field{
		{Name: "src_port", Bits: 16}, {Name: "dst_port", Bits: 16}, {Name: "length", Bits: 16}, {Name: "checksum", Bits: 16}}}
	ICMP = &HeaderType{Name: "icmp_t", Fields: []Field{
		{Name: "icmp_type", Bits: 8}, {Name: "code", Bits: 8}, {Name: "checksum", Bits: 16}}}
)

// F returns the Ref of field name of header h in the standard library
// ("ipv4", "protocol" → hdr.ipv4.protocol, bit<8>); it panics on a name
// the library lacks, which is a lowering's bug.
func F(h, name string) Ref {
	for _, x := range stdHeaders() {
		if x.Name == h {
			if f, ok := x.Type.Field(name); ok && !f.Var {
				return Ref{Path: "hdr." + h + "." + name, Bits: f.Bits}
			}
		}
	}
	panic("p4gen: the standard headers have no field " + h + "." + name)
}

func stdHeaders() []*Header {
	return []*Header{{"ethernet", Ethernet}, {"vlan0", VLAN}, {"vlan1", VLAN}, {"ipv4", IPv4},
		{"ipv4_options", IPv4Options}, {"ipv6", IPv6}, {"tcp", TCP}, {"udp", UDP}, {"icmp", ICMP}}
}

// NewProgram returns a program named name with the standard headers, their
// parser and deparser, and nothing else: the flowspace adds the functions.
func NewProgram(name string) *Program {
	p := &Program{Name: name,
		HeaderTypes: []*HeaderType{Ethernet, VLAN, IPv4, IPv4Options, IPv6, TCP, UDP, ICMP},
		Headers:     stdHeaders(),
		Deparse:     []string{"ethernet", "vlan0", "vlan1", "ipv4", "ipv4_options", "ipv6", "tcp", "udp", "icmp"},
	}
	ethertype := func(next0 string) []Case {
		return []Case{{Values: []uint64{0x8100}, Next: next0}, {Values: []uint64{0x88a8}, Next: next0},
			{Values: []uint64{0x0800}, Next: "parse_ipv4"}, {Values: []uint64{0x86dd}, Next: "parse_ipv6"}}
	}
	l4 := func() []Case {
		return []Case{{Values: []uint64{6}, Next: "parse_tcp"}, {Values: []uint64{17}, Next: "parse_udp"},
			{Values: []uint64{1}, Next: "parse_icmp"}}
	}
	ihl := F("ipv4", "ihl")
	p.Parser = []*ParserState{
		{Name: "start", Extract: []string{"ethernet"}, Select: []Expr{F("ethernet", "ether_type")},
			Cases: ethertype("parse_vlan0"), Default: Accept},
		{Name: "parse_vlan0", Extract: []string{"vlan0"}, Select: []Expr{Ref{Path: "hdr.vlan0.ether_type", Bits: 16}},
			Cases: ethertype("parse_vlan1"), Default: Accept},
		{Name: "parse_vlan1", Extract: []string{"vlan1"}, Select: []Expr{Ref{Path: "hdr.vlan1.ether_type", Bits: 16}},
			Cases: ethertype(Accept)[2:], Default: Accept},
		// IPv4: options when ihl > 5; a bogus ihl (< 5) ends parsing at the
		// IP header, and a fragment other than the first carries no
		// transport header.
		{Name: "parse_ipv4", Extract: []string{"ipv4"}, Select: []Expr{ihl, F("ipv4", "frag_offset")},
			Cases: []Case{
				{Values: []uint64{0, 0}, Masks: []uint64{0xc, 0}, Next: Accept}, // ihl 0..3
				{Values: []uint64{4, 0}, Masks: []uint64{0xf, 0}, Next: Accept}, // ihl 4
				{Values: []uint64{5, 0}, Masks: []uint64{0xf, 0x1fff}, Next: "parse_ipv4_l4"},
				{Values: []uint64{5, 0}, Masks: []uint64{0xf, 0}, Next: Accept},
				{Values: []uint64{0, 0}, Masks: []uint64{0, 0}, Next: "parse_ipv4_options"},
			}, Default: Accept},
		{Name: "parse_ipv4_options", Extract: []string{"ipv4_options"},
			VarBits: B(Shl, Cast{Bits: 32, X: B(Sub, ihl, C(5, 4))}, C(5, 32)),
			Select:  []Expr{F("ipv4", "frag_offset")},
			Cases:   []Case{{Values: []uint64{0}, Next: "parse_ipv4_l4"}}, Default: Accept},
		{Name: "parse_ipv4_l4", Select: []Expr{F("ipv4", "protocol")}, Cases: l4(), Default: Accept},
		{Name: "parse_ipv6", Extract: []string{"ipv6"}, Select: []Expr{F("ipv6", "next_hdr")},
			Cases: l4()[:2], Default: Accept},
		{Name: "parse_tcp", Extract: []string{"tcp"}, Default: Accept},
		{Name: "parse_udp", Extract: []string{"udp"}, Default: Accept},
		{Name: "parse_icmp", Extract: []string{"icmp"}, Default: Accept},
	}
	return p
}
