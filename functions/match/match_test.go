package match

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/gen"
)

var (
	macA = []byte{0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc}
	macB = []byte{0x02, 0x00, 0x00, 0x11, 0x22, 0x33}
	v4A  = [4]byte{10, 1, 2, 3}
	v4B  = [4]byte{192, 0, 2, 7}
	v6A  = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	v6B  = [16]byte{0xfe, 0x80, 15: 2}
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func eth(etype uint16, vids ...uint16) []byte {
	b := cat(macB, macA)
	for i, v := range vids {
		tpid := uint16(0x8100)
		if len(vids) > 1 && i == 0 {
			tpid = 0x88a8
		}
		b = cat(b, u16(tpid), u16(v|0x2000))
	}
	return cat(b, u16(etype))
}

func ip4(proto uint8, frag uint16, l4 []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	h[1] = 0xb8
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(l4)))
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8], h[9] = 63, proto
	copy(h[12:], v4A[:])
	copy(h[16:], v4B[:])
	return cat(h, l4)
}

func ip6(nh uint8, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6], h[7] = nh, 9
	copy(h[8:], v6A[:])
	copy(h[24:], v6B[:])
	return cat(h, payload)
}

// ext is an IPv6 extension header of 8 bytes with next header nh.
func ext(nh uint8) []byte { return []byte{nh, 0, 0, 0, 0, 0, 0, 0} }

func tcp(sport, dport uint16, flags byte) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 1000)
	binary.BigEndian.PutUint32(h[8:], 2000)
	h[12], h[13] = 0x50, flags
	binary.BigEndian.PutUint16(h[14:], 512)
	return h
}

func udp(sport, dport uint16, payload int) []byte {
	h := make([]byte, 8+payload)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+payload))
	return h
}

// eval evaluates expr on one frame captured whole.
func eval(t *testing.T, expr string, lt functions.LinkType, frame []byte, wire int) bool {
	t.Helper()
	m, err := Compile(expr, lt)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	p := buffers.NewPBuf(1, 4096)
	p.Store(0, frame, uint32(wire), 1_700_000_000_123_456_789, 0)
	return m.Eval(p, 0)
}

func TestFrames(t *testing.T) {
	tcp4 := cat(eth(0x800), ip4(6, 0, tcp(1234, 80, 0x12)))
	qinq := cat(eth(0x800, 100, 200), ip4(17, 0, udp(53, 4000, 10)))
	extChain := cat(eth(0x86dd), ip6(0, cat([]byte{60, 0, 0, 0, 0, 0, 0, 0}, []byte{44, 0, 0, 0, 0, 0, 0, 0}, []byte{6, 0, 0, 0, 0, 0, 0, 1}, tcp(5, 443, 0x02))))
	var nine []byte // nine extension headers: one more than the walk's bound
	for range 8 {
		nine = append(nine, ext(60)...)
	}
	tooLong := cat(eth(0x86dd), ip6(60, cat(nine, ext(6), tcp(5, 443, 2))))
	frag2 := cat(eth(0x800), ip4(6, 0x0010, tcp(1234, 80, 0x12))) // offset 16×8: no transport header
	icmp6 := cat(eth(0x86dd), ip6(58, []byte{128, 0, 0, 0}))
	for _, c := range []struct {
		frame []byte
		expr  string
		want  bool
	}{
		{tcp4, "tcp.dport == 80 and tcp.sport == 1234 and tcp.flags == 0x12 and tcp.seq == 1000 and tcp.ack == 2000 and tcp.win == 512", true},
		{tcp4, "ipv4.src == 10.1.2.3 and ipv4.dst in 192.0.2.0/24 and ipv4.ttl == 63 and ipv4.proto == 6 and ip.proto == 6 and ipv4.tos == 0xb8", true},
		{tcp4, "ipv4.len == 40 and pkt.len == 54 and pkt.caplen == 54 and eth.type == 0x800", true},
		{tcp4, "eth.src == 02:00:00:aa:bb:cc and eth.dst == 02:00:00:11:22:33", true},
		{tcp4, "pkt.ts == 1700000000123456789 and pkt.ts > 1700000000123456788", true},
		{tcp4, "pkt.ts - 1700000000s == 123456789ns", true},
		{tcp4, "udp.dport == 80", false},
		{tcp4, "udp.dport != 80", false},
		{tcp4, "not udp.dport == 80", true},
		{tcp4, "not (udp or tcp.dport < 80)", true},
		{tcp4, "ipv6.src == ::1 or ipv6.hlim >= 0", false},
		{tcp4, "not ipv6", true},
		{tcp4, "vlan.id == 0 or vlan", false},
		{tcp4, "ipv4.src in 10.0.0.0/8 && ipv4.src in 10.1.2.3/32 && !(ipv4.src in 11.0.0.0/8) && ipv4.src in 0.0.0.0/0", true},
		{tcp4, "tcp.dport * 2 == 160 and tcp.dport / 3 > 26.6 and tcp.dport % 7 == 3 and -tcp.dport == 0 - 80", true},
		{tcp4, "80 == tcp.dport and 81 > tcp.dport and 80 >= tcp.dport and 79 < tcp.dport and 80 <= tcp.dport and 1 != tcp.dport", true},
		{tcp4, "10.1.2.3 == ipv4.src and ipv4.dst != 10.1.2.3 and ipv4.src < 10.1.2.4", true},
		{tcp4, "tcp.dport % 0 == 0 or not tcp.dport % 0 == 0 and tcp.dport / 0 > 1K", true},
		{qinq, "vlan and vlan.id == 100 and eth.type == 0x88a8 and udp.sport == 53 and udp.len == 18 and ipv4", true},
		{extChain, "ipv6.nh == 0 and ip.proto == 6 and tcp.dport == 443 and ipv6.hlim == 9", true},
		{extChain, "ipv6.src == 2001:db8::1 and ipv6.dst in fe80::/10 and not ipv6.dst in fe80::/128 and ipv6.src != ::", true},
		{tooLong, "tcp", false},
		{tooLong, "ip.proto == 60 and ipv6 and not tcp.dport == 443", true},
		{frag2, "tcp and not tcp.dport == 80 and ipv4.proto == 6", true},
		{frag2, "tcp.sport >= 0", false},
		{icmp6, "icmp and icmp.type == 128 and icmp.code == 0", true},
		{cat(eth(0x800), ip4(1, 0, []byte{8, 0})), "icmp.type == 8 and icmp.code == 0", true},
		{cat(eth(0x0806), make([]byte, 28)), "eth and not ip and eth.type == 0x806", true},
	} {
		if got := eval(t, c.expr, functions.LinkEthernet, c.frame, len(c.frame)); got != c.want {
			t.Errorf("%s = %v, want %v", c.expr, got, c.want)
		}
	}
	// Other link types.
	raw := ip4(17, 0, udp(1, 2, 0))
	if !eval(t, "udp.dport == 2 and not eth", functions.LinkRaw, raw, len(raw)) {
		t.Error("udp on RAW")
	}
	if !eval(t, "ipv6.hlim == 9", functions.LinkIPv6, ip6(59, nil), 40) {
		t.Error("hlim on IPV6")
	}
	null := cat([]byte{2, 0, 0, 0}, raw)
	if !eval(t, "udp.sport == 1 and ipv4", functions.LinkNull, null, len(null)) {
		t.Error("udp on NULL")
	}
}

// TestTruncated cuts frames at every length: a field whose bytes are not
// all captured makes its comparison false, and nothing past the captured
// bytes is read (a PBuf slice ends there, so a read would panic).
func TestTruncated(t *testing.T) {
	frame := cat(eth(0x800, 7), ip4(6, 0, tcp(1234, 80, 0x12)))
	need := map[string]int{ // bytes the field's comparison needs
		"vlan.id == 7": 18, "ipv4.ttl == 63": 38, "tcp.sport == 1234": 40, "tcp.dport == 80": 42,
		"tcp.flags == 0x12": 52, "tcp.win == 512": 54, "eth.type == 0x8100": 14, "vlan": 14,
	}
	for expr, n := range need {
		for l := 0; l <= len(frame); l++ {
			if got := eval(t, expr, functions.LinkEthernet, frame[:l], len(frame)); got != (l >= n) {
				t.Errorf("%s on %d bytes = %v", expr, l, got)
			}
		}
	}
	all := allFields()
	g := gen.New(gen.Config{Seed: 3, Packets: 300, VLAN: 0.3, IPv6: 0.5, Malformed: 0.5})
	buf := make([]byte, 2048)
	p := buffers.NewPBuf(1, 2048)
	for {
		n, _, _, ok := g.Next(buf)
		if !ok {
			break
		}
		for l := 0; l <= n; l++ {
			p.Store(0, buf[:l], uint32(n), 0, 0)
			all.Eval(p, 0)
		}
	}
}

// allFields compiles a predicate that reads every field and layer.
func allFields() *Match {
	var parts []string
	for _, f := range FieldNames() {
		if fields[f].a != nil {
			parts = append(parts, f+" == ::1", f+" in 2001:db8::/32")
		} else {
			parts = append(parts, f+" == 1")
		}
	}
	parts = append(parts, layerNames()...)
	m, err := Compile(strings.Join(parts, " or "), functions.LinkEthernet)
	if err != nil {
		panic(err)
	}
	return m
}

func TestErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"":                          "empty",
		"tcp.dprt == 80":            "did you mean tcp.dport?",
		"tpc.dport == 80":           "did you mean tcp.dport?",
		"ipv4.srcip in 10.0.0.0/8":  "did you mean ipv4.src?",
		"tcpp":                      "did you mean tcp?",
		"tcp.dport":                 "not a truth value",
		"tcp.dport == 80 ==":        "do not chain",
		"1 < 2 < 3":                 "do not chain",
		"(tcp.dport == 80":          "missing )",
		"tcp.dport == 80)":          "unexpected",
		"tcp and 80":                "truth values",
		"not 5":                     "truth value",
		"ipv4.src in 10.0.0.1/8":    "did you mean 10.0.0.0/8",
		"ipv4.src in 2001:db8::/32": "IPv6 prefix",
		"ipv6.src in 10.0.0.0/8":    "IPv4 prefix",
		"ipv6.src < ::1":            "== and !=",
		"ipv6.src == 5":             "IPv6 address",
		"ipv4.src == 10.0.0.0/8":    "for in",
		"tcp.dport == 80furlongs":   "unknown unit",
		"tcp.dport == 1.2.3":        "bad number",
		"pkt.len in tcp":            "address prefix",
		"tcp.dport & 1.5 == 0":      "whole numbers",
		"a.b.c > 1":                 "neither",
		"tcp.dport == 80 $":         "unexpected \"$\"",
		"ipv6.src == fe80::1%eth0":  "unknown field eth0",
		"eth.src == 02:00:00:00:00": "bad address",
		"and":                       "a value was expected",
		"tcp.dport ==":              "ends where a value",
	} {
		_, err := Compile(expr, functions.LinkEthernet)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", expr, err, want)
		}
	}
}

func TestNumbers(t *testing.T) {
	for text, want := range map[string]int64{"80": 80, "0x1f": 31, "1.5K": 1500, "2M": 2e6, "1G": 1e9, "125KB": 125 << 10,
		"1MB": 1 << 20, "2GB": 2 << 30, "3B": 3, "7ns": 7, "1.5us": 1500, "100ms": 1e8, "2s": 2e9} {
		n, err := number(token{text: text})
		if err != nil || !n.isInt || n.i != want {
			t.Errorf("%s = %+v, %v; want %d", text, n, err, want)
		}
	}
	if n, err := number(token{text: "0.01"}); err != nil || n.isInt || n.f != 0.01 {
		t.Errorf("0.01 = %+v, %v", n, err)
	}
}

func TestReads(t *testing.T) {
	n, err := parse("nbytes.min > 0.01 * total.value and nbytes.max > 1 or tcp.dport == total.packets")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(n.labels(nil), ","); got != "nbytes,total" {
		t.Errorf("labels %s", got)
	}
}

func TestNoAllocs(t *testing.T) {
	p := trace(t, gen.Config{Seed: 1, Packets: 256, VLAN: 0.2, IPv6: 0.4, Malformed: 0.2})
	m := allFields()
	b := buffers.NewBatch(p, 0, 256, 0)
	if a := testing.AllocsPerRun(50, func() {
		b.N = 256
		for i := range b.E {
			b.E[i] = buffers.Entry{Slot: uint32(i)}
		}
		m.Process(b)
	}); a != 0 {
		t.Errorf("%v allocations per batch", a)
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, expr := range []string{"tcp.dport == 443", "ipv4.src in 10.0.0.0/8 and (tcp.flags & 0x02 != 0 or udp.dport == 53)", "pkt.len > 1000"} {
		b.Run(expr, func(b *testing.B) {
			p := trace(b, gen.Config{Seed: 1, Packets: 4096, VLAN: 0.05, IPv6: 0.2})
			m, err := Compile(expr, functions.LinkEthernet)
			if err != nil {
				b.Fatal(err)
			}
			bt := buffers.NewBatch(p, 0, 256, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				base := uint32(i%16) * 256
				bt.N = 256
				for j := range bt.E {
					bt.E[j] = buffers.Entry{Slot: base + uint32(j)}
				}
				m.Process(bt)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/pkt")
		})
	}
}
