package export

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/pcap"
)

func init() {
	functions.Register(&functions.Class{
		Name:      "export",
		Summary:   "write every packet or record that reaches it to a file (pcap, pcapng, JSON lines) and pass it on",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "file", Type: functions.String, Required: true, File: functions.FileWrite,
				Summary: "the file to write (created or truncated)"},
			{Name: "format", Type: functions.String, Enum: []string{"pcap", "pcapng", "jsonl"},
				Summary: "pcap, pcapng (the default for a name ending in .pcapng), or jsonl: records as JSON lines"},
		},
		TakesRecords: true,
		Targets:      []functions.Target{functions.TargetUser},
		Validate: func(ctx *functions.Context) error {
			if ctx.Params.Str("format") == "jsonl" && ctx.LinkType != functions.LinkRecord {
				return fmt.Errorf("format=jsonl writes records, but export receives packets (%v): write them as pcap, or feed it a producer's records", ctx.LinkType)
			}
			return nil
		},
		New: func(ctx *functions.Context) (functions.Function, error) {
			switch ctx.Params.Str("format") {
			case "jsonl":
				return CreateJSONL(ctx.Params.Str("file"))
			case "pcapng":
				field, snaplen := HeaderFor(ctx)
				return CreateNg(ctx.Params.Str("file"), functions.LinkType(field&0xffff), snaplen)
			case "pcap":
				field, snaplen := HeaderFor(ctx)
				return CreateField(ctx.Params.Str("file"), field, snaplen)
			}
			field, snaplen := HeaderFor(ctx)
			if IsPcapng(ctx.Params.Str("file")) {
				// pcapng keeps the FCS length in an option we do not write:
				// its interface block names the link type alone.
				return CreateNg(ctx.Params.Str("file"), functions.LinkType(field&0xffff), snaplen)
			}
			return CreateField(ctx.Params.Str("file"), field, snaplen)
		},
	})
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

// Create creates (or truncates) the file at path and writes the pcap file
// header with the given link type and snap length.
func Create(path string, link functions.LinkType, snaplen int) (*Exporter, error) {
	return CreateField(path, uint32(link), snaplen)
}

// CreateField is Create with the header's whole link-type field: the link
// type in the low 16 bits, the FCS length above (pcap-savefile(5)).
func CreateField(path string, field uint32, snaplen int) (*Exporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", path, functions.PathReason(err))
	}
	e, err := NewField(f, path, field, snaplen)
	if err != nil {
		f.Close()
		return nil, err
	}
	e.closer = f
	return e, nil
}

// New writes a pcap file to w; name is used in messages.
func New(w io.Writer, name string, link functions.LinkType, snaplen int) (*Exporter, error) {
	return NewField(w, name, uint32(link), snaplen)
}

// NewField is New with the header's whole link-type field.
func NewField(w io.Writer, name string, field uint32, snaplen int) (*Exporter, error) {
	if snaplen <= 0 {
		snaplen = DefaultSnaplen
	}
	e := &Exporter{file{name: name, w: w, snaplen: snaplen, buf: make([]byte, max(bufSize, recHdr+snaplen))}}
	h := e.buf[:24]
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[8:], 0)  // thiszone
	binary.LittleEndian.PutUint32(h[12:], 0) // sigfigs
	binary.LittleEndian.PutUint32(h[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(h[20:], field)
	if _, err := w.Write(h); err != nil {
		return nil, e.wrap(err)
	}
	return e, nil
}

// Process appends the batch's packets to the file and passes them on (a
// packet longer than the snap length is written truncated to it). The
// batch is written with one write call (more for batches larger than the
// 1 MB buffer), so that a failed write is charged exactly to the packets
// it carried: those, and every later one, are removed from the batch and
// counted in b.Dropped; Close reports the error.
func (e *Exporter) Process(b *buffers.Batch) {
	if e.err != nil {
		b.Dropped += b.N
		b.N = 0
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
