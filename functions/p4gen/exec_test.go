package p4gen

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// frame builds an Ethernet/IPv4/UDP frame with the given IHL (options
// of zeros when > 5) from src to dst port.
func frame(ihl int, sport, dport uint16) []byte {
	b := make([]byte, 14+4*ihl+8+4)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	u := ip[4*ihl:]
	binary.BigEndian.PutUint16(u, sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	return b
}

// counting is a program that counts UDP packets to port 53 per source
// port modulo 16 in a register (an RMW add) and in a counter, sends
// digests of the count, and forwards every packet to port 2.
func counting(t *testing.T) (*Program, *Register, *Counter) {
	t.Helper()
	p := NewProgram("t")
	b := &Builder{Prog: p, ID: "f#1", Prefix: "f_1", In: True}
	idx := b.Meta("idx", 32)
	now := b.Meta("now", 32)
	reg := b.Register("cells", 32, 16, "cells", 0)
	ctr := b.Counter("seen", 1, PacketsAndBytes, "packets", "bytes", 0)
	d := b.Digest("d", []Field{{Name: "port", Bits: 16}, {Name: "count", Bits: 32}})
	sport := F("l4_sport", "src_port")
	b.Add(
		If{Cond: AllOf(Valid{"udp_csum"}, B(Eq, F("l4_dport", "dst_port"), C(53, 16))), Then: []Stmt{
			Hash{Dst: idx, Algo: Identity, Data: []Expr{sport}, Max: 16},
			RMW{Reg: reg, Index: idx, New: B(Add, Old{32}, C(1, 32)), NewTo: &now},
			Count{Counter: ctr, Index: C(0, 32)},
			Digest{Type: d, Values: []Expr{sport, now}},
		}},
		Assign{Dst: Std("egress_spec"), X: C(2, 9)},
	)
	p.Ingress = b.Body
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p, reg, ctr
}

func TestExecCountsAndDigests(t *testing.T) {
	p, reg, ctr := counting(t)
	s := NewSwitch(p)
	for i, f := range [][]byte{frame(5, 1000, 53), frame(7, 1000, 53), frame(5, 1001, 53), frame(5, 1000, 80), frame(4, 1000, 53)} {
		r, err := s.Process(Arrival{Data: f, Port: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Out) != 1 || r.Out[0].Port != 2 || string(r.Out[0].Data) != string(f) {
			t.Fatalf("packet %d: out %+v, want it unchanged on port 2", i, r.Out)
		}
		want := map[int]uint64{0: 1, 1: 2, 2: 1}
		if c, ok := want[i]; ok != (len(r.Digests) == 1) || ok && r.Digests[0].Values[1] != c {
			t.Errorf("packet %d: digests %+v, want count %d", i, r.Digests, c)
		}
	}
	if got := s.Regs[reg][1000%16]; got != 2 {
		t.Errorf("cell of port 1000: %d, want 2", got)
	}
	if got := s.Regs[reg][1001%16]; got != 1 {
		t.Errorf("cell of port 1001: %d, want 1", got)
	}
	if c := s.Counts[ctr][0]; c.Packets != 3 || c.Bytes != uint64(2*len(frame(5, 0, 0))+len(frame(7, 0, 0))) {
		t.Errorf("counter %+v", c)
	}
}

func TestExecRefusesSecondAccess(t *testing.T) {
	p := NewProgram("t")
	b := &Builder{Prog: p, ID: "f#1", Prefix: "f_1", In: True}
	reg := b.Register("r", 8, 4, "r", 0)
	b.Add(RMW{Reg: reg, Index: C(0, 32), New: C(1, 8)}, RMW{Reg: reg, Index: C(1, 32), New: C(1, 8)})
	p.Ingress = b.Body
	if err := p.Validate(); err == nil {
		t.Fatal("two RMWs of one register on one path validated")
	}
	p.Ingress = []Stmt{If{Cond: Valid{"tcp_flags"}, Then: b.Body[:1], Else: b.Body[1:]}}
	if err := p.Validate(); err != nil {
		t.Fatalf("RMWs on exclusive branches: %v", err)
	}
}

func TestHashValues(t *testing.T) {
	if got := CRC16ARC([]byte("123456789")); got != 0xBB3D {
		t.Errorf("CRC-16/ARC check value %#x, want 0xbb3d", got)
	}
	h, err := HashValue(CRC32, []uint64{0x0a000001, 0x35}, []int{32, 16})
	if err != nil {
		t.Fatal(err)
	}
	if want := crc32.ChecksumIEEE([]byte{10, 0, 0, 1, 0, 0x35}); h != uint64(want) {
		t.Errorf("crc32 %#x, want %#x", h, want)
	}
	if _, err := HashValue(CRC32, []uint64{1}, []int{4}); err == nil {
		t.Error("4 bits of hash data accepted")
	}
}

func TestParserBogusIHLAndTruncation(t *testing.T) {
	p, _, _ := counting(t)
	s := NewSwitch(p)
	// ihl 4: the ports are inside the IP header, no l4_dport chunk is extracted.
	r, _ := s.Process(Arrival{Data: frame(4, 1000, 53), Port: 1})
	if len(r.Digests) != 0 {
		t.Error("a bogus IHL frame reached the UDP test")
	}
	// truncated inside UDP: PacketTooShort, the frame still forwarded whole.
	f := frame(5, 1000, 53)[:14+20+3]
	r, err := s.Process(Arrival{Data: f, Port: 1})
	if err != nil || r.ParserError != ErrPacketTooShort.Error() || len(r.Out) != 1 || string(r.Out[0].Data) != string(f) {
		t.Errorf("truncated frame: %+v, %v", r, err)
	}
}

// The parser sees standard metadata: a packet from the CPU port (255)
// starts with a packet_out header that selects its egress port.
func TestParserSeesIngressPort(t *testing.T) {
	p := NewProgram("t")
	out := &HeaderType{Name: "packet_out_t", Fields: []Field{{Name: "egress_port", Bits: 9}, {Name: "pad", Bits: 7}}, Controller: ControllerPacketOut}
	p.HeaderTypes = append(p.HeaderTypes, out)
	p.Headers = append(p.Headers, &Header{Name: "packet_out", Type: out})
	start := p.Parser[0]
	start.Name = "parse_ethernet"
	p.Parser = append([]*ParserState{{Name: "start", Select: []Expr{Std("ingress_port")},
		Cases: []Case{{Values: []uint64{255}, Next: "parse_packet_out"}}, Default: "parse_ethernet"},
		{Name: "parse_packet_out", Extract: []string{"packet_out"}, Default: "parse_ethernet"}}, p.Parser...)
	p.Ingress = []Stmt{If{Cond: Valid{"packet_out"},
		Then: []Stmt{Assign{Dst: Std("egress_spec"), X: Ref{Path: "hdr.packet_out.egress_port", Bits: 9}}},
		Else: []Stmt{Assign{Dst: Std("egress_spec"), X: C(255, 9)}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	s := NewSwitch(p)
	f := frame(5, 1, 2)
	r, err := s.Process(Arrival{Data: append([]byte{3, 0}, f...), Port: 255})
	if err != nil || len(r.Out) != 1 || r.Out[0].Port != 6 || !bytes.Equal(r.Out[0].Data, f) {
		t.Fatalf("from the CPU port: %+v, %v; want the frame without its packet_out header on port 6", r, err)
	}
	r, err = s.Process(Arrival{Data: f, Port: 1})
	if err != nil || len(r.Out) != 1 || r.Out[0].Port != 255 {
		t.Fatalf("from port 1: %+v, %v; want it on the CPU port", r, err)
	}
}

// As v1model on bmv2, mark_to_drop sets egress_spec to the drop port,
// and a port set after it sends the packet again; in egress it drops.
func TestMarkToDropThenForward(t *testing.T) {
	p := NewProgram("t")
	p.Ingress = []Stmt{MarkToDrop{}, If{Cond: Valid{"udp_csum"}, Then: []Stmt{Assign{Dst: Std("egress_spec"), X: C(3, 9)}}}}
	p.Egress = []Stmt{If{Cond: B(Eq, F("l4_dport", "dst_port"), C(9, 16)), Then: []Stmt{MarkToDrop{}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	s := NewSwitch(p)
	for _, c := range []struct {
		f    []byte
		outs int
	}{{frame(5, 1, 2), 1}, {frame(5, 1, 9), 0}, {frame(5, 1, 2)[:20], 0}} {
		r, err := s.Process(Arrival{Data: c.f, Port: 1})
		if err != nil || len(r.Out) != c.outs || c.outs == 1 && r.Out[0].Port != 3 {
			t.Errorf("%x: %+v, %v; want %d out on port 3", c.f, r, err, c.outs)
		}
	}
}
