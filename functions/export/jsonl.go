package export

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/record"
)

// JSONL writes ffpf records (functions/record) as JSON lines: one object
// per record, decoded from the record's own field descriptions, so that
// export needs to know nothing of the producer. A record that does not
// decode is dropped and counted, never written half.
type JSONL struct {
	file
}

// CreateJSONL creates (or truncates) the file at path ("-": standard
// output).
func CreateJSONL(path string) (*JSONL, error) { return CreateJSONLWith(path, Options{}) }

// CreateJSONLWith is CreateJSONL writing as o says.
func CreateJSONLWith(path string, o Options) (*JSONL, error) {
	f, name, err := open(path, o)
	if err != nil {
		return nil, err
	}
	e := &JSONL{file{name: name, w: f, buf: make([]byte, 0, bufSize)}}
	e.attach(f, o)
	return e, nil
}

// Process appends one line per record of the batch and passes the records
// on. The lines of a batch are written with one write call (more when
// they pass 1 MB), as the pcap exporter does, so that a failed write is
// charged exactly to the records it carried.
func (e *JSONL) Process(b *buffers.Batch) {
	if e.stopped {
		e.drop(b)
		return
	}
	p := b.PBuf
	n0 := b.N
	buf := e.buf[:0]
	k, start := 0, 0 // entries kept; [start, k) are pending in buf
	for i := 0; i < n0; i++ {
		line, err := record.AppendJSON(buf, p.Data(b.E[i].Slot))
		if err != nil { // not a record: counted, and not passed on
			b.Dropped++
			continue
		}
		buf = append(line, '\n')
		b.E[k] = b.E[i]
		e.ends[k] = len(buf)
		k++
		if len(buf) > bufSize-64<<10 {
			e.buf = buf
			b.N = k + n0 - i - 1 // what a failure would drop: the unwritten, and what follows
			if !e.flush(b, start, k, len(buf)) {
				e.buf = buf[:0]
				return
			}
			buf, start = buf[:0], k
		}
	}
	b.N = k
	e.buf = buf
	e.flush(b, start, k, len(buf))
	e.buf = buf[:0]
}

var (
	_ functions.Function = (*JSONL)(nil)
	_ functions.Closer   = (*JSONL)(nil)
)
