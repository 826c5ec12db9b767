// Package layers finds the transport header of a packet for the example
// plugins' classes: the link layers ffpf reads files of, IPv4 (first
// fragments) and IPv6 (past its hop-by-hop, routing and destination
// options headers), never reading past the captured bytes.
package layers

import (
	"encoding/binary"

	"github.com/ffpf-go/ffpf/functions"
)

// Link is how a packet's network header is found.
type Link uint8

const (
	Ethernet Link = iota + 1 // 802.3, up to two VLAN tags
	IP                       // raw IPv4 or IPv6
	SLL                      // Linux cooked capture
	Null                     // BSD loopback
)

// Transport protocols.
const (
	TCP = 6
	UDP = 17
)

// Of returns the Link of a link type, false for one it does not read.
func Of(lt functions.LinkType) (Link, bool) {
	switch lt {
	case functions.LinkEthernet:
		return Ethernet, true
	case functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6:
		return IP, true
	case functions.LinkLinuxSLL:
		return SLL, true
	case functions.LinkNull, functions.LinkLoop:
		return Null, true
	}
	return 0, false
}

// Transport returns the transport protocol of pkt and its header and
// payload as captured (the IP packet's own length when the capture has
// padding past it), or false when pkt carries no IP packet or is not the
// first fragment of one.
func Transport(k Link, pkt []byte) (proto byte, l4 []byte, ok bool) {
	var ip []byte
	switch k {
	case Ethernet:
		if len(pkt) < 14 {
			return 0, nil, false
		}
		et, off := binary.BigEndian.Uint16(pkt[12:]), 14
		for i := 0; i < 2 && (et == 0x8100 || et == 0x88a8); i++ {
			if len(pkt) < off+4 {
				return 0, nil, false
			}
			et, off = binary.BigEndian.Uint16(pkt[off+2:]), off+4
		}
		if et != 0x0800 && et != 0x86dd {
			return 0, nil, false
		}
		ip = pkt[off:]
	case IP:
		ip = pkt
	case SLL:
		if len(pkt) < 16 {
			return 0, nil, false
		}
		ip = pkt[16:]
	case Null:
		if len(pkt) < 4 {
			return 0, nil, false
		}
		ip = pkt[4:]
	default:
		return 0, nil, false
	}
	if len(ip) < 1 {
		return 0, nil, false
	}
	switch ip[0] >> 4 {
	case 4:
		ihl := int(ip[0]&0x0f) * 4
		if ihl < 20 || len(ip) < ihl || binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
			return 0, nil, false
		}
		l4 = ip[ihl:]
		if tot := int(binary.BigEndian.Uint16(ip[2:])); tot >= ihl && tot < len(ip) {
			l4 = ip[ihl:tot] // the capture's padding is not the packet's
		}
		return ip[9], l4, true
	case 6:
		if len(ip) < 40 {
			return 0, nil, false
		}
		next, off := ip[6], 40
		for next == 0 || next == 43 || next == 60 {
			if len(ip) < off+8 {
				return 0, nil, false
			}
			next, off = ip[off], off+8*(int(ip[off+1])+1)
		}
		if len(ip) < off || next == 44 { // a fragment header: not parsed
			return 0, nil, false
		}
		l4 = ip[off:]
		if pl := int(binary.BigEndian.Uint16(ip[4:])); 40+pl < len(ip) && 40+pl >= off {
			l4 = ip[off : 40+pl]
		}
		return next, l4, true
	}
	return 0, nil, false
}
