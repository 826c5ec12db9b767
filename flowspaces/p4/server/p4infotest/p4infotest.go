// Package p4infotest writes the P4Info of a p4gen.Program for the tests
// of the P4Runtime server and of `ffpf p4 switch`, after the conventions
// of the P4 switch flowspace: names qualified by the control that
// declares them (ffpf_ingress.cms_2_row0), a digest named by its struct
// type, the controller headers as ControllerPacketMetadata. IDs carry
// p4c's prefix byte, with a sequence number below it rather than p4c's
// hash of the name: the server maps entities by name and never computes
// an id.
//
// The sharp edge: this is a stand-in for tests. The flowspace's own
// P4Info (functions/p4gen's, with p4c's ids) is what a controller
// pushes.
package p4infotest

import (
	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The P4Info prefix bytes (p4info.proto's P4Ids.Prefix).
const (
	prefixAction     = 0x01
	prefixTable      = 0x02
	prefixCounter    = 0x12
	prefixController = 0x04
	prefixRegister   = 0x16
	prefixDigest     = 0x17
)

// P4Info returns prog's P4Info.
func P4Info(prog *p4gen.Program) *p4cfg.P4Info {
	n := uint32(0)
	id := func(prefix uint32) uint32 {
		n++
		return prefix<<24 | n
	}
	ctl := map[any]string{}
	var walk func([]p4gen.Stmt, string)
	walk = func(ss []p4gen.Stmt, c string) {
		for _, s := range ss {
			switch s := s.(type) {
			case p4gen.If:
				walk(s.Then, c)
				walk(s.Else, c)
			case p4gen.Apply:
				ctl[s.Table] = c
				for _, a := range s.Table.Actions {
					ctl[a] = c
					walk(a.Body, c)
				}
				ctl[s.Table.Default] = c
				walk(s.Table.Default.Body, c)
			case p4gen.Call:
				ctl[s.Action] = c
				walk(s.Action.Body, c)
			case p4gen.RMW:
				ctl[s.Reg] = c
			case p4gen.Count:
				ctl[s.Counter] = c
			}
		}
	}
	walk(prog.Ingress, "ffpf_ingress")
	walk(prog.Egress, "ffpf_egress")
	qualify := func(obj any, name string) string {
		c, ok := ctl[obj]
		if !ok {
			c = "ffpf_ingress"
		}
		return c + "." + name
	}
	info := &p4cfg.P4Info{PkgInfo: &p4cfg.PkgInfo{Arch: "v1model"}, TypeInfo: &p4cfg.P4TypeInfo{Structs: map[string]*p4cfg.P4StructTypeSpec{}}}
	actionIDs := map[*p4gen.Action]uint32{}
	for _, a := range prog.Actions {
		pa := &p4cfg.Action{Preamble: &p4cfg.Preamble{Id: id(prefixAction), Name: qualify(a, a.Name)}}
		for i, f := range a.Params {
			pa.Params = append(pa.Params, &p4cfg.Action_Param{Id: uint32(i + 1), Name: f.Name, Bitwidth: int32(f.Bits)})
		}
		actionIDs[a] = pa.Preamble.Id
		info.Actions = append(info.Actions, pa)
	}
	kinds := map[p4gen.MatchKind]p4cfg.MatchField_MatchType{p4gen.Exact: p4cfg.MatchField_EXACT,
		p4gen.Ternary: p4cfg.MatchField_TERNARY, p4gen.LPM: p4cfg.MatchField_LPM, p4gen.Range: p4cfg.MatchField_RANGE}
	for _, t := range prog.Tables {
		pt := &p4cfg.Table{Preamble: &p4cfg.Preamble{Id: id(prefixTable), Name: qualify(t, t.Name)}, Size: int64(t.Size), IsConstTable: t.Const}
		for i, k := range t.Keys {
			name := "key"
			switch x := k.X.(type) {
			case p4gen.Ref:
				name = x.Path
			case p4gen.Valid:
				name = "hdr." + x.Header + ".$valid$"
			}
			pt.MatchFields = append(pt.MatchFields, &p4cfg.MatchField{Id: uint32(i + 1), Name: name,
				Bitwidth: int32(max(k.X.Type().Bits, 1)), Match: &p4cfg.MatchField_MatchType_{MatchType: kinds[k.Match]}})
		}
		refs := map[*p4gen.Action]bool{}
		for _, a := range append(append([]*p4gen.Action(nil), t.Actions...), t.Default) {
			if !refs[a] {
				refs[a] = true
				pt.ActionRefs = append(pt.ActionRefs, &p4cfg.ActionRef{Id: actionIDs[a]})
			}
		}
		info.Tables = append(info.Tables, pt)
	}
	bit := func(w int) *p4cfg.P4DataTypeSpec {
		return &p4cfg.P4DataTypeSpec{TypeSpec: &p4cfg.P4DataTypeSpec_Bitstring{Bitstring: &p4cfg.P4BitstringLikeTypeSpec{
			TypeSpec: &p4cfg.P4BitstringLikeTypeSpec_Bit{Bit: &p4cfg.P4BitTypeSpec{Bitwidth: int32(w)}}}}}
	}
	for _, r := range prog.Registers {
		info.Registers = append(info.Registers, &p4cfg.Register{Preamble: &p4cfg.Preamble{Id: id(prefixRegister), Name: qualify(r, r.Name)},
			TypeSpec: bit(r.Width), Size: int32(r.Size)})
	}
	units := map[p4gen.CounterType]p4cfg.CounterSpec_Unit{p4gen.Packets: p4cfg.CounterSpec_PACKETS,
		p4gen.Bytes: p4cfg.CounterSpec_BYTES, p4gen.PacketsAndBytes: p4cfg.CounterSpec_BOTH}
	for _, c := range prog.Counters {
		info.Counters = append(info.Counters, &p4cfg.Counter{Preamble: &p4cfg.Preamble{Id: id(prefixCounter), Name: qualify(c, c.Name)},
			Spec: &p4cfg.CounterSpec{Unit: units[c.Type]}, Size: int64(c.Size)})
	}
	for _, d := range prog.Digests {
		st := &p4cfg.P4StructTypeSpec{}
		for _, f := range d.Fields {
			st.Members = append(st.Members, &p4cfg.P4StructTypeSpec_Member{Name: f.Name, TypeSpec: bit(f.Bits)})
		}
		info.TypeInfo.Structs[d.Name] = st
		info.Digests = append(info.Digests, &p4cfg.Digest{Preamble: &p4cfg.Preamble{Id: id(prefixDigest), Name: d.Name},
			TypeSpec: &p4cfg.P4DataTypeSpec{TypeSpec: &p4cfg.P4DataTypeSpec_Struct{Struct: &p4cfg.P4NamedType{Name: d.Name}}}})
	}
	for _, h := range prog.HeaderTypes {
		if h.Controller == "" {
			continue
		}
		cpm := &p4cfg.ControllerPacketMetadata{Preamble: &p4cfg.Preamble{Id: id(prefixController), Name: h.Controller}}
		for i, f := range h.Fields {
			cpm.Metadata = append(cpm.Metadata, &p4cfg.ControllerPacketMetadata_Metadata{Id: uint32(i + 1), Name: f.Name, Bitwidth: int32(f.Bits)})
		}
		info.ControllerPacketMetadata = append(info.ControllerPacketMetadata, cpm)
	}
	return info
}

// Switch is a small program for tests of a switch, with every kind of
// object a controller touches: packets from the CPU port carry a
// packet_out header naming their egress port; others go by route (exact
// on the IPv4 destination: fwd, drop or to_cpu; drop on a miss), then,
// for UDP, acl (ternary protocol and a range of destination ports, with
// priorities: fwd or to_cpu); a UDP packet to port 53 counts in a
// register cell per source port mod 16 and in a counter, sends a digest
// {source port, the cell's count} and a clone to session 1. Packets to
// the CPU port (255) get a packet_in header with their ingress port.
func Switch() *p4gen.Program {
	p := p4gen.NewProgram("switch")
	in := &p4gen.HeaderType{Name: "packet_in_t", Fields: []p4gen.Field{{Name: "ingress_port", Bits: 9}, {Name: "pad", Bits: 7}}, Controller: p4gen.ControllerPacketIn}
	out := &p4gen.HeaderType{Name: "packet_out_t", Fields: []p4gen.Field{{Name: "egress_port", Bits: 9}, {Name: "pad", Bits: 7}}, Controller: p4gen.ControllerPacketOut}
	p.HeaderTypes = append(p.HeaderTypes, in, out)
	p.Headers = append(p.Headers, &p4gen.Header{Name: "packet_in", Type: in}, &p4gen.Header{Name: "packet_out", Type: out})
	p.Deparse = append([]string{"packet_in"}, p.Deparse...)
	p.Parser[0].Name = "parse_ethernet"
	p.Parser = append([]*p4gen.ParserState{
		{Name: "start", Select: []p4gen.Expr{p4gen.Std("ingress_port")},
			Cases: []p4gen.Case{{Values: []uint64{255}, Next: "parse_packet_out"}}, Default: "parse_ethernet"},
		{Name: "parse_packet_out", Extract: []string{"packet_out"}, Default: "parse_ethernet"}}, p.Parser...)
	b := &p4gen.Builder{Prog: p, ID: "sw#1", Prefix: "sw_1", In: p4gen.True}
	idx := b.Meta("idx", 32)
	now := b.Meta("now", 32)
	reg := b.Register("cells", 32, 16, "cells", 0)
	ctr := b.Counter("seen", 1, p4gen.PacketsAndBytes, "packets", "bytes", 0)
	dg := b.Digest("d", []p4gen.Field{{Name: "port", Bits: 16}, {Name: "count", Bits: 32}})
	spec := p4gen.Std("egress_spec")
	fwd := b.Action("fwd", []p4gen.Field{{Name: "port", Bits: 9}}, p4gen.Assign{Dst: spec, X: p4gen.Ref{Path: "port", Bits: 9}})
	drop := b.Action("drop", nil, p4gen.MarkToDrop{})
	cpu := b.Action("to_cpu", nil, p4gen.Assign{Dst: spec, X: p4gen.C(255, 9)})
	nop := b.Action("nop", nil)
	dst, _ := p4gen.Hdr("ipv4.dst")
	route := b.Table(&p4gen.Table{Name: "route", Keys: []p4gen.TableKey{{X: dst, Match: p4gen.Exact}},
		Actions: []*p4gen.Action{fwd, drop, cpu}, Default: drop, Size: 1024})
	acl := b.Table(&p4gen.Table{Name: "acl", Keys: []p4gen.TableKey{{X: p4gen.F("ipv4_proto", "protocol"), Match: p4gen.Ternary},
		{X: p4gen.F("l4_dport", "dst_port"), Match: p4gen.Range}}, Actions: []*p4gen.Action{fwd, cpu, nop}, Default: nop, Size: 64})
	sport := p4gen.F("l4_sport", "src_port")
	udp := p4gen.Valid{Header: "udp_csum"} // the UDP header's last chunk
	p.Ingress = []p4gen.Stmt{p4gen.If{Cond: p4gen.Valid{Header: "packet_out"},
		Then: []p4gen.Stmt{p4gen.Assign{Dst: spec, X: p4gen.Ref{Path: "hdr.packet_out.egress_port", Bits: 9}},
			p4gen.SetValid{Header: "packet_out", Valid: false}},
		Else: []p4gen.Stmt{
			p4gen.Apply{Table: route},
			p4gen.If{Cond: udp, Then: []p4gen.Stmt{p4gen.Apply{Table: acl}}},
			p4gen.If{Cond: p4gen.AllOf(udp, p4gen.B(p4gen.Eq, p4gen.F("l4_dport", "dst_port"), p4gen.C(53, 16))), Then: []p4gen.Stmt{
				p4gen.Hash{Dst: idx, Algo: p4gen.Identity, Data: []p4gen.Expr{sport}, Max: 16},
				p4gen.RMW{Reg: reg, Index: idx, New: p4gen.B(p4gen.Add, p4gen.Old{Bits: 32}, p4gen.C(1, 32)), NewTo: &now},
				p4gen.Count{Counter: ctr, Index: p4gen.C(0, 32)},
				p4gen.Digest{Type: dg, Values: []p4gen.Expr{sport, now}},
				p4gen.Clone{Session: 1},
			}},
		}}}
	p.Egress = []p4gen.Stmt{p4gen.If{Cond: p4gen.B(p4gen.Eq, p4gen.Std("egress_port"), p4gen.C(255, 9)), Then: []p4gen.Stmt{
		p4gen.SetValid{Header: "packet_in", Valid: true},
		p4gen.Assign{Dst: p4gen.Ref{Path: "hdr.packet_in.ingress_port", Bits: 9}, X: p4gen.Std("ingress_port")},
	}}}
	if err := p.Validate(); err != nil {
		panic("p4infotest: Switch: " + err.Error())
	}
	return p
}
