package oracle

import (
	"math/rand"
	"net/netip"
	"sort"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// A trace built for the tests: TCP connections (handshakes with window
// scaling, data with bursts and spaced segments, retransmissions, duplicate
// ACKs, ECN marks, window changes, idle gaps longer than an epoch), UDP
// flows and an IPv6 connection, as Ethernet frames in time order.

// Packet is one frame of a trace and its time.
type Packet struct {
	Data []byte
	TS   int64
}

type traceBuilder struct {
	rng  *rand.Rand
	pkts []Packet
}

func mac(b byte) []byte { return []byte{2, 0, 0, 0, 0, b} }

func (tb *traceBuilder) frame(ts int64, ip gopacket.SerializableLayer, l4 gopacket.SerializableLayer, payload int, v6 bool) {
	eth := &layers.Ethernet{SrcMAC: mac(1), DstMAC: mac(2), EthernetType: layers.EthernetTypeIPv4}
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	pl := make([]byte, payload)
	for i := range pl {
		pl[i] = byte(i)
	}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, l4, gopacket.Payload(pl)); err != nil {
		panic(err)
	}
	tb.pkts = append(tb.pkts, Packet{Data: append([]byte(nil), buf.Bytes()...), TS: ts})
}

type seg struct {
	src, dst  netip.Addr
	sport     uint16
	dport     uint16
	seq, ack  uint32
	syn, ackF bool
	fin       bool
	win       uint16
	wscale    int // on a SYN; -1 none
	payload   int
	ttl, ecn  uint8
}

func (tb *traceBuilder) tcp(ts int64, s seg) {
	t := &layers.TCP{SrcPort: layers.TCPPort(s.sport), DstPort: layers.TCPPort(s.dport), Seq: s.seq, Ack: s.ack,
		SYN: s.syn, ACK: s.ackF, FIN: s.fin, Window: s.win}
	if s.syn && s.wscale >= 0 {
		t.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 180}},
			{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{byte(s.wscale)}}}
	}
	if s.src.Is4() {
		ip := &layers.IPv4{Version: 4, TTL: s.ttl, TOS: s.ecn, Protocol: layers.IPProtocolTCP, SrcIP: s.src.AsSlice(), DstIP: s.dst.AsSlice()}
		t.SetNetworkLayerForChecksum(ip)
		tb.frame(ts, ip, t, s.payload, false)
		return
	}
	ip := &layers.IPv6{Version: 6, HopLimit: s.ttl, TrafficClass: s.ecn, NextHeader: layers.IPProtocolTCP, SrcIP: s.src.AsSlice(), DstIP: s.dst.AsSlice()}
	t.SetNetworkLayerForChecksum(ip)
	tb.frame(ts, ip, t, s.payload, true)
}

func (tb *traceBuilder) udp(ts int64, src, dst netip.Addr, sport, dport uint16, payload int, ttl uint8) {
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	ip := &layers.IPv4{Version: 4, TTL: ttl, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	u.SetNetworkLayerForChecksum(ip)
	tb.frame(ts, ip, u, payload, false)
}

// conn plays one TCP connection from t0 to about t0+dur: client (c) sends
// data, server (s) acknowledges.
func (tb *traceBuilder) conn(c, s netip.Addr, cport, sport uint16, t0, dur int64) {
	r := tb.rng
	ttlC, ttlS := uint8(64-r.Intn(5)), uint8(128-r.Intn(5))
	cws, sws := 7, r.Intn(3)*3-1 // server may send no window scale (-1)
	iss, irs := r.Uint32(), r.Uint32()
	if r.Intn(3) == 0 {
		iss = 0xffffffff - uint32(r.Intn(200000)) // wraps during the connection
	}
	ts := t0
	tb.tcp(ts, seg{src: c, dst: s, sport: cport, dport: sport, seq: iss, syn: true, win: 64240, wscale: cws, ttl: ttlC})
	ts += 50_000 + r.Int63n(100_000)
	tb.tcp(ts, seg{src: s, dst: c, sport: sport, dport: cport, seq: irs, ack: iss + 1, syn: true, ackF: true, win: 65160, wscale: sws, ttl: ttlS})
	ts += 50_000 + r.Int63n(100_000)
	snd, rcv := iss+1, irs+1
	acked := snd
	sent := 0
	var lastAckTS int64
	mss := 1000 + r.Intn(400)
	for ts < t0+dur {
		// a burst of segments 1-3us apart, or a spaced one
		n := 1
		gap := int64(200_000 + r.Intn(2_000_000))
		if r.Intn(3) == 0 {
			n, gap = 4+r.Intn(6), int64(1000+r.Intn(2000))
		}
		for i := 0; i < n; i++ {
			seq := snd
			pl := mss
			if r.Intn(20) == 0 && snd != acked {
				seq = acked // retransmission of the oldest unacked segment
			} else {
				snd += uint32(pl)
			}
			var ecn uint8 = 2 // ECT(0)
			if r.Intn(10) == 0 {
				ecn = 3 // CE
			}
			tb.tcp(ts, seg{src: c, dst: s, sport: cport, dport: sport, seq: seq, ack: rcv, ackF: true, win: uint16(500 + r.Intn(3000)), payload: pl, ttl: ttlC, ecn: ecn})
			sent++
			ts += gap
			if n > 1 && i < n-1 {
				continue
			}
		}
		// the server acknowledges (sometimes twice: a duplicate ACK)
		ats := ts - gap + 30_000 + r.Int63n(300_000)
		if ats <= lastAckTS {
			ats = lastAckTS + 1000
		}
		a := snd
		if r.Intn(6) == 0 {
			a = acked // nothing new: a duplicate ACK
		}
		acked = a
		tb.tcp(ats, seg{src: s, dst: c, sport: sport, dport: cport, seq: rcv, ack: a, ackF: true, win: uint16(200 + r.Intn(60000)), ttl: ttlS})
		if r.Intn(5) == 0 {
			tb.tcp(ats+2000, seg{src: s, dst: c, sport: sport, dport: cport, seq: rcv, ack: a, ackF: true, win: uint16(200 + r.Intn(60000)), ttl: ttlS})
		}
		lastAckTS = ats + 2000
		if ts < ats {
			ts = ats + 1000
		}
		if r.Intn(40) == 0 {
			ts += 25_000_000 // idle for more than an epoch: the flow is forgotten
		}
	}
}

// Trace returns the test trace, in time order.
func Trace(seed int64) []Packet {
	tb := &traceBuilder{rng: rand.New(rand.NewSource(seed))}
	a := netip.MustParseAddr
	const ms = int64(1_000_000)
	base := int64(1_700_000_000_000_000_000) / (100 * ms) * (100 * ms) // aligned to 100 ms
	start := base + 3*ms + 123_456
	// Clients in the service rack 10.0.128.0/24 to 10.20.93.0/24 servers,
	// outside clients to the rack, a tenant in 10.0.128.0/20.
	for i := range 6 {
		tb.conn(a("10.0.128.10").Next().Next(), a("10.20.93.5"), uint16(40000+i), 443, start+int64(i)*7*ms, 300*ms)
	}
	for i := range 5 {
		c := netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})
		tb.conn(c, a("10.0.128.20"), uint16(50000+i), 80, start+int64(i)*11*ms, 280*ms)
	}
	for i := range 3 {
		c := netip.AddrFrom4([4]byte{10, 0, byte(130 + i), 7})
		tb.conn(c, netip.AddrFrom4([4]byte{10, 9, byte(i), 1}), uint16(30000+i), 8080, start+int64(i)*5*ms, 250*ms)
	}
	tb.conn(a("2001:db8::1"), a("2001:db8:1::2"), 33000, 443, start, 200*ms)
	// UDP: a load spike to the rack's port 80 and background
	r := tb.rng
	for i := 0; i < 3000; i++ {
		ts := start + int64(r.Intn(300))*ms + r.Int63n(ms)
		if i%3 == 0 && ts > start+100*ms && ts < start+140*ms {
			continue
		}
		dst := netip.AddrFrom4([4]byte{10, 0, 128, byte(1 + r.Intn(4))})
		tb.udp(ts, netip.AddrFrom4([4]byte{172, 16, 0, byte(r.Intn(8))}), dst, uint16(5000+r.Intn(4)), uint16(80+r.Intn(3)*5), 200+r.Intn(1200), 60)
	}
	sort.SliceStable(tb.pkts, func(i, j int) bool { return tb.pkts[i].TS < tb.pkts[j].TS })
	return tb.pkts
}

// Flood adds n packets of new 5-tuples (one small UDP packet each, to
// addresses no event watches) spread over the trace's time.
func Flood(trace []Packet, n int, seed int64) []Packet {
	tb := &traceBuilder{rng: rand.New(rand.NewSource(seed))}
	t0, t1 := trace[0].TS, trace[len(trace)-1].TS
	for range n {
		r := tb.rng
		src := netip.AddrFrom4([4]byte{172, 31, byte(r.Intn(256)), byte(r.Intn(256))})
		dst := netip.AddrFrom4([4]byte{10, 99, byte(r.Intn(256)), byte(r.Intn(256))})
		tb.udp(t0+r.Int63n(t1-t0), src, dst, uint16(r.Intn(65536)), 53, 18, 64)
	}
	out := append(append([]Packet(nil), trace...), tb.pkts...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TS < out[j].TS })
	return out
}
