package gen

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

type frame struct {
	data      []byte
	wire      int
	ts        int64
	truncated bool
}

func collect(cfg Config, n int, buflen int) []frame {
	g := New(cfg)
	buf := make([]byte, buflen)
	out := make([]frame, 0, n)
	for i := 0; i < n; i++ {
		for j := range buf {
			buf[j] = byte(i + j) // stale slot contents must not leak into frames
		}
		c, w, ts, ok := g.Next(buf)
		if !ok {
			break
		}
		out = append(out, frame{append([]byte(nil), buf[:c]...), w, ts, c < w})
	}
	return out
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 42, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 500}
	a := collect(cfg, 20000, MaxFrameLen)
	g := New(cfg)
	buf := make([]byte, 2000)
	for i := range buf {
		buf[i] = 0xee
	}
	for i, f := range a {
		c, w, ts, ok := g.Next(buf)
		if !ok || w != f.wire || ts != f.ts || !bytes.Equal(buf[:c], f.data) {
			t.Fatalf("packet %d differs between two generators with the same Config", i)
		}
	}
	b := collect(Config{Seed: 43, Malformed: 0.05, VLAN: 0.1, IPv6: 0.3, Flows: 500}, 100, MaxFrameLen)
	same := 0
	for i := range b {
		if bytes.Equal(a[i].data, b[i].data) {
			same++
		}
	}
	if same > 10 {
		t.Errorf("seeds 42 and 43 give %d identical packets out of 100", same)
	}

	var p1, p2 bytes.Buffer
	cfg.Packets = 5000
	if err := WritePcap(&p1, cfg, 0); err != nil {
		t.Fatal(err)
	}
	if err := WritePcap(&p2, cfg, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p1.Bytes(), p2.Bytes()) {
		t.Fatal("WritePcap is not deterministic")
	}
}

func TestTruncateToDst(t *testing.T) {
	cfg := Config{Seed: 7, Malformed: 0.1, VLAN: 0.2}
	full := collect(cfg, 3000, MaxFrameLen)
	short := collect(cfg, 3000, 100)
	for i := range full {
		want := full[i].data[:min(100, len(full[i].data))]
		if !bytes.Equal(short[i].data, want) || short[i].wire != full[i].wire {
			t.Fatalf("packet %d: truncated copy differs from the full frame's prefix", i)
		}
	}
	g := New(cfg)
	if c, w, _, ok := g.Next(nil); !ok || c != 0 || w < 0 {
		t.Fatalf("Next(nil) = %d, %d, %v", c, w, ok)
	}
}

func TestPacketLimit(t *testing.T) {
	g := New(Config{Packets: 10})
	buf := make([]byte, MaxFrameLen)
	for i := 0; i < 10; i++ {
		if _, _, _, ok := g.Next(buf); !ok {
			t.Fatalf("ended after %d packets", i)
		}
	}
	if _, _, _, ok := g.Next(buf); ok {
		t.Fatal("did not end after 10 packets")
	}
}

func TestTimestamps(t *testing.T) {
	fr := collect(Config{Rate: 1000}, 1000, MaxFrameLen)
	start := DefaultStart.UnixNano()
	if fr[0].ts < start || fr[0].ts >= start+1e6 {
		t.Fatalf("first timestamp %d, want within 1ms of %d", fr[0].ts, start)
	}
	for i := 1; i < len(fr); i++ {
		if fr[i].ts < fr[i-1].ts {
			t.Fatalf("timestamps go backwards at %d", i)
		}
	}
	if d := fr[999].ts - fr[0].ts; d < 998e6 || d > 1000e6 {
		t.Fatalf("1000 packets at 1000 pps span %d ns", d)
	}
}

// csum is an independent reference implementation of the Internet checksum.
func csum(parts ...[]byte) uint16 {
	var s uint32
	for _, p := range parts {
		for i := 0; i+1 < len(p); i += 2 {
			s += uint32(p[i])<<8 | uint32(p[i+1])
		}
		if len(p)%2 == 1 {
			s += uint32(p[len(p)-1]) << 8
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

type stats struct {
	n, ip, v6, tagged, qinq, tcp, udp, icmp, icmp6, arp, dns, small, large int
	flags                                                                  map[string]int
	ports                                                                  map[uint16]int
	flows                                                                  map[string]int
}

// check verifies a well-formed frame's lengths and checksums and counts
// what it carries.
func check(t *testing.T, i int, p []byte, st *stats) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("packet %d (% x): "+format, append([]any{i, p}, args...)...)
	}
	if len(p) < MinFrameLen || len(p) > MaxFrameLen {
		fail("length %d outside [%d, %d]", len(p), MinFrameLen, MaxFrameLen)
	}
	st.n++
	if len(p) < 100 {
		st.small++
	} else if len(p) > 1400 {
		st.large++
	}
	et := binary.BigEndian.Uint16(p[12:])
	off := 14
	if et == etQinQ {
		st.qinq++
		et = binary.BigEndian.Uint16(p[16:])
		off += 4
		if et != etVLAN {
			fail("QinQ outer tag not followed by 802.1Q")
		}
	}
	if et == etVLAN {
		st.tagged++
		et = binary.BigEndian.Uint16(p[off+2:])
		off += 4
	}
	var proto uint8
	var l4 []byte
	var pseudo []byte
	var src, dst []byte
	switch et {
	case etARP:
		st.arp++
		return
	case etIPv4:
		st.ip++
		h := p[off:]
		if h[0] != 0x45 {
			fail("IPv4 version/IHL %#x", h[0])
		}
		tl := int(binary.BigEndian.Uint16(h[2:]))
		if off+tl > len(p) || (off+tl < len(p) && len(p) != MinFrameLen) {
			fail("IPv4 total length %d in a %d-byte frame", tl, len(p))
		}
		if csum(h[:20]) != 0 {
			fail("bad IPv4 header checksum")
		}
		proto = h[9]
		l4 = h[20:tl]
		src, dst = h[12:16], h[16:20]
		pseudo = []byte{0, proto, byte(len(l4) >> 8), byte(len(l4))}
	case etIPv6:
		st.ip++
		st.v6++
		h := p[off:]
		pl := int(binary.BigEndian.Uint16(h[4:]))
		if off+40+pl > len(p) {
			fail("IPv6 payload length %d in a %d-byte frame", pl, len(p))
		}
		proto = h[6]
		l4 = h[40 : 40+pl]
		src, dst = h[8:24], h[24:40]
		pseudo = []byte{0, 0, byte(pl >> 8), byte(pl), 0, 0, 0, proto}
	default:
		fail("ethertype %#x", et)
	}
	switch proto {
	case protoTCP, protoUDP, protoICMPv6:
		if csum(src, dst, pseudo, l4) != 0 {
			fail("bad transport checksum (proto %d)", proto)
		}
	case protoICMP:
		if csum(l4) != 0 {
			fail("bad ICMP checksum")
		}
	default:
		fail("protocol %d", proto)
	}
	switch proto {
	case protoTCP:
		st.tcp++
		fl := l4[13]
		name := ""
		for _, x := range []struct {
			b byte
			s string
		}{{fSYN, "S"}, {fFIN, "F"}, {fRST, "R"}, {fPSH, "P"}, {fACK, "."}} {
			if fl&x.b != 0 {
				name += x.s
			}
		}
		st.flags[name]++
	case protoUDP:
		st.udp++
		if int(binary.BigEndian.Uint16(l4[4:])) != len(l4) {
			fail("UDP length %d, datagram %d", binary.BigEndian.Uint16(l4[4:]), len(l4))
		}
	case protoICMP:
		st.icmp++
	case protoICMPv6:
		st.icmp6++
	}
	if proto == protoTCP || proto == protoUDP {
		sp, dp := binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		st.ports[min(sp, dp)]++
		if sp == 53 || dp == 53 {
			st.dns++
			var d layers.DNS
			if err := d.DecodeFromBytes(l4[8:], gopacket.NilDecodeFeedback); err != nil {
				fail("DNS does not decode: %v", err)
			}
			if len(d.Questions) != 1 || (d.QR && len(d.Answers) == 0) {
				fail("DNS message has %d questions, %d answers", len(d.Questions), len(d.Answers))
			}
		}
		a, b := string(src)+string(l4[0:2]), string(dst)+string(l4[2:4])
		if a > b {
			a, b = b, a
		}
		st.flows[string(rune(proto))+a+b]++
	}
}

func TestWellFormed(t *testing.T) {
	const n = 200000
	g := New(Config{Seed: 3, VLAN: 0.05, IPv6: 0.2})
	buf := make([]byte, MaxFrameLen)
	st := &stats{flags: map[string]int{}, ports: map[uint16]int{}, flows: map[string]int{}}
	for i := 0; i < n; i++ {
		c, w, _, _ := g.Next(buf)
		if c != w {
			t.Fatalf("packet %d truncated (%d of %d) without Malformed", i, c, w)
		}
		check(t, i, buf[:c], st)
	}
	frac := func(a, b int) float64 { return float64(a) / float64(b) }
	t.Logf("tcp %.3f udp %.3f icmp %.3f icmp6 %.3f arp %.3f dns %.3f v6/ip %.3f tagged %.3f qinq %.3f small %.3f large %.3f",
		frac(st.tcp, n), frac(st.udp, n), frac(st.icmp, n), frac(st.icmp6, n), frac(st.arp, n), frac(st.dns, n),
		frac(st.v6, st.ip), frac(st.tagged, n), frac(st.qinq, n), frac(st.small, n), frac(st.large, n))
	t.Logf("tcp flags %v", st.flags)
	near := func(what string, got, want, tol float64) {
		if got < want-tol || got > want+tol {
			t.Errorf("%s: %.3f, want %.3f±%.3f", what, got, want, tol)
		}
	}
	near("IPv6 among IP", frac(st.v6, st.ip), 0.2, 0.03)
	near("tagged", frac(st.tagged, n), 0.05, 0.02)
	near("TCP", frac(st.tcp, n), 0.62, 0.08)
	near("ARP", frac(st.arp, n), 0.03, 0.02)
	if st.qinq == 0 || st.icmp == 0 || st.icmp6 == 0 || st.dns == 0 {
		t.Errorf("missing traffic: qinq %d icmp %d icmpv6 %d dns %d", st.qinq, st.icmp, st.icmp6, st.dns)
	}
	for _, f := range []string{"S", "S.", ".", "P.", "F.", "R."} {
		if st.flags[f] == 0 {
			t.Errorf("no TCP segment with flags %q", f)
		}
	}
	for _, p := range []uint16{22, 53, 80, 123, 443} {
		if st.ports[p] == 0 {
			t.Errorf("no packet to or from port %d", p)
		}
	}
	if frac(st.small, n) < 0.2 || frac(st.large, n) < 0.2 {
		t.Errorf("sizes not bimodal: %.2f below 100 bytes, %.2f above 1400", frac(st.small, n), frac(st.large, n))
	}
	// heavy tail: the top 1% of 5-tuples carry a large share
	var counts []int
	total := 0
	for _, c := range st.flows {
		counts = append(counts, c)
		total += c
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	top := 0
	for _, c := range counts[:len(counts)/100] {
		top += c
	}
	t.Logf("%d five-tuples; the top 1%% carry %.2f of TCP/UDP packets", len(counts), frac(top, total))
	if frac(top, total) < 0.3 {
		t.Errorf("top 1%% of flows carry only %.2f of the packets", frac(top, total))
	}
}

func TestMalformed(t *testing.T) {
	g := New(Config{Seed: 9, Malformed: 1, VLAN: 0.1, IPv6: 0.3})
	buf := make([]byte, MaxFrameLen)
	var zero, runt, trunc, frag, badIHL, ext6, oddET int
	for i := 0; i < 20000; i++ {
		c, w, _, _ := g.Next(buf)
		if c > w || w > MaxFrameLen {
			t.Fatalf("packet %d: capLen %d wireLen %d", i, c, w)
		}
		p := buf[:c]
		// gopacket must survive whatever we produce (it recovers panics
		// into a DecodeFailure layer; we want none of those to be panics)
		pk := gopacket.NewPacket(p, layers.LayerTypeEthernet, gopacket.Default)
		if el := pk.ErrorLayer(); el != nil && strings.Contains(el.Error().Error(), "panic") {
			t.Fatalf("packet %d makes gopacket panic: %v", i, el.Error())
		}
		switch {
		case w == 0:
			zero++
		case w < 14:
			runt++
		case c < w:
			trunc++
		}
		if c >= 14 {
			off := 12
			et := binary.BigEndian.Uint16(p[off:])
			for (et == etVLAN || et == etQinQ) && off+6 <= c {
				off += 4
				et = binary.BigEndian.Uint16(p[off:])
			}
			h := p[off+2:]
			switch {
			case et == etIPv4 && len(h) >= 20:
				if h[0]&0xf < 5 || int(h[0]&0xf)*4 > len(h) {
					badIHL++
				}
				if binary.BigEndian.Uint16(h[6:])&0x3fff != 0 {
					frag++
				}
			case et == etIPv6 && len(h) >= 40:
				if nh := h[6]; nh == 0 || nh == 43 || nh == 44 || nh == 60 {
					ext6++
				}
			case et != etIPv4 && et != etIPv6 && et != etARP:
				oddET++
			}
		}
	}
	t.Logf("zero %d runt %d truncated %d fragments %d bad IHL %d ipv6-ext %d odd ethertype %d",
		zero, runt, trunc, frag, badIHL, ext6, oddET)
	for name, v := range map[string]int{"zero-length": zero, "runt": runt, "truncated": trunc,
		"fragment": frag, "bad IHL": badIHL, "IPv6 extension": ext6, "unknown ethertype": oddET} {
		if v < 200 {
			t.Errorf("only %d %s frames in 20000 malformed", v, name)
		}
	}
	// at 5% the rest stays well formed
	g = New(Config{Seed: 9, Malformed: 0.05})
	bad := 0
	for i := 0; i < 20000; i++ {
		c, w, _, _ := g.Next(buf)
		if c != w || c < MinFrameLen {
			bad++
		}
	}
	if bad == 0 || bad > 2000 {
		t.Errorf("%d odd-length frames at Malformed 0.05", bad)
	}
}

func TestNoAllocs(t *testing.T) {
	g := New(Config{Malformed: 0.05, VLAN: 0.1, IPv6: 0.3})
	buf := make([]byte, MaxFrameLen)
	small := make([]byte, 64)
	if a := testing.AllocsPerRun(10000, func() { g.Next(buf); g.Next(small) }); a != 0 {
		t.Fatalf("Next allocates %.1f times per call", a)
	}
	s := NewSource(Config{})
	p := buffers.NewPBuf(256, MaxFrameLen)
	b := buffers.NewBatch(p, 0, 256, 0)
	if a := testing.AllocsPerRun(100, func() { b.Reset(); s.Fill(b) }); a != 0 {
		t.Fatalf("Fill allocates %.1f times per batch", a)
	}
}

func TestClass(t *testing.T) {
	c, ok := functions.Default.Lookup("GEN")
	if !ok || !c.IsSource() {
		t.Fatal("class gen not registered as a source")
	}
	p, err := c.Bind([]functions.Arg{{Key: "packets", Value: functions.Raw{Kind: functions.RawNumber, Text: "1000"}},
		{Key: "malformed", Value: functions.Raw{Kind: functions.RawNumber, Text: "0.05"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Canonical() != "packets=1000,seed=1,malformed=0.05,vlan=0.05,ipv6=0.2,flows=10000" {
		t.Errorf("canonical parameters %s", p.Canonical())
	}
	if _, err := c.Bind([]functions.Arg{{Key: "vlan", Value: functions.Raw{Kind: functions.RawNumber, Text: "2"}}}); err == nil {
		t.Error("vlan=2 accepted")
	}
	vctx := &functions.Context{Params: p}
	if err := c.Validate(vctx); err != nil || vctx.LinkType != functions.LinkEthernet {
		t.Fatalf("Validate: %v, link type %v", err, vctx.LinkType)
	}
	src, err := c.NewSource(&functions.Context{Params: p})
	if err != nil {
		t.Fatal(err)
	}
	info := src.Info()
	if info.LinkType != functions.LinkEthernet || info.MaxCapLen != MaxFrameLen {
		t.Fatalf("info %+v", info)
	}
	pb := buffers.NewPBuf(512, info.MaxCapLen)
	b := buffers.NewBatch(pb, 0, 256, 0)
	want := New(ConfigFromParams(p))
	ref := make([]byte, MaxFrameLen)
	total := 0
	for {
		b.Reset()
		err := src.Fill(b)
		if err == io.EOF {
			if b.N != 0 {
				t.Fatal("EOF with packets")
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range b.Entries() {
			c, w, ts, _ := want.Next(ref)
			m := pb.Meta(e.Slot)
			if !bytes.Equal(pb.Data(e.Slot), ref[:c]) || int(m.WireLen) != max(w, c) || m.Timestamp != ts {
				t.Fatalf("packet %d differs from the generator's", total)
			}
			total++
		}
		if d, tot := src.(functions.Progresser).Progress(); d != int64(total) || tot != 1000 {
			t.Fatalf("progress %d/%d after %d", d, tot, total)
		}
	}
	if total != 1000 {
		t.Fatalf("%d packets, want 1000", total)
	}
	src.Close()
	s2 := NewSource(Config{})
	s2.Close()
	b.Reset()
	if err := s2.Fill(b); err != io.EOF || b.N != 0 {
		t.Fatalf("Fill after Close: %v, %d packets", err, b.N)
	}
}

func TestWritePcapReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gen.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Packets: 20000, Malformed: 0.05}
	if err := WritePcap(f, cfg, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, _ = os.Open(path)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != MaxFrameLen {
		t.Fatalf("link type %v snaplen %d", r.LinkType(), r.Snaplen())
	}
	ref := collect(cfg, 20000, MaxFrameLen)
	for i := range ref {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !bytes.Equal(data, ref[i].data) || ci.Length != ref[i].wire || ci.Timestamp.UnixNano() != ref[i].ts/1000*1000 {
			t.Fatalf("record %d differs", i)
		}
	}
	if _, _, err := r.ReadPacketData(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}
	if tcpdump, err := exec.LookPath("tcpdump"); err == nil {
		out, err := exec.Command(tcpdump, "-tt", "-nn", "-r", path).Output()
		if err != nil {
			t.Fatalf("tcpdump -r: %v", err)
		}
		// one line per packet starts with its timestamp, except that
		// tcpdump prints a zero-length record as "[Invalid header: ...]"
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "1704067200.") || strings.HasPrefix(l, "[Invalid header") {
				n++
			}
		}
		if n != 20000 {
			t.Fatalf("tcpdump reads %d packets, want 20000", n)
		}
	} else {
		t.Log("tcpdump not found; skipped reading the trace with it")
	}
	if err := WritePcap(io.Discard, Config{}, 0); err == nil {
		t.Error("WritePcap of an endless trace did not fail")
	}
}

func BenchmarkNext(b *testing.B) {
	for _, m := range []float64{0, 0.05} {
		b.Run("malformed="+strconv.FormatFloat(m, 'g', -1, 64), func(b *testing.B) {
			g := New(Config{Malformed: m, VLAN: 0.05, IPv6: 0.2})
			buf := make([]byte, MaxFrameLen)
			var bytes int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, w, _, _ := g.Next(buf)
				bytes += int64(w)
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "B/pkt")
		})
	}
}

func BenchmarkFill(b *testing.B) {
	s := NewSource(Config{})
	p := buffers.NewPBuf(256, MaxFrameLen)
	bt := buffers.NewBatch(p, 0, 256, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bt.Reset()
		s.Fill(bt)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/pkt")
}

func TestWritePcapSnaplen(t *testing.T) {
	cfg := Config{Packets: 500}
	ref := collect(cfg, 500, MaxFrameLen)
	for _, snap := range []int{65535, 100} {
		var buf bytes.Buffer
		if err := WritePcap(&buf, cfg, snap); err != nil {
			t.Fatal(err)
		}
		r, err := pcapgo.NewReader(&buf)
		if err != nil || r.Snaplen() != uint32(snap) {
			t.Fatalf("snaplen %d: header says %d (%v)", snap, r.Snaplen(), err)
		}
		for i := range ref {
			d, ci, err := r.ReadPacketData()
			if err != nil || !bytes.Equal(d, ref[i].data[:min(snap, len(ref[i].data))]) || ci.Length != ref[i].wire {
				t.Fatalf("snaplen %d, record %d differs (%v)", snap, i, err)
			}
		}
	}
}
