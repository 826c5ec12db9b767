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
			binary.BigEndian.PutUint64(buf[pt.off:], p.at(pt.slot))
		}
		return
	}
	for i := range hp.parts {
		pt := &hp.parts[i]
		var v uint64
		if pt.x == nil {
			v = p.at(pt.slot)
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
	h.put(p, v)
}

// put reduces the algorithm's value v into the range and writes it.
func (h *hashOut) put(p *pkt, v uint64) {
	switch {
	case h.pow2:
		v &= h.max - 1
	case h.max > 0:
		v %= h.max
	}
	p.put(h.dst, (h.base+v)&h.mask)
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
	if wh := c.wordHash(hs[0], sc); wh != nil {
		if o := wh.op(outs, dirty); o != nil {
			return o, nil
		}
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
	if a0, a1 := outs[0].algo, outs[1].algo; len(outs) == 2 &&
		(a0 == p4gen.CRC32 && a1 == p4gen.CRC16 || a0 == p4gen.CRC16 && a1 == p4gen.CRC32) {
		// A sketch's two hash functions: both CRCs in one pass, their
		// values written in the statements' order.
		return func(p *pkt) {
			hp.pack(p)
			c32, c16 := crc32And16(hp.buf)
			for i := range outs {
				if outs[i].algo == p4gen.CRC32 {
					outs[i].put(p, uint64(c32))
				} else {
					outs[i].put(p, uint64(c16))
				}
			}
			if dirty {
				p.dirty = true
			}
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

// crcPairTables are crc32Tables[k] and crc16Tables[k] side by side for
// the four bytes of a step that both CRCs index by the data alone (the
// step's last four): one load serves both.
var crcPairTables = func() (t [4][256]uint64) {
	for k := range t {
		for i := range t[k] {
			t[k][i] = uint64(crc32Tables[k][i]) | uint64(crc16Tables[k][i])<<32
		}
	}
	return
}()

// crc32And16 is crc32IEEE and crc16 of b in one pass, as a sketch's two
// hash functions of one key take them: twelve table loads a step rather
// than sixteen.
func crc32And16(b []byte) (uint32, uint16) {
	c32, c16 := ^uint32(0), uint16(0)
	t32, t16, tp := &crc32Tables, &crc16Tables, &crcPairTables
	for len(b) >= 8 {
		c32 ^= uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		c := c16 ^ (uint16(b[0]) | uint16(b[1])<<8)
		both := tp[3][b[4]] ^ tp[2][b[5]] ^ tp[1][b[6]] ^ tp[0][b[7]]
		c32 = t32[7][byte(c32)] ^ t32[6][byte(c32>>8)] ^ t32[5][byte(c32>>16)] ^ t32[4][c32>>24] ^ uint32(both)
		c16 = t16[7][byte(c)] ^ t16[6][c>>8] ^ t16[5][b[2]] ^ t16[4][b[3]] ^ uint16(both>>32)
		b = b[8:]
	}
	for _, x := range b {
		c32 = c32>>8 ^ t32[0][byte(c32)^x]
		c16 = c16>>8 ^ t16[0][byte(c16)^x]
	}
	return ^c32, c16
}

// A hash whose data are all 64-bit words, each a field or a constant
// (a sketch's key, as the classes lower it), runs its CRCs on the
// words themselves, eight bytes a step, with no packing into a buffer:
// the steps of the constant words before the first field are taken at
// load (their state is the same for every packet), and a constant word
// after it costs only the table loads the state indexes (those its own
// bytes index are taken at load too).

// hword is a word of a hash's data: the field in slot, or, when slot is
// negative, a constant whose step is the state's loads xored with x32
// and k32 (CRC-32) or x16 and k16 (CRC-16).
type hword struct {
	slot     int
	x32, k32 uint32
	x16, k16 uint16
}

// wordHash is a hash's data as words: the states after its leading
// constant words, and the words after them.
type wordHash struct {
	s32   uint32
	s16   uint16
	words []hword
}

// wordHash returns s's data as words, or nil when a datum is not a
// 64-bit field or constant.
func (c *compiler) wordHash(s p4gen.Hash, sc *scope) *wordHash {
	wh := &wordHash{s32: ^uint32(0)}
	for _, x := range s.Data {
		if x.Type().Bits != 64 {
			return nil
		}
		if k, ok := x.(p4gen.Const); ok {
			w := constWord(k.Value)
			if len(wh.words) == 0 {
				wh.s32, wh.s16 = w.step32(wh.s32), w.step16(wh.s16)
				continue
			}
			wh.words = append(wh.words, w)
			continue
		}
		slot, ok := c.refSlot(x, sc)
		if !ok {
			return nil
		}
		wh.words = append(wh.words, hword{slot: slot})
	}
	return wh
}

// constWord is constant word v's step, what its bytes index taken now.
func constWord(v uint64) hword {
	t32, t16 := &crc32Tables, &crc16Tables
	x32 := bits.ReverseBytes32(uint32(v >> 32)) // its first four bytes, little-endian
	return hword{slot: -1, x32: x32, x16: uint16(x32),
		k32: t32[3][byte(v>>24)] ^ t32[2][byte(v>>16)] ^ t32[1][byte(v>>8)] ^ t32[0][byte(v)],
		k16: t16[5][byte(v>>40)] ^ t16[4][byte(v>>32)] ^ t16[3][byte(v>>24)] ^ t16[2][byte(v>>16)] ^ t16[1][byte(v>>8)] ^ t16[0][byte(v)]}
}

func (w *hword) step32(c uint32) uint32 {
	t := &crc32Tables
	c ^= w.x32
	return t[7][byte(c)] ^ t[6][byte(c>>8)] ^ t[5][byte(c>>16)] ^ t[4][c>>24] ^ w.k32
}

func (w *hword) step16(c uint16) uint16 {
	t := &crc16Tables
	c ^= w.x16
	return t[7][byte(c)] ^ t[6][c>>8] ^ w.k16
}

// crc32 is the CRC-32 of p's words.
func (wh *wordHash) crc32(p *pkt) uint32 {
	c := wh.s32
	t := &crc32Tables
	for i := range wh.words {
		w := &wh.words[i]
		if w.slot < 0 {
			c = w.step32(c)
			continue
		}
		v := p.at(w.slot)
		c ^= bits.ReverseBytes32(uint32(v >> 32))
		c = t[7][byte(c)] ^ t[6][byte(c>>8)] ^ t[5][byte(c>>16)] ^ t[4][c>>24] ^
			t[3][byte(v>>24)] ^ t[2][byte(v>>16)] ^ t[1][byte(v>>8)] ^ t[0][byte(v)]
	}
	return ^c
}

// crc16 is the CRC-16 of p's words.
func (wh *wordHash) crc16(p *pkt) uint16 {
	c := wh.s16
	t := &crc16Tables
	for i := range wh.words {
		w := &wh.words[i]
		if w.slot < 0 {
			c = w.step16(c)
			continue
		}
		v := p.at(w.slot)
		x := c ^ uint16(bits.ReverseBytes32(uint32(v>>32)))
		c = t[7][byte(x)] ^ t[6][x>>8] ^ t[5][byte(v>>40)] ^ t[4][byte(v>>32)] ^
			t[3][byte(v>>24)] ^ t[2][byte(v>>16)] ^ t[1][byte(v>>8)] ^ t[0][byte(v)]
	}
	return c
}

// crcs is crc32 and crc16 in one pass, sharing the loads that a
// field's last four bytes index (crcPairTables).
func (wh *wordHash) crcs(p *pkt) (uint32, uint16) {
	c32, c16 := wh.s32, wh.s16
	t32, t16, tp := &crc32Tables, &crc16Tables, &crcPairTables
	for i := range wh.words {
		w := &wh.words[i]
		if w.slot < 0 {
			c32, c16 = w.step32(c32), w.step16(c16)
			continue
		}
		v := p.at(w.slot)
		x32 := bits.ReverseBytes32(uint32(v >> 32))
		both := tp[3][byte(v>>24)] ^ tp[2][byte(v>>16)] ^ tp[1][byte(v>>8)] ^ tp[0][byte(v)]
		c32 ^= x32
		c32 = t32[7][byte(c32)] ^ t32[6][byte(c32>>8)] ^ t32[5][byte(c32>>16)] ^ t32[4][c32>>24] ^ uint32(both)
		x := c16 ^ uint16(x32)
		c16 = t16[7][byte(x)] ^ t16[6][x>>8] ^ t16[5][byte(v>>40)] ^ t16[4][byte(v>>32)] ^ uint16(both>>32)
	}
	return ^c32, c16
}

// op is the op that computes hashes outs of the words: a CRC-32, a
// CRC-16, or one of each; nil for another set.
func (wh *wordHash) op(outs []hashOut, dirty bool) op {
	var o op
	switch {
	case len(outs) == 1 && outs[0].algo == p4gen.CRC32:
		h := &outs[0]
		o = func(p *pkt) { h.put(p, uint64(wh.crc32(p))) }
	case len(outs) == 1 && outs[0].algo == p4gen.CRC16:
		h := &outs[0]
		o = func(p *pkt) { h.put(p, uint64(wh.crc16(p))) }
	case len(outs) == 2 && outs[0].algo == p4gen.CRC32 && outs[1].algo == p4gen.CRC16:
		h32, h16 := &outs[0], &outs[1]
		o = func(p *pkt) {
			c32, c16 := wh.crcs(p)
			h32.put(p, uint64(c32))
			h16.put(p, uint64(c16))
		}
	case len(outs) == 2 && outs[0].algo == p4gen.CRC16 && outs[1].algo == p4gen.CRC32:
		h16, h32 := &outs[0], &outs[1]
		o = func(p *pkt) {
			c32, c16 := wh.crcs(p)
			h16.put(p, uint64(c16))
			h32.put(p, uint64(c32))
		}
	default:
		return nil
	}
	if dirty {
		inner := o
		return func(p *pkt) {
			inner(p)
			p.dirty = true
		}
	}
	return o
}
