package pisa

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"reflect"

	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// A hash unit packs its data into a buffer of whole bytes (fields most
// significant bit first, as p4gen.HashValue) and computes its algorithm
// over it. When every datum is whole bytes, the constants are written
// into the buffer once, at load, and a packet writes only the others,
// each by one store; consecutive hashes of the same data (a sketch's
// two hash functions of one key) share one packing.

// hpart is a datum of a hash's data that a packet writes into the
// buffer: the field in slot (when x is nil) or x's value, of bytes
// bytes at byte off.
type hpart struct {
	slot, off, bytes int
	x                expr
}

// hashPack is a hash unit's buffer and how a packet fills it.
type hashPack struct {
	buf   []byte
	parts []hpart
	// unaligned: a datum is not whole bytes; every datum (constants
	// too) is packed bit by bit.
	unaligned bool
	// words: every datum that varies is a field of 64 bits.
	words  bool
	data   []expr
	widths []int
}

func (c *compiler) hashPack(s p4gen.Hash, sc *scope) (*hashPack, error) {
	hp := &hashPack{}
	total := 0
	for _, x := range s.Data {
		w := x.Type().Bits
		total += w
		hp.unaligned = hp.unaligned || w%8 != 0
	}
	if total%8 != 0 {
		return nil, fmt.Errorf("hash into %s: its data has %d bits; pad it to whole bytes", s.Dst.Path, total)
	}
	hp.buf = make([]byte, total/8)
	off := 0
	for _, x := range s.Data {
		w := x.Type().Bits
		e, err := c.expr(x, sc)
		if err != nil {
			return nil, err
		}
		hp.data, hp.widths = append(hp.data, e), append(hp.widths, w)
		if !hp.unaligned {
			pt := hpart{slot: -1, off: off / 8, bytes: w / 8}
			if k, ok := x.(p4gen.Const); ok {
				putBytes(hp.buf[pt.off:pt.off+pt.bytes], k.Value)
			} else {
				if s, ok := c.refSlot(x, sc); ok {
					pt.slot = s
				} else {
					pt.x = e
				}
				hp.parts = append(hp.parts, pt)
			}
		}
		off += w
	}
	hp.words = !hp.unaligned
	for _, pt := range hp.parts {
		hp.words = hp.words && pt.x == nil && pt.bytes == 8
	}
	return hp, nil
}

// putBytes writes the low len(b) bytes of v into b, most significant
// first.
func putBytes(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// pack fills the buffer with p's data.
func (hp *hashPack) pack(p *pkt) {
	if hp.unaligned {
		w := bitWriter{b: hp.buf[:0]}
		for i, x := range hp.data {
			w.put(x(p), hp.widths[i])
		}
		return
	}
	buf := hp.buf
	if hp.words {
		for i := range hp.parts {
			pt := &hp.parts[i]
			binary.BigEndian.PutUint64(buf[pt.off:], p.v[pt.slot])
		}
		return
	}
	for i := range hp.parts {
		pt := &hp.parts[i]
		var v uint64
		if pt.x == nil {
			v = p.v[pt.slot]
		} else {
			v = pt.x(p)
		}
		switch pt.bytes {
		case 8:
			binary.BigEndian.PutUint64(buf[pt.off:], v)
		case 4:
			binary.BigEndian.PutUint32(buf[pt.off:], uint32(v))
		case 2:
			binary.BigEndian.PutUint16(buf[pt.off:], uint16(v))
		case 1:
			buf[pt.off] = byte(v)
		default:
			putBytes(buf[pt.off:pt.off+pt.bytes], v)
		}
	}
}

// hashOut is one hash of a packing: its algorithm, and where its value
// goes.
type hashOut struct {
	algo      p4gen.HashAlgo
	dst       int
	base, max uint64
	pow2      bool // max is a power of two: the modulo is a mask
	mask      uint64
}

func (c *compiler) hashOut(s p4gen.Hash, sc *scope) (hashOut, error) {
	d, mask, err := c.set(s.Dst, sc)
	if err != nil {
		return hashOut{}, err
	}
	switch s.Algo {
	case p4gen.CRC32, p4gen.CRC16, p4gen.Identity:
	default:
		return hashOut{}, fmt.Errorf("hash into %s has no algorithm", s.Dst.Path)
	}
	return hashOut{algo: s.Algo, dst: d, base: s.Base, max: s.Max, pow2: s.Max > 0 && bits.OnesCount64(s.Max) == 1, mask: mask}, nil
}

// set computes the hash of buf into p's slot.
func (h *hashOut) set(p *pkt, buf []byte) {
	var v uint64
	switch h.algo {
	case p4gen.CRC32:
		v = uint64(crc32IEEE(buf))
	case p4gen.CRC16:
		v = uint64(crc16(buf))
	default: // Identity
		for _, c := range buf {
			v = v<<8 | uint64(c)
		}
	}
	switch {
	case h.pow2:
		v &= h.max - 1
	case h.max > 0:
		v %= h.max
	}
	p.v[h.dst] = (h.base + v) & h.mask
}

// sameData reports whether hash b hashes what hash a does when it runs
// right after it: the same data, which a's destination is not part of.
func sameData(a, b p4gen.Hash) bool {
	if !reflect.DeepEqual(a.Data, b.Data) {
		return false
	}
	read := map[string]bool{}
	for _, x := range a.Data {
		reads(x, read)
	}
	return !read[a.Dst.Path]
}

// hashes compiles hashes of the same data (sameData in turn) into one
// op: one packing, then each algorithm over it.
func (c *compiler) hashes(hs []p4gen.Hash, sc *scope) (op, error) {
	hp, err := c.hashPack(hs[0], sc)
	if err != nil {
		return nil, err
	}
	outs := make([]hashOut, len(hs))
	dirty := false
	for i, s := range hs {
		if outs[i], err = c.hashOut(s, sc); err != nil {
			return nil, err
		}
		dirty = dirty || c.hdr[outs[i].dst]
	}
	if len(outs) == 1 {
		h := &outs[0]
		if dirty {
			return func(p *pkt) {
				hp.pack(p)
				h.set(p, hp.buf)
				p.dirty = true
			}, nil
		}
		return func(p *pkt) {
			hp.pack(p)
			h.set(p, hp.buf)
		}, nil
	}
	return func(p *pkt) {
		hp.pack(p)
		for i := range outs {
			outs[i].set(p, hp.buf)
		}
		if dirty {
			p.dirty = true
		}
	}, nil
}

// crc16Tables are CRC-16/ARC's tables for slicing by 8: [k][b] is the
// CRC of byte b followed by k zero bytes.
var crc16Tables = func() (t [8][256]uint16) {
	for i := range t[0] {
		crc := uint16(i)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for k := 1; k < 8; k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = c>>8 ^ t[0][byte(c)]
		}
	}
	return
}()

// crc32Tables are CRC-32/IEEE's (reflected) tables for slicing by 8,
// as crc16Tables.
var crc32Tables = func() (t [8][256]uint32) {
	t[0] = *crc32.MakeTable(crc32.IEEE)
	for k := 1; k < 8; k++ {
		for i := range t[k] {
			c := t[k-1][i]
			t[k][i] = c>>8 ^ t[0][byte(c)]
		}
	}
	return
}()

// crc32IEEE is crc32.ChecksumIEEE, eight bytes a step: a hash unit's
// data is short (tens of bytes), where the standard library's own
// call and its choice of implementation cost about as much as the CRC.
func crc32IEEE(b []byte) uint32 {
	crc := ^uint32(0)
	t := &crc32Tables
	for len(b) >= 8 {
		crc ^= uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		crc = t[7][byte(crc)] ^ t[6][byte(crc>>8)] ^ t[5][byte(crc>>16)] ^ t[4][crc>>24] ^
			t[3][b[4]] ^ t[2][b[5]] ^ t[1][b[6]] ^ t[0][b[7]]
		b = b[8:]
	}
	for _, c := range b {
		crc = crc>>8 ^ t[0][byte(crc)^c]
	}
	return ^crc
}

// crc16 is p4gen.CRC16ARC, eight bytes a step.
func crc16(b []byte) uint16 {
	var crc uint16
	t := &crc16Tables
	for len(b) >= 8 {
		c := crc ^ (uint16(b[0]) | uint16(b[1])<<8)
		crc = t[7][byte(c)] ^ t[6][c>>8] ^ t[5][b[2]] ^ t[4][b[3]] ^
			t[3][b[4]] ^ t[2][b[5]] ^ t[1][b[6]] ^ t[0][b[7]]
		b = b[8:]
	}
	for _, c := range b {
		crc = crc>>8 ^ t[0][byte(crc)^c]
	}
	return crc
}
