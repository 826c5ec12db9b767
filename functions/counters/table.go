package counters

import (
	"slices"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// table is a keyed counter's table of keys and values in its MBuf.
type table interface {
	// find returns k's value, inserting k when insert is set (claimed
	// says it was), or nil: no room, or absent.
	find(k *flowkey.Key, insert bool) (value *uint64, claimed bool)
	// each calls f for every key stored, with its value.
	each(f func(k *flowkey.Key, v uint64))
	clear()
}

// keyedReader reads t's value for each packet's own key (0: no key, or
// absent); k is the reader's own key buffer, so that it runs under the
// reader's lock with no allocation.
func keyedReader(t table, sp *flowkey.Spec, lt functions.LinkType) func(p *buffers.PBuf, slot uint32) uint64 {
	var k flowkey.Key
	return func(p *buffers.PBuf, slot uint32) uint64 {
		if !sp.Extract(lt, p.Data(slot), &k) {
			return 0
		}
		v, _ := t.find(&k, false)
		if v == nil {
			return 0
		}
		return atomic.LoadUint64(v)
	}
}

// probeTable is the table in userspace and eBPF: open addressing, linear
// probing of at most maxProbe entries from flowkey.Index of the key's
// hash; an entry is the key's words, its value and a used mark.
type probeTable struct {
	sp    *flowkey.Spec
	words int // per entry
	size  uint32
	t     []uint64
	// touched records the entries a window inserted, so that a report
	// and the reset walk those, not the table (measure.Touched); nil
	// without windows.
	touched *measure.Touched
}

func newProbeTable(sp *flowkey.Spec, size uint32, mem []uint64, touched *measure.Touched) *probeTable {
	return &probeTable{sp: sp, words: entryWords(sp), size: size, t: mem, touched: touched}
}

func (p *probeTable) find(k *flowkey.Key, insert bool) (*uint64, bool) {
	nw := p.words - 2
	slot := flowkey.Index(p.sp.Hash(k, 0), 0, p.size)
	for range min(maxProbe, int(p.size)) {
		i := int(slot) * p.words
		e := p.t[i : i+p.words : i+p.words]
		if atomic.LoadUint64(&e[nw+1]) == 0 {
			if !insert {
				return nil, false
			}
			for j := range nw {
				atomic.StoreUint64(&e[j], k[j])
			}
			atomic.StoreUint64(&e[nw+1], 1)
			if p.touched != nil {
				p.touched.Add(slot)
			}
			return &e[nw], true
		}
		same := true
		for j := range nw {
			if atomic.LoadUint64(&e[j]) != k[j] {
				same = false
				break
			}
		}
		if same {
			return &e[nw], false
		}
		if slot++; slot == p.size {
			slot = 0
		}
	}
	return nil, false
}

func (p *probeTable) each(f func(*flowkey.Key, uint64)) {
	if p.touched == nil || p.touched.All() {
		for i := 0; i+p.words <= len(p.t); i += p.words {
			p.entry(i, f)
		}
		return
	}
	// The entries the window inserted, in the table's order: the order in
	// which equal values are offered decides which of them a report of K
	// keeps.
	slices.Sort(p.touched.Entries())
	for _, slot := range p.touched.Entries() {
		p.entry(int(slot)*p.words, f)
	}
}

// entry calls f with the entry at word i, if used.
func (p *probeTable) entry(i int, f func(*flowkey.Key, uint64)) {
	nw := p.words - 2
	if p.t[i+nw+1] == 0 {
		return
	}
	var k flowkey.Key
	copy(k[:nw], p.t[i:i+nw])
	f(&k, p.t[i+nw])
}

func (p *probeTable) clear() {
	if p.touched == nil || p.touched.All() {
		clear(p.t)
	} else {
		for _, slot := range p.touched.Entries() {
			i := int(slot) * p.words
			clear(p.t[i : i+p.words])
		}
	}
	if p.touched != nil {
		p.touched.Reset()
	}
}

// p4Table is the table on a switch, as the controller reads it from the
// registers into the MBuf: one slot per key, at P4Index 0 of its hashes
// (a switch probes no further: one access per register per packet), in
// columns, one per register: word j of slot i at j·size+i, the values at
// (words)·size+i, the used marks at (words+1)·size+i.
type p4Table struct {
	sp    *flowkey.Spec
	words int // key words
	bits  int
	size  int
	t     []uint64
}

func newP4Table(sp *flowkey.Spec, size int, mem []uint64) *p4Table {
	_, bits := flowkey.Pow2(uint64(size))
	return &p4Table{sp: sp, words: sp.Words(), bits: bits, size: size, t: mem}
}

func (p *p4Table) slot(k *flowkey.Key) int {
	h1, h2 := p.sp.P4Hashes(k)
	return int(flowkey.P4Index(h1, h2, 0, p.bits))
}

func (p *p4Table) find(k *flowkey.Key, insert bool) (*uint64, bool) {
	i := p.slot(k)
	used := &p.t[(p.words+1)*p.size+i]
	if atomic.LoadUint64(used) == 0 {
		if !insert {
			return nil, false
		}
		for j := range p.words {
			atomic.StoreUint64(&p.t[j*p.size+i], k[j])
		}
		atomic.StoreUint64(used, 1)
		return &p.t[p.words*p.size+i], true
	}
	for j := range p.words {
		if atomic.LoadUint64(&p.t[j*p.size+i]) != k[j] {
			return nil, false
		}
	}
	return &p.t[p.words*p.size+i], false
}

func (p *p4Table) each(f func(*flowkey.Key, uint64)) {
	var k flowkey.Key
	for i := range p.size {
		if p.t[(p.words+1)*p.size+i] == 0 {
			continue
		}
		for j := range p.words {
			k[j] = p.t[j*p.size+i]
		}
		f(&k, p.t[p.words*p.size+i])
	}
}

func (p *p4Table) clear() { clear(p.t) }

// p4Size is the size of a keyed counter's table on a switch: size=,
// rounded up to a power of two (a slot is the top bits of a hash).
func p4Size(p functions.Params) int {
	n, _ := flowkey.Pow2(uint64(p.Int("size")))
	return int(n)
}
