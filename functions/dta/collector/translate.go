package collector

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/translator"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// Apply implements translator.Memory: the collector is the memory a
// translator in the same process writes to, as the paper's translator
// writes a collector's memory by RDMA. A write lands at its byte offset in
// the region, laid out as package layout says, which is how the
// collector's own ingest lays it out; a write that is not whole slots,
// counters, chunks or entries of the collector's memory is counted as
// outside and dropped (a translator configured for another memory).
//
// The translator counts its writes (translator.Stats); the collector's
// report counts are for reports it ingests itself, except Append's
// entries, which count either way. Apply counts no write that lands: a
// locked add after a write's plain stores waits for their cache misses
// (Key-Write through a translator measured 10x slower). Apply may run
// beside ingest and queries.
func (c *Collector) Apply(w *translator.Write) {
	if !c.apply1(w) {
		atomic.AddUint64(&c.n.outside, 1)
	}
}

func aligned(off, n, size, units uint64) bool {
	return off%size == 0 && n%size == 0 && off/size <= units && n/size <= units-off/size
}

func (c *Collector) apply1(w *translator.Write) bool {
	n := uint64(len(w.Data))
	switch w.Region {
	case translator.KeyWrite:
		if c.kw == nil || n == 0 || !aligned(w.Offset, n, layout.KeyWriteSlotSize, uint64(len(c.kw.slots))) {
			return false
		}
		c.kw.store(w.Offset/layout.KeyWriteSlotSize, w.Data)
	case translator.KeyIncrement:
		if c.ki == nil || w.Data != nil || !aligned(w.Offset, layout.CounterSize, layout.CounterSize, uint64(len(c.ki.counters))) {
			return false
		}
		atomic.AddUint64(&c.ki.counters[w.Offset/layout.CounterSize], w.Add)
	case translator.Postcards:
		if c.pc == nil || n == 0 || n > layout.ChunkSize || w.Offset%layout.ChunkSize != 0 ||
			!aligned(w.Offset, n, layout.AppendEntrySize, uint64(len(c.pc.words))) {
			return false
		}
		c.pc.store(w.Offset/4, w.Data)
	case translator.Append:
		if c.ap == nil || w.List >= c.cfg.Append.Lists || n == 0 || !aligned(w.Offset, n, layout.AppendEntrySize, c.ap.size) {
			return false
		}
		c.ap.writeAt(w.List, w.Offset/layout.AppendEntrySize, w.Data)
		atomic.AddUint64(&c.n.reports[wire.Append], n/layout.AppendEntrySize)
	default:
		return false
	}
	return true
}

// store writes whole slots from their bytes (layout.PutKeyWriteSlot's).
//
//go:norace
func (kw *keyWrite) store(slot uint64, b []byte) {
	for i := 0; i < len(b); i += layout.KeyWriteSlotSize {
		kw.slots[slot] = binary.LittleEndian.Uint64(b[i:])
		slot++
	}
}

// store writes chunk words from their bytes.
//
//go:norace
func (p *postcarding) store(word uint64, b []byte) {
	for i := 0; i < len(b); i += 4 {
		p.words[word] = layout.Word(b[i:])
		word++
	}
}

// writeAt writes entries from their bytes at position pos of list l's
// ring, where the translator's batch lands, and moves the list on by
// them: the translator keeps the head, so that its writes and the
// collector's agree while the translator is the list's only writer.
func (a *appendLists) writeAt(l uint32, pos uint64, b []byte) {
	r := &a.lists[l]
	base := uint64(l)*a.size + pos
	r.mu.Lock()
	for i := 0; i < len(b); i += layout.AppendEntrySize {
		a.entries[base] = layout.Word(b[i:])
		base++
	}
	r.written += uint64(len(b) / layout.AppendEntrySize)
	r.mu.Unlock()
}

// TranslatorConfig is the translator configuration that writes this
// collector's memory, with Append batches of batch entries. A primitive
// the collector does not host gets the smallest memory the translator
// accepts; its writes are counted as outside.
func (c *Collector) TranslatorConfig(batch int) translator.Config {
	t := translator.Config{Slots: 1, Counters: 1, Chunks: 1, Copies: 1, Hops: layout.DefaultHops, Lists: 1, ListSize: 1, Batch: batch}
	if k := c.cfg.KeyWrite; k.Enabled() {
		t.Slots = k.Slots
	}
	if k := c.cfg.KeyIncrement; k.Enabled() {
		t.Counters = k.Slots
	}
	if p := c.cfg.Postcarding; p.Enabled() {
		t.Chunks, t.Copies, t.Hops = p.Chunks, p.Redundancy, p.Hops
	}
	if a := c.cfg.Append; a.Enabled() {
		t.Lists, t.ListSize = int(a.Lists), a.Size
	}
	return t
}
