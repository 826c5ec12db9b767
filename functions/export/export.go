package export

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/pcap"
)

func init() { functions.Register(NewClass(Options{})) }

// NewClass returns the export class writing as o says; init registers it
// with the zero Options. A program registers its own in a registry of its
// own (the CLI does, to stop a run whose pipe reader has gone).
func NewClass(o Options) *functions.Class {
	return &functions.Class{
		Name:      "export",
		Summary:   "write every packet or record that reaches it to a file (pcap, pcapng, JSON lines) and pass it on",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "file", Type: functions.String, File: functions.FileWrite,
				Summary: `the file to write (created or truncated); "-" is standard output (one of file, to)`},
			{Name: "format", Type: functions.String, Enum: []string{"pcap", "pcapng", "jsonl"},
				Summary: "pcap, pcapng (the default for a name ending in .pcapng), or jsonl: records as JSON lines"},
			{Name: "to", Type: functions.String,
				Summary: "send each packet instead, its captured bytes as one UDP datagram, to a collector at HOST:PORT (IPv4; one of file, to)"},
		},
		TakesRecords: true,
		Targets:      []functions.Target{functions.TargetUser},
		Validate: func(ctx *functions.Context) error {
			if ctx.Params.Has("file") == ctx.Params.Has("to") {
				return fmt.Errorf("export takes one of file=FILE and to=HOST:PORT")
			}
			if ctx.Params.Has("to") {
				if ctx.Params.Has("format") {
					return fmt.Errorf("format= is a file's: to= sends each packet's bytes as they are")
				}
				return checkTo(ctx.Params.Str("to"))
			}
			if ctx.Params.Str("format") == "jsonl" && ctx.LinkType != functions.LinkRecord {
				return fmt.Errorf("format=jsonl writes records, but export receives packets (%v): write them as pcap, or feed it a producer's records", ctx.LinkType)
			}
			return nil
		},
		New: func(ctx *functions.Context) (functions.Function, error) {
			if ctx.Params.Has("to") {
				return Dial(ctx.Params.Str("to"))
			}
			field, snaplen := HeaderFor(ctx)
			path := ctx.Params.Str("file")
			switch ctx.Params.Str("format") {
			case "jsonl":
				return CreateJSONLWith(path, o)
			case "pcap":
				return CreateFieldWith(path, field, snaplen, o)
			case "pcapng":
				return CreateNgWith(path, functions.LinkType(field&0xffff), snaplen, o)
			}
			if IsPcapng(path) {
				// pcapng keeps the FCS length in an option we do not write:
				// its interface block names the link type alone.
				return CreateNgWith(path, functions.LinkType(field&0xffff), snaplen, o)
			}
			return CreateFieldWith(path, field, snaplen, o)
		},
	}
}

// DefaultSnaplen is written in the file header when the snap length is
// unknown (0).
const DefaultSnaplen = 262144

const (
	recHdr  = 16
	bufSize = 1 << 20
)

// Exporter writes packets to a classic pcap file: little-endian,
// microsecond timestamps (magic a1b2c3d4), the form every pcap reader
// accepts.
type Exporter struct {
	file
}

// HeaderFor returns the link-type field and snap length to write for the
// packets that reach a function: when they all come from one capture
// file, that file's link-type field (with the FCS length in its upper
// bits) and, unless the run cuts packets shorter, its snap length, as
// tcpdump -r F -w G writes them; otherwise the link type and the slot size.
func HeaderFor(ctx *functions.Context) (field uint32, snaplen int) {
	field, snaplen = uint32(ctx.LinkType), ctx.Snaplen
	if len(ctx.Captures) == 1 {
		c := ctx.Captures[0]
		if c.File && c.LinkTypeField&0xffff == uint32(ctx.LinkType) {
			field = c.LinkTypeField
			snap := pcap.AdjustSnapshot(field&0xffff, c.Snaplen) // what libpcap reads the file with
			if snaplen <= 0 || uint32(snaplen) >= min(snap, pcap.MaxRecordLen) {
				snaplen = int(snap) // the run cut no packet shorter than the file did
			}
		}
	}
	return field, snaplen
}

// Create creates (or truncates) the file at path ("-": standard output)
// and writes the pcap file header with the given link type and snap
// length.
func Create(path string, link functions.LinkType, snaplen int) (*Exporter, error) {
	return CreateFieldWith(path, uint32(link), snaplen, Options{})
}

// CreateField is Create with the header's whole link-type field: the link
// type in the low 16 bits, the FCS length above (pcap-savefile(5)).
func CreateField(path string, field uint32, snaplen int) (*Exporter, error) {
	return CreateFieldWith(path, field, snaplen, Options{})
}

// CreateFieldWith is CreateField writing as o says.
func CreateFieldWith(path string, field uint32, snaplen int, o Options) (*Exporter, error) {
	f, name, err := open(path, o)
	if err != nil {
		return nil, err
	}
	e := newExporter(f, name, field, snaplen)
	e.attach(f, o)
	if err := e.writeHeader(field); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// New writes a pcap file to w; name is used in messages.
func New(w io.Writer, name string, link functions.LinkType, snaplen int) (*Exporter, error) {
	return NewField(w, name, uint32(link), snaplen)
}

// NewField is New with the header's whole link-type field.
func NewField(w io.Writer, name string, field uint32, snaplen int) (*Exporter, error) {
	e := newExporter(w, name, field, snaplen)
	if err := e.writeHeader(field); err != nil {
		return nil, err
	}
	return e, nil
}

func newExporter(w io.Writer, name string, field uint32, snaplen int) *Exporter {
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	return &Exporter{file{name: name, w: w, snaplen: snaplen, buf: make([]byte, max(bufSize, recHdr+snaplen))}}
}

func (e *Exporter) writeHeader(field uint32) error {
	h := e.buf[:24]
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[8:], 0)  // thiszone
	binary.LittleEndian.PutUint32(h[12:], 0) // sigfigs
	binary.LittleEndian.PutUint32(h[16:], uint32(e.snaplen))
	binary.LittleEndian.PutUint32(h[20:], field)
	return e.header(h)
}

// Process appends the batch's packets to the file and passes them on (a
// packet longer than the snap length is written truncated to it). The
// batch is written with one write call (more for batches larger than the
// 1 MB buffer), so that a failed write is charged exactly to the packets
// it carried: those, and every later one, are removed from the batch and
// counted in b.Dropped; a regular file is cut back to its last whole
// record; Close reports the error.
func (e *Exporter) Process(b *buffers.Batch) {
	if e.stopped {
		e.drop(b)
		return
	}
	p := b.PBuf
	n, start := 0, 0
	for i := 0; i < b.N; i++ {
		slot := b.E[i].Slot
		data := p.Data(slot)
		if len(data) > e.snaplen {
			data = data[:e.snaplen]
		}
		if n+recHdr+len(data) > len(e.buf) {
			if !e.flush(b, start, i, n) {
				return
			}
			n, start = 0, i
		}
		m := p.Meta(slot)
		sec, usec := micros(m.Timestamp)
		h := e.buf[n : n+recHdr]
		binary.LittleEndian.PutUint32(h[0:], uint32(sec))
		binary.LittleEndian.PutUint32(h[4:], uint32(usec))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(data)))
		binary.LittleEndian.PutUint32(h[12:], m.WireLen) // as read, also when below the captured length
		n += recHdr + copy(e.buf[n+recHdr:], data)
		e.ends[i] = n
	}
	e.flush(b, start, b.N, n)
}

// micros splits a timestamp in nanoseconds into seconds and microseconds,
// rounding down (also before 1970).
func micros(ts int64) (sec, usec int64) {
	us := ts / 1e3
	if ts%1e3 < 0 {
		us--
	}
	sec = us / 1e6
	usec = us % 1e6
	if usec < 0 {
		sec, usec = sec-1, usec+1e6
	}
	return sec, usec
}

var (
	_ functions.Function = (*Exporter)(nil)
	_ functions.Closer   = (*Exporter)(nil)
)
