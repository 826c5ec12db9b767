package pisa

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The hash unit's CRCs (eight bytes a step, alone or both in one pass)
// are p4gen's CRC-16/ARC, bit by bit, and the standard library's IEEE
// CRC-32, at every length and alignment of the tail.
func TestCRCsAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 80)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for n := range len(b) + 1 {
		if got, want := crc16(b[:n]), p4gen.CRC16ARC(b[:n]); got != want {
			t.Fatalf("CRC-16 of %d bytes: %#04x, reference %#04x", n, got, want)
		}
		if got, want := crc32IEEE(b[:n]), crc32.ChecksumIEEE(b[:n]); got != want {
			t.Fatalf("CRC-32 of %d bytes: %#08x, standard library %#08x", n, got, want)
		}
		if g32, g16 := crc32And16(b[:n]); g32 != crc32.ChecksumIEEE(b[:n]) || g16 != p4gen.CRC16ARC(b[:n]) {
			t.Fatalf("CRC-32 and CRC-16 in one pass of %d bytes: %#08x %#04x, reference %#08x %#04x",
				n, g32, g16, crc32.ChecksumIEEE(b[:n]), p4gen.CRC16ARC(b[:n]))
		}
	}
}

// Hashes of the same data in a row share one packing, unless one of
// them writes a field of that data: then the next packs it anew. Whole
// bytes (constants written once, 48-bit data) and data of 4 bits go
// through their own packings; every value comes out in a digest.
func TestHashesShareData(t *testing.T) {
	prog := p4gen.NewProgram("hashes")
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: 16}, {Name: "h1", Bits: 32}, {Name: "h2", Bits: 16},
		{Name: "h3", Bits: 32}, {Name: "h4", Bits: 32}, {Name: "h5", Bits: 8}}
	ref := func(n string, bits int) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: bits} }
	a, h1, h2, h3, h4, h5 := ref("a", 16), ref("h1", 32), ref("h2", 16), ref("h3", 32), ref("h4", 32), ref("h5", 8)
	src, proto := p4gen.F("ipv4_src_2", "src_2"), p4gen.F("ipv4_proto", "protocol")
	data := []p4gen.Expr{a, p4gen.Cast{Bits: 64, X: proto}, p4gen.C(0x0102030405060708, 64), p4gen.Cast{Bits: 48, X: src},
		p4gen.B(p4gen.Add, proto, p4gen.C(1, 8)), p4gen.C(0xabcdef, 24)}
	nibbles := []p4gen.Expr{p4gen.Slice{X: proto, Hi: 3, Lo: 0}, p4gen.C(5, 4), src}
	d := &p4gen.DigestType{Name: "d_t", Fields: []p4gen.Field{{Name: "a", Bits: 16}, {Name: "h1", Bits: 32},
		{Name: "h2", Bits: 16}, {Name: "h3", Bits: 32}, {Name: "h4", Bits: 32}, {Name: "h5", Bits: 8}}}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = []p4gen.Stmt{
		p4gen.Assign{Dst: a, X: p4gen.F("ipv4_len", "total_len")},
		p4gen.Hash{Dst: h1, Algo: p4gen.CRC32, Data: data, Max: 1 << 20},
		p4gen.Hash{Dst: h2, Algo: p4gen.CRC16, Base: 3, Data: data, Max: 1000},
		p4gen.Hash{Dst: a, Algo: p4gen.CRC16, Data: data}, // writes a: the next packs again
		p4gen.Hash{Dst: h3, Algo: p4gen.CRC32, Data: data},
		p4gen.Hash{Dst: h4, Algo: p4gen.Identity, Data: data},
		p4gen.Hash{Dst: h5, Algo: p4gen.CRC16, Data: nibbles, Max: 256},
		p4gen.Digest{Type: d, Values: []p4gen.Expr{a, h1, h2, h3, h4, h5}},
		p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)},
	}
	sameAsReference(t, prog, nil, splitReads)
}

// A hash of 64-bit words (fields and constants) runs its CRCs on the
// words (hash.go's wordHash): constants before the first field (taken
// at load), between fields and after them, CRC-32 and CRC-16 alone and
// both in one pass in either order, come out as the reference's.
func TestWordHashesAsReference(t *testing.T) {
	prog := p4gen.NewProgram("words")
	ref := func(n string, bits int) p4gen.Ref { return p4gen.Ref{Path: "meta." + n, Bits: bits} }
	a, b := ref("a", 64), ref("b", 64)
	prog.Metadata = []p4gen.Field{{Name: "a", Bits: 64}, {Name: "b", Bits: 64}}
	k1, k2, k3 := p4gen.C(0x0123456789abcdef, 64), p4gen.C(0xfedcba9876543210, 64), p4gen.C(0x8000000000000001, 64)
	datas := [][]p4gen.Expr{{k1, a, k2, b, k3}, {k1, k2, a}, {a, b}, {a, k3}, {k2, a, k1, k1}}
	d := &p4gen.DigestType{Name: "d_t"}
	var vals []p4gen.Expr
	ingress := []p4gen.Stmt{p4gen.Random{Dst: a, Hi: ^uint64(0)}, p4gen.Random{Dst: b, Hi: ^uint64(0)}}
	hash := func(algo p4gen.HashAlgo, data []p4gen.Expr) p4gen.Hash {
		n := fmt.Sprintf("h%d", len(vals))
		prog.Metadata = append(prog.Metadata, p4gen.Field{Name: n, Bits: 32})
		d.Fields = append(d.Fields, p4gen.Field{Name: n, Bits: 32})
		vals = append(vals, ref(n, 32))
		return p4gen.Hash{Dst: ref(n, 32), Algo: algo, Data: data, Max: 1 << 32}
	}
	for _, data := range datas {
		ingress = append(ingress, hash(p4gen.CRC32, data), p4gen.Assign{Dst: a, X: p4gen.B(p4gen.Add, a, p4gen.C(1, 64))})
		ingress = append(ingress, hash(p4gen.CRC16, data), p4gen.Assign{Dst: a, X: p4gen.B(p4gen.Add, a, p4gen.C(1, 64))})
		ingress = append(ingress, hash(p4gen.CRC32, data), hash(p4gen.CRC16, data)) // one pass
		ingress = append(ingress, hash(p4gen.CRC16, data), hash(p4gen.CRC32, data))
	}
	prog.Digests = []*p4gen.DigestType{d}
	prog.Ingress = append(ingress, p4gen.Digest{Type: d, Values: vals}, p4gen.Assign{Dst: p4gen.Std("egress_spec"), X: p4gen.C(1, 9)})
	sameAsReference(t, prog, nil, splitReads)
}
