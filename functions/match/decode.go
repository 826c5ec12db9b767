package match

import (
	"encoding/binary"

	"github.com/ffpf-go/ffpf/functions"
)

// Bounds of the header walk: at most maxTags VLAN tags (802.1Q 0x8100,
// 802.1ad 0x88a8, 0x9100) and maxExt IPv6 extension headers, the bounds
// flowkey uses, so a predicate and a flow key see the same layers.
const (
	maxTags = 4
	maxExt  = 8
)

// hdr is a packet's layers, decoded once per packet on the first field
// that needs them. Offsets are into pkt, the captured bytes; every read
// checks its bytes against len(pkt) (and, above IP, against the datagram's
// end), so nothing past the captured bytes is ever touched.
type hdr struct {
	pkt     []byte
	decoded bool

	eth     bool   // an Ethernet header (14 bytes) is captured
	ethType uint16 // its type field: the outermost
	tagged  bool   // the outermost type is a VLAN tag's (0x8100, 0x88a8, 0x9100)
	vlan    bool   // and that tag's TCI is captured
	vid     uint16 // the outermost tag's VLAN ID

	ver   uint8 // 4 or 6 when a valid IP header is captured, else 0
	l3    int   // where it starts
	limit int   // end of the datagram within the captured bytes
	proto uint8 // IPv4 protocol; IPv6 upper-layer header after extension headers
	nh    uint8 // IPv6 fixed header's next header
	l4    int   // where the transport header starts, or -1 (non-first fragment, walk stopped)
}

func be16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
func be32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

func isTag(t uint16) bool { return t == 0x8100 || t == 0x88a8 || t == 0x9100 }

// decode walks the link, network and transport layers of h.pkt.
func (h *hdr) decode(lt functions.LinkType) {
	h.decoded = true
	h.eth, h.tagged, h.vlan, h.ver, h.l4 = false, false, false, 0, -1
	b := h.pkt
	switch lt {
	case functions.LinkEthernet:
		if len(b) < 14 {
			return
		}
		h.eth, h.ethType = true, be16(b, 12)
		h.ethertype(h.ethType, 14)
	case functions.LinkLinuxSLL:
		if len(b) >= 16 {
			h.ethertype(be16(b, 14), 16)
		}
	case functions.LinkSLL2:
		if len(b) >= 20 {
			h.ethertype(be16(b, 0), 20)
		}
	case functions.LinkRaw:
		if len(b) >= 1 {
			h.ip(b[0]>>4, 0)
		}
	case functions.LinkIPv4:
		h.ip(4, 0)
	case functions.LinkIPv6:
		h.ip(6, 0)
	case functions.LinkNull, functions.LinkLoop:
		if len(b) < 4 {
			return
		}
		af := be32(b, 0)
		if lt == functions.LinkNull && af > 0xffff {
			af = binary.LittleEndian.Uint32(b)
		}
		switch af {
		case 2:
			h.ip(4, 4)
		case 10, 24, 28, 30:
			h.ip(6, 4)
		}
	}
}

// ethertype walks VLAN tags from type t whose payload starts at off.
func (h *hdr) ethertype(t uint16, off int) {
	b := h.pkt
	h.tagged = isTag(t)
	for i := 0; i < maxTags && isTag(t); i++ {
		if len(b) < off+4 {
			return
		}
		if !h.vlan {
			h.vlan, h.vid = true, be16(b, off)&0x0fff
		}
		t = be16(b, off+2)
		off += 4
	}
	switch t {
	case 0x0800:
		h.ip(4, off)
	case 0x86dd:
		h.ip(6, off)
	}
}

// ip reads an IP header of version ver at off. An IPv4 header is valid
// with its 20 fixed bytes captured, version 4, IHL ≥ 5 and a total length
// that holds the header (or 0: a TSO send, running to the end of the
// captured bytes); an IPv6 header with its 40 bytes captured and version 6.
func (h *hdr) ip(ver uint8, off int) {
	b := h.pkt
	switch ver {
	case 4:
		if len(b) < off+20 || b[off]>>4 != 4 {
			return
		}
		ihl := int(b[off]&0x0f) * 4
		tot := int(be16(b, off+2))
		if tot == 0 {
			tot = len(b) - off
		}
		if ihl < 20 || tot < ihl {
			return
		}
		h.ver, h.l3, h.proto = 4, off, b[off+9]
		h.limit = min(off+tot, len(b))
		if be16(b, off+6)&0x1fff == 0 {
			h.l4 = off + ihl
		}
	case 6:
		if len(b) < off+40 || b[off]>>4 != 6 {
			return
		}
		h.ver, h.l3 = 6, off
		h.limit = len(b)
		if plen := int(be16(b, off+4)); plen != 0 {
			h.limit = min(off+40+plen, len(b))
		}
		nh := b[off+6]
		h.nh = nh
		p := off + 40
		for range maxExt {
			switch nh {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if p+2 > h.limit {
					h.proto = nh
					return
				}
				nh, p = b[p], p+(int(b[p+1])+1)*8
				continue
			case 44: // fragment
				if p+8 > h.limit {
					h.proto = nh
					return
				}
				frag := be16(b, p+2) >> 3
				nh, p = b[p], p+8
				if frag != 0 {
					h.proto = nh
					return
				}
				continue
			}
			break
		}
		h.proto = nh
		switch nh {
		case 0, 43, 44, 60: // the walk's bound: the upper layer is not reached
			return
		}
		h.l4 = p
	}
}

// at returns the offset of n bytes at off in the transport header of a
// packet whose upper layer is proto (6 TCP, 17 UDP, or protoICMP: ICMP
// over IPv4 or ICMPv6 over IPv6), or -1 when they are not there: another
// protocol, a non-first fragment, or bytes beyond the captured bytes or
// the datagram.
func (h *hdr) at(proto uint8, off, n int) int {
	if h.l4 < 0 {
		return -1
	}
	switch {
	case proto == protoICMP:
		if !(h.ver == 4 && h.proto == 1 || h.ver == 6 && h.proto == 58) {
			return -1
		}
	case h.proto != proto:
		return -1
	}
	if o := h.l4 + off; o+n <= h.limit {
		return o
	}
	return -1
}

// protoICMP stands for ICMP of either IP version in hdr.at.
const protoICMP = 255
