package monitor

import (
	"encoding/binary"

	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
)

// Key is a flow's 5-tuple in flowkey's layout for the spec "5tuple": word 0
// holds the family, protocol and ports (flowkey's *Shift constants and
// PortsPresent), words 1–2 the source address and 3–4 the destination
// address (IPv4 in the top 32 bits of the first word). Two keys compare
// with ==; a bucket's key is a flow's key with the fields its granularity
// drops cleared.
type Key [5]uint64

// Family is 4 or 6.
func (k *Key) Family() uint8 { return uint8(k[0] >> flowkey.FamilyShift) }

// Proto is the IP protocol (IPv6: the upper-layer next header).
func (k *Key) Proto() uint8 { return uint8(k[0] >> flowkey.ProtoShift) }

// Ports reports the ports, and whether the packet had them.
func (k *Key) Ports() (src, dst uint16, ok bool) {
	return uint16(k[0] >> flowkey.SrcPortShift), uint16(k[0] >> flowkey.DstPortShift), k[0]&flowkey.PortsPresent != 0
}

// reverse is the key of the other direction.
func (k *Key) reverse() Key {
	h := k[0] &^ (0xffff<<flowkey.SrcPortShift | 0xffff<<flowkey.DstPortShift)
	h |= (k[0]>>flowkey.SrcPortShift&0xffff)<<flowkey.DstPortShift | (k[0]>>flowkey.DstPortShift&0xffff)<<flowkey.SrcPortShift
	return Key{h, k[3], k[4], k[1], k[2]}
}

// eq is k == *o without a call to the runtime's memequal.
func (k *Key) eq(o *Key) bool {
	return k[0] == o[0] && k[1] == o[1] && k[2] == o[2] && k[3] == o[3] && k[4] == o[4]
}

func (k *Key) hash() uint64 { return flowkey.HashWords(k[:], 0) }

// TCP flags.
const (
	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagACK = 0x10
)

// Packet is what the monitor reads of one packet: its flow key and the
// header fields Table 1's variables are computed from.
type Packet struct {
	Key     Key
	TS      int64  // ns, the packet clock
	WireLen uint32 // bytes on the wire (the DoS filter counts them)
	TTL     uint8  // IPv4 TTL or IPv6 hop limit
	ECN     uint8  // the IP ECN field: 3 is CE
	Payload uint32 // L4 payload bytes, from the IP and L4 header lengths
	TCP     bool   // a TCP header was read (the TCP fields below are set)
	Flags   uint8
	Seq     uint32
	Ack     uint32
	Win     uint16
	WScale  int8 // the window-scale option of a SYN; -1 without one
}

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

// Parse reads a packet of link type lt captured as pkt into p. It returns
// false for a packet without a readable IPv4 or IPv6 header (it has no
// flow). The IP header is read as flowkey reads it (IPv6 extension headers
// walked, ports of first fragments only); lengths come from the headers,
// not from the captured length, so a capture cut by a snap length measures
// the same volume. It reads nothing beyond len(pkt) and does not allocate.
func Parse(lt functions.LinkType, pkt []byte, ts int64, wirelen uint32, p *Packet) bool {
	if plainIPv4(lt, pkt) {
		return parseIPv4(pkt, ts, wirelen, p)
	}
	return parse(lt, pkt, ts, wirelen, p)
}

// plainIPv4 reports whether pkt is the common case: an untagged Ethernet
// frame with an IPv4 header without options.
func plainIPv4(lt functions.LinkType, pkt []byte) bool {
	return lt == functions.LinkEthernet && len(pkt) >= 34 && pkt[12] == 0x08 && pkt[13] == 0x00 && pkt[14] == 0x45
}

// parseIPv4 is Parse for a plainIPv4 frame: the header is read through one
// bounds check, the rest as parse reads it.
func parseIPv4(pkt []byte, ts int64, wirelen uint32, p *Packet) bool {
	h := pkt[14:34:34]
	tot := int(binary.BigEndian.Uint16(h[2:4]))
	if tot == 0 { // TSO: the datagram runs to the end of the capture
		tot = len(pkt) - 14
	}
	if tot < 20 {
		return false
	}
	proto := h[9]
	*p = Packet{TS: ts, WireLen: wirelen, WScale: -1, TTL: h[8], ECN: h[1] & 3,
		Key: Key{4<<flowkey.FamilyShift | uint64(proto)<<flowkey.ProtoShift,
			uint64(binary.BigEndian.Uint32(h[12:16])) << 32, 0, uint64(binary.BigEndian.Uint32(h[16:20])) << 32, 0}}
	return transport(pkt, proto, 34, 14+tot, binary.BigEndian.Uint16(h[6:8])&0x1fff == 0, p)
}

// parse is Parse's general path.
func parse(lt functions.LinkType, pkt []byte, ts int64, wirelen uint32, p *Packet) bool {
	var off int
	var ver uint8
	if lt == functions.LinkEthernet && len(pkt) >= 14 && (pkt[12] == 0x08 && pkt[13] == 0x00 || pkt[12] == 0x86 && pkt[13] == 0xdd) {
		off, ver = 14, 4 // untagged Ethernet, the common case, without the general walk
		if pkt[12] == 0x86 {
			ver = 6
		}
	} else {
		off, ver = flowkey.Network(lt, pkt)
	}
	*p = Packet{TS: ts, WireLen: wirelen, WScale: -1}
	var l4, end int // where the L4 header starts; where the datagram ends
	var proto uint8
	var first bool
	switch ver {
	case 4:
		if len(pkt) < off+20 || pkt[off]>>4 != 4 {
			return false
		}
		ihl := int(pkt[off]&0x0f) * 4
		tot := int(be16(pkt, off+2))
		if tot == 0 { // TSO: the datagram runs to the end of the capture
			tot = len(pkt) - off
		}
		if ihl < 20 || tot < ihl {
			return false
		}
		proto = pkt[off+9]
		p.ECN = pkt[off+1] & 3
		p.TTL = pkt[off+8]
		p.Key[0] = 4<<flowkey.FamilyShift | uint64(proto)<<flowkey.ProtoShift
		p.Key[1] = uint64(be32(pkt, off+12)) << 32
		p.Key[3] = uint64(be32(pkt, off+16)) << 32
		l4, end = off+ihl, off+tot
		first = be16(pkt, off+6)&0x1fff == 0
	case 6:
		if len(pkt) < off+40 || pkt[off]>>4 != 6 {
			return false
		}
		p.ECN = uint8(be16(pkt, off)>>4) & 3
		p.TTL = pkt[off+7]
		p.Key[1], p.Key[2] = binary.BigEndian.Uint64(pkt[off+8:]), binary.BigEndian.Uint64(pkt[off+16:])
		p.Key[3], p.Key[4] = binary.BigEndian.Uint64(pkt[off+24:]), binary.BigEndian.Uint64(pkt[off+32:])
		end = off + 40 + int(be16(pkt, off+4))
		if end == off+40 { // a jumbogram: to the end of the capture
			end = len(pkt)
		}
		limit := min(end, len(pkt))
		nh, q := pkt[off+6], off+40
		first = true
	walk:
		for range flowkey.MaxIPv6Ext {
			switch nh {
			case 0, 43, 60:
				if q+2 > limit {
					break walk
				}
				nh, q = pkt[q], q+(int(pkt[q+1])+1)*8
			case 44:
				if q+8 > limit {
					break walk
				}
				first = be16(pkt, q+2)>>3 == 0
				nh, q = pkt[q], q+8
				if !first {
					break walk
				}
			default:
				break walk
			}
		}
		proto, l4 = nh, q
		p.Key[0] = 6<<flowkey.FamilyShift | uint64(proto)<<flowkey.ProtoShift
	default:
		return false
	}
	return transport(pkt, proto, l4, end, first, p)
}

// transport reads the transport header of protocol proto at l4, in a
// datagram that ends at end (first: not a later fragment).
func transport(pkt []byte, proto uint8, l4, end int, first bool, p *Packet) bool {
	payload := end - l4
	limit := min(end, len(pkt))
	if first && (proto == 6 || proto == 17 || proto == 132) && l4+4 <= limit {
		p.Key[0] |= uint64(be16(pkt, l4))<<flowkey.SrcPortShift | uint64(be16(pkt, l4+2))<<flowkey.DstPortShift | flowkey.PortsPresent
	}
	switch {
	case !first:
	case proto == 6 && l4+20 <= limit:
		doff := int(pkt[l4+12]>>4) * 4
		if doff < 20 {
			break
		}
		p.TCP = true
		p.Seq, p.Ack = be32(pkt, l4+4), be32(pkt, l4+8)
		p.Flags = pkt[l4+13]
		p.Win = be16(pkt, l4+14)
		payload -= doff
		if p.Flags&FlagSYN != 0 {
			p.WScale = wscale(pkt[l4+20 : min(l4+doff, limit)])
		}
	case proto == 17:
		payload -= 8
	}
	p.Payload = uint32(max(payload, 0))
	return true
}

// wscale returns the window-scale option (kind 3) among TCP options, or -1.
func wscale(opt []byte) int8 {
	for i := 0; i < len(opt); {
		switch opt[i] {
		case 0:
			return -1
		case 1:
			i++
			continue
		}
		if i+1 >= len(opt) || opt[i+1] < 2 {
			return -1
		}
		if opt[i] == 3 && opt[i+1] == 3 && i+2 < len(opt) {
			return int8(min(opt[i+2], 14))
		}
		i += int(opt[i+1])
	}
	return -1
}
