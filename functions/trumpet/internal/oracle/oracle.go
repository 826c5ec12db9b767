package oracle

import (
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/ffpf-go/ffpf/functions/trumpet/event"
)

// Package oracle is the tests' brute-force evaluation of Trumpet events,
// written apart from the monitor, and the trace they run on.
//
// The oracle: a brute-force evaluation of events over a trace, written
// apart from the monitor. Packets are decoded by gopacket; every variable
// of every packet is computed from the definitions in the class README;
// each event's packets are grouped by interval and bucket, and each
// aggregate is computed from the list of its values.

type opkt struct {
	ts        int64
	src, dst  netip.Addr
	proto     int
	sp, dp    int // -1: no ports
	ttl, ecn  int
	payload   int
	tcp       bool
	syn, ackF bool
	fin, rst  bool
	seq, ack  uint32
	win       int
	wscale    int
}

func decode(data []byte, ts int64) (opkt, bool) {
	p := opkt{ts: ts, sp: -1, dp: -1, wscale: -1}
	pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
	var l4len int
	if ip4, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		p.src, _ = netip.AddrFromSlice(ip4.SrcIP)
		p.dst, _ = netip.AddrFromSlice(ip4.DstIP)
		p.proto, p.ttl, p.ecn = int(ip4.Protocol), int(ip4.TTL), int(ip4.TOS&3)
		l4len = int(ip4.Length) - int(ip4.IHL)*4
	} else if ip6, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		p.src, _ = netip.AddrFromSlice(ip6.SrcIP)
		p.dst, _ = netip.AddrFromSlice(ip6.DstIP)
		p.proto, p.ttl, p.ecn = int(ip6.NextHeader), int(ip6.HopLimit), int(ip6.TrafficClass&3)
		l4len = int(ip6.Length)
	} else {
		return p, false
	}
	p.payload = l4len
	if t, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		p.sp, p.dp = int(t.SrcPort), int(t.DstPort)
		p.tcp, p.syn, p.ackF, p.fin, p.rst = true, t.SYN, t.ACK, t.FIN, t.RST
		p.seq, p.ack, p.win = t.Seq, t.Ack, int(t.Window)
		p.payload = l4len - int(t.DataOffset)*4
		for _, o := range t.Options {
			if o.OptionType == layers.TCPOptionKindWindowScale && len(o.OptionData) == 1 {
				p.wscale = min(int(o.OptionData[0]), 14)
			}
		}
	}
	if u, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		p.sp, p.dp = int(u.SrcPort), int(u.DstPort)
		p.payload = l4len - 8
	}
	return p, true
}

func (p *opkt) key() string  { return fmt.Sprint(p.src, p.dst, p.sp, p.dp, p.proto) }
func (p *opkt) rkey() string { return fmt.Sprint(p.dst, p.src, p.dp, p.sp, p.proto) }

func filterMatch(f event.Filter, p *opkt) bool {
	if f.SrcIP.IsValid() && !f.SrcIP.Contains(p.src) || f.DstIP.IsValid() && !f.DstIP.Contains(p.dst) {
		return false
	}
	if f.Proto >= 0 && f.Proto != p.proto {
		return false
	}
	if f.SrcPort != event.AnyPort && (p.sp < 0 || p.sp < int(f.SrcPort.Lo) || p.sp > int(f.SrcPort.Hi)) {
		return false
	}
	if f.DstPort != event.AnyPort && (p.dp < 0 || p.dp < int(f.DstPort.Lo) || p.dp > int(f.DstPort.Hi)) {
		return false
	}
	return true
}

func eventMatch(e *event.Event, p *opkt) bool {
	if len(e.Filters) == 0 {
		return true
	}
	for _, f := range e.Filters {
		if filterMatch(f, p) {
			return true
		}
	}
	return false
}

// needs says whether an event reads a variable.
func needs(e *event.Event, v string) bool {
	for _, a := range event.Aggregates(e.Predicate) {
		if a.Var == v {
			return true
		}
	}
	return false
}

// AddrString writes an address kept to bits as a report's key does.
func AddrString(a netip.Addr, bits int) string {
	if a.Is4() {
		bits = min(bits, 32)
	}
	if bits >= a.BitLen() {
		return a.String()
	}
	pf, _ := a.Prefix(bits)
	return pf.String()
}

// ProtoString writes a protocol as a report's key does.
func ProtoString(p int) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	}
	return fmt.Sprint(p)
}

func portString(p int) string {
	if p < 0 {
		return "null"
	}
	return fmt.Sprint(p)
}

func bucketOf(e *event.Event, p *opkt) string {
	fs := e.Granularity
	if len(fs) == 0 {
		fs = []event.Field{{Name: "srcip", Bits: 128}, {Name: "dstip", Bits: 128}, {Name: "srcport"}, {Name: "dstport"}, {Name: "proto"}}
	}
	var parts []string
	for _, f := range fs {
		var v string
		switch f.Name {
		case "srcip":
			v = AddrString(p.src, f.Bits)
		case "dstip":
			v = AddrString(p.dst, f.Bits)
		case "srcport":
			v = portString(p.sp)
		case "dstport":
			v = portString(p.dp)
		case "proto":
			v = ProtoString(p.proto)
		}
		parts = append(parts, f.Name+"="+v)
	}
	return strings.Join(parts, ",")
}

// ostate is a direction's state, forgotten after an idle epoch.
type ostate struct {
	last            int64
	seqInit         bool
	seqLast, maxEnd uint64
	seqMax          uint64
	ackInit         bool
	ackLast, dup    uint64
	wscale          int
	rttOn           bool
	rttEnd          uint32
	rttTS           int64
	burstInit       bool
	burstLast       int64
	run             int
}

type obucket struct {
	packets    float64
	vals       map[string][]float64
	prev, last map[string]float64 // state variables
}

// stateVals is a direction's state as predicates read it bare.
func stateVals(s *ostate) map[string]float64 {
	nan := math.NaN()
	v := map[string]float64{"ack": nan, "seq": nan, "dup": nan}
	if s.seqInit {
		v["seq"] = float64(s.seqMax)
	}
	if s.ackInit {
		v["ack"], v["dup"] = float64(s.ackLast), float64(s.dup)
	}
	return v
}

func pairName(a, b string) string {
	if a > b {
		a, b = b, a
	}
	return a + "&" + b
}

// Config is the monitor's configuration the oracle follows.
type Config struct {
	Epoch    int64
	BurstGap int64
	BurstLen int
}

func unwrapO(prev uint64, v uint32) uint64 {
	d := int64(int32(v - uint32(prev)))
	return uint64(int64(prev) + d)
}

// Evaluate returns the reports, as "event|start|key|value" with the value
// formatted to 9 significant digits, of every interval that holds a
// packet: the last one, which the trace ends before its end, on the
// packets it holds.
func Evaluate(cfg Config, events []event.Event, trace []Packet) map[string]float64 {
	T := cfg.Epoch
	states := map[string]*ostate{}
	type bkey struct {
		ev    int
		start int64
		key   string
	}
	buckets := map[bkey]*obucket{}
	add := func(ev int, start int64, key string) *obucket {
		k := bkey{ev, start, key}
		b := buckets[k]
		if b == nil {
			b = &obucket{vals: map[string][]float64{}, last: map[string]float64{}}
			buckets[k] = b
		}
		return b
	}
	needsAny := func(p *opkt, v string) bool {
		for i := range events {
			if needs(&events[i], v) && eventMatch(&events[i], p) {
				return true
			}
		}
		return false
	}
	for _, tp := range trace {
		p, ok := decode(tp.Data, tp.TS)
		if !ok {
			continue
		}
		c := floorDivO(p.ts, T)
		s := states[p.key()]
		if s == nil || s.last < c-1 {
			s = &ostate{}
			states[p.key()] = s
		}
		s.last = c
		before := stateVals(s)
		vals := map[string]float64{"volume": float64(p.payload), "ttl": float64(p.ttl), "ecn": 0}
		if p.ecn == 3 {
			vals["ecn"] = 1
		}
		// is_burst
		if s.burstInit && p.ts-s.burstLast < cfg.BurstGap {
			s.run++
		} else {
			s.run = 1
		}
		s.burstInit, s.burstLast = true, p.ts
		vals["is_burst"] = 0
		if s.run >= cfg.BurstLen {
			vals["is_burst"] = 1
		}
		// RTT sample for the other direction
		var rttFor *opkt
		var rtt float64
		var rttState map[string]float64
		if p.tcp && p.ackF {
			if r := states[p.rkey()]; r != nil && r.last >= c-1 && r.rttOn && int32(p.ack-r.rttEnd) >= 0 {
				r.rttOn = false
				r.last = c
				rev := opkt{src: p.dst, dst: p.src, sp: p.dp, dp: p.sp, proto: p.proto}
				rttFor, rtt, rttState = &rev, float64(p.ts-r.rttTS), stateVals(r)
			}
		}
		if p.tcp {
			if p.syn {
				s.wscale = max(p.wscale, 0)
				vals["rwnd"] = float64(p.win)
			} else {
				vals["rwnd"] = float64(p.win << s.wscale)
			}
			sq := uint64(p.seq)
			if s.seqInit {
				sq = unwrapO(s.seqLast, p.seq)
				s.seqMax = max(s.seqMax, sq)
			} else {
				s.seqMax = sq
			}
			s.seqInit, s.seqLast = true, sq
			vals["seq"] = float64(sq)
			lost := false
			if p.payload > 0 {
				end := sq + uint64(p.payload)
				lost = s.maxEnd != 0 && sq < s.maxEnd
				if end > s.maxEnd {
					s.maxEnd = end
				}
				if needsAny(&p, "rtt") {
					if lost && s.rttOn && int32(uint32(sq)-s.rttEnd) < 0 {
						s.rttOn = false
					} else if !lost && !s.rttOn {
						s.rttOn, s.rttEnd, s.rttTS = true, uint32(end), p.ts
					}
				}
			}
			vals["is_lost"] = 0
			if lost {
				vals["is_lost"] = 1
			}
			if p.ackF {
				a := uint64(p.ack)
				if s.ackInit {
					a = unwrapO(s.ackLast, p.ack)
					pure := p.payload == 0 && !p.syn && !p.fin && !p.rst
					if a == s.ackLast && pure {
						s.dup += 1460
					} else if a > s.ackLast {
						d := a - s.ackLast
						if d > s.dup {
							s.dup = 0
						} else {
							s.dup -= d
						}
					}
				}
				s.ackInit, s.ackLast = true, max(s.ackLast, a)
				vals["ack"], vals["dup"] = float64(a), float64(s.dup)
			}
		}
		flags := []string{"ecn", "is_lost", "is_burst"}
		for i, a := range flags {
			for _, b := range flags[i+1:] {
				x, okA := vals[a]
				y, okB := vals[b]
				if okA && okB {
					vals[pairName(a, b)] = x * y
				}
			}
		}
		after := stateVals(s)
		for i := range events {
			e := &events[i]
			I := int64(e.Interval)
			start := floorDivO(p.ts, I) * I
			if rttFor != nil && needs(e, "rtt") && eventMatch(e, rttFor) {
				b := add(i, start, bucketOf(e, rttFor))
				b.vals["rtt"] = append(b.vals["rtt"], rtt)
				if b.prev == nil {
					b.prev = rttState
				}
			}
			if !eventMatch(e, &p) {
				continue
			}
			b := add(i, start, bucketOf(e, &p))
			if b.prev == nil {
				b.prev = before
			}
			b.last = after
			b.packets++
			for v, x := range vals {
				b.vals[v] = append(b.vals[v], x)
			}
		}
	}
	out := map[string]float64{}
	for k, b := range buckets {
		e := &events[k.ev]
		val := func(a event.Agg) float64 {
			if a.Func == "" { // a state variable
				m := b.last
				if a.Prev {
					m = b.prev
				}
				if x, ok := m[a.Var]; ok {
					return x
				}
				return math.NaN()
			}
			if a.Var == "" {
				return b.packets
			}
			name := a.Var
			if a.And != "" {
				name = pairName(a.Var, a.And)
			}
			xs := b.vals[name]
			switch a.Func {
			case "count":
				return float64(len(xs))
			case "sum":
				s := 0.0
				for _, x := range xs {
					s += x
				}
				return s
			}
			if len(xs) == 0 {
				return math.NaN()
			}
			switch a.Func {
			case "min", "max":
				m := xs[0]
				for _, x := range xs {
					if a.Func == "min" && x < m || a.Func == "max" && x > m {
						m = x
					}
				}
				return m
			}
			mean := 0.0
			for _, x := range xs {
				mean += x
			}
			mean /= float64(len(xs))
			if a.Func == "avg" {
				return mean
			}
			v := 0.0
			for _, x := range xs {
				v += (x - mean) * (x - mean)
			}
			return math.Sqrt(v / float64(len(xs)))
		}
		if event.Eval(e.Predicate, val) != 0 {
			out[fmt.Sprintf("%s|%d|%s", e.Name, k.start, k.key)] = event.Eval(event.Reported(e.Predicate), val)
		}
	}
	return out
}

func floorDivO(a, b int64) int64 {
	q := a / b
	if q*b > a {
		q--
	}
	return q
}
