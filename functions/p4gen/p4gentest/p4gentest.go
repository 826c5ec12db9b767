// Package p4gentest makes pipeline programs and frames for the tests and
// benchmarks of the P4 switch's parts: a count-min sketch feeding a
// HyperLogLog built by hand in the IR (the shape the cms and hll
// lowerings give), a generator of random valid programs with the table
// entries to install in them, and frames that exercise the parser's
// corners (VLAN tags, IPv4 options, IPv6, fragments, truncation).
//
// The sharp edge: a random program is valid by construction, not by
// luck: Program.Validate is run on it and a failure is the generator's
// bug, reported as a panic.
package p4gentest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// CMSHLL returns (bpf,"tcp") > (cms,key=5tuple) > (hll,key=dstip) as the
// lowerings build it: a count-min sketch of rows×width 32-bit counters,
// row i indexed by crc32(salt_i ++ 5-tuple) mod width, each row a
// register updated by one saturating add, the estimate the minimum of
// the rows; then a HyperLogLog of 2^precision 8-bit registers indexed by
// the top bits of crc32(dstip), each updated with the maximum of its
// value and the rank of the remaining bits. Every packet goes out of
// port 2.
func CMSHLL(rows, width, precision int) *p4gen.Program {
	p := p4gen.NewProgram("cms_hll")
	tcp := p4gen.AllOf(p4gen.Valid{Header: "ipv4"}, p4gen.Valid{Header: "tcp"})

	cms := &p4gen.Builder{Prog: p, ID: "cms#2", Prefix: "cms_2", In: tcp}
	tuple := []p4gen.Expr{p4gen.F("ipv4", "src_addr"), p4gen.F("ipv4", "dst_addr"), p4gen.F("ipv4", "protocol"),
		p4gen.F("tcp", "src_port"), p4gen.F("tcp", "dst_port")}
	var est p4gen.Expr
	for i := range rows {
		idx := cms.Meta(fmt.Sprintf("idx%d", i), 32)
		val := cms.Meta(fmt.Sprintf("val%d", i), 32)
		reg := cms.Register(fmt.Sprintf("row%d", i), 32, width, "counters", i*width)
		salt := p4gen.C(uint64(0x9e3779b9*uint32(i+1)), 32)
		cms.Add(p4gen.Hash{Dst: idx, Algo: p4gen.CRC32, Data: append([]p4gen.Expr{salt}, tuple...), Max: uint64(width)},
			p4gen.RMW{Reg: reg, Index: idx, New: p4gen.B(p4gen.SatAdd, p4gen.Old{Bits: 32}, p4gen.C(1, 32)), NewTo: &val})
		if est == nil {
			est = val
		} else {
			est = p4gen.Mux{Cond: p4gen.B(p4gen.Lt, val, est), Then: val, Else: est}
		}
	}
	min := cms.Meta("min", 32)
	cms.Add(p4gen.Assign{Dst: min, X: est})

	hll := &p4gen.Builder{Prog: p, ID: "hll#3", Prefix: "hll_3", In: tcp}
	h := hll.Meta("hash", 32)
	idx := hll.Meta("idx", 32)
	rank := hll.Meta("rank", 8)
	reg := hll.Register("regs", 8, 1<<precision, "registers", 0)
	rest := 32 - precision
	w := p4gen.Slice{X: h, Hi: rest - 1, Lo: 0}
	// rank: 1 + the leading zeros of the rest bits (rest+1 when all zero).
	var r p4gen.Expr = p4gen.C(uint64(rest+1), 8)
	for k := 0; k < rest; k++ {
		r = p4gen.Mux{Cond: p4gen.B(p4gen.Ne, p4gen.Slice{X: w, Hi: k, Lo: k}, p4gen.C(0, 1)), Then: p4gen.C(uint64(rest-k), 8), Else: r}
	}
	hll.Add(p4gen.Hash{Dst: h, Algo: p4gen.CRC32, Data: []p4gen.Expr{p4gen.F("ipv4", "dst_addr")}},
		p4gen.Assign{Dst: idx, X: p4gen.Cast{Bits: 32, X: p4gen.Slice{X: h, Hi: 31, Lo: rest}}},
		p4gen.Assign{Dst: rank, X: r},
		p4gen.RMW{Reg: reg, Index: idx, New: p4gen.Mux{Cond: p4gen.B(p4gen.Gt, rank, p4gen.Old{Bits: 8}), Then: rank, Else: p4gen.Old{Bits: 8}}})

	p.Ingress = []p4gen.Stmt{
		p4gen.If{Cond: tcp, Then: append(cms.Body, hll.Body...)},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(2, 9)},
	}
	if err := p.Validate(); err != nil {
		panic("p4gentest: CMSHLL: " + err.Error())
	}
	return p
}

// Frames returns n frames for flows flows, seeded: mostly
// Ethernet/IPv4/TCP and UDP, some VLAN-tagged, with IPv4 options, IPv6,
// ICMP, non-first fragments, a bogus IHL or cut short.
func Frames(seed uint64, n, flows int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([][]byte, n)
	for i := range out {
		out[i] = Frame(rng, rng.IntN(flows))
	}
	return out
}

// Frame returns one frame of flow f, its shape drawn from rng.
func Frame(rng *rand.Rand, f int) []byte {
	var b []byte
	b = append(b, 0x02, 0, 0, 0, 0, byte(f), 0x02, 0, 0, 0, 1, byte(f>>8))
	kind := rng.IntN(20)
	if kind == 0 || kind == 1 { // one or two VLAN tags
		b = append(b, 0x81, 0x00, byte(rng.IntN(256)), byte(f))
		if kind == 1 {
			b = append(b, 0x88, 0xa8, 0, 7)
		}
	}
	proto := []byte{6, 6, 6, 17, 17, 1}[rng.IntN(6)]
	sport, dport := uint16(1024+f%50000), []uint16{80, 443, 53, 8080}[f%4]
	if kind == 2 { // IPv6
		b = append(b, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		ip[6], ip[7] = proto, 64
		binary.BigEndian.PutUint16(ip[4:], 20)
		binary.BigEndian.PutUint64(ip[8:], 0x20010db8<<32)
		binary.BigEndian.PutUint64(ip[16:], uint64(f))
		binary.BigEndian.PutUint64(ip[24:], 0x20010db8<<32|1)
		binary.BigEndian.PutUint64(ip[32:], uint64(f*7))
		b = append(b, ip...)
		return append(b, l4(proto, sport, dport, rng)...)
	}
	if kind == 3 { // ARP
		return append(b, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1)
	}
	b = append(b, 0x08, 0x00)
	ihl := 5
	switch kind {
	case 4:
		ihl = 5 + 1 + rng.IntN(10) // options
	case 5:
		ihl = rng.IntN(5) // bogus
	}
	hdr := max(ihl, 5)
	ip := make([]byte, 4*hdr)
	ip[0] = 0x40 | byte(ihl)
	ip[1] = byte(rng.IntN(256))
	ip[8], ip[9] = byte(1+rng.IntN(255)), proto
	if kind == 6 {
		binary.BigEndian.PutUint16(ip[6:], uint16(1+rng.IntN(100))) // a later fragment
	}
	binary.BigEndian.PutUint32(ip[12:], 0x0a000000|uint32(f))
	binary.BigEndian.PutUint32(ip[16:], 0xc0a80000|uint32(f%200))
	seg := l4(proto, sport, dport, rng)
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(seg)))
	b = append(append(b, ip...), seg...)
	if kind == 7 { // cut short anywhere
		b = b[:rng.IntN(len(b))]
	}
	return b
}

func l4(proto byte, sport, dport uint16, rng *rand.Rand) []byte {
	var s []byte
	switch proto {
	case 6:
		s = make([]byte, 20+rng.IntN(8))
		binary.BigEndian.PutUint32(s[4:], rng.Uint32())
		s[12], s[13] = 5<<4, byte(rng.IntN(64))
	case 17:
		s = make([]byte, 8+rng.IntN(8))
		binary.BigEndian.PutUint16(s[4:], uint16(len(s)))
	default:
		s = make([]byte, 8)
		s[0] = 8
		return s
	}
	binary.BigEndian.PutUint16(s, sport)
	binary.BigEndian.PutUint16(s[2:], dport)
	return s
}
