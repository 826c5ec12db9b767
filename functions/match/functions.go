package match

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// The functions a predicate (or a value: Value) may call.
//
//	max(a, b), min(a, b)   the larger, the smaller of two numbers
//	bloom(M, K, v…)        the M-bit mask (M a power of two, at most 64) of
//	                       a Bloom filter that holds one element, the values
//	                       v…: bit Index(i) set for each of its K positions
//
// bloom hashes its values as a switch does (flowkey's P4Hashes): each a
// 64-bit big-endian word, crc32 (IEEE) and crc16 (CRC-16/ARC) of the
// words, position i the top log2(M) bits of crc32 + i·(crc16 << 16). A
// switch ORs such masks into a header field hop by hop (MAFIA's path
// encodings), and a host or a test computes the same bits.
var calls = map[string]*function{
	"max":   {args: 2, doc: "the larger of two numbers"},
	"min":   {args: 2, doc: "the smaller of two numbers"},
	"bloom": {args: -3, doc: "bloom(M, K, v…): the M-bit mask of a Bloom filter holding the values v… (K positions)"},
}

type function struct {
	args int // exactly, or at least -args
	doc  string
}

// call parses FUNC "(" sum { "," sum } ")", the name already read.
func (p *parser) call(t token) (*node, error) {
	p.next() // (
	n := &node{op: "call", pos: t.pos, name: t.text}
	for {
		a, err := p.sum()
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, a)
		u := p.next()
		if u.text == ")" {
			break
		}
		if u.text != "," {
			return nil, errAt(u.pos, "%s(…): \",\" or \")\" expected at offset %d, found %q", t.text, u.pos, u.text)
		}
	}
	f := calls[t.text]
	if f.args >= 0 && len(n.kids) != f.args || f.args < 0 && len(n.kids) < -f.args {
		want := "2"
		if f.args < 0 {
			want = "at least 3"
		}
		return nil, errAt(t.pos, "%s takes %s arguments, not %d", t.text, want, len(n.kids))
	}
	return n, nil
}

// compileCall compiles a call of a function to its closure.
func compileCall(n *node, kids []val) (val, error) {
	for i, k := range kids {
		if !numeric(k.k) {
			return val{}, errAt(n.kids[i].pos, "%s takes numbers, not %s", n.name, kindName[k.k])
		}
	}
	switch n.name {
	case "max", "min":
		isMax := n.name == "max"
		if kids[0].k == kInt && kids[1].k == kInt {
			a, b := kids[0].i, kids[1].i
			return val{k: kInt, i: func(e *env) (int64, bool) {
				x, ok := a(e)
				y, ok2 := b(e)
				if (x < y) == isMax {
					x = y
				}
				return x, ok && ok2
			}}, nil
		}
		a, b := kids[0].asFloat(), kids[1].asFloat()
		return val{k: kFloat, f: func(e *env) (float64, bool) {
			x, ok := a(e)
			y, ok2 := b(e)
			if isMax {
				return math.Max(x, y), ok && ok2
			}
			return math.Min(x, y), ok && ok2
		}}, nil
	case "bloom":
		m, ok1 := constInt(n.kids[0])
		k, ok2 := constInt(n.kids[1])
		if !ok1 || m < 1 || m > 64 || m&(m-1) != 0 {
			return val{}, errAt(n.kids[0].pos, "bloom's first argument is its bits, a power of two up to 64")
		}
		if !ok2 || k < 1 || k > 32 {
			return val{}, errAt(n.kids[1].pos, "bloom's second argument is its positions per element, 1 to 32")
		}
		vs := make([]intFn, 0, len(kids)-2)
		for _, v := range kids[2:] {
			vs = append(vs, v.asInt().i)
		}
		bits := 0
		for 1<<bits < m {
			bits++
		}
		return val{k: kInt, i: func(e *env) (int64, bool) {
			var buf [8 * 8]byte
			if len(vs) > 8 {
				return 0, false
			}
			for i, v := range vs {
				x, ok := v(e)
				if !ok {
					return 0, false
				}
				binary.BigEndian.PutUint64(buf[8*i:], uint64(x))
			}
			return int64(BloomMask(buf[:8*len(vs)], int(k), bits)), true
		}}, nil
	}
	return val{}, errAt(n.pos, "unknown function %s", n.name)
}

// BloomMask is the mask bloom(2^bits, k, …) gives for the values' bytes
// data: bit flowkey.P4Index(crc32, crc16, i) for i < k, the positions a
// switch computes (flowkey's P4Hashes).
func BloomMask(data []byte, k, bits int) uint64 {
	h1, h2 := crc32.ChecksumIEEE(data), p4gen.CRC16ARC(data)
	var mask uint64
	for i := range k {
		mask |= 1 << flowkey.P4Index(h1, h2, uint32(i), bits)
	}
	return mask
}
