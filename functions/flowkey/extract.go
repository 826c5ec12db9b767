package flowkey

import (
	"encoding/binary"

	"github.com/ffpf-go/ffpf/functions"
)

// Bounds of the parser's loops: an eBPF program walks the same headers with
// loops of these lengths, so both stop at the same header.
const (
	MaxVLANTags  = 4 // 802.1Q / 802.1ad / 0x9100 tags walked on Ethernet
	MaxIPv6Ext   = 8 // IPv6 extension headers walked
	ethTypeIPv4  = 0x0800
	ethTypeIPv6  = 0x86dd
	protoTCP     = 6
	protoUDP     = 17
	protoSCTP    = 132
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6DestOpts = 60
)

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

func isTag(t uint16) bool { return t == 0x8100 || t == 0x88a8 || t == 0x9100 }

// Supported reports whether Extract understands link type lt.
func Supported(lt functions.LinkType) bool {
	switch lt {
	case functions.LinkEthernet, functions.LinkLinuxSLL, functions.LinkSLL2, functions.LinkRaw,
		functions.LinkIPv4, functions.LinkIPv6, functions.LinkNull, functions.LinkLoop:
		return true
	}
	return false
}

// l2 is what the link layer gave: where the network layer starts, its
// version (4, 6, or 0 for none), the MACs and the outermost VLAN tag.
type l2 struct {
	l3       int
	ver      uint8
	smac     uint64
	dmac     uint64
	hasSMAC  bool
	hasDMAC  bool
	vid      uint64
	hasVLAN  bool
	linkOnly bool // no network layer follows
}

func mac(b []byte, off int) uint64 {
	return uint64(be16(b, off))<<32 | uint64(binary.BigEndian.Uint32(b[off+2:]))
}

// ethertype walks VLAN tags from a protocol value t whose payload starts at
// off and maps the inner type to an IP version.
func (r *l2) ethertype(b []byte, t uint16, off int) {
	for i := 0; i < MaxVLANTags && isTag(t); i++ {
		if len(b) < off+4 {
			r.linkOnly = true
			return
		}
		if !r.hasVLAN {
			r.vid = uint64(be16(b, off) & 0x0fff)
			r.hasVLAN = true
		}
		t = be16(b, off+2)
		off += 4
	}
	r.l3 = off
	switch t {
	case ethTypeIPv4:
		r.ver = 4
	case ethTypeIPv6:
		r.ver = 6
	default:
		r.linkOnly = true
	}
}

// nullFamily maps the address family of a NULL (host byte order of the
// capturing machine, so either order is accepted) or LOOP (network order)
// header to an IP version. IPv6 has a different AF_INET6 on each system:
// Linux 10, NetBSD/OpenBSD 24, FreeBSD 28, Darwin 30.
func nullFamily(lt functions.LinkType, b []byte) uint8 {
	af := binary.BigEndian.Uint32(b)
	if lt == functions.LinkNull && af > 0xffff {
		af = binary.LittleEndian.Uint32(b)
	}
	switch af {
	case 2:
		return 4
	case 10, 24, 28, 30:
		return 6
	}
	return 0
}

func link(lt functions.LinkType, b []byte) (r l2, ok bool) {
	switch lt {
	case functions.LinkEthernet:
		if len(b) < 14 {
			return r, false
		}
		r.dmac, r.smac, r.hasDMAC, r.hasSMAC = mac(b, 0), mac(b, 6), true, true
		r.ethertype(b, be16(b, 12), 14)
		return r, true
	case functions.LinkLinuxSLL:
		if len(b) < 16 {
			return r, false
		}
		if be16(b, 4) == 6 {
			r.smac, r.hasSMAC = mac(b, 6), true
		}
		r.ethertype(b, be16(b, 14), 16)
		return r, true
	case functions.LinkSLL2:
		if len(b) < 20 {
			return r, false
		}
		if b[11] == 6 {
			r.smac, r.hasSMAC = mac(b, 12), true
		}
		r.ethertype(b, be16(b, 0), 20)
		return r, true
	case functions.LinkRaw:
		if len(b) < 1 {
			return r, false
		}
		r.ver = b[0] >> 4
	case functions.LinkIPv4:
		r.ver = 4
	case functions.LinkIPv6:
		r.ver = 6
	case functions.LinkNull, functions.LinkLoop:
		if len(b) < 4 {
			return r, false
		}
		r.l3 = 4
		r.ver = nullFamily(lt, b)
	default:
		return r, false
	}
	if r.ver != 4 && r.ver != 6 {
		r.linkOnly = true
	}
	return r, true
}

// ip is what the network and transport layers gave.
type ip struct {
	ver          uint8
	proto        uint8
	src, dst     [2]uint64
	sport, dport uint16
	ports        bool
}

func isL4(p uint8) bool { return p == protoTCP || p == protoUDP || p == protoSCTP }

// ipv4 reads an IPv4 header at off. The header is valid when 20 bytes are
// captured, the version is 4, IHL ≥ 5 and the total length holds the
// header, or is 0: a TSO send captured before segmentation, where the
// datagram runs to the end of the captured bytes (as tcpdump and gopacket
// read it); options are not read. Ports are read from first fragments
// (offset 0) of TCP, UDP and SCTP when their 4 bytes lie within both the
// captured bytes and the total length.
func ipv4(b []byte, off int, r *ip) bool {
	if len(b) < off+20 || b[off]>>4 != 4 {
		return false
	}
	ihl := int(b[off]&0x0f) * 4
	tot := int(be16(b, off+2))
	if tot == 0 {
		tot = len(b) - off
	}
	if ihl < 20 || tot < ihl {
		return false
	}
	r.ver = 4
	r.proto = b[off+9]
	r.src[0] = uint64(binary.BigEndian.Uint32(b[off+12:])) << 32
	r.dst[0] = uint64(binary.BigEndian.Uint32(b[off+16:])) << 32
	limit := min(off+tot, len(b))
	if be16(b, off+6)&0x1fff == 0 && isL4(r.proto) && off+ihl+4 <= limit {
		r.sport, r.dport, r.ports = be16(b, off+ihl), be16(b, off+ihl+2), true
	}
	return true
}

// ipv6 reads an IPv6 header at off and walks at most MaxIPv6Ext extension
// headers (hop-by-hop, routing, destination options, fragment) within the
// captured bytes and the payload length (the captured bytes alone when the
// payload length is 0, as in a jumbogram). The protocol is the first next
// header that is not one of those four; when the walk stops early (the
// bound, an extension header whose first bytes are not captured, a
// non-first fragment) it is the next header where it stopped and there are
// no ports. Ports are read as for IPv4.
func ipv6(b []byte, off int, r *ip) bool {
	if len(b) < off+40 || b[off]>>4 != 6 {
		return false
	}
	r.ver = 6
	r.src[0], r.src[1] = binary.BigEndian.Uint64(b[off+8:]), binary.BigEndian.Uint64(b[off+16:])
	r.dst[0], r.dst[1] = binary.BigEndian.Uint64(b[off+24:]), binary.BigEndian.Uint64(b[off+32:])
	limit := len(b)
	if plen := int(be16(b, off+4)); plen != 0 {
		limit = min(off+40+plen, limit)
	}
	nh := b[off+6]
	p := off + 40
	for i := 0; i < MaxIPv6Ext; i++ {
		if nh == ipv6HopByHop || nh == ipv6Routing || nh == ipv6DestOpts {
			if p+2 > limit {
				break
			}
			nh, p = b[p], p+(int(b[p+1])+1)*8
			continue
		}
		if nh == ipv6Fragment {
			if p+8 > limit {
				break
			}
			frag := be16(b, p+2) >> 3
			nh, p = b[p], p+8
			if frag != 0 {
				r.proto = nh
				return true
			}
			continue
		}
		break
	}
	r.proto = nh
	if isL4(nh) && p+4 <= limit {
		r.sport, r.dport, r.ports = be16(b, p), be16(b, p+2), true
	}
	return true
}

// Extract fills k with the key of a packet: pkt is its captured bytes, lt
// its link type. It returns false, with k zeroed, when the packet lacks a
// layer a field of the spec needs: an IPv4 or IPv6 header for srcip, dstip,
// proto, srcport and dstport; an Ethernet header for dstmac; a 6-byte link
// address (Ethernet, LINUX_SLL, LINUX_SLL2) for srcmac. Within an IP packet
// the ports are absent (PortsPresent clear, zero) when they cannot be read;
// vlan is absent (VLANPresent clear) on an untagged frame. Extract reads
// nothing beyond len(pkt) and does not allocate.
func (sp *Spec) Extract(lt functions.LinkType, pkt []byte, k *Key) bool {
	if lt == functions.LinkEthernet && len(pkt) >= 34 {
		switch be16(pkt, 12) {
		case ethTypeIPv4:
			if sp.extractEthIPv4(pkt, k) {
				return true
			}
		case ethTypeIPv6:
			if sp.extractEthIPv6(pkt, k) {
				return true
			}
		}
	}
	return sp.extract(lt, pkt, k)
}

// The fast paths of Extract, for the commonest packets: an untagged
// Ethernet frame with a valid IPv4 header (as ipv4 defines it), or with an
// IPv6 header followed by no extension header. Each returns false, having
// written nothing, for any other packet, which extract reads; on the
// packets it takes, it gives extract's key (tests check it on every frame
// of the differential tests, cut short and with bits flipped, and the fuzz
// test on any bytes).

func (sp *Spec) extractEthIPv4(b []byte, k *Key) bool {
	if len(b) < 34 || be16(b, 12) != ethTypeIPv4 || b[14]>>4 != 4 {
		return false
	}
	ihl := int(b[14]&0x0f) * 4
	tot := int(be16(b, 16))
	if tot == 0 {
		tot = len(b) - 14
	}
	if ihl < 20 || tot < ihl {
		return false
	}
	*k = Key{}
	proto := b[23]
	h := uint64(4)<<FamilyShift | uint64(proto)<<ProtoShift
	if be16(b, 20)&0x1fff == 0 && isL4(proto) && 14+ihl+4 <= min(14+tot, len(b)) {
		h |= uint64(be16(b, 14+ihl))<<SrcPortShift | uint64(be16(b, 16+ihl))<<DstPortShift | PortsPresent
	}
	if sp.srcW >= 0 {
		k[sp.srcW] = uint64(binary.BigEndian.Uint32(b[26:])) << 32 & sp.pfx[0].m4
	}
	if sp.dstW >= 0 {
		k[sp.dstW] = uint64(binary.BigEndian.Uint32(b[30:])) << 32 & sp.pfx[1].m4
	}
	if sp.smacW >= 0 {
		k[sp.smacW] = mac(b, 6)
	}
	if sp.dmacW >= 0 {
		k[sp.dmacW] = mac(b, 0)
	}
	k[0] = h & sp.header
	return true
}

func (sp *Spec) extractEthIPv6(b []byte, k *Key) bool {
	if len(b) < 54 || be16(b, 12) != ethTypeIPv6 || b[14]>>4 != 6 {
		return false
	}
	nh := b[20]
	if nh == ipv6HopByHop || nh == ipv6Routing || nh == ipv6DestOpts || nh == ipv6Fragment {
		return false
	}
	*k = Key{}
	limit := len(b)
	if plen := int(be16(b, 18)); plen != 0 {
		limit = min(54+plen, limit)
	}
	h := uint64(6)<<FamilyShift | uint64(nh)<<ProtoShift
	if isL4(nh) && 58 <= limit {
		h |= uint64(be16(b, 54))<<SrcPortShift | uint64(be16(b, 56))<<DstPortShift | PortsPresent
	}
	if w := sp.srcW; w >= 0 {
		k[w] = binary.BigEndian.Uint64(b[22:]) & sp.pfx[0].m6hi
		k[w+1] = binary.BigEndian.Uint64(b[30:]) & sp.pfx[0].m6lo
	}
	if w := sp.dstW; w >= 0 {
		k[w] = binary.BigEndian.Uint64(b[38:]) & sp.pfx[1].m6hi
		k[w+1] = binary.BigEndian.Uint64(b[46:]) & sp.pfx[1].m6lo
	}
	if sp.smacW >= 0 {
		k[sp.smacW] = mac(b, 6)
	}
	if sp.dmacW >= 0 {
		k[sp.dmacW] = mac(b, 0)
	}
	k[0] = h & sp.header
	return true
}

// extract is Extract for any packet.
func (sp *Spec) extract(lt functions.LinkType, pkt []byte, k *Key) bool {
	*k = Key{}
	l, ok := link(lt, pkt)
	if !ok {
		return false
	}
	var h uint64
	if sp.smacW >= 0 {
		if !l.hasSMAC {
			*k = Key{}
			return false
		}
		k[sp.smacW] = l.smac
	}
	if sp.dmacW >= 0 {
		if !l.hasDMAC {
			*k = Key{}
			return false
		}
		k[sp.dmacW] = l.dmac
	}
	if l.hasVLAN {
		h |= l.vid<<VLANShift | VLANPresent
	}
	if sp.needIP {
		var r ip
		if l.linkOnly || !(l.ver == 4 && ipv4(pkt, l.l3, &r) || l.ver == 6 && ipv6(pkt, l.l3, &r)) {
			*k = Key{}
			return false
		}
		h |= uint64(r.ver)<<FamilyShift | uint64(r.proto)<<ProtoShift
		if r.ports {
			h |= uint64(r.sport)<<SrcPortShift | uint64(r.dport)<<DstPortShift | PortsPresent
		}
		if sp.srcW >= 0 {
			sp.pfx[0].apply(k[sp.srcW:sp.srcW+2], r.ver, r.src)
		}
		if sp.dstW >= 0 {
			sp.pfx[1].apply(k[sp.dstW:sp.dstW+2], r.ver, r.dst)
		}
	}
	k[0] = h & sp.header
	return true
}

func (p *prefix) apply(w []uint64, ver uint8, a [2]uint64) {
	if ver == 4 {
		w[0] = a[0] & p.m4
		return
	}
	w[0], w[1] = a[0]&p.m6hi, a[1]&p.m6lo
}
