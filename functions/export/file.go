package export

import (
	"fmt"
	"io"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// file is what the pcap and pcapng exporters share: the output, a batch's
// buffer of records and the accounting of a write that failed.
type file struct {
	name    string
	w       io.Writer
	closer  io.Closer
	buf     []byte
	ends    [buffers.MaxBatch]int // end of each pending record in buf
	snaplen int
	err     error // first write error
	closed  bool
}

func (e *file) wrap(err error) error {
	return fmt.Errorf("cannot write %s: %w", e.name, functions.PathReason(err))
}

// flush writes the records of entries [from, to), which occupy buf[:n]. On
// failure it keeps only the entries whose records were written whole and
// reports false.
func (e *file) flush(b *buffers.Batch, from, to, n int) bool {
	if n == 0 {
		return true
	}
	k, err := e.w.Write(e.buf[:n])
	if err == nil && k == n {
		return true
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	e.err = e.wrap(err)
	kept := from
	for kept < to && e.ends[kept] <= k {
		kept++
	}
	b.Dropped += b.N - kept
	b.N = kept
	return false
}

// Err returns the first write error, if any.
func (e *file) Err() error { return e.err }

// Close closes the file and returns the first write error (naming the
// file), or the error of closing it.
func (e *file) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.closer != nil {
		if err := e.closer.Close(); err != nil && e.err == nil {
			e.err = fmt.Errorf("cannot close %s: %w", e.name, functions.PathReason(err))
		}
	}
	return e.err
}
