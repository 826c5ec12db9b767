package pcap

import (
	"io"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

func init() {
	functions.Register(&functions.Class{
		Name:    "pcap",
		Summary: "read packets from a pcap or pcapng file",
		Params: []functions.Param{
			{Name: "file", Type: functions.String, Required: true,
				Summary: "the capture file (pcap with µs or ns timestamps in either byte order, or pcapng)"},
		},
		Targets: []functions.Target{functions.TargetUser},
		// Validate reads the file header to report the file's link type.
		// A file that cannot be read is a runtime error, not a bad
		// request: NewSource reports it.
		Validate: func(ctx *functions.Context) error {
			ctx.LinkType = functions.LinkEthernet
			if r, err := Open(ctx.Params.Str("file")); err == nil {
				ctx.LinkType = r.LinkType()
				r.Close()
			}
			return nil
		},
		NewSource: func(ctx *functions.Context) (functions.Source, error) {
			r, err := Open(ctx.Params.Str("file"))
			if err != nil {
				return nil, err
			}
			return NewSource(r), nil
		},
	})
}

// Source is the pcap class's source function: it copies each record of a
// Reader once, from the read buffer into a PBuf slot.
type Source struct {
	r      *Reader
	err    error // from the Reader, returned once the batch is empty
	done   atomic.Int64
	closed atomic.Bool
}

// NewSource returns a source that reads r; closing it closes r.
func NewSource(r *Reader) *Source { return &Source{r: r} }

// Reader returns the underlying reader.
func (s *Source) Reader() *Reader { return s.r }

// Info describes the file: its name, link type, snap length (capped at
// SlotLimit) and size.
func (s *Source) Info() functions.SourceInfo {
	return functions.SourceInfo{Name: s.r.name, LinkType: s.r.linkType, MaxCapLen: s.r.snaplen, Size: s.r.size}
}

// Fill appends the next records to b. At the end of the file it returns
// io.EOF; on a truncated or corrupt file it first delivers every complete
// record and then returns the error. Either comes with an empty batch:
// Fill never returns an error together with packets.
func (s *Source) Fill(b *buffers.Batch) error {
	if s.closed.Load() {
		return io.EOF
	}
	if s.err != nil {
		return s.err
	}
	n0 := b.N
	for b.Room() > 0 {
		data, wire, ts, err := s.r.Next()
		if err != nil {
			if s.closed.Load() {
				err = io.EOF // the read failed because Close closed the file
			}
			s.err = err
			break
		}
		b.Append(data, uint32(wire), ts)
	}
	s.done.Store(s.r.offset())
	if b.N == n0 {
		return s.err
	}
	return nil
}

// Progress reports the bytes consumed and the file size (0 if unknown).
func (s *Source) Progress() (done, total int64) { return s.done.Load(), s.r.size }

// Close closes the file; a Fill running concurrently returns promptly and
// the next one returns io.EOF.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.r.Close()
}

var (
	_ functions.Source     = (*Source)(nil)
	_ functions.Progresser = (*Source)(nil)
)
