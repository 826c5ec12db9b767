package pcap

import (
	"encoding/binary"
)

// The records of a classic pcap file form a chain: each header's length
// says where the next record starts. Followed one by one through a file
// larger than the caches, every step waits for a memory load that no
// prefetcher can predict (~120 ns here), which is what bounds a reader.
//
// index follows chainCount chains at once instead. A window of the mapped
// file is cut into segments; each segment's first record is found by a
// strict look at the bytes (sync), and all chains advance in one loop, so
// the processor has chainCount independent loads in flight (~27 ns a
// record). A segment's start is only a guess until the chain before it
// lands exactly on it; a wrong guess is discarded and that part of the file
// walked in order. The index takes only records the Reader would parse the
// same way; at anything else (the end of the file, a truncated or corrupt
// record) it stops at that record's boundary and the Reader takes over,
// so records, errors and record numbers are the Reader's by construction.
type index struct {
	mem      []byte
	big      bool // byte order of the file
	nanos    bool
	maxCap   uint32 // a sync candidate claims no more than this
	maxLen   uint32 // a longer record is corrupt: the Reader says so
	snapshot uint32 // a longer record is cut to it
	// touched sums bytes loaded only to bring their lines into the cache
	// (the compiler may drop a load whose value is unused).
	touched byte

	chains [chainCount]chain
}

type indexRec struct {
	off        uint64 // of the packet data
	incl, wire uint32 // incl: cut to the snapshot
	stored     uint32 // the captured bytes in the file (the record ends at off+stored)
	ts         int64
}

type chain struct {
	start, pos int
	recs       []indexRec
	// ok: the chain reached the start of the next one (or the window end)
	// rather than stopping at a record it could not take.
	ok bool
}

const (
	chainCount   = 16
	segmentBytes = 128 << 10 // a window (chainCount segments) stays in L2 until delivered
	chainRecs    = 4096      // records a chain holds per window; more ends the window early
	syncDepth    = 4         // consecutive plausible headers that make a sync
	syncScan     = 64 << 10
)

func newIndex(r *Reader) *index {
	x := &index{mem: r.mapped, big: r.big, nanos: r.nanos, maxCap: min(r.snapshot, r.maxCap), maxLen: r.maxCap, snapshot: r.snapshot}
	for i := range x.chains {
		x.chains[i].recs = make([]indexRec, 0, chainRecs)
	}
	return x
}

// boundary returns the index of c's record that starts at pos, len(c.recs)
// when pos is where c ended, or -1 when c never passed through pos.
func (c *chain) boundary(pos int) int {
	if c.ok && c.pos == pos {
		return len(c.recs)
	}
	want := uint64(pos + classicRecHdr) // records are kept by their data offset
	lo, hi := 0, len(c.recs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.recs[m].off < want {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(c.recs) && c.recs[lo].off == want {
		return lo
	}
	return -1
}

// windowRecs is the most records one window holds.
const windowRecs = chainCount * chainRecs

// header reads the four fields of the record header at pos, which the
// caller has checked lies inside the file. (A binary.ByteOrder interface
// would cost a call per field on the hottest line of a file replay.)
func (x *index) header(pos int) (sec, frac, incl, orig uint32) {
	h := x.mem[pos : pos+classicRecHdr]
	if x.big {
		return binary.BigEndian.Uint32(h), binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])
	}
	return binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint32(h[4:]), binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
}

// take parses the record header at pos as the Reader would (cut to the
// snapshot, the wire length as written) and reports whether the index may
// take the record: it is whole inside the file and not longer than the
// link type allows.
func (x *index) take(pos int) (indexRec, int, bool) {
	if pos+classicRecHdr > len(x.mem) {
		return indexRec{}, 0, false
	}
	sec, frac, incl, orig := x.header(pos)
	end := pos + classicRecHdr + int(incl)
	if incl > x.maxLen || end > len(x.mem) {
		return indexRec{}, 0, false
	}
	ts := int64(sec) * 1e9
	if x.nanos {
		ts += int64(frac)
	} else {
		ts += int64(frac) * 1e3
	}
	return indexRec{off: uint64(pos + classicRecHdr), incl: min(incl, x.snapshot), wire: orig, stored: incl, ts: ts}, end, true
}

// plausible is the strict test a sync candidate must pass, beyond take: a
// timestamp from a day before to a year after the window's first record
// (sec), a fraction of a second below one second, a captured length of at
// least one byte, within the file's snap length and not above the wire
// length. (Zero bytes, common in payloads, must not look like a header.)
func (x *index) plausible(pos int, sec uint32) (int, bool) {
	if pos+classicRecHdr > len(x.mem) {
		return 0, false
	}
	s, frac, incl, orig := x.header(pos)
	limit := uint32(1e6)
	if x.nanos {
		limit = 1e9
	}
	if s-(sec-86400) > 86400+366*86400 || frac >= limit || incl == 0 || incl > x.maxCap || incl > orig || orig > 1<<24 {
		return 0, false
	}
	end := pos + classicRecHdr + int(incl)
	return end, end <= len(x.mem)
}

// sync returns the first position in [from, to) where syncDepth plausible
// headers follow each other, or -1.
func (x *index) sync(from, to int, sec uint32) int {
	for p := from; p < to; p++ {
		q, ok := p, true
		for range syncDepth {
			if q, ok = x.plausible(q, sec); !ok {
				break
			}
		}
		if ok {
			return p
		}
	}
	return -1
}

// window indexes the records from the record boundary b on: it appends
// them to recs (which has room for windowRecs) and returns recs and the
// boundary after the last record it took, b itself when it took none.
func (x *index) window(b int, recs []indexRec) ([]indexRec, int) {
	end := min(b+chainCount*segmentBytes, len(x.mem))
	// Segment starts: the first is b (a known boundary), the others guesses.
	n := 1
	x.chains[0].start = b
	if end-b >= 2*segmentBytes && b+classicRecHdr <= len(x.mem) {
		sec, _, _, _ := x.header(b)
		for i := 1; i < chainCount; i++ {
			approx := b + i*(end-b)/chainCount
			if s := x.sync(approx, min(approx+syncScan, end), sec); s > x.chains[n-1].start {
				x.chains[n].start = s
				n++
			}
		}
	}
	for i := range n {
		c := &x.chains[i]
		c.pos, c.recs, c.ok = c.start, c.recs[:0], false
	}
	// Advance every chain by one record per round. First a tight loop that
	// only loads each chain's next header, so that all those cache misses
	// are in flight together (a longer loop body would not fit them in the
	// processor's window); then the records are taken from the cache.
	for active := n; active > 0; {
		for i := range n {
			if p := x.chains[i].pos; p >= 0 && p < len(x.mem) {
				x.touched += x.mem[p]
			}
		}
		active = 0
		for i := range n {
			c := &x.chains[i]
			limit := end
			if i+1 < n {
				limit = x.chains[i+1].start
			}
			if c.ok || c.pos < 0 {
				continue
			}
			if c.pos >= limit {
				c.ok = true
				continue
			}
			rec, next, ok := x.take(c.pos)
			if !ok || len(c.recs) == cap(c.recs) {
				c.pos = -1 - c.pos // stopped here; keep where
				continue
			}
			c.recs = append(c.recs, rec)
			c.pos = next
			active++
		}
	}
	// Keep chains in order while each meets the next: the genuine chain
	// ends on the next one's start, or on one of its later boundaries (a
	// guess that started inside a payload which looks like records — a
	// capture of a pcap download — and fell into step). From the meeting
	// point on, the next chain follows the genuine records.
	pos := b
	for i := range n {
		c := &x.chains[i]
		k := 0
		if c.start != pos {
			k = c.boundary(pos)
			if k < 0 {
				break // they never meet: the next window starts at pos
			}
		}
		recs = append(recs, c.recs[k:]...)
		if !c.ok {
			pos = -1 - c.pos // it stopped at a record it could not take
			break
		}
		pos = c.pos
	}
	return recs, pos
}
