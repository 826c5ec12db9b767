package bpf

import (
	"encoding/binary"
	"math/rand"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// testPacket is one packet of the adversarial corpus: the captured bytes
// and the length on the wire.
type testPacket struct {
	name string
	data []byte
	wire uint32
}

var (
	macA     = net.HardwareAddr{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
	macB     = net.HardwareAddr{0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb}
	macBcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	macMcast = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb}
	mac6Mc   = net.HardwareAddr{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}

	ipA    = net.IPv4(10, 0, 0, 1).To4()
	ipB    = net.IPv4(192, 168, 1, 2).To4()
	ipC    = net.IPv4(172, 20, 3, 4).To4()
	ipMc   = net.IPv4(224, 0, 0, 251).To4()
	ipBc   = net.IPv4(255, 255, 255, 255).To4()
	ip6A   = net.ParseIP("2001:db8::1")
	ip6B   = net.ParseIP("2001:db8:1::2")
	ip6C   = net.ParseIP("fe80::1")
	ip6Mc  = net.ParseIP("ff02::1")
	ip6Mdn = net.ParseIP("ff02::fb")
)

// serialize builds a packet from layers with gopacket, lengths fixed.
func serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		tb.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func eth(dst net.HardwareAddr, t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: dst, EthernetType: t}
}

func ip4(src, dst net.IP, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src, DstIP: dst, Id: 0x1234}
}

func ip6(src, dst net.IP, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: src, DstIP: dst}
}

func tcp(src, dst layers.TCPPort, flags string, opts bool) *layers.TCP {
	t := &layers.TCP{SrcPort: src, DstPort: dst, Seq: 1000, Ack: 2000, Window: 65535}
	for _, f := range flags {
		switch f {
		case 'S':
			t.SYN = true
		case 'A':
			t.ACK = true
		case 'F':
			t.FIN = true
		case 'R':
			t.RST = true
		case 'P':
			t.PSH = true
		case 'U':
			t.URG = true
		}
	}
	if opts {
		t.Options = []layers.TCPOption{
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}},
			{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
			{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: make([]byte, 8)},
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
		}
	}
	return t
}

func udp(src, dst layers.UDPPort) *layers.UDP { return &layers.UDP{SrcPort: src, DstPort: dst} }

func payload(n int, seed byte) gopacket.Payload {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

// ext6 is a raw 8-byte IPv6 extension header (hop-by-hop, destination
// options or routing) followed by the next header.
func ext6(next layers.IPProtocol) []byte {
	return []byte{byte(next), 0, 1, 4, 0, 0, 0, 0}
}

// frag6 is an IPv6 fragment header.
func frag6(next layers.IPProtocol, offset uint16, more bool) []byte {
	b := []byte{byte(next), 0, 0, 0, 0, 0, 0x43, 0x21}
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	return b
}

// ah is an authentication header (RFC 4302) with a 12-byte ICV: payload
// length (in 4-byte words, minus 2) 4.
func ah(next layers.IPProtocol) []byte {
	b := make([]byte, 24)
	b[0], b[1] = byte(next), 4
	binary.BigEndian.PutUint32(b[4:], 0x100)
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// tcpBytes serializes a TCP segment (with payload) on its own.
func tcpBytes(tb testing.TB, t *layers.TCP, n int) []byte {
	return serialize(tb, t, payload(n, 0x41))
}

// baseCorpus returns well-formed and malformed packets, each whole (wire
// length = captured length).
func baseCorpus(tb testing.TB) []testPacket {
	var ps []testPacket
	add := func(name string, b []byte) { ps = append(ps, testPacket{name, b, uint32(len(b))}) }
	T, U := layers.IPProtocolTCP, layers.IPProtocolUDP

	add("ipv4-tcp-syn-80-opts", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, T), tcp(40000, 80, "S", true)))
	add("ipv4-tcp-ack-from80", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipB, ipA, T), tcp(80, 40000, "AP", false), payload(200, 1)))
	add("ipv4-tcp-synack-443", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipC, ipA, T), tcp(443, 51000, "SA", true)))
	add("ipv4-tcp-rst-22", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipC, T), tcp(51000, 22, "R", false)))
	add("ipv4-tcp-fin-8080", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipC, T), tcp(1500, 8080, "FA", false), payload(10, 2)))
	add("ipv4-tcp-http-get", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, T), tcp(40001, 80, "AP", true), gopacket.Payload("GET / HTTP/1.1\r\nHost: x\r\n\r\n")))
	big := ip4(ipB, ipA, T)
	big.TTL = 30
	add("ipv4-tcp-1514", serialize(tb, eth(macB, layers.EthernetTypeIPv4), big, tcp(80, 40000, "A", false), payload(1460, 3)))
	add("ipv4-udp-dns", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, U), udp(5353, 53), payload(40, 4)))
	add("ipv4-udp-1500", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipC, ipB, U), udp(1500, 1999), payload(100, 5)))
	add("ipv4-udp-geneve", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipC, ipB, U), udp(1234, 6081),
		gopacket.Payload(cat([]byte{0, 0, 0x65, 0x58, 0, 0, 1, 0}, serialize(tb, eth(macA, layers.EthernetTypeIPv4), ip4(ipA, ipB, T), tcp(1, 80, "S", false))))))
	add("ipv4-udp-mdns-mcast", serialize(tb, eth(macMcast, layers.EthernetTypeIPv4), ip4(ipA, ipMc, U), udp(5353, 5353), payload(30, 6)))
	add("ipv4-udp-bcast", serialize(tb, eth(macBcast, layers.EthernetTypeIPv4), ip4(ipA, ipBc, U), udp(68, 67), payload(240, 7)))
	lowTTL := ip4(ipA, ipB, layers.IPProtocolICMPv4)
	lowTTL.TTL = 3
	add("ipv4-icmp-echo", serialize(tb, eth(macB, layers.EthernetTypeIPv4), lowTTL,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}, payload(56, 8)))
	add("ipv4-icmp-unreach", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipB, ipA, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, 3)}, payload(28, 9)))
	add("arp-request", serialize(tb, eth(macBcast, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
		SourceHwAddress: macA, SourceProtAddress: ipA, DstHwAddress: make([]byte, 6), DstProtAddress: ipB}))
	rarp := serialize(tb, eth(macBcast, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 3,
		SourceHwAddress: macA, SourceProtAddress: make([]byte, 4), DstHwAddress: macA, DstProtAddress: make([]byte, 4)})
	rarp[12], rarp[13] = 0x80, 0x35
	add("rarp-request", rarp)
	add("ipv6-tcp-443", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, T), tcp(51000, 443, "S", true)))
	add("ipv6-tcp-80", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6B, ip6A, T), tcp(40000, 80, "AP", false), payload(100, 10)))
	add("ipv6-udp-mdns-mcast", serialize(tb, eth(mac6Mc, layers.EthernetTypeIPv6), ip6(ip6C, ip6Mdn, U), udp(5353, 5353), payload(20, 11)))
	add("ipv6-icmp6-ns", serialize(tb, eth(mac6Mc, layers.EthernetTypeIPv6), ip6(ip6C, ip6Mc, layers.IPProtocolICMPv6),
		&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}, payload(20, 12)))
	add("ipv6-icmp6-echo", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, layers.IPProtocolICMPv6),
		&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}, payload(20, 13)))
	add("vlan100-ipv4-tcp-80", serialize(tb, eth(macB, layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv4},
		ip4(ipA, ipB, T), tcp(40000, 80, "S", false)))
	add("vlan200-ipv6-tcp-443", serialize(tb, eth(macB, layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 200, Priority: 5, Type: layers.EthernetTypeIPv6},
		ip6(ip6A, ip6B, T), tcp(40000, 443, "S", false)))
	add("qinq-100-200-ipv4-udp", serialize(tb, eth(macB, layers.EthernetTypeQinQ), &layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 200, Type: layers.EthernetTypeIPv4}, ip4(ipA, ipB, U), udp(1000, 53), payload(20, 14)))
	add("qinq8100-8100-ipv4-tcp", serialize(tb, eth(macB, layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 300, Type: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: 100, Type: layers.EthernetTypeIPv4}, ip4(ipA, ipB, T), tcp(40000, 80, "S", false)))
	add("vlan0-arp", serialize(tb, eth(macBcast, layers.EthernetTypeDot1Q), &layers.Dot1Q{VLANIdentifier: 0, Type: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPReply, SourceHwAddress: macA, SourceProtAddress: ipA, DstHwAddress: macB, DstProtAddress: ipB}))
	add("ipv4-gre-ipv4-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipC, layers.IPProtocolGRE),
		&layers.GRE{Protocol: layers.EthernetTypeIPv4}, ip4(ipB, ipA, T), tcp(40000, 80, "S", false)))

	first := ip4(ipA, ipB, T)
	first.Flags = layers.IPv4MoreFragments
	add("ipv4-frag-first", serialize(tb, eth(macB, layers.EthernetTypeIPv4), first, tcp(40000, 80, "S", false), payload(64, 15)))
	later := ip4(ipA, ipB, T)
	later.FragOffset = 185
	add("ipv4-frag-later", serialize(tb, eth(macB, layers.EthernetTypeIPv4), later, payload(120, 16)))
	df := ip4(ipA, ipB, U)
	df.Flags = layers.IPv4DontFragment
	add("ipv4-df-udp", serialize(tb, eth(macB, layers.EthernetTypeIPv4), df, udp(33000, 1050), payload(8, 17)))

	opt := ip4(ipA, ipB, T)
	opt.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	add("ipv4-options-tcp-80", serialize(tb, eth(macB, layers.EthernetTypeIPv4), opt, tcp(40000, 80, "S", true)))

	// Bogus IPv4 headers, patched after serialization.
	good := serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, T), tcp(40000, 80, "S", false), payload(8, 18))
	patch := func(name string, f func(b []byte)) {
		b := append([]byte(nil), good...)
		f(b)
		add(name, b)
	}
	patch("ipv4-ihl-0", func(b []byte) { b[14] = 0x40 })
	patch("ipv4-ihl-2", func(b []byte) { b[14] = 0x42 })
	patch("ipv4-ihl-4", func(b []byte) { b[14] = 0x44 })
	patch("ipv4-ihl-15", func(b []byte) { b[14] = 0x4f })
	patch("ipv4-ihl-6-nooptions", func(b []byte) { b[14] = 0x46 })
	patch("ipv4-version-6", func(b []byte) { b[14] = 0x65 })
	patch("ipv4-totlen-huge", func(b []byte) { binary.BigEndian.PutUint16(b[16:], 0xffff) })
	patch("ipv4-totlen-tiny", func(b []byte) { binary.BigEndian.PutUint16(b[16:], 10) })
	patch("ipv4-totlen-0", func(b []byte) { binary.BigEndian.PutUint16(b[16:], 0) })
	patch("ipv4-proto-47-not-gre", func(b []byte) { b[23] = 47 })
	patch("ipv4-tcp-doff-0", func(b []byte) { b[46] = 0 })
	patch("ipv4-tcp-doff-15", func(b []byte) { b[46] = 0xf0 })
	patch("ipv4-mf-offset", func(b []byte) { b[20], b[21] = 0x3f, 0xff })
	patch("ethertype-zero", func(b []byte) { b[12], b[13] = 0, 0 })
	patch("ethertype-vlan-but-ip", func(b []byte) { b[12], b[13] = 0x81, 0x00 })
	patch("ethertype-ipv6-but-ipv4", func(b []byte) { b[12], b[13] = 0x86, 0xdd })

	// IPv6 extension header chains (protochain walks them with a backward
	// jump).
	seg := tcpBytes(tb, tcp(40000, 80, "S", false), 0)
	H, D, R, F := layers.IPProtocolIPv6HopByHop, layers.IPProtocolIPv6Destination, layers.IPProtocolIPv6Routing, layers.IPProtocolIPv6Fragment
	ext := cat(ext6(D), ext6(R), ext6(F), frag6(T, 0, true), seg)
	add("ipv6-ext-chain-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, H), gopacket.Payload(ext)))
	add("ipv6-frag-later-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, F), gopacket.Payload(cat(frag6(T, 100, false), payload(40, 19)))))
	add("ipv6-hbh-udp", serialize(tb, eth(mac6Mc, layers.EthernetTypeIPv6), ip6(ip6C, ip6Mc, H), gopacket.Payload(cat(ext6(U), serialize(tb, udp(1000, 2000), payload(8, 20))))))
	add("ipv6-ah-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, layers.IPProtocolAH), gopacket.Payload(cat(ah(T), seg))))
	add("ipv6-nonext", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, layers.IPProtocolNoNextHeader)))
	// 70 destination-options headers: more than the 64 backward jumps
	// current libpcap allows, fewer than ours; libpcap 1.10 accepts.
	var long []byte
	for i := 0; i < 69; i++ {
		long = append(long, ext6(D)...)
	}
	long = append(long, cat(ext6(T), seg)...)
	add("ipv6-70-dstopts-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv6), ip6(ip6A, ip6B, D), gopacket.Payload(long)))
	add("ipv4-ah-tcp", serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, layers.IPProtocolAH), gopacket.Payload(cat(ah(T), seg))))

	// 802.3 frames with an LLC header instead of an ethertype.
	stp := cat(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0}, macA, []byte{0, 38, 0x42, 0x42, 0x03}, make([]byte, 35))
	add("llc-stp", stp)
	snap := cat(macB, macA, []byte{0, 50, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00}, good[14:])
	add("llc-snap-ipv4", snap)
	add("lldp", cat(net.HardwareAddr{0x01, 0x80, 0xc2, 0, 0, 0x0e}, macA, []byte{0x88, 0xcc}, payload(40, 21)))
	add("mpls-ipv4", cat(macB, macA, []byte{0x88, 0x47, 0x00, 0x01, 0x41, 0x40}, good[14:]))
	add("runt-14", good[:14])
	return ps
}

// hostileLoop is an IPv4 packet whose AH header makes libpcap's IPv4
// protochain code loop forever (X is set to (len+2)*4 = 20 again and the
// next header is AH again). libpcap 1.10 hangs on it; never give it to the
// oracle.
func hostileLoop(tb testing.TB) []byte {
	b := serialize(tb, eth(macB, layers.EthernetTypeIPv4), ip4(ipA, ipB, layers.IPProtocolAH), payload(40, 0))
	b[34], b[35] = byte(layers.IPProtocolAH), 3
	return b
}

// truncations returns every prefix of every packet in ps: captured length
// 0 … len, with the original wire length (as a snap length would leave
// them) and, for a shorter runt, with wire = captured.
func truncations(ps []testPacket) []testPacket {
	var out []testPacket
	for _, p := range ps {
		for n := 0; n < len(p.data); n++ {
			out = append(out, testPacket{p.name + "/trunc", p.data[:n:n], p.wire})
			out = append(out, testPacket{p.name + "/runt", p.data[:n:n], uint32(n)})
		}
	}
	return out
}

// garbage returns random packets from a fixed seed: pure noise, noise
// behind a plausible ethertype, and the corpus with a few bytes changed
// and a random truncation.
func garbage(ps []testPacket, n int) []testPacket {
	rng := rand.New(rand.NewSource(20240601))
	types := [][2]byte{{0x08, 0x00}, {0x86, 0xdd}, {0x81, 0x00}, {0x88, 0xa8}, {0x08, 0x06}, {0x91, 0x00}}
	interesting := []byte{0, 1, 2, 4, 5, 6, 0x11, 0x2c, 0x2b, 0x3c, 0x33, 0x3a, 0x3b, 0x2f, 0x45, 0x4f, 0x50, 0x81, 0x86, 0xdd, 0x08, 0xff, 0x7f, 0x80}
	var out []testPacket
	for i := 0; i < n; i++ {
		var b []byte
		switch i % 3 {
		case 0: // noise
			b = make([]byte, rng.Intn(160))
			rng.Read(b)
		case 1: // noise behind an ethertype and an IP version nibble
			b = make([]byte, 14+rng.Intn(120))
			rng.Read(b)
			t := types[rng.Intn(len(types))]
			b[12], b[13] = t[0], t[1]
			if len(b) > 14 && rng.Intn(2) == 0 {
				b[14] = 0x40 | b[14]&0x0f
			}
		case 2: // mutation of a corpus packet
			src := ps[rng.Intn(len(ps))].data
			b = append([]byte(nil), src...)
			for m := rng.Intn(4) + 1; m > 0 && len(b) > 0; m-- {
				j := rng.Intn(len(b))
				if rng.Intn(2) == 0 {
					b[j] = interesting[rng.Intn(len(interesting))]
				} else {
					b[j] = byte(rng.Intn(256))
				}
			}
			if rng.Intn(3) == 0 && len(b) > 0 {
				b = b[:rng.Intn(len(b))]
			}
		}
		wire := uint32(len(b))
		switch rng.Intn(4) {
		case 0:
			wire += uint32(rng.Intn(2000))
		case 1:
			wire = uint32(rng.Intn(2000)) // may be below the captured length
		}
		out = append(out, testPacket{"garbage", b, wire})
	}
	return out
}

// fullCorpus is the base corpus, with extra wire lengths, all truncations
// and garbage.
func fullCorpus(tb testing.TB) []testPacket {
	base := baseCorpus(tb)
	all := append([]testPacket(nil), base...)
	for _, p := range base {
		all = append(all, testPacket{p.name + "/wire+", p.data, p.wire + 100})
	}
	all = append(all, truncations(base)...)
	loop := testPacket{"hostile-ah-loop", hostileLoop(tb), 0}
	loop.wire = uint32(len(loop.data))
	all = append(all, loop, testPacket{"hostile-ah-loop/wire+", loop.data, loop.wire + 1000})
	all = append(all, garbage(base, 6000)...)
	return all
}
