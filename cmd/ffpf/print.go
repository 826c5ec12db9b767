package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

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

// printer writes one line per packet. It decodes with gopacket's
// DecodingLayerParser into layers it owns and formats with append
// functions, so that it allocates nothing per packet.
type printer struct {
	w    *bufio.Writer
	link functions.LinkType
	line []byte
	err  error

	eth     layers.Ethernet
	sll     layers.LinuxSLL
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	udp     layers.UDP
	icmp4   layers.ICMPv4
	icmp6   layers.ICMPv6
	echo6   layers.ICMPv6Echo
	arp     layers.ARP
	parsers map[gopacket.LayerType]*gopacket.DecodingLayerParser // by the first layer
	decoded []gopacket.LayerType
}

func newPrinter(w io.Writer, link functions.LinkType) *printer {
	p := &printer{w: bufio.NewWriterSize(w, 64<<10), link: link, line: make([]byte, 0, 512),
		decoded: make([]gopacket.LayerType, 0, 8)}
	p.parsers = map[gopacket.LayerType]*gopacket.DecodingLayerParser{}
	for _, first := range []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeLinuxSLL, layers.LayerTypeIPv4, layers.LayerTypeIPv6} {
		dp := gopacket.NewDecodingLayerParser(first,
			&p.eth, &p.sll, &p.dot1q, &p.ip4, &p.ip6, &p.tcp, &p.udp, &p.icmp4, &p.icmp6, &p.echo6, &p.arp)
		dp.IgnoreUnsupported = true
		p.parsers[first] = dp
	}
	return p
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

// format appends the line of one packet to l.
func (p *printer) format(l, data []byte, ts int64, wire uint32) []byte {
	l = appendTime(l, ts)
	first := layers.LayerTypeEthernet
	rest := int(wire) // bytes on the wire after the link-layer header
	switch p.link {
	case functions.LinkEthernet:
		rest -= 14
	case functions.LinkLinuxSLL:
		first = layers.LayerTypeLinuxSLL
		rest -= 16
	case functions.LinkRaw, functions.LinkIPv4, functions.LinkIPv6:
		first = layers.LayerTypeIPv4
		if len(data) > 0 && data[0]>>4 == 6 {
			first = layers.LayerTypeIPv6
		}
	default:
		l = append(l, "link type "...)
		l = append(l, p.link.String()...)
		l = append(l, ", length "...)
		return append(strconv.AppendUint(l, uint64(wire), 10), '\n')
	}
	p.decoded = p.decoded[:0]
	err := p.parsers[first].DecodeLayers(data, &p.decoded)
	var ip4, ip6 bool
	for _, t := range p.decoded {
		switch t {
		case layers.LayerTypeDot1Q:
			rest -= 4
		case layers.LayerTypeIPv4:
			ip4 = true
		case layers.LayerTypeIPv6:
			ip6 = true
		case layers.LayerTypeARP:
			return append(p.appendARP(l, rest), '\n')
		}
	}
	if ip4 && p.decoded[len(p.decoded)-1] == layers.LayerTypeIPv4 && p.ip4.Flags&layers.IPv4MoreFragments != 0 && p.ip4.FragOffset == 0 {
		// A first fragment: gopacket stops at it, tcpdump reads on.
		p.decodeFirstFragment()
	}
	switch {
	case ip4:
		l = append(l, "IP "...)
		payload := int(p.ip4.Length) - int(p.ip4.IHL)*4
		return append(p.appendTransport(l, p.ip4.SrcIP, p.ip4.DstIP, p.ip4.Protocol, payload), '\n')
	case ip6:
		l = append(l, "IP6 "...)
		return append(p.appendTransport(l, p.ip6.SrcIP, p.ip6.DstIP, p.ip6.NextHeader, int(p.ip6.Length)), '\n')
	}
	if len(p.decoded) == 0 || err != nil {
		l = append(l, "undecoded, length "...)
		return append(strconv.AppendUint(l, uint64(wire), 10), '\n')
	}
	et := p.eth.EthernetType
	switch p.decoded[len(p.decoded)-1] {
	case layers.LayerTypeLinuxSLL:
		et = p.sll.EthernetType
	case layers.LayerTypeDot1Q:
		et = p.dot1q.Type
	}
	l = append(l, "ethertype 0x"...)
	l = appendHex16(l, uint16(et))
	l = append(l, ", length "...)
	return append(strconv.AppendInt(l, int64(rest), 10), '\n')
}

// decodeFirstFragment decodes the transport header of a first IPv4
// fragment, and appends its layer to p.decoded when it decodes.
func (p *printer) decodeFirstFragment() {
	var l gopacket.DecodingLayer
	switch p.ip4.Protocol {
	case layers.IPProtocolTCP:
		l = &p.tcp
	case layers.IPProtocolUDP:
		l = &p.udp
	case layers.IPProtocolICMPv4:
		l = &p.icmp4
	default:
		return
	}
	if l.DecodeFromBytes(p.ip4.Payload, gopacket.NilDecodeFeedback) == nil {
		p.decoded = append(p.decoded, l.(gopacket.Layer).LayerType())
	}
}

// appendTransport appends "SRC.SPORT > DST.DPORT: ..." for TCP and UDP, or
// "SRC > DST: ..." for the rest; payload is the IP payload's length from
// the IP header.
func (p *printer) appendTransport(l []byte, src, dst []byte, proto layers.IPProtocol, payload int) []byte {
	last := p.decoded[len(p.decoded)-1]
	switch {
	case last == layers.LayerTypeTCP && proto == layers.IPProtocolTCP:
		l = appendEnd(l, src, uint16(p.tcp.SrcPort), dst, uint16(p.tcp.DstPort))
		return p.appendTCP(l, payload-int(p.tcp.DataOffset)*4)
	case last == layers.LayerTypeUDP && proto == layers.IPProtocolUDP:
		l = appendEnd(l, src, uint16(p.udp.SrcPort), dst, uint16(p.udp.DstPort))
		l = append(l, "UDP, length "...)
		return strconv.AppendInt(l, int64(p.udp.Length)-8, 10)
	}
	l = appendAddr(l, src)
	l = append(l, " > "...)
	l = appendAddr(l, dst)
	l = append(l, ": "...)
	switch {
	case last == layers.LayerTypeICMPv4 && proto == layers.IPProtocolICMPv4:
		switch p.icmp4.TypeCode.Type() {
		case layers.ICMPv4TypeEchoRequest:
			l = append(l, "ICMP echo request"...)
		case layers.ICMPv4TypeEchoReply:
			l = append(l, "ICMP echo reply"...)
		default:
			l = append(l, "ICMP type "...)
			l = strconv.AppendUint(l, uint64(p.icmp4.TypeCode.Type()), 10)
			l = append(l, ", length "...)
			return strconv.AppendInt(l, int64(payload), 10)
		}
		l = append(l, ", id "...)
		l = strconv.AppendUint(l, uint64(p.icmp4.Id), 10)
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(p.icmp4.Seq), 10)
	case last == layers.LayerTypeICMPv6Echo && proto == layers.IPProtocolICMPv6:
		if p.icmp6.TypeCode.Type() == layers.ICMPv6TypeEchoRequest {
			l = append(l, "ICMP6, echo request"...)
		} else {
			l = append(l, "ICMP6, echo reply"...)
		}
		l = append(l, ", id "...)
		l = strconv.AppendUint(l, uint64(p.echo6.Identifier), 10)
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(p.echo6.SeqNumber), 10)
	case last == layers.LayerTypeICMPv6 && proto == layers.IPProtocolICMPv6:
		l = append(l, "ICMP6, type "...)
		l = strconv.AppendUint(l, uint64(p.icmp6.TypeCode.Type()), 10)
	default:
		l = append(l, "ip-proto-"...)
		l = strconv.AppendUint(l, uint64(proto), 10)
		if last == layers.LayerTypeIPv4 && p.ip4.FragOffset != 0 {
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

// appendTCP appends tcpdump's TCP summary; n is the segment's payload
// length from the IP header.
func (p *printer) appendTCP(l []byte, n int) []byte {
	t := &p.tcp
	var bits uint8
	for i, f := range []bool{t.FIN, t.SYN, t.RST, t.PSH, t.ACK, t.URG, t.ECE, t.CWR} {
		if f {
			bits |= 1 << i
		}
	}
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
	if n > 0 || t.SYN || t.FIN || t.RST {
		l = append(l, ", seq "...)
		l = strconv.AppendUint(l, uint64(t.Seq), 10)
		if n > 0 {
			l = append(l, ':')
			l = strconv.AppendUint(l, uint64(t.Seq+uint32(n)), 10)
		}
	}
	if t.ACK {
		l = append(l, ", ack "...)
		l = strconv.AppendUint(l, uint64(t.Ack), 10)
	}
	l = append(l, ", win "...)
	l = strconv.AppendUint(l, uint64(t.Window), 10)
	if t.URG {
		l = append(l, ", urg "...)
		l = strconv.AppendUint(l, uint64(t.Urgent), 10)
	}
	if len(t.Options) > 0 {
		l = append(l, ", options ["...)
		for i, o := range t.Options {
			if i > 0 {
				l = append(l, ',')
			}
			l = appendTCPOption(l, o)
		}
		l = append(l, ']')
	}
	l = append(l, ", length "...)
	return strconv.AppendInt(l, int64(n), 10)
}

// appendTCPOption appends one option as tcpdump names it.
func appendTCPOption(l []byte, o layers.TCPOption) []byte {
	d := o.OptionData
	switch {
	case o.OptionType == layers.TCPOptionKindEndList:
		return append(l, "eol"...)
	case o.OptionType == layers.TCPOptionKindNop:
		return append(l, "nop"...)
	case o.OptionType == layers.TCPOptionKindMSS && len(d) == 2:
		return strconv.AppendUint(append(l, "mss "...), uint64(binary.BigEndian.Uint16(d)), 10)
	case o.OptionType == layers.TCPOptionKindWindowScale && len(d) == 1:
		return strconv.AppendUint(append(l, "wscale "...), uint64(d[0]), 10)
	case o.OptionType == layers.TCPOptionKindSACKPermitted && len(d) == 0:
		return append(l, "sackOK"...)
	case o.OptionType == layers.TCPOptionKindTimestamps && len(d) == 8:
		l = strconv.AppendUint(append(l, "TS val "...), uint64(binary.BigEndian.Uint32(d)), 10)
		return strconv.AppendUint(append(l, " ecr "...), uint64(binary.BigEndian.Uint32(d[4:])), 10)
	case o.OptionType == layers.TCPOptionKindSACK && len(d)%8 == 0:
		l = append(l, "sack "...)
		l = strconv.AppendInt(l, int64(len(d)/8), 10)
		for i := 0; i < len(d); i += 8 {
			l = strconv.AppendUint(append(l, " {"...), uint64(binary.BigEndian.Uint32(d[i:])), 10)
			l = strconv.AppendUint(append(l, ':'), uint64(binary.BigEndian.Uint32(d[i+4:])), 10)
			l = append(l, '}')
		}
		return l
	}
	l = strconv.AppendUint(append(l, "opt-"...), uint64(o.OptionType), 10)
	return strconv.AppendUint(append(l, ':'), uint64(len(d)), 10)
}

// appendARP appends tcpdump's line for an Ethernet/IPv4 ARP request or
// reply; n is its length on the wire.
func (p *printer) appendARP(l []byte, n int) []byte {
	a := &p.arp
	l = append(l, "ARP, "...)
	if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || len(a.SourceProtAddress) != 4 {
		l = append(l, "hardware type "...)
		l = strconv.AppendUint(l, uint64(a.AddrType), 10)
	} else {
		switch a.Operation {
		case layers.ARPRequest:
			l = append(l, "Request who-has "...)
			l = appendAddr(l, a.DstProtAddress)
			l = append(l, " tell "...)
			l = appendAddr(l, a.SourceProtAddress)
		case layers.ARPReply:
			l = append(l, "Reply "...)
			l = appendAddr(l, a.SourceProtAddress)
			l = append(l, " is-at "...)
			l = appendMAC(l, a.SourceHwAddress)
		default:
			l = append(l, "operation "...)
			l = strconv.AppendUint(l, uint64(a.Operation), 10)
		}
	}
	l = append(l, ", length "...)
	return strconv.AppendInt(l, int64(n), 10)
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
