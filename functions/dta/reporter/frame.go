package reporter

import (
	"encoding/binary"
	"net/netip"
)

// Offsets in a report frame: Ethernet, IPv4 (no options), UDP, the report.
const (
	ipOff      = 14
	udpOff     = ipOff + 20
	PayloadOff = udpOff + 8 // where the DTA report starts in a frame
	// MinFrame is Ethernet's shortest frame without its FCS: every report
	// frame is padded to it, as on a wire.
	MinFrame = 60
	// MaxFrame is the longest frame: the padded one (the headers and the
	// longest report, Key-Increment's 15 bytes, make 57).
	MaxFrame = MinFrame
)

// SrcPort is the UDP source port of the reference reporter (0xc0de), used
// in frames when no socket gives a real one.
const SrcPort = 0xc0de

// Locally administered MAC addresses: the frames are records of reports,
// not frames a NIC sent.
var (
	srcMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	dstMAC = [6]byte{0x02, 0, 0, 0, 0, 0x02}
)

// framer writes Ethernet/IPv4/UDP headers around a report, with a correct
// IPv4 header checksum and UDP checksum.
type framer struct {
	tmpl [PayloadOff]byte
	// The sums of the constant words: the IPv4 header's without length
	// and identification; the UDP pseudo-header's addresses and protocol
	// and the ports. A frame adds its own words to them.
	ipSum, udpSum uint32
	id            uint16 // IPv4 identification, one more per frame
}

func newFramer(src, dst netip.AddrPort) *framer {
	f := &framer{}
	t := f.tmpl[:]
	copy(t[0:], dstMAC[:])
	copy(t[6:], srcMAC[:])
	binary.BigEndian.PutUint16(t[12:], 0x0800)
	ip := t[ipOff:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF, as the reference reporter
	ip[8] = 64
	ip[9] = 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	u := t[udpOff:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	f.ipSum = sum(ip[:20], 0)
	f.udpSum = sum(s[:], 0) + sum(d[:], 0) + 17 + uint32(src.Port()) + uint32(dst.Port())
	return f
}

// sum adds b as big-endian 16-bit words (a last odd byte padded with 0).
func sum(b []byte, s uint32) uint32 {
	n := len(b) &^ 1
	for i := 0; i < n; i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b) > n {
		s += uint32(b[n]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// finish completes the headers of frame, whose report (frame[PayloadOff:])
// is written, pads it with zeros to MinFrame (in its capacity) and returns
// the padded length.
func (f *framer) finish(frame []byte) int {
	n := len(frame)
	copy(frame, f.tmpl[:])
	if n < MinFrame {
		clear(frame[n:MinFrame])
	}
	ip := frame[ipOff:udpOff]
	binary.BigEndian.PutUint16(ip[2:], uint16(n-ipOff))
	binary.BigEndian.PutUint16(ip[4:], f.id)
	f.id++
	binary.BigEndian.PutUint16(ip[10:], fold(f.ipSum+uint32(n-ipOff)+uint32(f.id-1)))
	ulen := uint16(n - udpOff)
	u := frame[udpOff:]
	binary.BigEndian.PutUint16(u[4:], ulen)
	// The length counts twice: in the pseudo-header and in the UDP
	// header; then the report.
	c := fold(sum(frame[PayloadOff:n], f.udpSum+2*uint32(ulen)))
	if c == 0 {
		c = 0xffff // 0 means "no checksum" in UDP over IPv4
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return max(n, MinFrame)
}

// payload returns the report in a frame: the UDP payload, without padding.
func payload(frame []byte) []byte {
	n := int(binary.BigEndian.Uint16(frame[ipOff+2:])) + ipOff
	return frame[PayloadOff:n]
}
