// Package p4test is what the tests of the classes' P4 lowerings share:
// the frames a switch must get right (adversarial frames built by hand,
// each cut at every length, and generated traces), a function's
// parameters from its expression, its P4 code assembled into a program
// alone, and runs of frames through p4gen.Switch and through the class's
// Go function, so that a test compares the two on the same frames. It is
// for tests only.
//
// The sharp edge: a switch sees a frame as it arrived, so the Go side is
// given each frame with its wire length equal to its length, as a switch
// would count it: a cut frame is a short frame, not a truncated capture.
package p4test

import (
	"encoding/binary"
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

var (
	macA = []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01} // multicast
	macB = []byte{0x02, 0x00, 0x00, 0x11, 0x22, 0x33}
)

// Eth builds an Ethernet header of type etype behind the given tags
// (each a TPID and a VLAN ID).
func Eth(etype uint16, tags ...[2]uint16) []byte {
	b := cat(macB, macA)
	for _, t := range tags {
		b = cat(b, u16(t[0]), u16(t[1]|0x2000))
	}
	return cat(b, u16(etype))
}

// IPv4 builds an IPv4 header of IHL ihl (options of NOPs when above 5;
// below 5 the header is still 20 bytes) carrying l4, with the given
// fragment field, protocol and addresses.
func IPv4(ihl int, proto uint8, frag uint16, src, dst [4]byte, l4 []byte) []byte {
	n := 20
	if ihl > 5 {
		n = 4 * ihl
	}
	h := make([]byte, n)
	h[0] = 0x40 | byte(ihl)
	h[1] = 0xb8
	binary.BigEndian.PutUint16(h[2:], uint16(n+len(l4)))
	binary.BigEndian.PutUint16(h[4:], 0x1234)
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8], h[9] = 64, proto
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	for i := 20; i < n; i++ {
		h[i] = 1
	}
	return cat(h, l4)
}

// IPv6 builds an IPv6 header of next header nh around payload (its
// extension headers included).
func IPv6(nh uint8, src, dst [16]byte, payload []byte) []byte {
	h := make([]byte, 40)
	h[0], h[1] = 0x6b, 0x80
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6], h[7] = nh, 64
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return cat(h, payload)
}

// Ext builds an IPv6 hop-by-hop, routing or destination options header
// of 8·(units+1) bytes; Frag a fragment header.
func Ext(nh, units uint8) []byte {
	b := make([]byte, 8*(int(units)+1))
	b[0], b[1] = nh, units
	for i := 2; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

// Frag builds an IPv6 fragment header.
func Frag(nh uint8, offset uint16, more bool) []byte {
	b := make([]byte, 8)
	b[0] = nh
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	binary.BigEndian.PutUint32(b[4:], 0xdeadbeef)
	return b
}

// TCP builds a TCP header (data offset 5, or with options) with payload.
func TCP(sport, dport uint16, flags uint8, optWords int, payload int) []byte {
	h := make([]byte, 20+4*optWords)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 0x01020304)
	binary.BigEndian.PutUint32(h[8:], 0x0a0b0c0d)
	h[12] = byte(5+optWords) << 4
	h[13] = flags
	binary.BigEndian.PutUint16(h[14:], 0xffff)
	for i := range payload {
		h = append(h, byte(i))
	}
	return h
}

// UDP builds a UDP header with payload.
func UDP(sport, dport uint16, payload int) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h, sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+payload))
	for i := range payload {
		h = append(h, byte(i*7))
	}
	return h
}

// ICMP builds an ICMP (or ICMPv6) header of type and code with payload.
func ICMP(typ, code uint8, payload int) []byte {
	h := []byte{typ, code, 0xab, 0xcd, 0, 1, 0, 2}
	for i := range payload {
		h = append(h, byte(i))
	}
	return h
}

// ARP builds an ARP (or RARP) request of sender spa for tpa.
func ARP(spa, tpa [4]byte) []byte {
	return cat([]byte{0, 1, 8, 0, 6, 4, 0, 1}, macB, spa[:], make([]byte, 6), tpa[:])
}

var (
	v4a = [4]byte{10, 0, 0, 1}
	v4b = [4]byte{192, 168, 1, 2}
	v4m = [4]byte{224, 0, 0, 251}
	v6a = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	v6b = [16]byte{0xfe, 0x80, 15: 0x22}
	v6m = [16]byte{0xff, 0x02, 15: 1}
)

// Q and AD are VLAN tags of 802.1Q and 802.1ad with a VLAN ID.
func Q(vid uint16) [2]uint16  { return [2]uint16{0x8100, vid} }
func AD(vid uint16) [2]uint16 { return [2]uint16{0x88a8, vid} }

// Adversarial returns frames that test a parser where it breaks: every
// IHL from 0 to 15 for TCP, UDP and ICMP, IPv4 options, first and later
// fragments, total lengths of 0, below the header and beyond the frame,
// VLAN tags up to five deep (802.1Q, 802.1ad, 0x9100), IPv6 with chains of
// extension headers (fragments first and later, nine deep, longer than
// the payload length), ICMP and ICMPv6, ARP and RARP, and other
// ethertypes. Each frame is whole; Cuts cuts them.
func Adversarial() [][]byte {
	var fs [][]byte
	l4s := []struct {
		proto uint8
		l4    []byte
	}{
		{6, TCP(80, 1234, 0x12, 0, 6)}, {6, TCP(4321, 443, 0x02, 2, 0)}, {17, UDP(53, 5353, 12)},
		{1, ICMP(8, 0, 8)}, {132, UDP(2905, 80, 4)}, {47, UDP(1, 2, 4)},
	}
	for ihl := range 16 {
		for _, l := range l4s {
			fs = append(fs, cat(Eth(0x0800), IPv4(ihl, l.proto, 0, v4a, v4b, l.l4)))
		}
	}
	for _, frag := range []uint16{0x2000, 0x0001, 0x00b9, 0x4000, 0x1fff} {
		fs = append(fs, cat(Eth(0x0800), IPv4(5, 6, frag, v4b, v4m, TCP(80, 80, 0x11, 0, 2))),
			cat(Eth(0x0800), IPv4(7, 17, frag, v4a, v4m, UDP(80, 53, 2))))
	}
	// Total lengths: 0 (a TSO send), below the header, beyond the frame,
	// ending inside the ports.
	for _, tot := range []uint16{0, 12, 20, 22, 1500} {
		f := cat(Eth(0x0800), IPv4(5, 6, 0, v4a, v4b, TCP(22, 2222, 0x18, 0, 4)))
		binary.BigEndian.PutUint16(f[16:], tot)
		fs = append(fs, f)
	}
	// Version 6 in an IPv4 ethertype, and 4 in an IPv6 one.
	bad := cat(Eth(0x0800), IPv4(5, 6, 0, v4a, v4b, TCP(1, 2, 0, 0, 0)))
	bad[14] = 0x65
	fs = append(fs, bad)
	bad6 := cat(Eth(0x86dd), IPv6(6, v6a, v6b, TCP(1, 2, 0, 0, 0)))
	bad6[14] = 0x4b
	fs = append(fs, bad6)
	// VLAN tags, one to five deep, each kind.
	tcp4 := IPv4(5, 6, 0, v4a, v4b, TCP(1024, 80, 0x02, 0, 0))
	fs = append(fs,
		cat(Eth(0x0800, Q(100)), tcp4),
		cat(Eth(0x0800, AD(200), Q(100)), tcp4),
		cat(Eth(0x86dd, Q(100)), IPv6(17, v6a, v6m, UDP(5353, 5353, 4))),
		cat(Eth(0x0800, [2]uint16{0x9100, 7}, Q(300), Q(400)), tcp4),
		cat(Eth(0x0800, Q(1), Q(2), Q(3), Q(4)), tcp4),
		cat(Eth(0x0800, Q(1), Q(2), Q(3), Q(4), Q(5)), tcp4),
		cat(Eth(0x0806, Q(100)), ARP(v4a, v4b)),
		cat(Eth(0x1234, Q(100)), make([]byte, 30)),
	)
	// IPv6 and its extension headers.
	tcp6 := TCP(443, 50000, 0x10, 0, 3)
	fs = append(fs,
		cat(Eth(0x86dd), IPv6(6, v6a, v6b, tcp6)),
		cat(Eth(0x86dd), IPv6(58, v6b, v6m, ICMP(135, 0, 16))),
		cat(Eth(0x86dd), IPv6(0, v6a, v6b, cat(Ext(6, 0), tcp6))),
		cat(Eth(0x86dd), IPv6(0, v6a, v6b, cat(Ext(43, 1), Ext(60, 0), UDP(1, 2, 3)))),
		cat(Eth(0x86dd), IPv6(44, v6a, v6b, cat(Frag(6, 0, true), tcp6))),
		cat(Eth(0x86dd), IPv6(44, v6a, v6b, cat(Frag(6, 185, false), tcp6))),
		cat(Eth(0x86dd), IPv6(44, v6a, v6b, cat(Frag(58, 0, true), ICMP(128, 0, 4)))),
		cat(Eth(0x86dd), IPv6(60, v6a, v6b, cat(Ext(44, 0), Frag(17, 0, false), UDP(9, 9, 1)))),
		cat(Eth(0x86dd), IPv6(59, v6a, v6b, nil)),
		cat(Eth(0x86dd), IPv6(132, v6a, v6b, UDP(3868, 3868, 0))),
	)
	chain := func(n int, last uint8, l4 []byte) []byte {
		var b []byte
		for i := range n {
			nh := uint8(60)
			if i == n-1 {
				nh = last
			}
			b = cat(b, Ext(nh, uint8(i%3)))
		}
		return cat(Eth(0x86dd), IPv6(0, v6a, v6b, cat(b, l4)))
	}
	fs = append(fs, chain(7, 17, UDP(7, 7, 2)), chain(8, 17, UDP(8, 8, 2)), chain(9, 17, UDP(9, 9, 2)), chain(8, 0, Ext(6, 0)))
	// A payload length that ends inside the extension headers or the ports.
	for _, plen := range []uint16{0, 1, 9, 10, 18} {
		f := cat(Eth(0x86dd), IPv6(0, v6a, v6b, cat(Ext(6, 0), tcp6)))
		binary.BigEndian.PutUint16(f[18:], plen)
		fs = append(fs, f)
	}
	// ARP, RARP, other types, an 802.3 length field.
	fs = append(fs,
		cat(Eth(0x0806), ARP(v4a, v4b)),
		cat(Eth(0x8035), ARP(v4b, v4a)),
		cat(Eth(0x88cc), make([]byte, 46)),
		cat(Eth(0x05dc), make([]byte, 46)),
		cat(Eth(0x0800), IPv4(5, 1, 0, v4a, v4b, ICMP(0, 0, 20))),
	)
	return fs
}

// Cuts returns every frame of fs cut at every length, from 0 bytes to
// whole.
func Cuts(fs [][]byte) [][]byte {
	var out [][]byte
	for _, f := range fs {
		for n := 0; n <= len(f); n++ {
			out = append(out, f[:n:n])
		}
	}
	return out
}
