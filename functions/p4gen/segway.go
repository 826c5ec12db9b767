package p4gen

// ez-Segway's messages (Nguyen et al., SOSR 2017), which MAFIA's path
// change latency reads and writes: a UDP datagram to port SegwayPort
// carries a 16-byte header first, the message type, a logical clock, six
// bytes this header keeps as they are, and a 64-bit time.

// SegwayPort is the UDP destination port of ez-Segway's messages.
const SegwayPort = 6655

// SegwayHeader is the header instance UseSegway adds.
const SegwayHeader = "segway"

// UseSegway adds ez-Segway's header to p's parser, once: a UDP datagram
// to SegwayPort extracts it after the UDP header (one shorter than the
// header leaves it invalid, as a parser error does), and the deparser
// emits it after UDP. A program that never reads the header is left as
// it is, so the standard programs do not change.
func UseSegway(p *Program) {
	if p.Header(SegwayHeader) != nil {
		return
	}
	t := &HeaderType{Name: "segway_t", Fields: []Field{{Name: "msg", Bits: 8}, {Name: "ts", Bits: 8},
		{Name: "keep", Bits: 48}, {Name: "time", Bits: 64}}}
	p.HeaderTypes = append(p.HeaderTypes, t)
	p.Headers = append(p.Headers, &Header{Name: SegwayHeader, Type: t})
	// UDP's header is chunks (std.go): the header follows the last the
	// UDP state extracts.
	last := ""
	for _, s := range p.Parser {
		if s.Name == "parse_udp" {
			last = s.Extract[len(s.Extract)-1]
			s.Select = []Expr{F("l4_dport", "dst_port")}
			s.Cases = []Case{{Values: []uint64{SegwayPort}, Next: "parse_segway"}}
		}
	}
	var dep []string
	for _, h := range p.Deparse {
		dep = append(dep, h)
		if h == last {
			dep = append(dep, SegwayHeader)
		}
	}
	p.Deparse = dep
	p.Parser = append(p.Parser, &ParserState{Name: "parse_segway", Extract: []string{SegwayHeader}, Default: Accept})
}

// SegwayField returns field name (msg, ts, time) of the header UseSegway
// adds, and its validity.
func SegwayField(name string) (Ref, Valid) {
	bits := map[string]int{"msg": 8, "ts": 8, "time": 64}[name]
	if bits == 0 {
		panic("p4gen: ez-Segway's header has no field " + name)
	}
	return Ref{Path: "hdr." + SegwayHeader + "." + name, Bits: bits}, Valid{Header: SegwayHeader}
}
