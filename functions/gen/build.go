package gen

import "encoding/binary"

// Frame layout helpers. Every function here writes each byte of the frame
// it returns (a PBuf slot holds stale bytes from earlier packets) and keeps
// every frame within MaxFrameLen: at most 22 bytes of link header and a
// 1500-byte IP packet.

var be = binary.BigEndian

var broadcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const (
	etIPv4 = 0x0800
	etARP  = 0x0806
	etVLAN = 0x8100
	etQinQ = 0x88a8
	etIPv6 = 0x86dd

	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58

	mtu = 1500
)

// TCP flags.
const (
	fFIN = 0x01
	fSYN = 0x02
	fRST = 0x04
	fPSH = 0x08
	fACK = 0x10
)

// TCP connection states.
const (
	tcpSYN uint8 = iota
	tcpSYNACK
	tcpACK
	tcpReq
	tcpData
	tcpFin1
	tcpFin2
	tcpLast
	tcpRefused
)

// emit writes the next packet of f into b and returns its length.
func (g *Generator) emit(b []byte, f *flow) int {
	switch f.kind {
	case kindTCP:
		return g.emitTCP(b, f)
	case kindDNS:
		return g.emitDNS(b, f)
	case kindNTP:
		return g.emitNTP(b, f)
	case kindQUIC:
		return g.emitQUIC(b, f)
	case kindUDP:
		return g.emitUDP(b, f)
	case kindICMP:
		if f.v6 {
			return g.emitICMPv6(b, f)
		}
		return g.emitICMP(b, f)
	}
	return g.emitARP(b, f)
}

// l2 writes the Ethernet header, with f's VLAN tags, and returns the offset
// of the network header.
func l2(b []byte, f *flow, toServer bool, etype uint16) int {
	if toServer {
		copy(b[0:6], f.smac[:])
		copy(b[6:12], f.cmac[:])
	} else {
		copy(b[0:6], f.cmac[:])
		copy(b[6:12], f.smac[:])
	}
	off := 12
	switch f.tags {
	case 2:
		be.PutUint16(b[off:], etQinQ)
		be.PutUint16(b[off+2:], f.vid[0])
		off += 4
		fallthrough
	case 1:
		be.PutUint16(b[off:], etVLAN)
		be.PutUint16(b[off+2:], 3<<13|f.vid[1]) // PCP 3
		off += 4
	}
	be.PutUint16(b[off:], etype)
	return off + 2
}

// ipHdr writes the link and IP headers of a packet of f that carries an
// l4len-byte segment of protocol proto. It returns the segment's offset and
// the one's-complement sum of the pseudo header.
func ipHdr(b []byte, f *flow, toServer bool, proto uint8, l4len int) (l4 int, ps uint64) {
	if f.v6 {
		l3 := l2(b, f, toServer, etIPv6)
		ps = ip6(b[l3:], f, toServer, proto, l4len)
		return l3 + 40, ps
	}
	l3 := l2(b, f, toServer, etIPv4)
	ps = ip4(b[l3:], f, toServer, proto, l4len)
	return l3 + 20, ps
}

func ip4(h []byte, f *flow, toServer bool, proto uint8, l4len int) uint64 {
	src, dst, ttl := f.c4, f.s4, f.ttlC
	if !toServer {
		src, dst, ttl = f.s4, f.c4, f.ttlS
	}
	var frag uint16
	if proto == protoTCP {
		frag = 0x4000 // DF
	}
	f.ipid++
	be.PutUint32(h[0:], 0x45<<24|uint32(20+l4len))
	be.PutUint32(h[4:], uint32(f.ipid)<<16|uint32(frag))
	be.PutUint32(h[8:], uint32(ttl)<<24|uint32(proto)<<16)
	be.PutUint32(h[12:], src)
	be.PutUint32(h[16:], dst)
	be.PutUint16(h[10:], ^fold(sum(h[:20])))
	return uint64(src>>16) + uint64(src&0xffff) + uint64(dst>>16) + uint64(dst&0xffff) +
		uint64(proto) + uint64(l4len)
}

func ip6(h []byte, f *flow, toServer bool, nh uint8, plen int) uint64 {
	hop := f.ttlC
	if !toServer {
		hop = f.ttlS
	}
	be.PutUint32(h[0:], 6<<28|f.label)
	be.PutUint32(h[4:], uint32(plen)<<16|uint32(nh)<<8|uint32(hop))
	if toServer {
		copy(h[8:24], f.c6[:])
		copy(h[24:40], f.s6[:])
	} else {
		copy(h[8:24], f.s6[:])
		copy(h[24:40], f.c6[:])
	}
	return sum(h[8:40]) + uint64(nh) + uint64(plen)
}

// sum is the one's-complement sum of b as big-endian 16-bit words, not yet
// folded; b must start at an even offset of the checksummed data.
func sum(b []byte) uint64 {
	var s uint64
	for len(b) >= 8 {
		s += uint64(be.Uint32(b)) + uint64(be.Uint32(b[4:]))
		b = b[8:]
	}
	if len(b) >= 4 {
		s += uint64(be.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(be.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// payload copies n bytes of the payload pattern into b and returns their
// sum (as if they start at an even offset), read from prefix sums: the
// checksum of a full-size segment costs as much as that of an empty one.
func (g *Generator) payload(b []byte, n int) uint64 {
	o := int(g.rng.intn(patLen/2)) * 2
	copy(b[:n], g.pat[o:o+n])
	a := o / 2
	s := g.psum[a+n/2] - g.psum[a]
	if n&1 == 1 {
		s += uint64(g.pat[o+n-1]) << 8
	}
	return s
}

// pad zero-fills a frame shorter than MinFrameLen and returns the length.
func pad(b []byte, end int) int {
	if end < MinFrameLen {
		clear(b[end:MinFrameLen])
		return MinFrameLen
	}
	return end
}

// l4Max is the largest segment that fits f's IP header in the MTU.
func l4Max(f *flow) int {
	if f.v6 {
		return mtu - 40
	}
	return mtu - 20
}

// tcp writes a TCP segment of f with plen payload bytes. A SYN carries the
// options Linux sends (MSS, SACK permitted, timestamps, window scale).
func (g *Generator) tcp(b []byte, f *flow, toServer bool, flags uint8, plen int) int {
	hl := 20
	if flags&fSYN != 0 {
		hl = 40
	}
	l4, ps := ipHdr(b, f, toServer, protoTCP, hl+plen)
	t := b[l4:]
	seq, ack := f.cseq, f.sseq
	sp, dp := f.cport, f.sport
	if !toServer {
		seq, ack, sp, dp = f.sseq, f.cseq, f.sport, f.cport
	}
	if flags&fACK == 0 {
		ack = 0
	}
	win := uint32(502)
	if flags&fSYN != 0 {
		win = 64240
	}
	be.PutUint32(t[0:], uint32(sp)<<16|uint32(dp))
	be.PutUint32(t[4:], seq)
	be.PutUint32(t[8:], ack)
	be.PutUint32(t[12:], uint32(hl/4)<<28|uint32(flags)<<16|win)
	be.PutUint32(t[16:], 0)
	if hl == 40 {
		mss := uint32(1460)
		if f.v6 {
			mss = 1440
		}
		be.PutUint32(t[20:], 0x0204<<16|mss) // MSS
		be.PutUint32(t[24:], 0x0402080a)     // SACK permitted; timestamps
		be.PutUint32(t[28:], seq^0x5a5a5a5a) // TSval
		be.PutUint32(t[32:], ack>>3)         // TSecr
		be.PutUint32(t[36:], 0x01030307)     // NOP; window scale 7
	}
	s := ps + sum(t[:hl])
	if plen > 0 {
		s += g.payload(t[hl:], plen)
	}
	be.PutUint16(t[16:], ^fold(s))
	return pad(b, l4+hl+plen)
}

func (g *Generator) emitTCP(b []byte, f *flow) int {
	mss := 1460
	if f.v6 {
		mss = 1440
	}
	switch f.state {
	case tcpSYN:
		n := g.tcp(b, f, true, fSYN, 0)
		f.cseq++
		f.state = tcpSYNACK
		if g.rng.intn(50) == 0 {
			f.state = tcpRefused
		}
		return n
	case tcpSYNACK:
		n := g.tcp(b, f, false, fSYN|fACK, 0)
		f.sseq++
		f.state = tcpACK
		return n
	case tcpACK:
		f.state = tcpReq
		return g.tcp(b, f, true, fACK, 0)
	case tcpReq:
		plen := g.rng.between(40, 700)
		if f.sport == 22 {
			plen = g.rng.between(20, 200)
		}
		n := g.tcp(b, f, true, fPSH|fACK, plen)
		f.cseq += uint32(plen)
		f.state = tcpData
		return n
	case tcpData:
		if f.acks >= 2 || (f.left <= 0 && f.acks > 0) {
			f.acks = 0
			if f.left <= 0 {
				f.state = tcpFin1
			}
			return g.tcp(b, f, true, fACK, 0)
		}
		if f.left > 0 {
			plen, flags := mss, uint8(fACK)
			if f.left == 1 {
				plen, flags = g.rng.between(1, mss), fPSH|fACK
			}
			n := g.tcp(b, f, false, flags, plen)
			f.sseq += uint32(plen)
			f.left--
			f.acks++
			return n
		}
		f.state = tcpFin1
		fallthrough
	case tcpFin1:
		if g.rng.intn(20) == 0 {
			n := g.tcp(b, f, false, fRST|fACK, 0)
			g.newConnection(f)
			return n
		}
		n := g.tcp(b, f, false, fFIN|fACK, 0)
		f.sseq++
		f.state = tcpFin2
		return n
	case tcpFin2:
		n := g.tcp(b, f, true, fFIN|fACK, 0)
		f.cseq++
		f.state = tcpLast
		return n
	case tcpLast:
		n := g.tcp(b, f, false, fACK, 0)
		g.newConnection(f)
		return n
	default: // tcpRefused: a closed port answers the SYN with a reset
		n := g.tcp(b, f, false, fRST|fACK, 0)
		g.newConnection(f)
		return n
	}
}

// udpHdr writes the headers of a UDP datagram with plen payload bytes and
// returns the payload offset and the sum of pseudo header and UDP header.
func udpHdr(b []byte, f *flow, toServer bool, plen int) (int, uint64) {
	l4, ps := ipHdr(b, f, toServer, protoUDP, 8+plen)
	sp, dp := f.cport, f.sport
	if !toServer {
		sp, dp = dp, sp
	}
	be.PutUint32(b[l4:], uint32(sp)<<16|uint32(dp))
	be.PutUint32(b[l4+4:], uint32(8+plen)<<16)
	return l4 + 8, ps + sum(b[l4:l4+8])
}

// udpDone stores the UDP checksum (0 is sent as 0xffff) and pads.
func udpDone(b []byte, pay int, plen int, s uint64) int {
	c := ^fold(s)
	if c == 0 {
		c = 0xffff
	}
	be.PutUint16(b[pay-2:], c)
	return pad(b, pay+plen)
}

// udpPattern writes a UDP datagram whose payload is pattern bytes after a
// head of hlen bytes the caller fills afterwards (hlen even); it returns
// the payload offset and the partial sum without the head.
func (g *Generator) udpPattern(b []byte, f *flow, toServer bool, plen, hlen int) (int, uint64) {
	pay, s := udpHdr(b, f, toServer, plen)
	s += g.payload(b[pay+hlen:], plen-hlen)
	return pay, s
}

func (g *Generator) emitUDP(b []byte, f *flow) int {
	toServer := g.rng.intn(2) == 0
	var plen int
	switch r := g.rng.intn(10); {
	case r < 5:
		plen = g.rng.between(18, 160)
	case r < 8:
		plen = g.rng.between(1150, l4Max(f)-8)
	default:
		plen = g.rng.between(160, 1150)
	}
	pay, s := g.udpPattern(b, f, toServer, plen, 0)
	return udpDone(b, pay, plen, s)
}

func (g *Generator) emitNTP(b []byte, f *flow) int {
	toServer := f.state == 0
	f.state ^= 1
	pay, s := g.udpPattern(b, f, toServer, 48, 4)
	if toServer {
		be.PutUint32(b[pay:], 0x230006e9) // LI 0, version 4, client; stratum 0; poll 6; precision -23
	} else {
		be.PutUint32(b[pay:], 0x240206e9) // server, stratum 2
	}
	return udpDone(b, pay, 48, s+sum(b[pay:pay+4]))
}

// emitQUIC writes QUIC over UDP 443: a connection opens with client and
// server Initial packets (long header, padded to at least 1200 bytes), then
// short-header packets, large from the server and small from the client.
func (g *Generator) emitQUIC(b []byte, f *flow) int {
	var toServer bool
	var plen, hlen int
	switch f.state {
	case 0, 1:
		toServer = f.state == 0
		plen, hlen = g.rng.between(1200, 1252), 30
		f.state++
	default:
		toServer = g.rng.intn(3) == 0
		if toServer {
			plen = g.rng.between(30, 80)
		} else {
			plen = g.rng.between(900, l4Max(f)-8)
		}
		hlen = 10
	}
	pay, s := g.udpPattern(b, f, toServer, plen, hlen)
	h := b[pay : pay+hlen]
	if hlen == 30 {
		h[0] = 0xc3 // long header, Initial, 4-byte packet number
		be.PutUint32(h[1:], 1)
		h[5] = 8
		copy(h[6:14], f.c6[8:16])
		h[14] = 8
		copy(h[15:23], f.s6[8:16])
		h[23] = 0 // token length
		be.PutUint16(h[24:], 0x4000|uint16(plen-26))
		be.PutUint32(h[26:], uint32(f.state))
	} else {
		h[0] = 0x40 | byte(f.left&0x20) // short header, spin bit, 1-byte packet number
		copy(h[1:9], f.c6[8:16])
		h[9] = byte(f.left)
	}
	f.left--
	if f.left <= 0 {
		f.state = 0
		f.left = int32(g.rng.between(4, 64))
		f.cport = ephemeral(&g.rng)
	}
	return udpDone(b, pay, plen, s+sum(h))
}

// emitDNS alternates a query and its response (A, or AAAA over IPv6).
func (g *Generator) emitDNS(b []byte, f *flow) int {
	name := dnsNames[f.name]
	qtype, rdlen := uint16(1), 4
	if f.v6 {
		qtype, rdlen = 28, 16
	}
	query := f.state == 0
	f.state ^= 1
	an := 0
	if !query {
		an = 1 + int(f.seq16&3)
	}
	plen := 12 + len(name) + 4 + an*(12+rdlen)
	pay, s := udpHdr(b, f, query, plen)
	d := b[pay : pay+plen]
	flags := uint32(0x0100)
	if !query {
		flags = 0x8180
	}
	be.PutUint32(d[0:], uint32(f.seq16)<<16|flags)
	be.PutUint32(d[4:], 1<<16|uint32(an))
	be.PutUint32(d[8:], 0)
	o := 12 + copy(d[12:], name)
	be.PutUint32(d[o:], uint32(qtype)<<16|1)
	o += 4
	for i := 0; i < an; i++ {
		be.PutUint32(d[o:], 0xc00c<<16|uint32(qtype))
		be.PutUint32(d[o+4:], 1<<16|uint32(300>>16))
		be.PutUint32(d[o+8:], uint32(300&0xffff)<<16|uint32(rdlen))
		if f.v6 {
			copy(d[o+12:], f.s6[:])
			d[o+27] += byte(i)
		} else {
			be.PutUint32(d[o+12:], f.s4+uint32(i))
		}
		o += 12 + rdlen
	}
	if !query {
		f.seq16++
		if g.rng.intn(4) == 0 {
			f.cport = ephemeral(&g.rng)
		}
	}
	return udpDone(b, pay, plen, s+sum(d))
}

// emitICMP alternates echo requests and replies (ping's 56 data bytes);
// one in twenty is a port unreachable quoting a UDP datagram.
func (g *Generator) emitICMP(b []byte, f *flow) int {
	if g.rng.intn(20) == 0 {
		l4, _ := ipHdr(b, f, false, protoICMP, 8+28)
		m := b[l4 : l4+36]
		be.PutUint32(m[0:], 3<<24|3<<16) // type 3 code 3
		be.PutUint32(m[4:], 0)
		inner := m[8:]
		ip4(inner, f, true, protoUDP, 8+32)
		be.PutUint32(inner[20:], uint32(f.cport)<<16|uint32(f.sport))
		be.PutUint32(inner[24:], (8+32)<<16|0x1234)
		be.PutUint16(m[2:], ^fold(sum(m)))
		return pad(b, l4+36)
	}
	toServer := f.state == 0
	f.state ^= 1
	typ := uint32(8)
	if !toServer {
		typ = 0
	}
	l4, _ := ipHdr(b, f, toServer, protoICMP, 64)
	m := b[l4 : l4+64]
	be.PutUint32(m[0:], typ<<24)
	be.PutUint32(m[4:], uint32(f.cport)<<16|uint32(f.seq16))
	s := sum(m[:8]) + g.payload(m[8:], 56)
	be.PutUint16(m[2:], ^fold(s))
	if !toServer {
		f.seq16++
	}
	return pad(b, l4+64)
}

// emitICMPv6 alternates echo requests and replies; one in ten packets is a
// neighbour solicitation to the solicited-node multicast address.
func (g *Generator) emitICMPv6(b []byte, f *flow) int {
	if g.rng.intn(10) == 0 {
		l3 := l2(b, f, true, etIPv6)
		h := b[l3:]
		ip6(h, f, true, protoICMPv6, 32)
		h[7] = 255
		// ff02::1:ffXX:XXXX and its multicast MAC 33:33:ff:XX:XX:XX
		be.PutUint64(h[24:], 0xff02<<48)
		be.PutUint64(h[32:], 0x1ff<<24|uint64(f.s6[13])<<16|uint64(f.s6[14])<<8|uint64(f.s6[15]))
		b[0], b[1], b[2], b[3], b[4], b[5] = 0x33, 0x33, 0xff, f.s6[13], f.s6[14], f.s6[15]
		m := h[40:72]
		be.PutUint64(m[0:], 135<<56)
		copy(m[8:24], f.s6[:])
		m[24], m[25] = 1, 1 // source link-layer address option
		copy(m[26:32], f.cmac[:])
		s := sum(h[8:40]) + protoICMPv6 + 32 + sum(m)
		be.PutUint16(m[2:], ^fold(s))
		return pad(b, l3+72)
	}
	toServer := f.state == 0
	f.state ^= 1
	typ := uint32(128)
	if !toServer {
		typ = 129
	}
	l4, ps := ipHdr(b, f, toServer, protoICMPv6, 64)
	m := b[l4 : l4+64]
	be.PutUint32(m[0:], typ<<24)
	be.PutUint32(m[4:], uint32(f.cport)<<16|uint32(f.seq16))
	s := ps + sum(m[:8]) + g.payload(m[8:], 56)
	be.PutUint16(m[2:], ^fold(s))
	if !toServer {
		f.seq16++
	}
	return pad(b, l4+64)
}

// emitARP alternates a broadcast who-has for the gateway and its reply.
func (g *Generator) emitARP(b []byte, f *flow) int {
	request := f.state == 0
	f.state ^= 1
	l3 := l2(b, f, !request, etARP)
	a := b[l3 : l3+28]
	be.PutUint32(a[0:], 1<<16|etIPv4)
	if request {
		copy(b[0:6], broadcast[:])
		copy(b[6:12], f.cmac[:])
		be.PutUint32(a[4:], 6<<24|4<<16|1)
		copy(a[8:14], f.cmac[:])
		be.PutUint32(a[14:], f.c4)
		clear(a[18:24])
		be.PutUint32(a[24:], f.s4)
	} else {
		be.PutUint32(a[4:], 6<<24|4<<16|2)
		copy(a[8:14], f.smac[:])
		be.PutUint32(a[14:], f.s4)
		copy(a[18:24], f.cmac[:])
		be.PutUint32(a[24:], f.c4)
	}
	return pad(b, l3+28)
}
