// Package translator is the DTA translator: it turns DTA reports into the
// memory writes a collector's NIC would receive by RDMA, as the paper's
// last-hop switch does (§3–§4). Key-Write fans a report out to N slots;
// Key-Increment to N Fetch&Add operations; Append batches B entries of a
// list into one write at the list's head; Postcarding gathers a flow's
// postcards in a cache of 32K lines and writes the flow's chunk once all B
// hops are in, or when another flow takes the line (a collision evicts
// the flow early, with blanks for its missing hops).
//
// Where the writes go is a Memory: a collector's memory in the same
// process, the record output of the dta-translator class, or a test's.
// Slots, checksums and byte layout are package layout's, which the
// collector shares.
//
// The sharp edge: the translator holds state between reports (Append
// batches, cached postcards); Flush writes it out, at the end of the
// input. Until then a collector misses up to B−1 entries per list and the
// cached flows.
package translator

import (
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/dta/wire"
)

// Region is a region of collector memory.
type Region uint8

const (
	KeyWrite     Region = 1 // Key-Write slots of layout.KeyWriteSlotSize bytes
	KeyIncrement Region = 2 // Key-Increment counters of layout.CounterSize bytes
	Postcards    Region = 3 // postcard chunks of layout.ChunkSize bytes
	Append       Region = 4 // one ring of layout.AppendEntrySize-byte entries per list
)

func (r Region) String() string {
	switch r {
	case KeyWrite:
		return "keywrite"
	case KeyIncrement:
		return "keyincrement"
	case Postcards:
		return "postcards"
	case Append:
		return "append"
	}
	return fmt.Sprintf("region(%d)", uint8(r))
}

// Write is one memory operation, an RDMA WRITE of Data at Offset, or (Key-
// Increment) an RDMA Fetch&Add of Add to the 64-bit counter at Offset.
type Write struct {
	Region Region
	List   uint32 // the Append list
	Offset uint64 // bytes from the start of the region (of the list)
	Data   []byte // the bytes written; nil for a Fetch&Add. Valid during the call only.
	Add    uint64 // the Fetch&Add's operand
}

// Memory receives the translator's writes, in order.
type Memory interface {
	Apply(w *Write)
}

// Config is the collector memory the translator writes to, and its own
// batching.
type Config struct {
	Slots    uint64 // Key-Write slots (M)
	Counters uint64 // Key-Increment counters
	Chunks   uint64 // postcard chunks (C)
	Copies   int    // postcard chunk copies per flow (the paper's N; the reference's 1)
	Hops     int    // postcards per flow (B), 1 to layout.MaxHops
	Lists    int    // Append lists
	ListSize uint64 // entries per list
	Batch    int    // Append entries per write: 1, 2, 4, 8 or 16
}

// DefaultConfig is a small collector, the class's defaults: 1M (10^6)
// Key-Write slots, 1M counters, 64K (64,000) chunks of 5 hops, 16 lists
// of 64K entries; batches of 16.
var DefaultConfig = Config{Slots: 1_000_000, Counters: 1_000_000, Chunks: 64_000, Copies: 1, Hops: layout.DefaultHops,
	Lists: 16, ListSize: 64_000, Batch: 16}

// MaxBatch is the largest Append batch (the reference's).
const MaxBatch = 16

// Check reports why c is not a memory the translator can write: one a
// collector could not host (layout's limits, which the collector checks).
func (c *Config) Check() error {
	for _, h := range []struct {
		name string
		m    uint64
	}{{"slots", c.Slots}, {"counters", c.Counters}, {"chunks", c.Chunks}} {
		if err := layout.CheckHashed(h.name, h.m); err != nil {
			return err
		}
	}
	if err := layout.CheckRedundancy("copies", c.Copies); err != nil {
		return err
	}
	switch {
	case c.Hops < 1 || c.Hops > layout.MaxHops:
		return fmt.Errorf("hops is 1 to %d", layout.MaxHops)
	case c.Lists < 1 || c.Lists > layout.MaxLists:
		return fmt.Errorf("lists is 1 to %d", layout.MaxLists)
	case c.ListSize < 1 || c.ListSize > layout.MaxSlots:
		return fmt.Errorf("a list holds 1 to %d entries", uint64(layout.MaxSlots))
	case c.Batch < 1 || c.Batch > MaxBatch || c.Batch&(c.Batch-1) != 0:
		return errors.New("batch is 1, 2, 4, 8 or 16")
	}
	return nil
}

// Reason is why a report was not translated.
type Reason uint8

const (
	BadRedundancy Reason = iota + 1 // Key-Write or Key-Increment with N = 0 or N > layout.MaxRedundancy
	BadList                         // an Append list id ≥ Lists
	BadHop                          // a postcard hop offset at or past Hops
)

func (r Reason) String() string {
	switch r {
	case BadRedundancy:
		return "redundancy"
	case BadList:
		return "list"
	case BadHop:
		return "hop"
	}
	return "unknown"
}

// Error is a report the translator refused.
type Error struct {
	Reason Reason
	Report wire.Report
}

func (e *Error) Error() string {
	switch e.Reason {
	case BadRedundancy:
		return fmt.Sprintf("dta: %v report with redundancy %d, not 1 to %d as a collector takes", e.Report.Op, e.Report.Redundancy, layout.MaxRedundancy)
	case BadList:
		return fmt.Sprintf("dta: append to list %d, beyond the lists", e.Report.List)
	case BadHop:
		return fmt.Sprintf("dta: postcard of hop %d, past the hops (0 first)", e.Report.Hop)
	}
	return "dta: report refused"
}

// Stats counts what the translator did.
type Stats struct {
	Reports    [5]uint64 // translated, by opcode (index wire.Opcode)
	Writes     uint64    // RDMA writes
	FetchAdds  uint64    // RDMA Fetch&Adds
	Bytes      uint64    // bytes written
	Batches    uint64    // Append writes (a batch that wraps the ring is two writes, one batch)
	Complete   uint64    // postcard flows written with all B hops
	Evicted    uint64    // postcard flows written early: another flow took their cache line
	Flushed    uint64    // postcard flows written by Flush, incomplete
	Duplicates uint64    // postcards of a hop the cached flow had already
	Refused    [4]uint64 // by Reason
}

// line is a postcard cache line: one flow's postcards so far.
type line struct {
	key   uint32
	seen  uint8 // bit i for hop offset i
	valid bool
	words [layout.MaxHops]uint32 // layout.PostcardWord of each seen hop
}

type list struct {
	head  uint64 // entry the next batch starts at
	n     int    // entries batched
	batch [MaxBatch]uint32
}

// Translator translates reports into writes. It is not safe for
// concurrent use.
type Translator struct {
	cfg Config
	mem Memory
	// slots, counters and chunks reduce a hash modulo each region's size
	// without a division.
	slots, counters, chunks layout.Reducer
	full                    uint8 // seen, once all hops are in
	cache                   []line
	lists                   []list
	w                       Write
	buf                     [MaxBatch * layout.AppendEntrySize]byte // the payload of one write
	stats                   Stats
}

// New returns a translator writing to mem.
func New(cfg Config, mem Memory) (*Translator, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Translator{cfg: cfg, mem: mem, full: uint8(1<<cfg.Hops - 1),
		slots: layout.NewReducer(cfg.Slots), counters: layout.NewReducer(cfg.Counters), chunks: layout.NewReducer(cfg.Chunks),
		cache: make([]line, layout.PostcardCacheSize), lists: make([]list, cfg.Lists)}, nil
}

// Config returns the translator's configuration.
func (t *Translator) Config() Config { return t.cfg }

// Stats returns the counts so far.
func (t *Translator) Stats() Stats { return t.stats }

func (t *Translator) write(region Region, list uint32, off uint64, data []byte) {
	t.w = Write{Region: region, List: list, Offset: off, Data: data}
	t.stats.Writes++
	t.stats.Bytes += uint64(len(data))
	t.mem.Apply(&t.w)
}

// Translate turns one report into writes. A report it refuses (an *Error)
// writes nothing.
func (t *Translator) Translate(r *wire.Report) error {
	switch r.Op {
	case wire.KeyWrite:
		if r.Redundancy == 0 || r.Redundancy > layout.MaxRedundancy {
			return t.refuse(BadRedundancy, r)
		}
		st := layout.KeyState(r.Key)
		b := t.buf[:layout.KeyWriteSlotSize]
		layout.PutKeyWriteSlot(b, layout.ChecksumOf(st), r.Data)
		for n := range int(r.Redundancy) {
			t.write(KeyWrite, 0, uint64(t.slots.Mod(layout.SlotHashOf(st, n)))*layout.KeyWriteSlotSize, b)
		}
	case wire.KeyIncrement:
		if r.Redundancy == 0 || r.Redundancy > layout.MaxRedundancy {
			return t.refuse(BadRedundancy, r)
		}
		st := layout.KeyState(r.Key)
		for n := range int(r.Redundancy) {
			t.w = Write{Region: KeyIncrement, Offset: uint64(t.counters.Mod(layout.SlotHashOf(st, n))) * layout.CounterSize, Add: r.Counter}
			t.stats.FetchAdds++
			t.mem.Apply(&t.w)
		}
	case wire.Append:
		if uint64(r.List) >= uint64(t.cfg.Lists) {
			return t.refuse(BadList, r)
		}
		l := &t.lists[r.List]
		l.batch[l.n] = r.Data
		if l.n++; l.n == t.cfg.Batch {
			t.writeBatch(r.List, l)
		}
	case wire.Postcarding:
		if int(r.Hop) >= t.cfg.Hops {
			return t.refuse(BadHop, r)
		}
		t.postcard(r.Key, r.Hop, r.Data)
	default:
		return &wire.Error{Reason: wire.ReasonOpcode, Op: r.Op}
	}
	t.stats.Reports[r.Op]++
	return nil
}

func (t *Translator) refuse(why Reason, r *wire.Report) error {
	t.stats.Refused[why]++
	return &Error{Reason: why, Report: *r}
}

// writeBatch writes a list's batched entries at its head, in order, as one
// write, or two where the batch wraps the ring's end.
func (t *Translator) writeBatch(id uint32, l *list) {
	n := l.n
	for i, v := range l.batch[:n] {
		layout.PutWord(t.buf[i*layout.AppendEntrySize:], v)
	}
	size := t.cfg.ListSize
	first := min(uint64(n), size-l.head) // entries before the end
	t.write(Append, id, l.head*layout.AppendEntrySize, t.buf[:first*layout.AppendEntrySize])
	rest := uint64(n) - first
	for rest > 0 { // a ring smaller than the batch wraps more than once
		k := min(rest, size)
		from := (uint64(n) - rest) * layout.AppendEntrySize
		t.write(Append, id, 0, t.buf[from:from+k*layout.AppendEntrySize])
		rest -= k
	}
	l.head = (l.head + uint64(n)) % size
	l.n = 0
	t.stats.Batches++
}

// postcard caches one postcard, writing the flow out when complete and
// evicting the line's other flow.
func (t *Translator) postcard(key uint32, hop uint8, v uint32) {
	c := &t.cache[layout.CacheIndex(key)]
	if c.valid && c.key != key {
		t.writeChunk(c)
		t.stats.Evicted++
	}
	if !c.valid {
		*c = line{key: key, valid: true}
	}
	bit := uint8(1) << hop
	if c.seen&bit != 0 {
		t.stats.Duplicates++
	}
	c.seen |= bit
	c.words[hop] = layout.PostcardWord(key, int(hop), v)
	if c.seen == t.full {
		t.writeChunk(c)
		t.stats.Complete++
	}
}

// writeChunk writes a cached flow into its chunk copies, with blanks for
// the hops it lacks, and frees the line.
func (t *Translator) writeChunk(c *line) {
	b := t.buf[:t.cfg.Hops*4]
	for h := range t.cfg.Hops {
		w := c.words[h]
		if c.seen&(1<<h) == 0 {
			w = layout.PostcardWord(c.key, h, layout.Blank)
		}
		layout.PutWord(b[h*4:], w)
	}
	st := layout.KeyState(c.key)
	for n := range t.cfg.Copies {
		t.write(Postcards, 0, uint64(t.chunks.Mod(layout.SlotHashOf(st, n)))*layout.ChunkSize, b)
	}
	c.valid = false
}

// Flush writes out what the translator holds: each list's partial batch,
// and each cached flow (incomplete, with blanks).
func (t *Translator) Flush() {
	for i := range t.lists {
		if l := &t.lists[i]; l.n > 0 {
			t.writeBatch(uint32(i), l)
		}
	}
	for i := range t.cache {
		if c := &t.cache[i]; c.valid {
			t.writeChunk(c)
			t.stats.Flushed++
		}
	}
}
