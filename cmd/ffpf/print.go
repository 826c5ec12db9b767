package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// printHelp states what --print prints and where it stops short of
// tcpdump; run -h shows it.
const printHelp = `print a line per packet that reaches the end of the flowgraph, as 'tcpdump -n -S' prints its first line (local time, numeric addresses, absolute TCP sequence numbers): IPv4 and IPv6 (without extension headers) with TCP (flags, seq, ack, win, urg, the options mss, nop, eol, wscale, sackOK, sack and TS, length), UDP (length), ICMP and ICMPv6 echo, and ARP requests and replies; application protocols (DNS, HTTP, NTP…) are not decoded, other packets get a short generic line. The counters go to stderr, as tcpdump's statistics do`

// printClass is the sink --print attaches; it lives only in the run's own
// registry, not among the classes of expressions.
func printClass(w io.Writer) *functions.Class {
	return &functions.Class{
		Name:      "print",
		Summary:   "print a line per packet, as tcpdump does",
		MinInputs: 1, MaxInputs: -1,
		New: func(ctx *functions.Context) (functions.Function, error) {
			return newPrinter(w, ctx.LinkType), nil
		},
	}
}

// printer writes one line per packet. It decodes the headers it prints
// in place (views into the packet's bytes) and formats with append
// functions, so that it allocates nothing per packet.
type printer struct {
	w    *bufio.Writer
	link functions.LinkType
	line []byte
	err  error
}

func newPrinter(w io.Writer, link functions.LinkType) *printer {
	return &printer{w: bufio.NewWriterSize(w, 64<<10), link: link, line: make([]byte, 0, 512)}
}

// Process prints the batch's packets and passes them all on. A write that
// fails (standard output closed) drops the batch and every later one; Close
// reports it.
func (p *printer) Process(b *buffers.Batch) {
	if p.err != nil {
		b.Dropped += b.N
		b.N = 0
		return
	}
	for i := 0; i < b.N; i++ {
		slot := b.E[i].Slot
		m := b.PBuf.Meta(slot)
		p.line = p.format(p.line[:0], b.PBuf.Data(slot), m.Timestamp, m.WireLen)
		p.w.Write(p.line)
	}
	// A line per packet as it comes: a live capture is read as it goes.
	if err := p.w.Flush(); err != nil {
		p.err = fmt.Errorf("cannot print: %v", err)
		b.Dropped += b.N
		b.N = 0
	}
}

// Close reports the first write error.
func (p *printer) Close() error { return p.err }

// Ethertypes the printer follows.
const (
	etherIPv4  = 0x0800
	etherARP   = 0x0806
	etherVLAN  = 0x8100
	etherQinQ  = 0x88a8
	etherIPv6  = 0x86dd
	etherMinII = 0x0600 // below: an 802.3 length, not a type
)

// format appends the line of one packet to l. A header that does not
// decode (too short, a length below its own header's) gives the
// "undecoded" line; a protocol the printer does not follow gives the
// generic line of the last header it read.
func (p *printer) format(l, data []byte, ts int64, wire uint32) []byte {
	l = appendTime(l, ts)
	rest := int(wire) // bytes on the wire after the link-layer header
	var et uint16
	var off int
	switch p.link {
	case functions.LinkEthernet:
		rest -= 14
		if len(data) < 14 {
			return undecoded(l, wire)
		}
		et, off = binary.BigEndian.Uint16(data[12:]), 14
		if et < etherMinII {
			et = 0 // 802.3 with LLC: not followed
		}
	case functions.LinkLinuxSLL:
		rest -= 16
		if len(data) < 16 {
			return undecoded(l, wire)
		}
		et, off = binary.BigEndian.Uint16(data[14:]), 16
	case functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6:
		et = etherIPv4
		if len(data) > 0 && data[0]>>4 == 6 {
			et = etherIPv6
		}
	default:
		l = append(l, "link type "...)
		l = append(l, p.link.String()...)
		l = append(l, ", length "...)
		return append(strconv.AppendUint(l, uint64(wire), 10), '\n')
	}
	// Behind a link-layer header, nothing captured beyond it ends the
	// decoding as a type the printer does not follow does.
	for off > 0 && off < len(data) && (et == etherVLAN || et == etherQinQ) {
		if len(data)-off < 4 {
			return undecoded(l, wire)
		}
		rest -= 4
		et, off = binary.BigEndian.Uint16(data[off+2:]), off+4
	}
	d, ok := data[off:], false
	switch {
	case off > 0 && len(d) == 0:
	case et == etherIPv4:
		l, ok = appendIPv4(l, d, 0)
		return endLine(l, ok, wire)
	case et == etherIPv6:
		l, ok = appendIPv6(l, d, 0)
		return endLine(l, ok, wire)
	case et == etherARP:
		l, ok = appendARP(l, d, rest)
		return endLine(l, ok, wire)
	}
	l = append(l, "ethertype 0x"...)
	l = appendHex16(l, et)
	l = append(l, ", length "...)
	return append(strconv.AppendInt(l, int64(rest), 10), '\n')
}

// endLine ends the line l, or gives the "undecoded" line if the packet's
// headers did not decode (!ok).
func endLine(l []byte, ok bool, wire uint32) []byte {
	if !ok {
		return undecoded(l, wire)
	}
	return append(l, '\n')
}

func undecoded(l []byte, wire uint32) []byte {
	l = append(l, "undecoded, length "...)
	return append(strconv.AppendUint(l, uint64(wire), 10), '\n')
}

// appendIPv4 appends "IP " and the rest of the line of the IPv4 packet d,
// or returns l as it was and false if its header does not decode: shorter than 20 bytes, a
// total length or header length too small, options that overrun.
func appendIPv4(l, d []byte, depth int) ([]byte, bool) {
	if len(d) < 20 {
		return l, false
	}
	length, ihl := int(binary.BigEndian.Uint16(d[2:])), int(d[0]&15)*4
	if length == 0 { // TCP segmentation offload: the length is the packet's
		length = int(uint16(len(d)))
	}
	if length < 20 || ihl < 20 || ihl > length {
		return l, false
	}
	if len(d) > length {
		d = d[:length]
	} else if len(d) < ihl {
		return l, false
	}
	if !ipv4Options(d[20:ihl]) {
		return l, false
	}
	flags := binary.BigEndian.Uint16(d[6:])
	more, offset := flags&0x2000 != 0, flags&0x1fff
	proto := d[9]
	var t transport
	switch {
	case offset == 0 && !more:
		t = decodeTransport(proto, d[ihl:])
	case offset == 0 && proto != protoICMPv6: // a first fragment: tcpdump reads on
		t = decodeTransport(proto, d[ihl:])
	}
	l = append(l, "IP "...)
	if t.kind == 0 && offset == 0 && !more {
		if m, ok := appendTunnel(l, d[12:16], d[16:20], proto, d[ihl:], depth); ok {
			return m, true
		}
	}
	return t.append(l, d[12:16], d[16:20], proto, length-ihl, offset != 0), true
}

// ipv4Options reports whether the options o are well formed.
func ipv4Options(o []byte) bool {
	for len(o) > 0 {
		switch o[0] {
		case 0: // end of options
			return true
		case 1: // no operation
			o = o[1:]
		default:
			if len(o) < 2 || len(o) < int(o[1]) || o[1] <= 2 {
				return false
			}
			o = o[o[1]:]
		}
	}
	return true
}

// appendIPv6 appends "IP6 " and the rest of the line of the IPv6 packet d
// (without extension headers: a next header other than TCP, UDP, ICMP or
// ICMPv6 is printed as a number), or returns l as it was and false if it
// is shorter than its header, its payload length is 0 without a
// jumbogram option, or its hop-by-hop header is malformed.
func appendIPv6(l, d []byte, depth int) ([]byte, bool) {
	if len(d) < 40 {
		return l, false
	}
	length, next := int(binary.BigEndian.Uint16(d[4:])), d[6]
	var t transport
	switch {
	case next == 0: // a hop-by-hop header: checked, not followed
		if jumbo, ok := hopByHop(d[40:]); !ok || jumbo != (length == 0) {
			return l, false
		}
	case length == 0:
		return l, false
	default:
		t = decodeTransport(next, d[40:min(len(d), 40+length)])
	}
	l = append(l, "IP6 "...)
	if t.kind == 0 && next != 0 {
		if m, ok := appendTunnel(l, d[8:24], d[24:40], next, d[40:min(len(d), 40+length)], depth); ok {
			return m, true
		}
	}
	return t.append(l, d[8:24], d[24:40], next, length, false), true
}

// maxTunnels bounds the IP-in-IP headers the printer follows.
const maxTunnels = 4

// appendTunnel appends "SRC > DST: " and the line of the IP packet inner
// for IP in IP (protocol 4) and IPv6 in IP (41), as tcpdump does, or
// returns l as it was and false for another protocol, an inner packet
// whose header does not decode, or tunnels nested deeper than maxTunnels.
func appendTunnel(l, src, dst []byte, proto uint8, inner []byte, depth int) ([]byte, bool) {
	if depth >= maxTunnels || proto != protoIPIP && proto != protoIPv6 {
		return l, false
	}
	m := appendAddr(l, src)
	m = append(m, " > "...)
	m = appendAddr(m, dst)
	m = append(m, ": "...)
	var ok bool
	if proto == protoIPIP {
		m, ok = appendIPv4(m, inner, depth+1)
	} else {
		m, ok = appendIPv6(m, inner, depth+1)
	}
	if !ok {
		return l, false
	}
	return m, true
}

// hopByHop reports whether the IPv6 hop-by-hop header at the start of d
// is well formed (it and each option within d; a jumbogram option, if
// any, of 4 bytes and a length above 65535), and whether it has a
// jumbogram option.
func hopByHop(d []byte) (jumbo, ok bool) {
	if len(d) < 2 {
		return false, false
	}
	end := (int(d[1]) + 1) * 8
	if len(d) < end {
		return false, false
	}
	for off := 2; off < end; {
		if len(d)-off < 2 {
			return false, false
		}
		if d[off] == 0 { // Pad1
			off++
			continue
		}
		n := int(d[off+1]) + 2
		if len(d)-off < n {
			return false, false
		}
		if d[off] == 0xc2 && !jumbo { // the first jumbogram option counts
			if n != 6 || binary.BigEndian.Uint32(d[off+2:]) <= 65535 {
				return false, false
			}
			jumbo = true
		}
		off += n
	}
	return jumbo, true
}

// IP protocol numbers the printer decodes.
const (
	protoICMP   = 1
	protoIPIP   = 4
	protoTCP    = 6
	protoUDP    = 17
	protoIPv6   = 41
	protoICMPv6 = 58
)

// transport is the decoded transport header of a packet: kind says which
// (0: none decoded) and h holds its bytes.
type transport struct {
	kind uint8 // protoTCP, protoUDP, protoICMP, protoICMPv6, or kindEcho6
	h    []byte
}

// kindEcho6 is an ICMPv6 echo request or reply whose identifier and
// sequence number are there.
const kindEcho6 = 255

// decodeTransport decodes the header of protocol proto at the start of d:
// a TCP header whose data offset and options are sound, a UDP header whose
// length is 0 or at least 8, 8 bytes of ICMP, 4 of ICMPv6 (8 for an echo).
func decodeTransport(proto uint8, d []byte) transport {
	switch proto {
	case protoTCP:
		if len(d) < 20 {
			break
		}
		hlen := int(d[12]>>4) * 4
		if hlen < 20 || hlen > len(d) {
			break
		}
		if _, ok := appendTCPOptions(nil, d[20:hlen], false); ok {
			return transport{protoTCP, d[:hlen]}
		}
	case protoUDP:
		if len(d) >= 8 {
			if n := binary.BigEndian.Uint16(d[4:]); n == 0 || n >= 8 {
				return transport{protoUDP, d[:8]}
			}
		}
	case protoICMP:
		if len(d) >= 8 {
			return transport{protoICMP, d[:8]}
		}
	case protoICMPv6:
		if len(d) >= 4 {
			if (d[0] == 128 || d[0] == 129) && len(d) >= 8 {
				return transport{kindEcho6, d[:8]}
			}
			return transport{protoICMPv6, d[:4]}
		}
	}
	return transport{}
}

// append appends "SRC.SPORT > DST.DPORT: ..." for TCP and UDP, or
// "SRC > DST: ..." for the rest; payload is the IP payload's length from
// the IP header, later whether the packet is a later IPv4 fragment.
func (t transport) append(l []byte, src, dst []byte, proto uint8, payload int, later bool) []byte {
	h := t.h
	switch t.kind {
	case protoTCP:
		l = appendEnd(l, src, binary.BigEndian.Uint16(h), dst, binary.BigEndian.Uint16(h[2:]))
		return appendTCP(l, h, payload-len(h))
	case protoUDP:
		l = appendEnd(l, src, binary.BigEndian.Uint16(h), dst, binary.BigEndian.Uint16(h[2:]))
		l = append(l, "UDP, length "...)
		return strconv.AppendInt(l, int64(binary.BigEndian.Uint16(h[4:]))-8, 10)
	}
	l = appendAddr(l, src)
	l = append(l, " > "...)
	l = appendAddr(l, dst)
	l = append(l, ": "...)
	switch t.kind {
	case protoICMP:
		switch h[0] {
		case 8:
			l = append(l, "ICMP echo request"...)
		case 0:
			l = append(l, "ICMP echo reply"...)
		default:
			l = append(l, "ICMP type "...)
			l = strconv.AppendUint(l, uint64(h[0]), 10)
			l = append(l, ", length "...)
			return strconv.AppendInt(l, int64(payload), 10)
		}
		l = append(l, ", id "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[4:])), 10)
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[6:])), 10)
	case kindEcho6:
		if h[0] == 128 {
			l = append(l, "ICMP6, echo request"...)
		} else {
			l = append(l, "ICMP6, echo reply"...)
		}
		l = append(l, ", id "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[4:])), 10)
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[6:])), 10)
	case protoICMPv6:
		l = append(l, "ICMP6, type "...)
		l = strconv.AppendUint(l, uint64(h[0]), 10)
	default:
		l = append(l, "ip-proto-"...)
		l = strconv.AppendUint(l, uint64(proto), 10)
		if later {
			return l // a later fragment: tcpdump gives no length
		}
		l = append(l, ' ')
		return strconv.AppendInt(l, int64(payload), 10)
	}
	l = append(l, ", length "...)
	return strconv.AppendInt(l, int64(payload), 10)
}

// tcpFlags are TCP's flags in the order tcpdump prints them.
var tcpFlags = [...]struct {
	bit  uint8
	char byte
}{{0x01, 'F'}, {0x02, 'S'}, {0x04, 'R'}, {0x08, 'P'}, {0x10, '.'}, {0x20, 'U'}, {0x40, 'E'}, {0x80, 'W'}}

// TCP flag bits.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
	tcpURG = 0x20
)

// appendTCP appends tcpdump's summary of the TCP header h (options
// included); n is the segment's payload length from the IP header.
func appendTCP(l, h []byte, n int) []byte {
	bits := h[13]
	seq := binary.BigEndian.Uint32(h[4:])
	l = append(l, "Flags ["...)
	if bits == 0 {
		l = append(l, "none"...)
	}
	for _, f := range tcpFlags {
		if bits&f.bit != 0 {
			l = append(l, f.char)
		}
	}
	l = append(l, ']')
	if n > 0 || bits&(tcpSYN|tcpFIN|tcpRST) != 0 {
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(seq), 10)
		if n > 0 {
			l = append(l, ':')
			l = strconv.AppendUint(l, uint64(seq+uint32(n)), 10)
		}
	}
	if bits&tcpACK != 0 {
		l = append(l, ", ack "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint32(h[8:])), 10)
	}
	l = append(l, ", win "...)
	l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[14:])), 10)
	if bits&tcpURG != 0 {
		l = append(l, ", urg "...)
		l = strconv.AppendUint(l, uint64(binary.BigEndian.Uint16(h[18:])), 10)
	}
	if len(h) > 20 {
		l = append(l, ", options ["...)
		l, _ = appendTCPOptions(l, h[20:], true)
		l = append(l, ']')
	}
	l = append(l, ", length "...)
	return strconv.AppendInt(l, int64(n), 10)
}

// appendTCPOptions walks the options o, appending each as tcpdump names
// it when print is set, and reports whether they are well formed (each
// option's length at least 2 and within o). The end-of-options option ends
// the walk.
func appendTCPOptions(l, o []byte, print bool) ([]byte, bool) {
	for i := 0; len(o) > 0; i++ {
		kind, n := o[0], 1
		if kind > 1 {
			if len(o) < 2 || o[1] < 2 || int(o[1]) > len(o) {
				return l, false
			}
			n = int(o[1])
		}
		if print {
			if i > 0 {
				l = append(l, ',')
			}
			l = appendTCPOption(l, kind, o[min(n, 2):n])
		}
		if kind == 0 {
			break
		}
		o = o[n:]
	}
	return l, true
}

// TCP option kinds.
const (
	tcpOptEOL       = 0
	tcpOptNOP       = 1
	tcpOptMSS       = 2
	tcpOptWScale    = 3
	tcpOptSACKOK    = 4
	tcpOptSACK      = 5
	tcpOptTimestamp = 8
)

// appendTCPOption appends one option, of kind k with data d, as tcpdump
// names it.
func appendTCPOption(l []byte, k byte, d []byte) []byte {
	switch {
	case k == tcpOptEOL:
		return append(l, "eol"...)
	case k == tcpOptNOP:
		return append(l, "nop"...)
	case k == tcpOptMSS && len(d) == 2:
		return strconv.AppendUint(append(l, "mss "...), uint64(binary.BigEndian.Uint16(d)), 10)
	case k == tcpOptWScale && len(d) == 1:
		return strconv.AppendUint(append(l, "wscale "...), uint64(d[0]), 10)
	case k == tcpOptSACKOK && len(d) == 0:
		return append(l, "sackOK"...)
	case k == tcpOptTimestamp && len(d) == 8:
		l = strconv.AppendUint(append(l, "TS val "...), uint64(binary.BigEndian.Uint32(d)), 10)
		return strconv.AppendUint(append(l, " ecr "...), uint64(binary.BigEndian.Uint32(d[4:])), 10)
	case k == tcpOptSACK && len(d)%8 == 0:
		l = append(l, "sack "...)
		l = strconv.AppendInt(l, int64(len(d)/8), 10)
		for i := 0; i < len(d); i += 8 {
			l = strconv.AppendUint(append(l, " {"...), uint64(binary.BigEndian.Uint32(d[i:])), 10)
			l = strconv.AppendUint(append(l, ':'), uint64(binary.BigEndian.Uint32(d[i+4:])), 10)
			l = append(l, '}')
		}
		return l
	}
	l = strconv.AppendUint(append(l, "opt-"...), uint64(k), 10)
	return strconv.AppendUint(append(l, ':'), uint64(len(d)), 10)
}

// appendARP appends tcpdump's line for the ARP packet d, an Ethernet/IPv4
// request or reply, or a short one for others; n is its length on the
// wire. It returns l as it was and false if d is shorter than its
// addresses.
func appendARP(l, d []byte, n int) ([]byte, bool) {
	if len(d) < 8 {
		return l, false
	}
	hw, pr := int(d[4]), int(d[5])
	if len(d) < 8+2*hw+2*pr {
		return l, false
	}
	sha, spa := d[8:8+hw], d[8+hw:8+hw+pr]
	tpa := d[8+2*hw+pr : 8+2*hw+2*pr]
	l = append(l, "ARP, "...)
	if hrd := binary.BigEndian.Uint16(d); hrd != 1 || binary.BigEndian.Uint16(d[2:]) != etherIPv4 || pr != 4 {
		l = append(l, "hardware type "...)
		l = strconv.AppendUint(l, uint64(hrd), 10)
	} else {
		switch op := binary.BigEndian.Uint16(d[6:]); op {
		case 1:
			l = append(l, "Request who-has "...)
			l = appendAddr(l, tpa)
			l = append(l, " tell "...)
			l = appendAddr(l, spa)
		case 2:
			l = append(l, "Reply "...)
			l = appendAddr(l, spa)
			l = append(l, " is-at "...)
			l = appendMAC(l, sha)
		default:
			l = append(l, "operation "...)
			l = strconv.AppendUint(l, uint64(op), 10)
		}
	}
	l = append(l, ", length "...)
	return strconv.AppendInt(l, int64(n), 10), true
}

// appendTime appends the time of day in the local time zone with
// microseconds, as tcpdump prints it ("15:04:05.000000 ").
func appendTime(l []byte, ns int64) []byte {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	h, m, s := time.Unix(sec, 0).Clock()
	l = append2(l, h)
	l = append(l, ':')
	l = append2(l, m)
	l = append(l, ':')
	l = append2(l, s)
	l = append(l, '.')
	us := frac / 1e3
	for d := int64(1e5); d > 0; d /= 10 {
		l = append(l, byte('0'+us/d%10))
	}
	return append(l, ' ')
}

func append2(l []byte, v int) []byte { return append(l, byte('0'+v/10), byte('0'+v%10)) }

func appendEnd(l []byte, src []byte, sport uint16, dst []byte, dport uint16) []byte {
	l = appendAddr(l, src)
	l = strconv.AppendUint(append(l, '.'), uint64(sport), 10)
	l = append(l, " > "...)
	l = appendAddr(l, dst)
	l = strconv.AppendUint(append(l, '.'), uint64(dport), 10)
	return append(l, ": "...)
}

// appendAddr appends an IPv4 or IPv6 address as inet_ntop writes it.
func appendAddr(l []byte, ip []byte) []byte {
	switch len(ip) {
	case 4:
		return netip.AddrFrom4([4]byte(ip)).AppendTo(l)
	case 16: // inet_ntop's form, ::ffff:1.2.3.4 included
		return netip.AddrFrom16([16]byte(ip)).AppendTo(l)
	}
	return append(l, '?')
}

func appendMAC(l []byte, mac []byte) []byte {
	const hex = "0123456789abcdef"
	for i, b := range mac {
		if i > 0 {
			l = append(l, ':')
		}
		l = append(l, hex[b>>4], hex[b&15])
	}
	return l
}

func appendHex16(l []byte, v uint16) []byte {
	const hex = "0123456789abcdef"
	return append(l, hex[v>>12], hex[v>>8&15], hex[v>>4&15], hex[v&15])
}

var (
	_ functions.Function = (*printer)(nil)
	_ functions.Closer   = (*printer)(nil)
)

// formatRate gives packets per second in a unit that shows it: a live run
// of a few thousand packets a second is not "0.00 Mpps".
func formatRate(packets uint64, el time.Duration) string {
	if el <= 0 {
		return "0 pps"
	}
	switch pps := float64(packets) / el.Seconds(); {
	case pps >= 1e6:
		return fmt.Sprintf("%.2f Mpps", pps/1e6)
	case pps >= 1e3:
		return fmt.Sprintf("%.2f kpps", pps/1e3)
	default:
		return fmt.Sprintf("%.0f pps", pps)
	}
}
