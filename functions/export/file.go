package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// Options are what a program that runs export functions decides for them
// (the class registered by init uses the zero Options).
type Options struct {
	// Stdout is the file "-" names (nil: os.Stdout).
	Stdout *os.File
	// Context, once done, interrupts a write blocked on a pipe that its
	// reader does not empty, so that ^C ends the run (nil: never).
	Context context.Context
	// Closed, if set, is called once when the output is a pipe whose
	// reader has gone (EPIPE): the run has no one to write for, and should
	// stop, as tcpdump -w - does when its reader exits. The packets not
	// written are dropped and counted; Close then reports no error. Without
	// it a closed pipe is a write error like any other.
	Closed func(name string)
}

// stdoutName is how messages name standard output ("-").
const stdoutName = "standard output"

// open opens the output path names for writing (never for reading: a
// process that holds a pipe's read end itself never sees EPIPE): "-" is
// standard output. It returns the name messages use.
func open(path string, o Options) (*os.File, string, error) {
	if path != "-" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if st, err := os.Stat(path); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			// A pipe with a reader opens at once; one without waits for
			// a reader, as in tcpdump.
			if f, err := os.OpenFile(path, flags|syscall.O_NONBLOCK, 0); err == nil {
				return f, path, nil
			}
		}
		f, err := os.OpenFile(path, flags, 0o666)
		if err != nil {
			return nil, path, fmt.Errorf("cannot create %s: %w", path, functions.PathReason(err))
		}
		return f, path, nil
	}
	out := o.Stdout
	if out == nil {
		out = os.Stdout
	}
	st, err := out.Stat()
	if err != nil {
		return nil, stdoutName, fmt.Errorf("cannot write %s: %w", stdoutName, functions.PathReason(err))
	}
	if st.Mode()&os.ModeNamedPipe != 0 {
		// A pipe opened anew has a file description of its own, which Go
		// polls: a blocked write can be interrupted (Options.Context),
		// and standard output's own description stays as it was.
		// (Without blocking: a pipe whose reader has gone is ENXIO, and
		// the duplicate below then meets EPIPE.)
		if f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", out.Fd()), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			return f, stdoutName, nil
		}
	}
	// A duplicate: writing it never raises SIGPIPE (Go does so for a broken
	// pipe on descriptors 1 and 2 only), and closing it leaves standard
	// output open.
	fd, err := syscall.Dup(int(out.Fd()))
	if err != nil {
		return nil, stdoutName, fmt.Errorf("cannot write %s: %w", stdoutName, err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), stdoutName), stdoutName, nil
}

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
	stopped bool  // nothing more is written (an error, a closed reader, an interrupt)
	closed  bool

	// A regular file is cut back to its last whole record when a write
	// stops short (a full disk), so that every reader opens it cleanly.
	f     *os.File
	trunc bool
	off   int64 // where the next write goes

	onClosed  func(string)
	stopWatch func() bool // ends the watch of Options.Context
}

// attach makes f the output: a regular file is cut back on a short
// write, a pipe's blocked write is interrupted when o.Context is done.
func (e *file) attach(f *os.File, o Options) {
	e.f, e.closer = f, f
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if off, err := f.Seek(0, io.SeekCurrent); err == nil {
			e.trunc, e.off = true, off
		}
	}
	e.onClosed = o.Closed
	if o.Context != nil {
		e.stopWatch = context.AfterFunc(o.Context, func() {
			_ = f.SetWriteDeadline(time.Unix(1, 0)) // only a polled file (a pipe) has deadlines
		})
	}
}

func (e *file) wrap(err error) error {
	return fmt.Errorf("cannot write %s: %w", e.name, functions.PathReason(err))
}

// write writes p whole, or reports how much of it was written and why not.
func (e *file) write(p []byte) (int, error) {
	k, err := e.w.Write(p)
	if err == nil && k < len(p) {
		err = io.ErrShortWrite
	}
	return k, err
}

// header writes the file header; on failure a regular file is cut back to
// where it began, so that no partial header is left.
func (e *file) header(h []byte) error {
	k, err := e.write(h)
	if err == nil {
		e.off += int64(k)
		return nil
	}
	e.stopped = true
	if errors.Is(err, syscall.EPIPE) && e.onClosed != nil {
		e.onClosed(e.name) // gone before the first packet
		return nil
	}
	e.err = e.cutBack(e.wrap(err), k, 0)
	return e.err
}

// flush writes the records of entries [from, to), which occupy buf[:n]. On
// failure it keeps only the entries whose records were written whole, cuts
// a regular file back to the last of them, and reports false.
func (e *file) flush(b *buffers.Batch, from, to, n int) bool {
	if n == 0 {
		return true
	}
	k, err := e.write(e.buf[:n])
	if err == nil {
		e.off += int64(n)
		return true
	}
	kept := from
	for kept < to && e.ends[kept] <= k {
		kept++
	}
	whole := 0
	if kept > from {
		whole = e.ends[kept-1]
	}
	e.stopped = true
	switch {
	case errors.Is(err, syscall.EPIPE) && e.onClosed != nil:
		e.onClosed(e.name) // the reader has gone: the run ends, without an error
	case errors.Is(err, os.ErrDeadlineExceeded):
		// interrupted (^C): the run ends, without an error
	default:
		e.err = e.cutBack(e.wrap(err), k, whole)
	}
	e.off += int64(whole)
	b.Dropped += b.N - kept
	b.N = kept
	return false
}

// cutBack removes from a regular file the k-whole bytes of a record that
// were written only in part, after the whole bytes that were kept.
func (e *file) cutBack(err error, k, whole int) error {
	if k <= whole || !e.trunc {
		return err
	}
	if terr := e.f.Truncate(e.off + int64(whole)); terr != nil {
		return fmt.Errorf("%w; its last record is cut short (cannot truncate it: %v)", err, functions.PathReason(terr))
	}
	return err
}

// drop removes every entry of a batch that arrives once nothing more is
// written.
func (e *file) drop(b *buffers.Batch) {
	b.Dropped += b.N
	b.N = 0
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
	if e.stopWatch != nil {
		e.stopWatch()
	}
	if e.closer != nil {
		if err := e.closer.Close(); err != nil && e.err == nil && !e.stopped {
			e.err = fmt.Errorf("cannot close %s: %w", e.name, functions.PathReason(err))
		}
	}
	return e.err
}
