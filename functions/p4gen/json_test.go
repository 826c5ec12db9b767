package p4gen

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// everyDecl is a program with every kind of declaration, statement and
// expression the IR has.
func everyDecl(t *testing.T) *Program {
	t.Helper()
	p := NewProgram("everything")
	p.UpdateIPv4Checksum = true
	ctl := &HeaderType{Name: "packet_in_t", Fields: []Field{{Name: "ingress_port", Bits: 9}, {Name: "pad", Bits: 7}}, Controller: ControllerPacketIn}
	p.HeaderTypes = append(p.HeaderTypes, ctl)
	p.Headers = append(p.Headers, &Header{Name: "packet_in", Type: ctl})
	p.Deparse = append([]string{"packet_in"}, p.Deparse...)
	b := &Builder{Prog: p, ID: "f#1", Prefix: "f_1", In: True}
	idx := b.Meta("idx", 32)
	val := b.Meta("val", 16)
	old := b.Meta("old", 16)
	flag := b.Meta("flag", 1)
	reg := b.Register("r", 16, 64, "cells", 0)
	ctr := b.Counter("c", 4, PacketsAndBytes, "packets", "bytes", 0)
	ctr2 := b.Counter("p", 1, Packets, "packets", "", 0)
	d := b.Digest("d", []Field{{Name: "v", Bits: 16}, {Name: "port", Bits: 16}})
	port := Field{Name: "port", Bits: 9}
	fwd := b.Action("fwd", []Field{port}, Assign{Dst: Std("egress_spec"), X: Ref{Path: "port", Bits: 9}}, Count{Counter: ctr2, Index: C(0, 32)})
	drop := b.Action("drop", nil, MarkToDrop{})
	set := b.Action("set", []Field{{Name: "v", Bits: 16}}, Assign{Dst: val, X: Ref{Path: "v", Bits: 16}})
	tb := b.Table(&Table{Name: "t", Keys: []TableKey{{X: hdr("ipv4.dst"), Match: LPM}, {X: Valid{"tcp_urg"}, Match: Exact}},
		Actions: []*Action{fwd, drop}, Default: drop, Size: 1024})
	tc := b.Table(&Table{Name: "k", Keys: []TableKey{{X: F("ipv4_proto", "protocol"), Match: Ternary}, {X: F("l4_dport", "dst_port"), Match: Range}},
		Actions: []*Action{set}, Default: set, DefaultArgs: []uint64{7}, Size: 16, Const: true,
		Entries: []Entry{{Match: []Match{{Value: 17, Mask: 0xff}, {Lo: 50, Hi: 60}}, Priority: 3, Action: set, Args: []uint64{99}}}})
	x := F("ipv4_ttl", "ttl")
	b.Add(
		Hash{Dst: idx, Algo: CRC32, Base: 2, Data: []Expr{F("ipv4_src_2", "src_2"), F("l4_sport", "src_port")}, Max: 60},
		Hash{Dst: idx, Algo: CRC16, Data: []Expr{F("ipv4_src_2", "src_2")}},
		Hash{Dst: idx, Algo: Identity, Data: []Expr{F("l4_sport", "src_port"), F("l4_dport", "dst_port")}, Max: 64},
		Random{Dst: flag, Lo: 0, Hi: 1},
		Apply{Table: tc},
		If{Cond: AllOf(Valid{"udp_csum"}, Unary{Op: Not, X: B(Eq, flag, C(1, 1))}),
			Then: []Stmt{
				RMW{Reg: reg, Index: idx, New: Mux{Cond: B(Gt, Old{16}, val), Then: Old{16}, Else: B(SatAdd, val, C(1, 16))},
					Cond: B(Ne, val, C(0, 16)), OldTo: &old, NewTo: &val},
				Digest{Type: d, Values: []Expr{val, Cast{Bits: 16, X: Slice{X: F("ipv4_src_2", "src_2"), Hi: 15, Lo: 0}}}},
			},
			Else: []Stmt{Clone{Session: 5}, SetValid{Header: "udp_csum", Valid: false}}},
		Assign{Dst: x, X: B(Sub, x, C(1, 8))},
		Assign{Dst: val, X: B(Or, B(Shl, Unary{Op: Inv, X: val}, C(2, 16)), B(Xor, B(Shr, val, C(1, 16)), B(And, val, C(3, 16))))},
		Count{Counter: ctr, Index: Cast{Bits: 32, X: Slice{X: F("ipv4_proto", "protocol"), Hi: 1, Lo: 0}}},
		Call{Action: fwd, Args: []Expr{C(2, 9)}},
		Apply{Table: tb},
		If{Cond: AnyOf(B(Lt, val, old), B(Le, val, C(3, 16)), B(Ge, old, C(9, 16)), B(LAnd, True, False))},
	)
	p.Ingress = b.Body
	p.Egress = []Stmt{If{Cond: B(Eq, Std("egress_port"), C(255, 9)), Then: []Stmt{
		SetValid{Header: "packet_in", Valid: true},
		Assign{Dst: Ref{Path: "hdr.packet_in.ingress_port", Bits: 9}, X: Std("ingress_port")},
	}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJSONRoundTrip(t *testing.T) {
	p := everyDecl(t)
	enc, err := EncodeJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeJSON(enc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := EncodeJSON(q)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, again) {
		t.Fatalf("the decoded program encodes differently: %s", firstDiff(string(enc), string(again)))
	}
	// And it runs the same: every packet, through both, leaves alike.
	sp, sq := NewSwitch(p), NewSwitch(q)
	sp.Sessions[5], sq.Sessions[5] = 255, 255
	for i, f := range [][]byte{frame(5, 1000, 53), frame(5, 1000, 55), frame(6, 7, 8), frame(4, 1, 2), frame(5, 9, 9)[:20]} {
		rp, errp := sp.Process(Arrival{Data: f, Port: 1, Time: uint64(i)})
		rq, errq := sq.Process(Arrival{Data: f, Port: 1, Time: uint64(i)})
		if (errp == nil) != (errq == nil) || !sameResult(rp, rq) {
			t.Fatalf("packet %d: %+v, %v from the program, %+v, %v from its JSON", i, rp, errp, rq, errq)
		}
	}
	for i, r := range p.Registers {
		if a, b := sp.Regs[r], sq.Regs[q.Registers[i]]; !slices.Equal(a, b) {
			t.Errorf("register %s: %v and %v", r.Name, a, b)
		}
	}
}

func sameResult(a, b Result) bool {
	if len(a.Out) != len(b.Out) || len(a.Digests) != len(b.Digests) || a.ParserError != b.ParserError {
		return false
	}
	for i := range a.Out {
		if a.Out[i].Port != b.Out[i].Port || !bytes.Equal(a.Out[i].Data, b.Out[i].Data) || a.Out[i].Instance != b.Out[i].Instance {
			return false
		}
	}
	for i := range a.Digests {
		if a.Digests[i].Type.Name != b.Digests[i].Type.Name || !slices.Equal(a.Digests[i].Values, b.Digests[i].Values) {
			return false
		}
	}
	return true
}

func firstDiff(a, b string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			lo := max(0, i-80)
			return "…" + a[lo:min(len(a), i+40)] + "… vs …" + b[lo:min(len(b), i+40)] + "…"
		}
	}
	return "one is a prefix of the other"
}

func TestJSONStrict(t *testing.T) {
	enc, err := EncodeJSON(everyDecl(t))
	if err != nil {
		t.Fatal(err)
	}
	s := string(enc)
	for _, c := range []struct{ name, old, new, want string }{
		{"unknown field", `"name": "everything"`, `"name": "everything", "colour": 1`, `unknown field "colour"`},
		{"a field of another kind", `"k": "old",`, `"k": "old", "path": "x",`, `has no field "path"`},
		{"version", `"version": 1`, `"version": 2`, "version 2"},
		{"format", `"format": "ffpf-pisa-program"`, `"format": "bmv2"`, `format "bmv2"`},
		{"dangling action", `"default": "f_1_drop"`, `"default": "f_1_dropped"`, `no action "f_1_dropped"`},
		{"dangling table", `"table": "f_1_t"`, `"table": "f_1_u"`, `no table "f_1_u"`},
		{"dangling register", `"register": "f_1_r"`, `"register": "f_1_q"`, `no register "f_1_q"`},
		{"dangling counter", `"counter": "f_1_c"`, `"counter": "f_1_x"`, `no counter "f_1_x"`},
		{"dangling digest", `"digest": "f_1_d"`, `"digest": "f_1_e"`, `no type "f_1_e"`},
		{"dangling header type", `"type": "tcp_urg_t"`, `"type": "tcp_urg2_t"`, `no header type "tcp_urg2_t"`},
		{"undeclared field", `"path": "meta.f_1_old"`, `"path": "meta.f_1_older"`, "meta.f_1_older is not declared"},
		{"wrong width", `"name": "f_1_r",
   "width": 16`, `"name": "f_1_r",
   "width": 12`, "12 bits wide"},
		{"unknown statement", `"s": "mark_to_drop"`, `"s": "recirculate"`, `statement kind "recirculate"`},
		{"unknown operator", `"op": "|+|"`, `"op": "+++"`, `binary operator "+++"`},
		{"counter type", `"type": "packets_and_bytes"`, `"type": "cells"`, `type "cells"`},
		{"controller", `"controller": "packet_in"`, `"controller": "packet_up"`, `controller header "packet_up"`},
		{"trailing data", "\n}\n", "\n}\n{}", "data after the program"},
	} {
		mod := strings.Replace(s, c.old, c.new, 1)
		if mod == s {
			t.Fatalf("%s: %q is not in the encoding", c.name, c.old)
		}
		_, err := DecodeJSON([]byte(mod))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// hdr is a value of the standard headers (Hdr) without its header.
func hdr(name string) Expr {
	x, _ := Hdr(name)
	return x
}
