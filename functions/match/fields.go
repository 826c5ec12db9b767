package match

import (
	"encoding/binary"
	"sort"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// env is what a predicate is evaluated on: one packet. The match function
// owns one and reuses it, so evaluation allocates nothing.
type env struct {
	p    *buffers.PBuf
	slot uint32
	md   *buffers.Meta
	lt   functions.LinkType
	h    hdr
	// vars are the values of the names an expression was parsed with
	// (parseNames), set by its caller before each evaluation.
	vars []int64
}

func (e *env) set(p *buffers.PBuf, slot uint32) {
	e.p, e.slot, e.md = p, slot, p.Meta(slot)
	e.h.pkt, e.h.decoded = p.Data(slot), false
}

func (e *env) hdr() *hdr {
	if !e.h.decoded {
		e.h.decode(e.lt)
	}
	return &e.h
}

type intFn func(*env) (int64, bool)
type addrFn func(*env) (hi, lo uint64, ok bool)

// field is a packet field a predicate names.
type field struct {
	i    intFn  // an integer field
	a    addrFn // an IPv6 address
	doc  string // for the README test: every field is documented
	bits int    // of an unsigned field, for address prefixes (32 for IPv4)
	// sw marks a switch's metadata: a host has none (the field is
	// missing there), and a function that reads it runs on a switch.
	sw bool
}

// onSwitch reads a switch's metadata on a host: it is never there.
func onSwitch(*env) (int64, bool) { return 0, false }

func tcpField(off, n int) intFn { return l4Field(6, off, n) }
func udpField(off, n int) intFn { return l4Field(17, off, n) }

func l4Field(proto uint8, off, n int) intFn {
	return func(e *env) (int64, bool) {
		h := e.hdr()
		o := h.at(proto, off, n)
		if o < 0 {
			return 0, false
		}
		return readN(h.pkt, o, n), true
	}
}

// SegwayPort is the UDP port of ez-Segway's messages (SOSR 2017), as
// ffpf reads them for MAFIA's path-change-latency measurement: after the
// UDP header, msg (1 byte), ts (1 byte, the logical clock), 6 bytes kept
// zero, time (8 bytes, big-endian).
const SegwayPort = 6655

// SegwayLen is the length of an ez-Segway message's header.
const SegwayLen = 16

// segwayField reads n bytes at off of an ez-Segway message's header.
func segwayField(off, n int) intFn {
	return func(e *env) (int64, bool) {
		h := e.hdr()
		if o := h.at(17, 2, 2); o < 0 || be16(h.pkt, o) != SegwayPort || h.at(17, 8, SegwayLen) < 0 {
			return 0, false
		}
		return readN(h.pkt, h.at(17, 8+off, n), n), true
	}
}

func readN(b []byte, o, n int) int64 {
	switch n {
	case 8:
		return int64(binary.BigEndian.Uint64(b[o:]))
	case 1:
		return int64(b[o])
	case 2:
		return int64(be16(b, o))
	}
	return int64(be32(b, o))
}

// ipField reads n bytes at off of the IPv4 (ver 4) or IPv6 (ver 6) header.
func ipField(ver uint8, off, n int) intFn {
	return func(e *env) (int64, bool) {
		h := e.hdr()
		if h.ver != ver {
			return 0, false
		}
		return readN(h.pkt, h.l3+off, n), true
	}
}

func ethMAC(off int) intFn {
	return func(e *env) (int64, bool) {
		h := e.hdr()
		if !h.eth {
			return 0, false
		}
		return int64(be16(h.pkt, off))<<32 | int64(be32(h.pkt, off+2)), true
	}
}

func ipv6Addr(off int) addrFn {
	return func(e *env) (uint64, uint64, bool) {
		h := e.hdr()
		if h.ver != 6 {
			return 0, 0, false
		}
		b := h.pkt[h.l3+off:]
		return uint64(be32(b, 0))<<32 | uint64(be32(b, 4)), uint64(be32(b, 8))<<32 | uint64(be32(b, 12)), true
	}
}

var fields = map[string]field{
	"pkt.len":    {i: func(e *env) (int64, bool) { return int64(e.md.WireLen), true }, doc: "bytes on the wire"},
	"pkt.caplen": {i: func(e *env) (int64, bool) { return int64(e.md.CapLen), true }, doc: "bytes captured"},
	"pkt.ts":     {i: func(e *env) (int64, bool) { return e.md.Timestamp, true }, doc: "capture time, ns since the Unix epoch"},
	"eth.src":    {i: ethMAC(6), doc: "source MAC (48 bits)"},
	"eth.dst":    {i: ethMAC(0), doc: "destination MAC"},
	"eth.type": {i: func(e *env) (int64, bool) {
		h := e.hdr()
		return int64(h.ethType), h.eth
	}, doc: "the frame's type field (the outermost: 0x8100 on a tagged frame)"},
	"vlan.id": {i: func(e *env) (int64, bool) {
		h := e.hdr()
		return int64(h.vid), h.vlan
	}, doc: "VLAN ID of the outermost tag"},
	"ipv4.src":   {i: ipField(4, 12, 4), doc: "source address", bits: 32},
	"ipv4.dst":   {i: ipField(4, 16, 4), doc: "destination address", bits: 32},
	"ipv4.proto": {i: ipField(4, 9, 1), doc: "protocol"},
	"ipv4.ttl":   {i: ipField(4, 8, 1), doc: "time to live"},
	"ipv4.len":   {i: ipField(4, 2, 2), doc: "total length field"},
	"ipv4.tos":   {i: ipField(4, 1, 1), doc: "type of service byte (DSCP and ECN)"},
	"ipv4.id":    {i: ipField(4, 4, 2), doc: "identification"},
	"ipv4.csum":  {i: ipField(4, 10, 2), doc: "header checksum"},
	"pkt.inport": {i: func(e *env) (int64, bool) { return int64(e.md.Source) + 1, true },
		doc: "the port the packet came in by: on a switch its ingress port; on a host the source's position among the flowspace's sources, from 1 (the first -r file or interface is port 1, as a switch's first port)"},
	"pkt.outport": {i: onSwitch, sw: true,
		doc: "on a switch: the port it leaves by (forwarding decides it before the functions run)"},
	"pkt.qdepth":  {i: onSwitch, sw: true, doc: "on a switch: the depth of the egress queue it joins, in packets"},
	"switch.id":   {i: onSwitch, sw: true, doc: "on a switch: the switch's id (its P4Runtime device id)"},
	"segway.msg":  {i: segwayField(0, 1), doc: "ez-Segway message type (a UDP datagram to port 6655: SegwayPort)"},
	"segway.ts":   {i: segwayField(1, 1), doc: "ez-Segway message's logical clock"},
	"segway.time": {i: segwayField(8, 8), doc: "ez-Segway message's time field (64 bits)"},
	"ipv6.src":    {a: ipv6Addr(8), doc: "source address"},
	"ipv6.dst":    {a: ipv6Addr(24), doc: "destination address"},
	"ipv6.nh":     {i: ipField(6, 6, 1), doc: "next header of the fixed header"},
	"ipv6.hlim":   {i: ipField(6, 7, 1), doc: "hop limit"},
	"ip.proto": {i: func(e *env) (int64, bool) {
		h := e.hdr()
		return int64(h.proto), h.ver != 0
	}, doc: "IPv4 protocol, or IPv6 upper-layer protocol after the extension headers"},
	"tcp.sport": {i: tcpField(0, 2), doc: "source port"},
	"tcp.dport": {i: tcpField(2, 2), doc: "destination port"},
	"tcp.seq":   {i: tcpField(4, 4), doc: "sequence number"},
	"tcp.ack":   {i: tcpField(8, 4), doc: "acknowledgment number"},
	"tcp.flags": {i: tcpField(13, 1), doc: "flags byte: FIN 0x01 SYN 0x02 RST 0x04 PSH 0x08 ACK 0x10 URG 0x20 ECE 0x40 CWR 0x80"},
	"tcp.win":   {i: tcpField(14, 2), doc: "window"},
	"udp.sport": {i: udpField(0, 2), doc: "source port"},
	"udp.dport": {i: udpField(2, 2), doc: "destination port"},
	"udp.len":   {i: udpField(4, 2), doc: "length field"},
	"icmp.type": {i: l4Field(protoICMP, 0, 1), doc: "type (ICMP, or ICMPv6 over IPv6)"},
	"icmp.code": {i: l4Field(protoICMP, 1, 1), doc: "code"},
}

// layers are the words that test whether a packet has a header.
var layers = map[string]func(*env) bool{
	"eth":  func(e *env) bool { return e.hdr().eth },
	"vlan": func(e *env) bool { return e.hdr().tagged },
	"ip":   func(e *env) bool { return e.hdr().ver != 0 },
	"ipv4": func(e *env) bool { return e.hdr().ver == 4 },
	"ipv6": func(e *env) bool { return e.hdr().ver == 6 },
	"tcp":  func(e *env) bool { h := e.hdr(); return h.ver != 0 && h.proto == 6 },
	"udp":  func(e *env) bool { h := e.hdr(); return h.ver != 0 && h.proto == 17 },
	"icmp": func(e *env) bool { h := e.hdr(); return h.ver == 4 && h.proto == 1 || h.ver == 6 && h.proto == 58 },
}

// FieldNames lists the packet fields, sorted.
func FieldNames() []string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// protocols are the prefixes of packet fields: a dotted name with another
// prefix is named state (LABEL.NAME).
var protocols = map[string]bool{"segway": true, "switch": true, "pkt": true, "eth": true, "vlan": true, "ip": true, "ipv4": true, "ipv6": true, "tcp": true, "udp": true, "icmp": true}
