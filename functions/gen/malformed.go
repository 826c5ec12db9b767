package gen

// Adversarial frames: what a parser meets on a real link and must survive.
// Each is built from a well-formed packet of the picked flow and then
// broken in one way.
const (
	malTruncated = iota // captured length < wire length, cut anywhere
	malIHLShort         // IPv4 IHL < 5
	malIHLLong          // IPv4 IHL beyond the captured data or the total length
	malTotalLen         // IPv4 total length beyond the frame or below 20
	malFragFirst        // first fragment: MF set, offset 0
	malFragLater        // non-first fragment: offset > 0, no transport header
	malEtherType        // unknown ethertype or an 802.3 length field
	malRunt             // shorter than an Ethernet header
	malEmpty            // zero bytes
	malIPv6Ext          // IPv6 extension-header chains, some broken
	malTCPOff           // TCP data offset < 5 or beyond the segment
	malUDPLen           // UDP length < 8 or beyond the datagram
	numMal
)

var oddEtherTypes = [...]uint16{0x88b5, 0x1234, 0x9000, 0xffff, 0x0000, 0x05dc, 0x0600, 0x86de}

// malformed writes an adversarial frame and returns its wire and captured
// lengths.
func (g *Generator) malformed(b []byte, f *flow) (wire, capLen int) {
	r := &g.rng
	switch r.intn(numMal) {
	case malTruncated:
		n := g.emit(b, f)
		return n, 1 + int(r.intn(uint32(n-1)))
	case malIHLShort:
		p := g.baseV4(b, f, 0)
		b[p.l3] = 0x40 | byte(r.intn(5))
		ipChecksum(b[p.l3:])
		return p.n, p.n
	case malIHLLong:
		p := g.baseV4(b, f, 0)
		if r.intn(2) == 0 {
			// 60-byte header claimed, capture ends inside it
			b[p.l3] = 0x4f
			ipChecksum(b[p.l3:])
			return p.n, min(p.n, p.l3+20+int(r.intn(40)))
		}
		b[p.l3] = 0x40 | byte(r.between(6, 15))
		be.PutUint16(b[p.l3+2:], 20) // total length shorter than the header
		ipChecksum(b[p.l3:])
		return p.n, p.n
	case malTotalLen:
		p := g.baseV4(b, f, 0)
		tl := r.intn(20)
		if r.intn(2) == 0 {
			tl = uint32(r.between(p.n-p.l3+1, 65535))
		}
		be.PutUint16(b[p.l3+2:], uint16(tl))
		ipChecksum(b[p.l3:])
		return p.n, p.n
	case malFragFirst:
		p := g.baseV4(b, f, protoUDP)
		be.PutUint16(b[p.l3+6:], 0x2000) // MF, offset 0
		// the UDP length covers the whole datagram, not this fragment
		be.PutUint16(b[p.l4+4:], uint16(be.Uint16(b[p.l3+2:])-20+uint16(r.between(8, 3000))))
		ipChecksum(b[p.l3:])
		return p.n, p.n
	case malFragLater:
		p := g.baseV4(b, f, 0)
		off := uint16(r.between(1, 8191))
		if r.intn(2) == 0 {
			off |= 0x2000
		}
		be.PutUint16(b[p.l3+6:], off)
		g.payload(b[p.l4:], min(20, p.n-p.l4)) // fragment data, not a header
		ipChecksum(b[p.l3:])
		return p.n, p.n
	case malEtherType:
		n := g.emit(b, f)
		be.PutUint16(b[12+4*int(f.tags):], oddEtherTypes[r.intn(uint32(len(oddEtherTypes)))])
		return n, n
	case malRunt:
		g.emit(b, f)
		n := r.between(1, 13)
		return n, n
	case malEmpty:
		return 0, 0
	case malIPv6Ext:
		n, c := g.ipv6Ext(b, f)
		return n, c
	case malTCPOff:
		p := g.baseV4(b, f, protoTCP)
		if r.intn(2) == 0 {
			b[p.l4+12] = byte(r.intn(5)) << 4
		} else {
			b[p.l4+12] = 0xf0 // 60-byte header
			n := min(p.n, p.l4+20+int(r.intn(40)))
			be.PutUint16(b[p.l3+2:], uint16(n-p.l3))
			ipChecksum(b[p.l3:])
			return pad(b, n), pad(b, n)
		}
		return p.n, p.n
	default: // malUDPLen
		p := g.baseV4(b, f, protoUDP)
		ul := r.intn(8)
		if r.intn(2) == 0 {
			ul = uint32(r.between(p.n-p.l4+1, 65535))
		}
		be.PutUint16(b[p.l4+4:], uint16(ul))
		return p.n, p.n
	}
}

type base struct{ n, l3, l4 int }

// baseV4 writes a well-formed IPv4 TCP or UDP packet (proto 0: either) with
// f's addresses and tags.
func (g *Generator) baseV4(b []byte, f *flow, proto uint8) base {
	tf := *f
	tf.v6 = false
	r := &g.rng
	if proto == 0 {
		proto = protoTCP
		if r.intn(2) == 0 {
			proto = protoUDP
		}
	}
	plen := int(r.intn(1400))
	var n int
	if proto == protoTCP {
		n = g.tcp(b, &tf, true, fPSH|fACK, plen)
	} else {
		pay, s := g.udpPattern(b, &tf, true, plen, 0)
		n = udpDone(b, pay, plen, s)
	}
	l3 := 14 + 4*int(f.tags)
	return base{n: n, l3: l3, l4: l3 + 20}
}

// ipChecksum recomputes the checksum of the fixed 20-byte IPv4 header.
func ipChecksum(h []byte) {
	be.PutUint16(h[10:], 0)
	be.PutUint16(h[10:], ^fold(sum(h[:20])))
}

// ipv6Ext writes an IPv6 packet with an extension-header chain: valid
// chains (hop-by-hop, destination options, fragment, routing type 0) and
// broken ones (a header longer than the packet, a chain of ten headers
// ending in no-next-header, a non-first fragment).
func (g *Generator) ipv6Ext(b []byte, f *flow) (wire, capLen int) {
	tf := *f
	tf.v6 = true
	r := &g.rng
	l3 := l2(b, &tf, true, etIPv6)
	h := b[l3:]
	const (
		nhHBH    = 0
		nhRoute  = 43
		nhFrag   = 44
		nhDest   = 60
		nhNoNext = 59
	)
	e := h[40:]
	var first uint8
	var o int
	ext := func(typ, next uint8, n int) { // an options header of n bytes, PadN-filled
		e[o], e[o+1] = next, byte(n/8-1)
		e[o+2], e[o+3] = 1, byte(n-4)
		clear(e[o+4 : o+n])
		o += n
	}
	variant := r.intn(5)
	upper := uint8(protoUDP)
	switch variant {
	case 0: // hop-by-hop, destination options, atomic fragment, UDP
		first = nhHBH
		ext(nhHBH, nhDest, 8)
		ext(nhDest, nhFrag, 16)
		be.PutUint32(e[o:], uint32(protoUDP)<<24) // offset 0, M 0
		be.PutUint32(e[o+4:], uint32(r.next()))
		o += 8
	case 1: // routing header type 0 (deprecated), TCP
		first = nhRoute
		upper = protoTCP
		be.PutUint32(e[o:], uint32(protoTCP)<<24|2<<16|0<<8|1)
		be.PutUint32(e[o+4:], 0)
		copy(e[o+8:o+24], f.s6[:])
		o += 24
	case 2: // ten destination-options headers, then nothing
		first = nhDest
		for i := 0; i < 10; i++ {
			next := uint8(nhDest)
			if i == 9 {
				next = nhNoNext
			}
			ext(nhDest, next, 8)
		}
		upper = nhNoNext
	case 3: // hop-by-hop header claiming 2048 bytes
		first = nhHBH
		ext(nhHBH, protoUDP, 8)
		e[1] = 255
	default: // non-first fragment of a UDP datagram
		first = nhFrag
		be.PutUint32(e[o:], uint32(protoUDP)<<24|uint32(r.between(1, 8191))<<3)
		be.PutUint32(e[o+4:], uint32(r.next()))
		o += 8
		upper = 0 // fragment data follows
	}
	plen := int(r.intn(200))
	u := e[o:]
	var ulen int
	switch upper {
	case protoUDP:
		ulen = 8 + plen
		be.PutUint32(u[0:], uint32(f.cport)<<16|uint32(f.sport))
		be.PutUint32(u[4:], uint32(ulen)<<16)
		g.payload(u[8:], plen)
	case protoTCP:
		ulen = 20
		be.PutUint32(u[0:], uint32(f.cport)<<16|uint32(f.sport))
		be.PutUint32(u[4:], f.cseq)
		be.PutUint32(u[8:], f.sseq)
		be.PutUint32(u[12:], 5<<28|fACK<<16|502)
		be.PutUint32(u[16:], 0)
	case nhNoNext:
		ulen = 0
	default:
		ulen = plen
		g.payload(u, plen)
	}
	ip6(h, &tf, true, first, o+ulen)
	if upper == protoUDP || upper == protoTCP {
		ps := sum(h[8:40]) + uint64(upper) + uint64(ulen)
		ck := 6
		if upper == protoTCP {
			ck = 16
		}
		be.PutUint16(u[ck:], ^fold(ps+sum(u[:ulen])))
	}
	n := pad(b, l3+40+o+ulen)
	return n, n
}
