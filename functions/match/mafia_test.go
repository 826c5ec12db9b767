package match

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// ipv4Frame is an Ethernet/IPv4/TCP frame with the given TOS, ID and
// checksum field.
func ipv4Frame(tos byte, id, csum uint16) []byte {
	f := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[1], ip[8], ip[9] = 0x45, tos, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[10:], csum)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	ip[20+12] = 5 << 4
	return f
}

// TestMAFIAOperators: the fields, operators and functions MAFIA's
// programs compile to.
func TestMAFIAOperators(t *testing.T) {
	f := ipv4Frame(0x12, 0xbeef, 0x0f0f)
	pb := buffers.NewPBuf(1, 100)
	b := buffers.NewBatch(pb, 0, 1, 0)
	b.Append(f, uint32(len(f)), 1)
	for _, tc := range []struct {
		pred string
		want bool
	}{
		{"ipv4.id == 0xbeef and ipv4.csum == 0x0f0f", true},
		{"(ipv4.tos | 1) == 0x13", true},
		{"ipv4.tos | 1 == 0x13", true}, // | binds as & does, tighter than ==
		{"(ipv4.tos & 0x1) == 0x1", false},
		{"max(ipv4.ttl, 100) == 100 and min(ipv4.ttl, 100) == 64", true},
		{"max(ipv4.ttl + 1, 3) == 65", true},
		{"pkt.inport == 1", true}, // a host's first source is port 1, as a switch's first port
		{"not switch.id == 1", true},
		{"segway.msg == 0 or segway.msg != 0", false}, // not an ez-Segway message
	} {
		m, err := Compile(tc.pred, functions.LinkEthernet)
		if err != nil {
			t.Errorf("%s: %v", tc.pred, err)
			continue
		}
		if got := m.Eval(pb, 0); got != tc.want {
			t.Errorf("%s: %v", tc.pred, got)
		}
	}
	// The third source's packets came in by port 3.
	b3 := buffers.NewBatch(pb, 0, 1, 2)
	b3.Append(f, uint32(len(f)), 1)
	if m, err := Compile("pkt.inport == 3", functions.LinkEthernet); err != nil || !m.Eval(pb, 0) {
		t.Errorf("pkt.inport of source 2: not port 3 (%v)", err)
	}
	for _, bad := range []string{"max(1)", "bloom(12, 2, ipv4.id)", "bloom(16, 0, ipv4.id)", "bloom(16, 2)", "min(1, 2, 3)", "1 | 0.5 > 0"} {
		if _, err := Compile(bad, functions.LinkEthernet); err == nil {
			t.Errorf("%s: compiled", bad)
		}
	}
}

// TestBloomMask: bloom(M, K, v…) is the mask a switch computes: crc32
// and crc16 (p4gen's CRC-16/ARC) of the values as 64-bit words, position
// i flowkey.P4Index of them.
func TestBloomMask(t *testing.T) {
	f := ipv4Frame(0, 0x1234, 0)
	pb := buffers.NewPBuf(1, 100)
	b := buffers.NewBatch(pb, 0, 1, 0)
	b.Append(f, uint32(len(f)), 1)
	x, err := NewExpr(&functions.Context{LinkType: functions.LinkEthernet}, "bloom(16, 4, ipv4.id, 7, ipv4.ttl)", false)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := x.Int(pb, 0)
	var data [24]byte
	binary.BigEndian.PutUint64(data[0:], 0x1234)
	binary.BigEndian.PutUint64(data[8:], 7)
	binary.BigEndian.PutUint64(data[16:], 64)
	h1, h2 := crc32.ChecksumIEEE(data[:]), p4gen.CRC16ARC(data[:])
	var want int64
	for i := range uint32(4) {
		want |= 1 << flowkey.P4Index(h1, h2, i, 4)
	}
	if !ok || got != want || want == 0 {
		t.Errorf("bloom: %#x %v, want %#x", got, ok, want)
	}
}

// TestSwitchFieldsRunOnSwitches: a function that reads a switch's
// metadata is refused a host, with the field named.
func TestSwitchFieldsRunOnSwitches(t *testing.T) {
	c, _ := functions.Default.Lookup("match")
	p, err := c.Bind([]functions.Arg{{Value: functions.Raw{Kind: functions.RawString, Text: "pkt.outport == 2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CanRun(functions.TargetUser, p); err == nil || !strings.Contains(err.Error(), "pkt.outport") {
		t.Errorf("user: %v", err)
	}
	if err := c.CanRun(functions.TargetP4, p); err != nil {
		t.Errorf("p4: %v", err)
	}
}

// TestExprNames: an expression's bare names are given their values per
// evaluation (a register's old), and its reads are listed.
func TestExprNames(t *testing.T) {
	x, err := NewExpr(&functions.Context{LinkType: functions.LinkEthernet}, "old + 1", false, "old")
	if err != nil {
		t.Fatal(err)
	}
	pb := buffers.NewPBuf(1, 100)
	x.Set(0, 41)
	if v, ok := x.Int(pb, 0); !ok || v != 42 {
		t.Errorf("old + 1 with old 41: %d %v", v, ok)
	}
	if err := CheckExpr("old + 1", false); err == nil {
		t.Error("old without the name given checked")
	}
	if err := CheckExpr("old > 1", false, "old"); err == nil {
		t.Error("a condition checked as a number")
	}
	if r, err := Refs("a.value + max(b.old, 2)", "old"); err != nil || strings.Join(r, ",") != "a.value,b.old" {
		t.Errorf("refs %v %v", r, err)
	}
}
