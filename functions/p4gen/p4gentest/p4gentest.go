// Package p4gentest makes pipeline programs and frames for the tests and
// benchmarks of the P4 switch's parts: functions lowered by their classes
// and assembled (a count-min sketch feeding a HyperLogLog), a generator of random valid programs with the table
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
	"testing"

	_ "github.com/ffpf-go/ffpf/functions/builtin" // the classes Lowered lowers
	"github.com/ffpf-go/ffpf/functions/internal/p4test"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// Lowered assembles a chain of functions (each fed by the one before:
// "(cms,key=5tuple)", "(hll,key=dstip)") from their classes' own P4
// lowerings into one program, as the p4 flowspace does: what passes the
// last leaves by port 1. The classes come from functions/builtin.
func Lowered(tb testing.TB, exprs ...string) *p4gen.Program {
	tb.Helper()
	var nodes []p4gen.Node
	for i, e := range exprs {
		id := fmt.Sprintf("f#%d", i+1)
		code, err := p4test.Parse(tb, e).P4(id)
		if err != nil {
			tb.Fatalf("%s: %v", e, err)
		}
		n := p4gen.Node{ID: id, Fn: code}
		if i > 0 {
			n.Inputs = []int{i - 1}
		}
		nodes = append(nodes, n)
	}
	p, _, err := p4gen.Assemble("lowered", nodes, p4test.Uplink)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// CMSHLL is (cms,key=5tuple) > (hll,key=dstip) at the classes' default
// sizes, lowered by the classes.
func CMSHLL(tb testing.TB) *p4gen.Program {
	return Lowered(tb, "(cms,key=5tuple)", "(hll,key=dstip)")
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
