package p4gen

import (
	"os"
	"path/filepath"
	"testing"
)

// testPrograms are programs built with the Builder that together use every
// statement, expression, match kind, hash algorithm and counter type of
// the IR, in ingress, egress and actions: what the printer, the P4Info and
// the differential test of the printed program run on (beside the golden
// files of the class lowerings, when there are some in testdata).
func testPrograms(t *testing.T) map[string]*Program {
	t.Helper()
	out := map[string]*Program{}
	out["everything"] = allNodes(t)
	out["tables"] = tables(t)
	out["std"] = foldStd(t)
	return out
}

// The test programs other than std read header fields of a header
// library of their own (Ethernet, two VLAN tags, IPv4 with options as a
// varbit, IPv6, TCP, UDP, ICMP), so that they do not change when the
// standard library does.
var (
	tEth  = &HeaderType{Name: "eth_t", Fields: []Field{{Name: "dst", Bits: 48}, {Name: "src", Bits: 48}, {Name: "ether_type", Bits: 16}}}
	tVLAN = &HeaderType{Name: "vlan_t", Fields: []Field{{Name: "pcp", Bits: 3}, {Name: "dei", Bits: 1}, {Name: "vid", Bits: 12}, {Name: "ether_type", Bits: 16}}}
	tIPv4 = &HeaderType{Name: "ipv4_t", Fields: []Field{{Name: "version", Bits: 4}, {Name: "ihl", Bits: 4}, {Name: "diffserv", Bits: 8},
		{Name: "total_len", Bits: 16}, {Name: "identification", Bits: 16}, {Name: "flags", Bits: 3}, {Name: "frag_offset", Bits: 13},
		{Name: "ttl", Bits: 8}, {Name: "protocol", Bits: 8}, {Name: "hdr_checksum", Bits: 16}, {Name: "src_addr", Bits: 32}, {Name: "dst_addr", Bits: 32}}}
	tOpts = &HeaderType{Name: "ipv4_options_t", Fields: []Field{{Name: "options", Bits: 320, Var: true}}}
	tIPv6 = &HeaderType{Name: "ipv6_t", Fields: []Field{{Name: "version", Bits: 4}, {Name: "traffic_class", Bits: 8}, {Name: "flow_label", Bits: 20},
		{Name: "payload_len", Bits: 16}, {Name: "next_hdr", Bits: 8}, {Name: "hop_limit", Bits: 8},
		{Name: "src_hi", Bits: 64}, {Name: "src_lo", Bits: 64}, {Name: "dst_hi", Bits: 64}, {Name: "dst_lo", Bits: 64}}}
	tTCP = &HeaderType{Name: "tcp_t", Fields: []Field{{Name: "src_port", Bits: 16}, {Name: "dst_port", Bits: 16}, {Name: "seq_no", Bits: 32},
		{Name: "ack_no", Bits: 32}, {Name: "data_offset", Bits: 4}, {Name: "res", Bits: 4}, {Name: "flags", Bits: 8}, {Name: "window", Bits: 16},
		{Name: "checksum", Bits: 16}, {Name: "urgent_ptr", Bits: 16}}}
	tUDP  = &HeaderType{Name: "udp_t", Fields: []Field{{Name: "src_port", Bits: 16}, {Name: "dst_port", Bits: 16}, {Name: "length", Bits: 16}, {Name: "checksum", Bits: 16}}}
	tICMP = &HeaderType{Name: "icmp_t", Fields: []Field{{Name: "icmp_type", Bits: 8}, {Name: "code", Bits: 8}, {Name: "checksum", Bits: 16}}}
)

// testLib returns a program with the test header library and its parser.
func testLib(name string) *Program {
	p := &Program{Name: name, HeaderTypes: []*HeaderType{tEth, tVLAN, tIPv4, tOpts, tIPv6, tTCP, tUDP, tICMP},
		Headers: []*Header{{"ethernet", tEth}, {"vlan0", tVLAN}, {"vlan1", tVLAN}, {"ipv4", tIPv4}, {"ipv4_options", tOpts},
			{"ipv6", tIPv6}, {"tcp", tTCP}, {"udp", tUDP}, {"icmp", tICMP}},
		Deparse: []string{"ethernet", "vlan0", "vlan1", "ipv4", "ipv4_options", "ipv6", "tcp", "udp", "icmp"}}
	ethertype := func(vlan string) []Case {
		return []Case{{Values: []uint64{0x8100}, Next: vlan}, {Values: []uint64{0x88a8}, Next: vlan},
			{Values: []uint64{0x0800}, Next: "parse_ipv4"}, {Values: []uint64{0x86dd}, Next: "parse_ipv6"}}
	}
	l4 := []Case{{Values: []uint64{6}, Next: "parse_tcp"}, {Values: []uint64{17}, Next: "parse_udp"}, {Values: []uint64{1}, Next: "parse_icmp"}}
	ihl, frag := fld(p, "ipv4", "ihl"), fld(p, "ipv4", "frag_offset")
	p.Parser = []*ParserState{
		{Name: "start", Extract: []string{"ethernet"}, Select: []Expr{fld(p, "ethernet", "ether_type")}, Cases: ethertype("parse_vlan0"), Default: Accept},
		{Name: "parse_vlan0", Extract: []string{"vlan0"}, Select: []Expr{fld(p, "vlan0", "ether_type")}, Cases: ethertype("parse_vlan1"), Default: Accept},
		{Name: "parse_vlan1", Extract: []string{"vlan1"}, Select: []Expr{fld(p, "vlan1", "ether_type")}, Cases: ethertype(Reject)[2:], Default: Accept},
		{Name: "parse_ipv4", Extract: []string{"ipv4"}, Select: []Expr{ihl, frag}, Cases: []Case{
			{Values: []uint64{0, 0}, Masks: []uint64{0xc, 0}, Next: Reject},
			{Values: []uint64{4, 0}, Masks: []uint64{0xf, 0}, Next: Accept},
			{Values: []uint64{5, 0}, Masks: []uint64{0xf, 0x1fff}, Next: "parse_ipv4_l4"},
			{Values: []uint64{5, 0}, Masks: []uint64{0xf, 0}, Next: Accept},
			{Values: []uint64{0, 0}, Masks: []uint64{0, 0}, Next: "parse_ipv4_options"}}, Default: Accept},
		{Name: "parse_ipv4_options", Extract: []string{"ipv4_options"}, VarBits: B(Shl, Cast{Bits: 32, X: B(Sub, ihl, C(5, 4))}, C(5, 32)),
			Select: []Expr{frag}, Cases: []Case{{Values: []uint64{0}, Next: "parse_ipv4_l4"}}, Default: Accept},
		{Name: "parse_ipv4_l4", Select: []Expr{fld(p, "ipv4", "protocol")}, Cases: l4, Default: Accept},
		{Name: "parse_ipv6", Extract: []string{"ipv6"}, Select: []Expr{fld(p, "ipv6", "next_hdr")}, Cases: l4[:2], Default: Accept},
		{Name: "parse_tcp", Extract: []string{"tcp"}, Default: Accept},
		{Name: "parse_udp", Extract: []string{"udp"}, Default: Accept},
		{Name: "parse_icmp", Extract: []string{"icmp"}, Default: Accept},
	}
	return p
}

// fld returns hdr.<h>.<name> of p.
func fld(p *Program, h, name string) Ref {
	f, ok := p.Header(h).Type.Field(name)
	if !ok {
		panic("no field " + h + "." + name)
	}
	return Ref{Path: "hdr." + h + "." + name, Bits: f.Bits}
}

// foldStd runs the standard library's parser (NewProgram, whatever its
// headers are): it counts each header's validity and folds every field it
// can read into a value it digests, so that a parser the interpreter runs
// differently from Exec shows.
func foldStd(t *testing.T) *Program {
	t.Helper()
	p := NewProgram("std")
	p.UpdateIPv4Checksum = true
	b := &Builder{Prog: p, ID: "s#3", Prefix: "s_3", In: True}
	sig := b.Meta("sig", 64)
	h := b.Meta("h", 32)
	seen := b.Counter("valid", len(p.Headers), Packets, "valid", "", 0)
	d := b.Digest("fields", []Field{{Name: "sig", Bits: 64}, {Name: "h", Bits: 32}})
	for i, hd := range p.Headers {
		var fold []Stmt
		for _, f := range hd.Type.Fields {
			if f.Var {
				continue
			}
			fold = append(fold, Assign{Dst: sig, X: B(Add, B(Shl, sig, C(1, 64)), Cast{Bits: 64, X: Ref{Path: "hdr." + hd.Name + "." + f.Name, Bits: f.Bits}})})
		}
		b.Add(If{Cond: Valid{hd.Name}, Then: append([]Stmt{Count{Counter: seen, Index: C(uint64(i), 32)}}, fold...)})
	}
	b.Add(Hash{Dst: h, Algo: CRC32, Data: []Expr{sig}}, Digest{Type: d, Values: []Expr{sig, h}}, Assign{Dst: Std("egress_spec"), X: C(1, 9)})
	p.Ingress = b.Body
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// allNodes uses each statement and expression kind at least once.
func allNodes(t *testing.T) *Program {
	t.Helper()
	p := testLib("everything")
	b := &Builder{Prog: p, ID: "e#1", Prefix: "e_1", In: True}
	h32 := b.Meta("h32", 32)
	h16 := b.Meta("h16", 16)
	h8 := b.Meta("h8", 8)
	old := b.Meta("old", 16)
	nw := b.Meta("new", 16)
	rnd := b.Meta("rnd", 8)
	wide := b.Meta("wide", 64)
	flag := b.Meta("flag", 1)
	r16 := b.Register("r16", 16, 64, "r16", 0)
	r64 := b.Register("r64", 64, 4, "r64", 0)
	r1 := b.Register("r1", 1, 8, "r1", 0)
	rEg := b.Register("eg", 32, 4, "eg", 0)
	cp := b.Counter("cp", 8, Packets, "p", "", 0)
	cb := b.Counter("cb", 2, Bytes, "", "b", 0)
	cEg := b.Counter("ceg", 4, PacketsAndBytes, "p", "b", 0)
	dg := b.Digest("d", []Field{{Name: "src", Bits: 32}, {Name: "v", Bits: 16}, {Name: "f", Bits: 1}})
	ttl := fld(p, "ipv4", "ttl")
	src := fld(p, "ipv4", "src_addr")
	dst := fld(p, "ipv4", "dst_addr")
	sport := fld(p, "tcp", "src_port")
	fwd := b.Action("fwd", []Field{{Name: "port", Bits: 9}, {Name: "tag", Bits: 8}},
		Assign{Dst: Std("egress_spec"), X: Ref{Path: "port", Bits: 9}},
		Assign{Dst: fld(p, "ipv4", "diffserv"), X: Ref{Path: "tag", Bits: 8}},
		Random{Dst: rnd, Lo: 3, Hi: 200},
		RMW{Reg: r1, Index: C(2, 32), New: Unary{Op: Inv, X: Old{1}}},
	)
	drop := b.Action("drop", nil, MarkToDrop{})
	stamp := b.Action("stamp", []Field{{Name: "v", Bits: 16}},
		SetValid{Header: "udp", Valid: true},
		Assign{Dst: fld(p, "udp", "src_port"), X: Ref{Path: "v", Bits: 16}},
		Assign{Dst: fld(p, "udp", "dst_port"), X: B(SatAdd, Ref{Path: "v", Bits: 16}, C(0xfff0, 16))},
	)
	b.Add(
		Assign{Dst: flag, X: Cast{Bits: 1, X: Valid{"tcp"}}},
		If{Cond: Valid{"ipv4"}, Then: []Stmt{
			Hash{Dst: h32, Algo: CRC32, Data: []Expr{src, dst, C(7, 8)}},
			Hash{Dst: h16, Algo: CRC16, Base: 5, Data: []Expr{src}, Max: 1000},
			Hash{Dst: h8, Algo: CRC32, Base: 300, Data: []Expr{dst}},
			Hash{Dst: wide, Algo: Identity, Data: []Expr{src, C(0, 8)}},
			RMW{Reg: r16, Index: Cast{Bits: 32, X: Slice{X: h32, Hi: 5, Lo: 0}},
				New:   B(Add, Old{16}, Cast{Bits: 16, X: ttl}),
				Cond:  B(LAnd, B(Lt, Old{16}, C(60000, 16)), Unary{Op: Not, X: B(Eq, ttl, C(0, 8))}),
				OldTo: &old, NewTo: &nw},
			RMW{Reg: r64, Index: B(And, h32, C(3, 32)), New: Mux{Cond: B(Gt, Old{64}, wide), Then: Old{64}, Else: wide}},
			Count{Counter: cp, Index: B(Shr, h32, C(29, 32))},
			Count{Counter: cb, Index: Cast{Bits: 32, X: flag}},
			If{Cond: B(Ge, ttl, C(64, 8)), Then: []Stmt{
				Call{Action: fwd, Args: []Expr{C(3, 9), B(Xor, ttl, C(0x5a, 8))}},
			}, Else: []Stmt{If{Cond: B(LOr, B(Le, ttl, C(2, 8)), B(Ne, B(Or, h8, C(1, 8)), C(0x81, 8))), Then: []Stmt{
				Call{Action: drop},
			}, Else: []Stmt{
				Assign{Dst: Std("egress_spec"), X: Cast{Bits: 9, X: B(Shl, Cast{Bits: 16, X: ttl}, C(1, 16))}},
			}}}},
			Digest{Type: dg, Values: []Expr{B(Sub, src, dst), nw, flag}},
			If{Cond: B(Eq, Slice{X: src, Hi: 7, Lo: 0}, C(1, 8)), Then: []Stmt{Clone{Session: 5}, Clone{Session: 9}}},
		}, Else: []Stmt{
			Call{Action: stamp, Args: []Expr{C(4242, 16)}},
			SetValid{Header: "udp", Valid: false},
			Assign{Dst: Std("egress_spec"), X: C(1, 9)},
		}},
		If{Cond: B(LAnd, Valid{"tcp"}, B(Eq, sport, C(22, 16))), Then: []Stmt{MarkToDrop{}}},
	)
	p.Ingress = b.Body
	p.Egress = []Stmt{
		If{Cond: B(Eq, Std("instance_type"), C(InstanceCloneI2E, 32)), Then: []Stmt{
			RMW{Reg: rEg, Index: C(1, 32), New: B(Add, Old{32}, C(1, 32))},
			Count{Counter: cEg, Index: Cast{Bits: 32, X: Std("egress_port")}},
		}, Else: []Stmt{
			Count{Counter: cEg, Index: C(0, 32)},
			If{Cond: B(Eq, Std("egress_port"), C(4, 9)), Then: []Stmt{MarkToDrop{}}},
		}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// tables has tables of every match kind, const and installed, with
// action parameters and default arguments.
func tables(t *testing.T) *Program {
	t.Helper()
	p := testLib("tables")
	b := &Builder{Prog: p, ID: "t#2", Prefix: "t_2", In: True}
	class := b.Meta("class", 8)
	set := b.Action("set", []Field{{Name: "c", Bits: 8}}, Assign{Dst: class, X: Ref{Path: "c", Bits: 8}})
	nop := b.Action("nop", nil)
	out := b.Action("out", []Field{{Name: "port", Bits: 9}}, Assign{Dst: Std("egress_spec"), X: Ref{Path: "port", Bits: 9}})
	proto := fld(p, "ipv4", "protocol")
	dport := fld(p, "tcp", "dst_port")
	lpm := b.Table(&Table{Name: "routes", Keys: []TableKey{{X: fld(p, "ipv4", "dst_addr"), Match: LPM}},
		Actions: []*Action{out}, Default: out, DefaultArgs: []uint64{7}, Size: 16, Const: true,
		Entries: []Entry{
			{Match: []Match{{Value: 0x0a000000, PrefixLen: 8}}, Action: out, Args: []uint64{1}},
			{Match: []Match{{Value: 0x0a000100, PrefixLen: 24}}, Action: out, Args: []uint64{2}},
			{Match: []Match{{Value: 0, PrefixLen: 0}}, Action: out, Args: []uint64{3}},
		}})
	acl := b.Table(&Table{Name: "acl", Keys: []TableKey{{X: proto, Match: Ternary}, {X: dport, Match: Range}, {X: Valid{"tcp"}, Match: Exact}},
		Actions: []*Action{set}, Default: nop, Size: 64, Const: true,
		Entries: []Entry{
			{Match: []Match{{Value: 6, Mask: 0xff}, {Lo: 0, Hi: 1023}, {Value: 1}}, Priority: 1, Action: set, Args: []uint64{1}},
			{Match: []Match{{Value: 0, Mask: 0}, {Lo: 80, Hi: 80}, {Value: 1}}, Priority: 10, Action: set, Args: []uint64{2}},
			{Match: []Match{{Value: 17, Mask: 0xff}, {Lo: 0, Hi: 0xffff}, {Value: 0}}, Priority: 5, Action: set, Args: []uint64{3}},
		}})
	installed := b.Table(&Table{Name: "ports", Keys: []TableKey{{X: Std("ingress_port"), Match: Exact}, {X: proto, Match: Ternary}},
		Actions: []*Action{set, nop}, Default: set, DefaultArgs: []uint64{9}, Size: 32})
	b.Add(
		Apply{Table: installed},
		If{Cond: Valid{"ipv4"}, Then: []Stmt{Apply{Table: acl}, Apply{Table: lpm}}},
		If{Cond: B(Eq, class, C(2, 8)), Then: []Stmt{Assign{Dst: fld(p, "ipv4", "ttl"), X: B(Sub, fld(p, "ipv4", "ttl"), C(1, 8))}}},
	)
	p.Ingress = b.Body
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// golden returns the P4 golden files of the class lowerings
// (testdata/*.p4), by name.
func golden(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.p4"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = b
	}
	return out
}
