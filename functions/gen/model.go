package gen

import (
	"encoding/binary"
	"math"
)

// Flow kinds and their share of packets. The shares are of packets, not of
// flows: flows are assigned kinds in order of weight so that the packet mix
// matches these numbers even though a few flows carry most packets.
const (
	kindTCP uint8 = iota
	kindDNS
	kindNTP
	kindQUIC
	kindUDP
	kindICMP
	kindARP
	numKinds
)

var kindShare = [numKinds]float64{
	kindTCP:  0.62,
	kindDNS:  0.05,
	kindNTP:  0.01,
	kindQUIC: 0.15,
	kindUDP:  0.10,
	kindICMP: 0.04,
	kindARP:  0.03,
}

// zipfS is the exponent of the flow-popularity law: with 10000 flows the
// top 1% of flows carries about 60% of the packets.
const zipfS = 1.1

// flow is one conversation between a client and a server. Its fields are
// fixed at New except the state machine, which advances each time the flow
// is picked (one packet per pick).
type flow struct {
	kind  uint8
	v6    bool
	tags  uint8 // 0 untagged, 1 802.1Q, 2 QinQ
	state uint8
	acks  uint8 // data segments since the client's last ACK
	name  uint8 // DNS name index
	ttlC  uint8
	ttlS  uint8

	vid   [2]uint16 // outer, inner
	cport uint16
	sport uint16
	ipid  uint16
	seq16 uint16 // ICMP sequence, DNS id

	size  float32 // weight × number of flows: 1 for an average flow
	left  int32   // data segments left in the TCP connection / packets in a QUIC exchange
	cseq  uint32
	sseq  uint32
	label uint32 // IPv6 flow label

	c4, s4 uint32
	cmac   [6]byte
	smac   [6]byte
	c6, s6 [16]byte
}

// buildFlows creates the flows and the alias table of their weights.
func (g *Generator) buildFlows() {
	n := g.cfg.Flows
	g.flows = make([]flow, n)
	w := make([]float64, n)
	var total float64
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), zipfS)
		total += w[i]
	}
	g.buildAlias(w, total)

	// Assign kind, IP version and tagging by largest deficit, heaviest flow
	// first, so that packet shares track the configured fractions.
	var haveKind, seenIP, have6 [numKinds]float64
	var seen, seenTag, haveTag, haveQinQ float64
	for i := range g.flows {
		f := &g.flows[i]
		wi := w[i]
		best, bestDef := uint8(0), math.Inf(-1)
		for k := range numKinds {
			if d := kindShare[k]*(seen+wi) - haveKind[k]; d > bestDef {
				best, bestDef = k, d
			}
		}
		k := best
		f.kind = k
		haveKind[k] += wi
		if k != kindARP { // IPv6 share within each kind
			if g.cfg.IPv6*(seenIP[k]+wi)-have6[k] > wi/2 {
				f.v6 = true
				have6[k] += wi
			}
			seenIP[k] += wi
		}
		if g.cfg.VLAN*(seen+wi)-haveTag > wi/2 {
			f.tags = 1
			if 0.2*(seenTag+wi)-haveQinQ > wi/2 {
				f.tags = 2
				haveQinQ += wi
			}
			seenTag += wi
			haveTag += wi
		}
		seen += wi
		f.size = float32(wi * float64(n) / total)
		g.initFlow(f)
	}
}

// buildAlias fills g.prob and g.alias (Vose's alias method).
func (g *Generator) buildAlias(w []float64, total float64) {
	n := len(w)
	g.prob = make([]uint32, n)
	g.alias = make([]uint32, n)
	scaled := make([]float64, n)
	small := make([]int, 0, n)
	large := make([]int, 0, n)
	for i := range w {
		scaled[i] = w[i] * float64(n) / total
		if scaled[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		g.prob[s] = uint32(scaled[s] * (1 << 32))
		g.alias[s] = uint32(l)
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range append(small, large...) {
		g.prob[i] = math.MaxUint32
		g.alias[i] = uint32(i)
	}
}

// Address pools. Servers live in public-looking ranges (including the
// documentation nets 198.51.100.0/24 and 203.0.113.0/24), clients in
// 10.0.0.0/8 and 192.168.0.0/16; IPv6 uses 2001:db8::/32 only.
var (
	publicFirst = [...]byte{23, 31, 34, 35, 45, 52, 54, 64, 93, 104, 142, 151, 157, 185, 199}
	dnsServers  = [...]uint32{0x08080808, 0x08080404, 0x01010101, 0x09090909, 0xc0a80101}
	gatewayMACs = [...][6]byte{
		{0x00, 0x1b, 0x21, 0x3a, 0x4c, 0x01},
		{0x00, 0x0c, 0x29, 0x8f, 0x12, 0x34},
		{0x3c, 0xfd, 0xfe, 0x00, 0xaa, 0x02},
	}
	tcpPorts = [...]uint16{443, 443, 443, 443, 443, 443, 443, 443, 443, 443, 443,
		80, 80, 80, 80, 80, 22, 22, 25, 993, 3306, 8080}
)

func (g *Generator) initFlow(f *flow) {
	r := &g.rng
	if r.intn(10) < 7 {
		f.c4 = 0x0a000000 | r.intn(1<<24)
	} else {
		f.c4 = 0xc0a80000 | r.intn(1<<16)
	}
	f.c4 = fixHost(f.c4)
	switch f.kind {
	case kindDNS:
		f.s4 = dnsServers[r.intn(uint32(len(dnsServers)))]
	case kindARP:
		f.s4 = f.c4&^0xff | 1 // the gateway of the client's /24
	default:
		if f.kind == kindTCP && r.intn(4) == 0 {
			f.s4 = fixHost(0x0a000000 | r.intn(1<<24)) // an internal server
		} else {
			f.s4 = g.publicV4()
		}
	}
	f.c6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01}
	binary.BigEndian.PutUint16(f.c6[6:], uint16(r.next()))
	binary.BigEndian.PutUint64(f.c6[8:], r.next()|1)
	f.s6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff}
	if f.kind == kindDNS {
		f.s6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 0x53}
	} else {
		binary.BigEndian.PutUint16(f.s6[6:], uint16(r.next()))
		binary.BigEndian.PutUint64(f.s6[8:], r.next()|1)
	}
	f.cmac = [6]byte{0x02, byte(r.next()), byte(r.next()), byte(r.next()), byte(r.next()), byte(r.next())}
	f.smac = gatewayMACs[r.intn(uint32(len(gatewayMACs)))]
	if f.kind == kindARP {
		f.smac = gatewayMACs[0]
	}
	f.vid = [2]uint16{uint16(r.between(1, 4094)), uint16(r.between(1, 4094))}
	f.ttlC = 64
	f.ttlS = [...]uint8{64, 64, 128, 255, 57, 117, 50}[r.intn(7)]
	f.ipid = uint16(r.next())
	f.seq16 = uint16(r.next())
	f.label = r.intn(1 << 20)
	f.name = uint8(r.intn(uint32(len(dnsNames))))
	f.cport = ephemeral(r)
	switch f.kind {
	case kindTCP:
		f.sport = tcpPorts[r.intn(uint32(len(tcpPorts)))]
		if f.sport == 22 {
			f.s4 = fixHost(0x0a000000 | r.intn(1<<24))
		}
		g.newConnection(f)
	case kindDNS:
		f.sport = 53
	case kindNTP:
		f.sport = 123
		if r.intn(2) == 0 {
			f.cport = 123
		}
	case kindQUIC:
		f.sport = 443
		f.left = int32(r.between(4, 64))
	case kindUDP:
		f.sport = uint16(r.between(1024, 65535))
		f.cport = uint16(r.between(1024, 65535))
	}
}

func (g *Generator) publicV4() uint32 {
	r := &g.rng
	switch r.intn(8) {
	case 0:
		return 0xc6336400 | r.intn(254) + 1 // 198.51.100.0/24
	case 1:
		return 0xcb007100 | r.intn(254) + 1 // 203.0.113.0/24
	}
	return fixHost(uint32(publicFirst[r.intn(uint32(len(publicFirst)))])<<24 | r.intn(1<<24))
}

// fixHost avoids .0 and .255 host bytes.
func fixHost(a uint32) uint32 {
	switch a & 0xff {
	case 0:
		return a | 1
	case 0xff:
		return a - 1
	}
	return a
}

func ephemeral(r *rng) uint16 { return uint16(r.between(32768, 60999)) }

// newConnection starts a new TCP connection in f: new client port, new
// initial sequence numbers and a heavy-tailed (Pareto) number of data
// segments, scaled by the flow's popularity so that the popular flows are
// long-lived elephants rather than many short connections.
func (g *Generator) newConnection(f *flow) {
	r := &g.rng
	f.state = tcpSYN
	f.acks = 0
	f.cport = ephemeral(r)
	f.cseq = uint32(r.next())
	f.sseq = uint32(r.next())
	// Pareto(alpha 1.2, xm 4), capped: most connections are short, a few
	// are long.
	u := 1 - r.float()
	f.left = int32(min(4/math.Pow(u, 1/1.2)*max(1, float64(f.size)), 1e6))
}

// dnsNames are query names in DNS wire format.
var dnsNames = func() [][]byte {
	var out [][]byte
	for _, n := range []string{
		"www.example.com", "api.example.org", "cdn.example.net", "mail.example.com",
		"time.example.org", "ns1.example.net", "a.very.long.subdomain.name.example.com",
		"login.example.org", "static.example.net", "x.example",
	} {
		var b []byte
		start := 0
		for i := 0; i <= len(n); i++ {
			if i == len(n) || n[i] == '.' {
				b = append(b, byte(i-start))
				b = append(b, n[start:i]...)
				start = i + 1
			}
		}
		out = append(out, append(b, 0))
	}
	return out
}()
