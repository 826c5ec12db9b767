package export

import (
	"encoding/binary"
	"io"
	"strings"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// IsPcapng reports whether a file name asks for pcapng: it ends in
// ".pcapng" (in any case).
func IsPcapng(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".pcapng") }

// pcapng block types and option codes (draft-ietf-opsawg-pcapng).
const (
	ngSHB       = 0x0a0d0d0a
	ngIDB       = 0x00000001
	ngEPB       = 0x00000006
	ngByteOrder = 0x1a2b3c4d
	ngOptEnd    = 0
	ngOptUserAp = 4 // shb_userappl
	ngOptTSRes  = 9 // if_tsresol
	epbHdr      = 28
	epbTrailer  = 4
)

// NgExporter writes packets to a pcapng file: one section, one interface
// of the packets' link type, nanosecond timestamps (if_tsresol 9), one
// Enhanced Packet Block per packet. It is the Exporter's twin and shares
// its rules: a batch is written with one write call, and a failed write is
// charged exactly to the packets it carried.
//
// It writes the blocks itself rather than through gopacket's NgWriter,
// whose interface link type is a uint8 (no LINUX_SLL2, 276) and whose
// buffered writes would hide which packets a failed write lost.
type NgExporter struct {
	file
}

// CreateNg creates (or truncates) the file at path ("-": standard output)
// and writes the pcapng section header and interface description.
func CreateNg(path string, link functions.LinkType, snaplen int) (*NgExporter, error) {
	return CreateNgWith(path, link, snaplen, Options{})
}

// CreateNgWith is CreateNg writing as o says.
func CreateNgWith(path string, link functions.LinkType, snaplen int, o Options) (*NgExporter, error) {
	f, name, err := open(path, o)
	if err != nil {
		return nil, err
	}
	e := newNg(f, name, snaplen)
	e.attach(f, o)
	if err := e.writeHeader(link); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// NewNg writes a pcapng file to w; name is used in messages.
func NewNg(w io.Writer, name string, link functions.LinkType, snaplen int) (*NgExporter, error) {
	e := newNg(w, name, snaplen)
	if err := e.writeHeader(link); err != nil {
		return nil, err
	}
	return e, nil
}

func newNg(w io.Writer, name string, snaplen int) *NgExporter {
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	return &NgExporter{file{name: name, w: w, snaplen: snaplen,
		buf: make([]byte, max(bufSize, epbHdr+snaplen+3+epbTrailer))}}
}

func (e *NgExporter) writeHeader(link functions.LinkType) error {
	le := binary.LittleEndian
	h := e.buf[:0]
	// Section Header Block, with shb_userappl "ffpf".
	h = le.AppendUint32(h, ngSHB)
	h = le.AppendUint32(h, 40)
	h = le.AppendUint32(h, ngByteOrder)
	h = le.AppendUint16(h, 1) // major
	h = le.AppendUint16(h, 0) // minor
	h = le.AppendUint64(h, ^uint64(0))
	h = le.AppendUint16(h, ngOptUserAp)
	h = le.AppendUint16(h, 4)
	h = append(h, "ffpf"...)
	h = le.AppendUint32(h, ngOptEnd)
	h = le.AppendUint32(h, 40)
	// Interface Description Block, with if_tsresol 9 (nanoseconds).
	h = le.AppendUint32(h, ngIDB)
	h = le.AppendUint32(h, 32)
	h = le.AppendUint16(h, uint16(link))
	h = le.AppendUint16(h, 0)
	h = le.AppendUint32(h, uint32(e.snaplen))
	h = le.AppendUint16(h, ngOptTSRes)
	h = le.AppendUint16(h, 1)
	h = append(h, 9, 0, 0, 0)
	h = le.AppendUint32(h, ngOptEnd)
	h = le.AppendUint32(h, 32)
	return e.header(h)
}

// Process appends an Enhanced Packet Block per packet and passes the
// packets on, as Exporter.Process does.
func (e *NgExporter) Process(b *buffers.Batch) {
	if e.stopped {
		e.drop(b)
		return
	}
	le := binary.LittleEndian
	p := b.PBuf
	n, start := 0, 0
	for i := 0; i < b.N; i++ {
		slot := b.E[i].Slot
		data := p.Data(slot)
		if len(data) > e.snaplen {
			data = data[:e.snaplen]
		}
		pad := (4 - len(data)&3) & 3
		size := epbHdr + len(data) + pad + epbTrailer
		if n+size > len(e.buf) {
			if !e.flush(b, start, i, n) {
				return
			}
			n, start = 0, i
		}
		m := p.Meta(slot)
		ts := uint64(max(m.Timestamp, 0)) // pcapng time is unsigned
		h := e.buf[n : n+epbHdr]
		le.PutUint32(h[0:], ngEPB)
		le.PutUint32(h[4:], uint32(size))
		le.PutUint32(h[8:], 0) // interface 0
		le.PutUint32(h[12:], uint32(ts>>32))
		le.PutUint32(h[16:], uint32(ts))
		le.PutUint32(h[20:], uint32(len(data)))
		le.PutUint32(h[24:], max(m.WireLen, uint32(len(data))))
		k := n + epbHdr + copy(e.buf[n+epbHdr:], data)
		clear(e.buf[k : k+pad])
		le.PutUint32(e.buf[k+pad:], uint32(size))
		n += size
		e.ends[i] = n
	}
	e.flush(b, start, b.N, n)
}

var (
	_ functions.Function = (*NgExporter)(nil)
	_ functions.Closer   = (*NgExporter)(nil)
)
