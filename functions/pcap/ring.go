package pcap

import (
	"errors"
	"io"
)

// ring is how a file read with read(2) is buffered when a source refers
// to its records in place (AccessRing): read(2) fills one chunk after the
// other of a slab, the slab is the source's PBuf view, and each record is
// delivered where read(2) put it: each byte is copied once, from the page
// cache, rather than into a read buffer and then again into a PBuf.
//
// Each chunk is preceded by a prefix of its own: when a record straddles
// the end of a chunk, the Reader moves its first part (less than the
// longest block it ever needs whole) into the next chunk's prefix, so that
// every record lies in one piece.
//
// A chunk is read into again once the Reader has left it and no batch
// still refers to it: the source marks the chunk a record comes from
// (ref), and a chunk left while marked waits (retired) until the batch is
// done, which the source learns from its next fill.
//
// Reading ahead on a goroutine of its own, overlapping read(2) with the
// filtering on the other core, was measured too and lost: on the 2-core
// VMs ffpf is developed on, handing chunks between cores cost more than
// the overlap saved, even with neither side ever sleeping (README, "File
// replay").
type ring struct {
	slab    []byte
	pre     int // bytes before each chunk's data: room for a record's first part
	size    int // bytes of data per chunk
	cur     int // the chunk the Reader is in
	ref     []bool
	retired []int
	free    []int
	empty   int // reads in a row that returned nothing
}

const (
	ringChunks = 4         // chunks in the ring
	ringChunk  = 256 << 10 // data bytes per chunk: a batch's chunks stay in L2
)

var errRingFull = errors.New("no free chunk to read into")

// useRing reports whether a reader of a regular file, its header read,
// goes on through a ring: when the file is more than its first buffer, and
// every record fits a chunk's prefix.
func (r *Reader) useRing() bool {
	return r.mapped == nil && !r.eof && r.rerr == nil && r.size > int64(len(r.buf)) && r.maxCap <= MaxRecordLen
}

// startRing makes r read on through a ring. The bytes r has buffered but
// not consumed go to the end of the last chunk's prefix, where the Reader
// starts; read(2) fills the other chunks as the Reader needs them.
func (r *Reader) startRing() {
	// The most ensure is asked to hold whole: a record (classic pcap) or
	// a block of at most maxEnsure bytes (pcapng). Less than that is ever
	// left over at the end of a chunk.
	pre := classicRecHdr + MaxRecordLen
	if r.format == NG {
		pre = maxEnsure + ngEPBHeaderLen
	}
	pre = max(pre, bufSize) // the first buffer's bytes go there too
	pre = (pre + pageSize - 1) &^ (pageSize - 1)
	g := &ring{
		pre: pre, size: ringChunk,
		slab:    make([]byte, ringChunks*(pre+ringChunk)),
		ref:     make([]bool, ringChunks),
		retired: make([]int, 0, ringChunks),
		free:    make([]int, 0, ringChunks),
	}
	last := ringChunks - 1
	for c := range last {
		g.free = append(g.free, c)
	}
	end := g.data(last)
	start := end - copy(g.slab[end-(r.w-r.r):end], r.buf[r.r:r.w])
	r.base += int64(r.r - start)
	r.buf, r.r, r.w = g.slab, start, end
	g.cur = last
	r.ring = g
}

// data is the slab offset where chunk c's data starts.
func (g *ring) data(c int) int { return c*(g.pre+g.size) + g.pre }

// fillRing reads the next chunks until n bytes are readable at buf[r.r:]
// or the file ends, carrying the unread bytes of the chunk left into the
// next one's prefix.
func (r *Reader) fillRing(n int) {
	g := r.ring
	for r.w-r.r < n && !r.eof && r.rerr == nil {
		left := r.w - r.r // < n: fits the prefix
		if len(g.free) == 0 || left > g.pre {
			r.rerr = errRingFull // the source ends batches before this happens
			return
		}
		c := g.free[len(g.free)-1]
		g.free = g.free[:len(g.free)-1]
		start := g.data(c)
		buf := g.slab[start : start+g.size]
		k := 0
		for k < len(buf) {
			m, err := r.rd.Read(buf[k:])
			k += m
			if err == io.EOF {
				r.eof = true
				break
			}
			if err != nil {
				r.rerr = err
				break
			}
			if m == 0 {
				if g.empty++; g.empty == 100 {
					r.rerr = io.ErrNoProgress
					break
				}
			} else {
				g.empty = 0
			}
		}
		copy(g.slab[start-left:start], r.buf[r.r:r.w])
		g.leave(g.cur)
		g.cur = c
		r.base += int64(r.r - (start - left))
		r.r, r.w = start-left, start+k
	}
}

// leave makes chunk c free, or keeps it while a batch refers to it.
func (g *ring) leave(c int) {
	if g.ref[c] {
		g.retired = append(g.retired, c)
		return
	}
	g.free = append(g.free, c)
}

// release frees the chunks only the batches before referred to: the source
// calls it when it starts a new batch on its view.
func (g *ring) release() {
	g.free = append(g.free, g.retired...)
	g.retired = g.retired[:0]
	clear(g.ref)
}

// room reports whether a batch may take more records: the Reader moving
// to a new chunk while the one it leaves is still referred to needs a free
// chunk, and one more in case the same record (a long pcapng block) moves
// it on again.
func (g *ring) room() bool { return len(g.retired) < ringChunks-2 }
