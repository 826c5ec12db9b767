package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"

	"github.com/ffpf-go/ffpf/functions"
)

const (
	// MaxRecordLen is the longest record accepted for most link types:
	// libpcap's MAXIMUM_SNAPLEN (max_snaplen_for_dlt allows more for three:
	// maxSnaplenFor). A longer captured length means a corrupt file.
	MaxRecordLen = 262144
	// SlotLimit caps Reader.Snaplen, the slot size suggested to a program
	// that copies records into slots of its own PBuf: a snaplen of 262144
	// would make every slot 256 KB. Longer records are truncated by the
	// slot, as a snap length would, and keep their wire length.
	SlotLimit = 65535

	bufSize   = 256 << 10 // read buffer: stays in L2 between read(2) and the copy out of it
	maxEnsure = 1 << 20   // the longest block held whole in the buffer
)

// Format is the kind of capture file.
type Format uint8

const (
	Classic Format = iota + 1 // libpcap's pcap, any of its four magics
	NG                        // pcapng
)

func (f Format) String() string {
	if f == NG {
		return "pcapng"
	}
	return "pcap"
}

// classic magics as read little-endian
const (
	magicMicros    = 0xa1b2c3d4
	magicNanos     = 0xa1b23c4d
	magicMicrosBE  = 0xd4c3b2a1
	magicNanosBE   = 0x4d3cb2a1
	magicNG        = 0x0a0d0d0a
	ngByteOrder    = 0x1a2b3c4d
	ngBlockIDB     = 1
	ngBlockPB      = 2 // obsolete packet block
	ngBlockSPB     = 3
	ngBlockEPB     = 6
	ngOptEnd       = 0
	ngOptTsResol   = 9
	ngOptTsOffset  = 14
	ngMaxIfaces    = 1 << 16
	gzipMagic      = 0x8b1f
	classicHdrLen  = 24
	classicRecHdr  = 16
	ngMinBlock     = 12
	ngEPBHeaderLen = 28
)

// Reader reads the records of a pcap or pcapng file. It keeps one read
// buffer, allocated by Open: the data Next returns points into it and is
// valid until the next call.
type Reader struct {
	name   string
	rd     io.Reader
	closer io.Closer
	size   int64

	buf    []byte
	mapped []byte // the whole file, when it is mapped (then buf is mapped)
	ring   *ring  // reads the file into chunks a source refers to (then buf is its slab)
	r, w   int    // unread bytes are buf[r:w]
	base   int64  // file offset of buf[0]
	eof    bool   // rd returned io.EOF
	rerr   error  // rd failed otherwise

	format   Format
	big      bool // byte order of the file (pcapng: of the current section)
	nanos    bool
	linkType functions.LinkType
	// linkField is the link type as the header stores it (classic pcap:
	// with the FCS length above the low 16 bits).
	linkField uint32
	swapped   bool // the file (pcapng: its first section) is not in this host's byte order
	snaplen   int
	// headerSnaplen is the snap length the header declares (pcapng: the
	// first interface's), as written.
	headerSnaplen uint32
	// snapshot is libpcap's snapshot: headerSnaplen, or the link type's
	// maximum when that is 0 or above INT_MAX. A longer record is cut to
	// it (classic) or is an error (pcapng), as libpcap does.
	snapshot uint32
	maxCap   uint32 // longest record the link type allows (max_snaplen_for_dlt)
	lengths  uint8  // classic pcap before 2.4: captured and wire length may be swapped
	post     bool   // records' pseudo-headers are converted from the other byte order
	records  int64
	skip     int64 // pcapng: bytes left of the block of the last record
	ifaces   []ngIface
	haveLink bool // an interface has set linkType
	sections int
	err      error // sticky
}

type ngIface struct {
	linkType functions.LinkType
	snaplen  uint32
	// timestamp units: 10^-exp (dec) or 2^-exp seconds
	exp    uint8
	binary bool
	offset int64 // seconds
}

// Access is how a regular file is read.
type Access uint8

const (
	// AccessDefault is AccessRing, unless the environment's
	// FFPF_PCAP_READ says "read" or "mmap" (FFPF_NO_MMAP, set, forces
	// AccessRead).
	AccessDefault Access = iota
	// AccessRead reads the file with read(2) into a large buffer; a
	// source copies each record once into a slab of its own.
	AccessRead
	// AccessMap maps the file into memory; a source refers to each record
	// where it lies (zero-copy).
	AccessMap
	// AccessRing reads the file with read(2) into a ring of chunks, and a
	// source refers to each record where read(2) put it (copied once). A
	// file no larger than the first buffer, or with records longer than
	// MaxRecordLen, is read as with AccessRead.
	AccessRing
)

// DefaultAccess is what AccessDefault stands for in this process. The
// ring is the default because it measured fastest: on the 2-core EPYC VMs
// ffpf is developed on, loading mapped page-cache pages costs about four
// times what read(2) costs for the same bytes, and the ring copies each
// byte once where the read path copies it twice (see the README's "File
// replay").
func DefaultAccess() Access {
	if os.Getenv("FFPF_NO_MMAP") != "" {
		return AccessRead
	}
	switch os.Getenv("FFPF_PCAP_READ") {
	case "mmap", "map", "mapped":
		return AccessMap
	case "read":
		return AccessRead
	}
	return AccessRing
}

func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessMap:
		return "mmap"
	case AccessRing:
		return "ring"
	}
	return "default"
}

// Open opens a capture file ("-" is standard input) and reads its header (and, for pcapng, the
// blocks before the first packet) so that its link type is known. A
// regular file is read the way DefaultAccess says.
func Open(path string) (*Reader, error) { return OpenAccess(path, AccessDefault) }

// OpenAccess is Open with the access to a regular file chosen by the
// caller. A file that cannot be mapped (a pipe, an empty file) or whose
// records are rewritten while read (pseudo-headers of the other byte
// order) is read with read(2) whatever a says.
func OpenAccess(path string, a Access) (*Reader, error) {
	if a == AccessDefault {
		a = DefaultAccess()
	}
	if path == "-" {
		return NewReader(os.Stdin, "stdin", 0)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, functions.PathReason(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot read %s: %w", path, functions.PathReason(err))
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("cannot read %s: is a directory", path)
	}
	var size int64
	if st.Mode().IsRegular() {
		size = st.Size()
	}
	if a == AccessMap {
		if mem, err := mapFile(f, size); err == nil {
			r, err := newReader(nil, path, size, mem)
			if err == nil && !r.post {
				r.closer = f // kept open to see whether the file shrinks (Clamp)
				return r, nil
			}
			unmap(mem)
			if err != nil {
				f.Close()
				return nil, err
			}
			// The records must be rewritten: read them into a buffer.
		}
	}
	r, err := NewReader(f, path, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	if a == AccessRing && r.useRing() {
		r.startRing()
	}
	return r, nil
}

// NewReader reads a capture from rd; name is used in messages and size
// (0 if unknown) for progress.
func NewReader(rd io.Reader, name string, size int64) (*Reader, error) {
	return newReader(rd, name, size, nil)
}

// newReader reads from rd, or, when mem is not nil, from a whole file
// mapped into memory (then the data Next returns stays valid until Close).
func newReader(rd io.Reader, name string, size int64, mem []byte) (*Reader, error) {
	r := &Reader{name: name, rd: rd, size: size, ifaces: make([]ngIface, 0, 8)}
	if mem != nil {
		r.buf, r.w, r.eof, r.mapped = mem, len(mem), true, mem
	} else {
		n := bufSize
		if size > 0 && size < bufSize {
			n = max(int(size), 4096) // a small file needs no large buffer
		}
		r.buf = make([]byte, n)
	}
	if err := r.ensure(4); err != nil || r.w-r.r < 4 {
		if r.rerr != nil {
			return nil, fmt.Errorf("cannot read %s: %w", name, functions.PathReason(r.rerr))
		}
		if r.w == 0 {
			return nil, fmt.Errorf("%s is empty, not a pcap or pcapng file", name)
		}
		return nil, fmt.Errorf("%s is not a pcap or pcapng file (only %d bytes long)", name, r.w)
	}
	magic := binary.LittleEndian.Uint32(r.buf)
	switch magic {
	case magicMicros, magicNanos, magicMicrosBE, magicNanosBE:
		return r, r.openClassic(magic)
	case magicNG:
		return r, r.openNG()
	}
	if uint16(magic) == gzipMagic {
		return nil, fmt.Errorf("%s is gzip-compressed: decompress it first (pcap and pcapng files are read uncompressed)", name)
	}
	return nil, fmt.Errorf("%s is not a pcap or pcapng file (it starts with %#08x)", name, binary.BigEndian.Uint32(r.buf))
}

func (r *Reader) openClassic(magic uint32) error {
	r.format = Classic
	r.big = magic == magicMicrosBE || magic == magicNanosBE
	r.nanos = magic == magicNanos || magic == magicNanosBE
	if err := r.ensure(classicHdrLen); err != nil {
		return r.headerErr(err)
	}
	h := r.buf[r.r:]
	if v := r.u16(h[4:]); v != 2 {
		return fmt.Errorf("%s: unsupported pcap format version %d.%d (want 2.x)", r.name, v, r.u16(h[6:]))
	}
	// Versions before 2.3 wrote the captured and wire lengths the other
	// way round; 2.3 sometimes (sf-pcap.c: lengths_swapped).
	switch minor := r.u16(h[6:]); {
	case minor < 3:
		r.lengths = lengthsSwapped
	case minor == 3:
		r.lengths = lengthsMaybeSwapped
	}
	snap := r.u32(h[16:])
	r.linkField = r.u32(h[20:])
	lt := r.linkField & 0xffff // above: the FCS length (pcap-savefile(5))
	r.linkType = functions.LinkType(lt)
	r.setSnapshot(lt, snap)
	r.swapped = r.big != hostBig
	r.post = r.swapped && swapsPseudoHeader(lt)
	r.r += classicHdrLen
	return nil
}

const (
	lengthsSwapped      = 1
	lengthsMaybeSwapped = 2
)

// setSnapshot takes the snap length snap of a file of link type lt.
func (r *Reader) setSnapshot(lt, snap uint32) {
	r.headerSnaplen = snap
	r.snapshot = AdjustSnapshot(lt, snap)
	r.maxCap = maxSnaplenFor(lt)
	r.snaplen = slotFor(r.snapshot)
}

func slotFor(snaplen uint32) int {
	if snaplen == 0 || snaplen > SlotLimit {
		return SlotLimit
	}
	return int(snaplen)
}

func (r *Reader) headerErr(err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return fmt.Errorf("%s: truncated file header: unexpected end of file", r.name)
	}
	return err
}

// openNG reads the section header and the blocks before the first packet,
// to learn the link type and snap length.
func (r *Reader) openNG() error {
	r.format = NG
	r.linkType = functions.LinkEthernet // for a capture without interfaces
	for {
		off := r.offset()
		err := r.ensure(8)
		if err == io.EOF && r.sections > 0 {
			break // no packets
		}
		if err != nil {
			return r.headerErr(err)
		}
		typ := r.u32(r.buf[r.r:])
		if typ == ngBlockEPB || typ == ngBlockSPB || typ == ngBlockPB {
			if len(r.ifaces) == 0 {
				return fmt.Errorf("%s: packet block at byte offset %d before any interface description block: the file is corrupt", r.name, off)
			}
			break
		}
		if err := r.ngBlock(); err != nil {
			if err == io.EOF {
				break
			}
			return err
		}
	}
	if !r.haveLink { // no interface: nothing will be read
		r.setSnapshot(uint32(r.linkType), 0)
	}
	return nil
}

// Name returns the file name given to Open.
func (r *Reader) Name() string { return r.name }

// Format returns the file's format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the link type of every record.
func (r *Reader) LinkType() functions.LinkType { return r.linkType }

// Snaplen returns the longest record the file announces, capped at
// SlotLimit.
func (r *Reader) Snaplen() int { return r.snaplen }

// HeaderSnaplen returns the snap length as the file header (pcapng: its
// first interface) states it, 0 included.
func (r *Reader) HeaderSnaplen() uint32 { return r.headerSnaplen }

// Snapshot returns libpcap's snapshot for the file: the longest record
// delivered (a longer one is cut to it).
func (r *Reader) Snapshot() uint32 { return r.snapshot }

// LinkTypeField returns the link type as the file stores it: for classic
// pcap the header's whole field, with the FCS length in its upper bits;
// for pcapng the first interface's link type.
func (r *Reader) LinkTypeField() uint32 { return r.linkField }

// Swapped reports whether the file (pcapng: its first section) was
// written in the other byte order than this machine's.
func (r *Reader) Swapped() bool { return r.swapped }

// Capture describes the file as functions.Context.Captures does.
func (r *Reader) Capture() functions.Capture {
	return functions.Capture{File: true, LinkTypeField: r.linkField, Swapped: r.swapped, Snaplen: r.headerSnaplen}
}

// Size returns the file size, or 0 when it is not a regular file.
func (r *Reader) Size() int64 { return r.size }

// Offset returns how many bytes of the file have been consumed.
func (r *Reader) Offset() int64 { return r.offset() }

// Records returns how many records Next has returned.
func (r *Reader) Records() int64 { return r.records }

// Close closes the file.
func (r *Reader) Close() error {
	if r.mapped != nil {
		m := r.mapped
		r.mapped, r.buf, r.r, r.w = nil, nil, 0, 0
		r.err = io.EOF
		err := unmap(m)
		if r.closer != nil {
			r.closer.Close()
			r.closer = nil
		}
		return err
	}
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// skipIndexed moves a mapped reader past records an index took, to the
// record boundary to.
func (r *Reader) skipIndexed(to, records int) {
	r.r = to
	r.records += int64(records)
}

// Clamp makes a mapped reader end where the file ends now, if another
// program cut it since it was mapped (reading past the new end would
// fault): the records before the cut are still read, and the cut is then
// reported as a truncated file. It reports whether the file had shrunk.
func (r *Reader) Clamp() bool {
	f, ok := r.closer.(*os.File)
	if r.mapped == nil || !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Size() >= int64(r.w) {
		return false
	}
	r.w = max(r.r, int(st.Size()))
	return true
}

// Mapped returns the whole file when it is mapped into memory: the data
// Next returns points into it, so a source can refer to packets there
// instead of copying them.
func (r *Reader) Mapped() []byte { return r.mapped }

func (r *Reader) offset() int64 { return r.base + int64(r.r) }

func (r *Reader) u16(b []byte) uint16 {
	if r.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *Reader) u32(b []byte) uint32 {
	if r.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// ensure makes at least n (≤ maxEnsure + a packet block header) bytes
// readable at buf[r:]. It returns io.EOF if the file ends exactly at r, and
// io.ErrUnexpectedEOF if it ends before r+n.
func (r *Reader) ensure(n int) error {
	if r.w-r.r >= n {
		return nil
	}
	if r.mapped == nil { // a mapped file is all in buf, and buf is read-only
		r.fill(n)
		if r.w-r.r >= n {
			return nil
		}
	}
	if r.rerr != nil {
		return fmt.Errorf("cannot read %s: %w", r.name, functions.PathReason(r.rerr))
	}
	if r.w == r.r {
		return io.EOF
	}
	return io.ErrUnexpectedEOF
}

// fill moves the unread bytes to the front of buf and reads until n are
// there or the input ends.
func (r *Reader) fill(n int) {
	if r.ring != nil {
		r.fillRing(n)
		return
	}
	if n > len(r.buf) {
		// only for a file smaller than the buffer Open would allocate
		// that has grown since, or a block as large as the file
		nb := make([]byte, max(n, min(2*len(r.buf), bufSize)))
		r.w = copy(nb, r.buf[r.r:r.w])
		r.base += int64(r.r)
		r.r = 0
		r.buf = nb
	}
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.base += int64(r.r)
		r.w -= r.r
		r.r = 0
	}
	for empty := 0; r.w < n; {
		if r.eof || r.rerr != nil {
			break
		}
		m, err := r.rd.Read(r.buf[r.w:])
		r.w += m
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.rerr = err
		} else if m == 0 {
			if empty++; empty == 100 {
				r.rerr = io.ErrNoProgress
			}
		}
	}
}

// discard skips n bytes, reading through the buffer.
func (r *Reader) discard(n int64) error {
	for n > 0 {
		if r.w == r.r {
			if err := r.ensure(1); err != nil {
				if err == io.EOF {
					return io.ErrUnexpectedEOF
				}
				return err
			}
		}
		k := min(int64(r.w-r.r), n)
		r.r += int(k)
		n -= k
	}
	return nil
}

// Next returns the next record: its captured bytes (valid until the next
// call to Next), wire length and timestamp in nanoseconds since the Unix
// epoch. It returns io.EOF at the end of the file, and a descriptive error
// (naming the file, the record and its byte offset) for a truncated or
// corrupt file; after an error it returns that error again.
func (r *Reader) Next() (data []byte, wireLen int, ts int64, err error) {
	if r.err != nil {
		return nil, 0, 0, r.err
	}
	if r.format == Classic {
		data, wireLen, ts, err = r.nextClassic()
	} else {
		data, wireLen, ts, err = r.nextNG()
	}
	if err != nil {
		r.err = err
		return nil, 0, 0, err
	}
	r.records++
	return data, wireLen, ts, nil
}

// classicHeader decodes a classic record header h in the file's byte order:
// seconds, fraction, captured and wire length as written.
func (r *Reader) classicHeader(h []byte) (sec, frac, incl, orig uint32) {
	if r.big {
		return binary.BigEndian.Uint32(h), binary.BigEndian.Uint32(h[4:]),
			binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])
	}
	return binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint32(h[4:]),
		binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
}

func (r *Reader) nextClassic() ([]byte, int, int64, error) {
	off := r.offset()
	if err := r.ensure(classicRecHdr); err != nil {
		return nil, 0, 0, r.recordErr(err, off)
	}
	h := r.buf[r.r : r.r+classicRecHdr]
	sec, frac, incl, orig := r.classicHeader(h)
	if r.lengths == lengthsSwapped || (r.lengths == lengthsMaybeSwapped && incl > orig) {
		incl, orig = orig, incl
	}
	if incl > r.maxCap {
		return nil, 0, 0, r.tooLong(incl, off)
	}
	n := classicRecHdr + int(incl)
	if err := r.ensure(n); err != nil {
		return nil, 0, 0, r.recordErr(err, off)
	}
	// A record longer than the snapshot is cut to it, keeping its wire
	// length, as libpcap does before anything sees it.
	end := r.r + classicRecHdr + int(min(incl, r.snapshot))
	data := r.buf[r.r+classicRecHdr : end : end]
	r.r += n
	ts := int64(sec) * 1e9
	if r.nanos {
		ts += int64(frac)
	} else {
		ts += int64(frac) * 1e3
	}
	if r.post {
		swapPseudoHeader(uint32(r.linkType), data, orig)
	}
	return data, int(orig), ts, nil
}

func (r *Reader) recordErr(err error, off int64) error {
	switch err {
	case io.EOF:
		return io.EOF
	case io.ErrUnexpectedEOF:
		return fmt.Errorf("%s: truncated at record %d (byte offset %d): unexpected end of file", r.name, r.records+1, off)
	}
	return err
}

func (r *Reader) tooLong(incl uint32, off int64) error {
	return fmt.Errorf("%s: record %d (byte offset %d) claims %d captured bytes, more than the %d a record may hold: the file is corrupt",
		r.name, r.records+1, off, incl, r.maxCap)
}

func (r *Reader) corrupt(off int64, format string, args ...any) error {
	return fmt.Errorf("%s: corrupt block at byte offset %d (before record %d): %s", r.name, off, r.records+1, fmt.Sprintf(format, args...))
}

func (r *Reader) nextNG() ([]byte, int, int64, error) {
	if r.skip > 0 {
		if err := r.discard(r.skip); err != nil {
			return nil, 0, 0, r.recordErr(err, r.offset())
		}
		r.skip = 0
	}
	for {
		off := r.offset()
		if err := r.ensure(8); err != nil {
			return nil, 0, 0, r.recordErr(err, off)
		}
		typ := r.u32(r.buf[r.r:])
		switch typ {
		case ngBlockEPB, ngBlockPB, ngBlockSPB:
			return r.ngPacket(typ, off)
		}
		if err := r.ngBlock(); err != nil {
			return nil, 0, 0, err
		}
	}
}

// ngPacket reads a packet block at off.
func (r *Reader) ngPacket(typ uint32, off int64) ([]byte, int, int64, error) {
	blen := r.u32(r.buf[r.r+4:])
	hdr := ngEPBHeaderLen
	if typ == ngBlockSPB {
		hdr = 12
	}
	if blen < uint32(hdr)+4 || blen%4 != 0 {
		return nil, 0, 0, r.corrupt(off, "block length %d", blen)
	}
	if err := r.ensure(hdr); err != nil {
		return nil, 0, 0, r.recordErr(err, off)
	}
	b := r.buf[r.r : r.r+hdr]
	var ifc int
	var incl, orig uint32
	var tsRaw uint64
	switch typ {
	case ngBlockEPB:
		ifc = int(r.u32(b[8:]))
		tsRaw = uint64(r.u32(b[12:]))<<32 | uint64(r.u32(b[16:]))
		incl, orig = r.u32(b[20:]), r.u32(b[24:])
	case ngBlockPB:
		ifc = int(r.u16(b[8:]))
		tsRaw = uint64(r.u32(b[12:]))<<32 | uint64(r.u32(b[16:]))
		incl, orig = r.u32(b[20:]), r.u32(b[24:])
	default: // simple packet block: interface 0, no timestamp
		// libpcap: the captured length is the wire length cut to the
		// snapshot; a block too short for it is corrupt.
		orig = r.u32(b[8:])
		incl = min(orig, r.snapshot)
	}
	if ifc >= len(r.ifaces) {
		return nil, 0, 0, r.corrupt(off, "record %d refers to interface %d, but the section declares %d", r.records+1, ifc, len(r.ifaces))
	}
	if incl > r.snapshot {
		return nil, 0, 0, r.corrupt(off, "record %d has %d captured bytes, more than the snap length %d (libpcap: invalid packet capture length)", r.records+1, incl, r.snapshot)
	}
	if incl > r.maxCap {
		return nil, 0, 0, r.tooLong(incl, off)
	}
	padded := (incl + 3) &^ 3
	if uint32(hdr)+padded+4 > blen {
		return nil, 0, 0, r.corrupt(off, "a block of %d bytes cannot hold %d captured bytes", blen, incl)
	}
	whole := blen <= maxEnsure
	need := hdr + int(incl)
	if whole {
		need = int(blen)
	}
	if err := r.ensure(need); err != nil {
		return nil, 0, 0, r.recordErr(err, off)
	}
	if whole {
		if t := r.u32(r.buf[r.r+int(blen)-4:]); t != blen {
			return nil, 0, 0, r.corrupt(off, "block length %d at the start, %d at the end", blen, t)
		}
	}
	data := r.buf[r.r+hdr : r.r+hdr+int(incl) : r.r+hdr+int(incl)]
	if whole {
		r.r += int(blen)
	} else {
		r.r += need
		r.skip = int64(blen) - int64(need)
	}
	var ts int64
	if typ != ngBlockSPB {
		ts = r.ifaces[ifc].nanos(tsRaw)
	}
	if r.post && r.big != hostBig {
		swapPseudoHeader(uint32(r.linkType), data, orig)
	}
	return data, int(orig), ts, nil
}

// nanos converts a timestamp in the interface's units to nanoseconds since
// the epoch.
func (i *ngIface) nanos(t uint64) int64 {
	off := i.offset * 1e9
	if i.binary {
		if i.exp == 0 {
			return int64(t)*1e9 + off
		}
		if i.exp >= 64 {
			return off
		}
		secs := t >> i.exp
		frac := t & (1<<i.exp - 1)
		hi, lo := bits.Mul64(frac, 1e9)
		return int64(secs)*1e9 + int64(hi<<(64-i.exp)|lo>>i.exp) + off
	}
	switch {
	case i.exp == 9:
		return int64(t) + off
	case i.exp < 9:
		return int64(t)*pow10[9-i.exp] + off
	case i.exp <= 19:
		return int64(t/uint64(pow10[i.exp-9])) + off
	}
	return off
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// ngBlock reads one non-packet block: a section header, an interface
// description, or anything else (skipped).
func (r *Reader) ngBlock() error {
	off := r.offset()
	if err := r.ensure(8); err != nil {
		return r.recordErr(err, off)
	}
	typ := r.u32(r.buf[r.r:])
	if typ == magicNG {
		if err := r.ensure(ngMinBlock); err != nil {
			return r.recordErr(err, off)
		}
		switch binary.LittleEndian.Uint32(r.buf[r.r+8:]) {
		case ngByteOrder:
			r.big = false
		case 0x4d3c2b1a:
			r.big = true
		default:
			if r.sections == 0 {
				return fmt.Errorf("%s is not a pcapng file (bad byte-order magic)", r.name)
			}
			return r.corrupt(off, "section header with a bad byte-order magic")
		}
	}
	blen := r.u32(r.buf[r.r+4:])
	if blen < ngMinBlock || blen%4 != 0 {
		return r.corrupt(off, "block length %d", blen)
	}
	switch typ {
	case magicNG, ngBlockIDB:
		if blen > maxEnsure {
			return r.corrupt(off, "a %d-byte header block", blen)
		}
		if err := r.ensure(int(blen)); err != nil {
			return r.recordErr(err, off)
		}
		b := r.buf[r.r : r.r+int(blen)]
		if t := r.u32(b[blen-4:]); t != blen {
			return r.corrupt(off, "block length %d at the start, %d at the end", blen, t)
		}
		var err error
		if typ == magicNG {
			err = r.ngSection(b, off)
		} else {
			err = r.ngInterface(b, off)
		}
		if err != nil {
			return err
		}
		r.r += int(blen)
		return nil
	}
	return r.discardBlock(blen, off)
}

func (r *Reader) discardBlock(blen uint32, off int64) error {
	if err := r.discard(int64(blen)); err != nil {
		return r.recordErr(err, off)
	}
	return nil
}

func (r *Reader) ngSection(b []byte, off int64) error {
	if len(b) < 28 {
		return r.corrupt(off, "section header of %d bytes", len(b))
	}
	if v := r.u16(b[12:]); v != 1 {
		return fmt.Errorf("%s: unsupported pcapng version %d.%d in the section at byte offset %d", r.name, v, r.u16(b[14:]), off)
	}
	r.sections++
	r.ifaces = r.ifaces[:0]
	return nil
}

func (r *Reader) ngInterface(b []byte, off int64) error {
	if len(b) < 20 {
		return r.corrupt(off, "interface description of %d bytes", len(b))
	}
	if len(r.ifaces) >= ngMaxIfaces {
		return r.corrupt(off, "more than %d interfaces", ngMaxIfaces)
	}
	ifc := ngIface{linkType: functions.LinkType(r.u16(b[8:])), snaplen: r.u32(b[12:]), exp: 6}
	opts := b[16 : len(b)-4]
	for len(opts) >= 4 {
		code, n := r.u16(opts), int(r.u16(opts[2:]))
		if code == ngOptEnd {
			break
		}
		if 4+n > len(opts) {
			return r.corrupt(off, "interface option %d runs past its block", code)
		}
		v := opts[4 : 4+n]
		switch {
		case code == ngOptTsResol && n >= 1:
			ifc.binary = v[0]&0x80 != 0
			ifc.exp = v[0] & 0x7f
		case code == ngOptTsOffset && n >= 8:
			if r.big {
				ifc.offset = int64(binary.BigEndian.Uint64(v))
			} else {
				ifc.offset = int64(binary.LittleEndian.Uint64(v))
			}
		}
		opts = opts[min(len(opts), 4+(n+3)&^3):]
	}
	// All interfaces must share one link type and one snap length: the
	// first one's (libpcap refuses the file otherwise, too).
	if !r.haveLink {
		r.linkType, r.haveLink = ifc.linkType, true
		r.linkField = uint32(ifc.linkType)
		r.swapped = r.big != hostBig
		r.post = swapsPseudoHeader(uint32(ifc.linkType)) // whether a section is swapped is known per section
		r.setSnapshot(uint32(ifc.linkType), ifc.snaplen)
	} else if ifc.linkType != r.linkType {
		return fmt.Errorf("%s: interface %d (byte offset %d, before record %d) has link type %v but the file began with %v; a pcap source carries one link type (split the file with editcap or tshark)",
			r.name, len(r.ifaces), off, r.records+1, ifc.linkType, r.linkType)
	} else if AdjustSnapshot(uint32(ifc.linkType), ifc.snaplen) != r.snapshot {
		return fmt.Errorf("%s: interface %d (byte offset %d, before record %d) has snap length %d but the first interface %d; libpcap refuses such a file (split it with editcap or tshark)",
			r.name, len(r.ifaces), off, r.records+1, ifc.snaplen, r.headerSnaplen)
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}
