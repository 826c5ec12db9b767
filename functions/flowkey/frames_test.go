package flowkey

import "encoding/binary"

// Builders of frames for the tests: each returns fresh bytes.

var (
	macA = []byte{0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc}
	macB = []byte{0x02, 0x00, 0x00, 0x11, 0x22, 0x33}
)

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// eth builds an Ethernet header with the given VLAN IDs as tags (the first
// an 802.1ad tag when there are two).
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

// ip4 builds an IPv4 header (IHL 5 plus opt words) around payload l4.
func ip4(proto uint8, src, dst [4]byte, frag uint16, optWords int, l4 []byte) []byte {
	h := make([]byte, 20+4*optWords)
	h[0] = 0x40 | byte(5+optWords)
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(l4)))
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8] = 64
	h[9] = proto
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	return cat(h, l4)
}

// ip6 builds an IPv6 header with next header nh around payload (extension
// headers included).
func ip6(nh uint8, src, dst [16]byte, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	h[6] = nh
	h[7] = 64
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return cat(h, payload)
}

// ext builds an IPv6 hop-by-hop, routing or destination options header of
// 8·(units+1) bytes.
func ext(nh uint8, units uint8) []byte {
	b := make([]byte, 8*(int(units)+1))
	b[0], b[1] = nh, units
	return b
}

func fragHdr(nh uint8, offset uint16, more bool) []byte {
	b := make([]byte, 8)
	b[0] = nh
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	return b
}

func l4ports(sport, dport uint16, n int) []byte {
	b := make([]byte, max(n, 4))
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	return b
}

var (
	v4a = [4]byte{10, 0, 1, 77}
	v4b = [4]byte{198, 51, 100, 9}
	v6a = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0, 0, 0, 0, 0, 1}
	v6b = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53}
)
