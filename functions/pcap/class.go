package pcap

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func init() {
	functions.Register(&functions.Class{
		Name:    "pcap",
		Summary: "read packets from a pcap or pcapng file",
		Params: []functions.Param{
			{Name: "file", Type: functions.String, Required: true, File: functions.FileRead,
				Summary: `the capture file (pcap with µs or ns timestamps in either byte order, or pcapng); "-" is standard input`},
		},
		Targets: []functions.Target{functions.TargetUser},
		// Validate reads the file header to report the file's link type
		// and capture (byte order, link-type field, snap length), which
		// filters are compiled for.
		// A file that cannot be read is a runtime error, not a bad
		// request: NewSource reports it.
		// Only a regular file is peeked at, standard input included (at
		// its offset, without moving it): reading a pipe would consume it
		// (and block), so a pipe is assumed to carry Ethernet and
		// NewSource checks the assumption.
		Validate: func(ctx *functions.Context) error {
			ctx.LinkType = functions.LinkEthernet
			var r *Reader
			if path := ctx.Params.Str("file"); path == "-" {
				r = peekStdin()
			} else if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
				r, _ = OpenAccess(path, AccessRead)
			}
			if r != nil {
				ctx.LinkType = r.LinkType()
				ctx.Captures = []functions.Capture{r.Capture()}
				r.Close()
			}
			return nil
		},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			r, err := Open(ctx.Params.Str("file"))
			if err != nil {
				return nil, err
			}
			if ctx.LinkType != 0 && r.LinkType() != ctx.LinkType {
				r.Close()
				if ctx.Params.Str("file") == "-" {
					return nil, fmt.Errorf("standard input carries %s packets, but a pipe is taken to carry Ethernet when the request is checked: redirect a file to it (-r - < FILE) or name the file",
						r.LinkType())
				}
				return nil, fmt.Errorf("%s carries %s packets, but its functions were checked for %s (did the file change?)",
					r.Name(), r.LinkType(), ctx.LinkType)
			}
			s := NewSource(r)
			if ctx.Snaplen > 0 {
				s.snaplen = uint32(ctx.Snaplen)
			}
			return s, nil
		},
	})
}

// peekStdin reads the header of the capture on standard input when that
// is a regular file, from its current offset without moving it (pread);
// nil for anything else (a pipe, a terminal) or a file that is no capture.
func peekStdin() *Reader {
	st, err := os.Stdin.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	off, err := os.Stdin.Seek(0, io.SeekCurrent)
	if err != nil || off >= st.Size() {
		return nil
	}
	r, err := NewReader(io.NewSectionReader(os.Stdin, off, st.Size()-off), "stdin", 0)
	if err != nil {
		return nil
	}
	return r
}

// Source is the pcap class's source function. When the file is mapped
// into memory, or read into a ring of chunks, its PBuf is a view of that
// memory and Fill refers to each record where it lies; otherwise Fill
// copies each record once, from the read buffer into a slab of its own.
type Source struct {
	r       *Reader
	view    *buffers.PBuf // a view of the mapping, the ring's slab, or slab
	ix      *indexer      // finds a mapped classic file's records, ahead of Fill
	ixOn    bool          // ix runs from the Reader's position
	cur     *window       // the window Fill delivers from
	handoff bool          // the index stopped: the Reader reads the next record
	warmed  byte          // keeps the loads of window.warm
	ahead   *readahead    // runs ahead of Fill through the mapping on the spare core
	snaplen uint32        // most bytes of a record a view refers to
	// slab holds the copied records of the batch being filled, one after
	// the other (a file that is read, not mapped): a batch of small
	// packets then spans a few pages, not a page per slot of a PBuf sized
	// for the longest record, which on a VM costs a TLB miss each.
	slab    []byte
	slabPos int
	mapped  bool  // the Reader reads a mapping (set once: Close unmaps it)
	err     error // from the Reader, returned once the batch is empty
	done    atomic.Int64
	filled  bool // Fill was called: the memory records lie in stays
	closed  atomic.Bool
	mu      sync.Mutex // a mapping must not vanish under a running Fill
}

// NewSource returns a source that reads r; closing it closes r.
func NewSource(r *Reader) *Source {
	s := &Source{r: r, snaplen: MaxRecordLen, mapped: r.Mapped() != nil}
	switch {
	case r.ring != nil:
		s.view = buffers.NewPBufView(r.ring.slab, buffers.MaxBatch)
	case !s.mapped:
		s.slab = make([]byte, slabBytes+MaxRecordLen)
		s.view = buffers.NewPBufView(s.slab, buffers.MaxBatch)
	default:
		s.view = buffers.NewPBufView(r.Mapped(), buffers.MaxBatch)
		if r.Format() == Classic && r.lengths == 0 {
			s.ahead = startReadahead(r.Mapped(), pageSize)
			s.ix = newIndexer(newIndex(r), s.ahead)
		} else {
			s.ahead = startReadahead(r.Mapped(), cacheLine)
		}
	}
	return s
}

// Share implements functions.Sharer: before the first Fill, the ring or
// the slab records are read into moves to shared memory, for a function
// that reads them in another process in place. A mapped file stays where
// it is (its mapping is of the file, which other programs can change or
// cut): its records are copied once on their way there.
func (s *Source) Share(alloc func(size int) []byte) bool {
	if s.filled {
		return false
	}
	switch g := s.r.ring; {
	case g != nil:
		mem := alloc(len(g.slab))
		if mem == nil {
			return false
		}
		// The Reader reads on in the slab, from the bytes it holds there.
		copy(mem, g.slab)
		g.slab, s.r.buf = mem, mem
		s.view = buffers.NewPBufView(mem, buffers.MaxBatch)
		return true
	case s.slab != nil:
		mem := alloc(len(s.slab))
		if mem == nil {
			return false
		}
		s.slab = mem
		s.view = buffers.NewPBufView(mem, buffers.MaxBatch)
		return true
	}
	return false
}

// slabBytes is what a batch's copied records take at most before the batch
// ends early (beyond it, room for one more record of MaxRecordLen).
const slabBytes = 1 << 20

// Reader returns the underlying reader.
func (s *Source) Reader() *Reader { return s.r }

// PBuf returns the source's own PBuf: a view of the mapped file, of the
// ring it is read into, or of the slab its records are copied into.
func (s *Source) PBuf() *buffers.PBuf { return s.view }

// Info describes the file: its name, link type, the longest record it
// delivers (the snapshot, or the run's snap length, at most MaxRecordLen
// when copied) and size.
func (s *Source) Info() functions.SourceInfo {
	maxCap := int(min(s.snaplen, s.r.snapshot)) // no slot to fit in
	if s.slab != nil {
		maxCap = min(maxCap, MaxRecordLen) // room in the slab
	}
	return functions.SourceInfo{Name: s.r.name, LinkType: s.r.linkType, MaxCapLen: maxCap, Size: s.r.size}
}

// Fill appends the next records to b. At the end of the file it returns
// io.EOF; on a truncated or corrupt file it first delivers every complete
// record and then returns the error. Either comes with an empty batch:
// Fill never returns an error together with packets. A Fill that starts a
// batch (b.N == 0) tells the source that the batches filled before are
// done with: their records' memory may be reused.
func (s *Source) Fill(b *buffers.Batch) (err error) {
	if s.mapped {
		s.mu.Lock()
		defer s.mu.Unlock()
		// A mapped file that another program cuts faults where it is read:
		// make that this source's error rather than a crash. (Functions
		// reading the packets can fault too: the flowspace guards those.)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				if _, fault := r.(interface{ Addr() uintptr }); !fault {
					panic(r)
				}
				s.err = s.shrunk()
				b.N, err = 0, s.err // the batch may refer to lost memory
			}
		}()
	}
	if s.closed.Load() {
		return io.EOF
	}
	if s.err != nil {
		return s.err
	}
	s.filled = true
	n0 := b.N
	// Refer to records in place only in a batch on our own view; a caller
	// that gives us its own PBuf gets copies.
	zeroCopy := s.view != nil && b.PBuf == s.view
	slab := zeroCopy && s.slab != nil
	ring := s.r.ring
	var base uintptr
	switch {
	case zeroCopy && ring != nil:
		base = uintptr(unsafe.Pointer(unsafe.SliceData(ring.slab)))
	case zeroCopy && !slab:
		base = uintptr(unsafe.Pointer(unsafe.SliceData(s.r.Mapped())))
	}
	if b.N == 0 {
		// The batch that referred to the slab or the ring before is done
		// (the flowspace fills a source's view with one batch at a time).
		if slab {
			s.slabPos = 0
		}
		if ring != nil {
			ring.release()
		}
	}
	for b.Room() > 0 && (!slab || s.slabPos <= slabBytes) && (ring == nil || ring.room()) {
		if s.ix != nil && s.ixOn != (zeroCopy && !s.handoff) {
			if s.ixOn {
				s.stopIndex() // a caller that copies reads in order
			} else {
				s.ix.start(int(s.r.offset()))
				s.ixOn = true
			}
		}
		if s.ixOn {
			if s.cur == nil {
				s.cur = <-s.ix.full
				if s.cur.fault {
					// The file was cut: the Reader, clamped to what is
					// left, delivers the records before the cut and then
					// reports it. No more index: its mapping is stale.
					s.stopIndex()
					s.ix = nil
					if !s.r.Clamp() {
						s.err = s.shrunk()
						break
					}
					continue
				}
				s.warmed += s.cur.warm(s.r.Mapped())
			}
			w := s.cur
			if w.next < len(w.recs) {
				rec := &w.recs[w.next]
				w.next++
				b.AppendRef(rec.off, min(rec.incl, s.snaplen), rec.wire, rec.ts)
				if w.next == len(w.recs) {
					s.r.skipIndexed(w.to, len(w.recs))
					s.ix.free <- w
					s.cur = nil
				}
				continue
			}
			// A window without records: the index cannot take the record
			// at w.to. The Reader reads it (or says why it cannot), and
			// the index starts again after it.
			s.stopIndex()
			s.handoff = true
		}
		if ring != nil && zeroCopy {
			if s.fillInPlace(b); b.Room() == 0 {
				break
			}
		}
		data, wire, ts, err := s.r.Next()
		if err != nil {
			if s.closed.Load() {
				err = io.EOF // the read failed because Close closed the file
			}
			s.err = err
			break
		}
		if !zeroCopy {
			b.Append(data, uint32(wire), ts)
			continue
		}
		if ring != nil { // refer to the record where read(2) put it
			ring.ref[ring.cur] = true // Next's data lies in the chunk it is in
			var off uint64
			if len(data) > 0 {
				off = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))) - base)
			}
			b.AppendRef(off, min(uint32(len(data)), s.snaplen), uint32(wire), ts)
			continue
		}
		if slab {
			n := copy(s.slab[s.slabPos:], data[:min(uint32(len(data)), s.snaplen, MaxRecordLen)])
			b.AppendRef(uint64(s.slabPos), uint32(n), uint32(wire), ts)
			s.slabPos += (n + 7) &^ 7
			continue
		}
		s.handoff = false // the Reader took the record: the index may go on
		var off uint64
		if len(data) > 0 {
			off = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))) - base)
		}
		b.AppendRef(off, min(uint32(len(data)), s.snaplen), uint32(wire), ts)
	}
	s.done.Store(s.r.offset())
	if !s.ixOn {
		s.ahead.advance(s.r.offset()) // with an index running, the index leads it
	}
	if b.N == n0 {
		return s.err
	}
	return nil
}

// fillInPlace appends to b the classic records that lie whole in the
// ring's current chunk, where they lie: most records, taken without Next's
// checks for what only a chunk's end or an odd file needs (an error, bytes
// to read, lengths to swap, pseudo-headers to rewrite). It stops before
// any other record, which Next then reads.
func (s *Source) fillInPlace(b *buffers.Batch) {
	r := s.r
	if r.err != nil || r.format != Classic || r.lengths != 0 || r.post {
		return
	}
	buf, p, w := r.buf, r.r, r.w
	snap := min(r.snapshot, s.snaplen)
	n0 := b.N
	for b.Room() > 0 && w-p >= classicRecHdr {
		h := buf[p : p+classicRecHdr]
		sec, frac, incl, orig := r.classicHeader(h)
		if incl > r.maxCap || w-p-classicRecHdr < int(incl) {
			break
		}
		ts := int64(sec) * 1e9
		if r.nanos {
			ts += int64(frac)
		} else {
			ts += int64(frac) * 1e3
		}
		b.AppendRef(uint64(p+classicRecHdr), min(incl, snap), orig, ts)
		p += classicRecHdr + int(incl)
	}
	if b.N > n0 {
		r.r = p
		r.records += int64(b.N - n0)
		r.ring.ref[r.ring.cur] = true
	}
}

// shrunk is the error of a mapped file cut while being read.
func (s *Source) shrunk() error {
	return fmt.Errorf("%s shrank while being read (after record %d, byte offset %d)", s.r.Name(), s.r.Records(), s.r.Offset())
}

// FaultError is the error of a run whose functions faulted reading this
// source's packets: the mapped file was cut while its records were being
// processed.
func (s *Source) FaultError() error {
	if s.mapped {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return s.shrunk()
}

// stopIndex halts the indexer and takes its windows back, undelivered.
func (s *Source) stopIndex() {
	s.ix.halt()
	for len(s.ix.full) > 0 {
		s.ix.free <- <-s.ix.full
	}
	if w := s.cur; w != nil {
		if w.next > 0 { // the Reader goes on after the last record delivered
			last := w.recs[w.next-1]
			s.r.skipIndexed(int(last.off)+int(last.stored), w.next)
		}
		s.ix.free <- w
		s.cur = nil
	}
	s.ixOn = false
}

// Interrupt makes a Fill blocked on a pipe return, and later ones return
// io.EOF. A mapped file is left mapped (batches may still refer to it):
// Close unmaps it.
func (s *Source) Interrupt() {
	if s.mapped {
		s.closed.Store(true) // a mapped Fill never blocks: it sees the flag
		return
	}
	s.Close() // closing the file is what makes a blocked read return
}

// Progress reports the bytes consumed and the file size (0 if unknown).
func (s *Source) Progress() (done, total int64) { return s.done.Load(), s.r.size }

// Close closes the file; a Fill running concurrently returns promptly and
// the next one returns io.EOF.
//
// A mapped file is unmapped: the flowspace closes a source only once no
// batch of it is being processed.
func (s *Source) Close() error {
	if s.closed.Swap(true) && !s.mapped {
		return nil
	}
	if s.mapped {
		s.mu.Lock() // a read from a pipe may block; a mapped Fill does not
		defer s.mu.Unlock()
		s.ahead.close()
		if s.ixOn {
			s.stopIndex() // before the mapping goes
		}
	}
	return s.r.Close()
}

var (
	_ functions.Source      = (*Source)(nil)
	_ functions.Progresser  = (*Source)(nil)
	_ functions.PBufOwner   = (*Source)(nil)
	_ functions.Interrupter = (*Source)(nil)
	_ functions.Sharer      = (*Source)(nil)
)
