package p4

// Windows on a switch: the controller's side of p4gen.Window (MAFIA's
// measurement interval with its incremental reset). The first packet of
// each window sends a digest with its window's mark and the mark of the
// window before; for each window that ended the controller reads the half
// that holds it (when its state register says it does) into the Go
// half's MBuf and ticks the Go half at the window's end, so that it
// reports the window exactly as it would in userspace and starts the next
// empty; a window the switch could not measure (its half was not clean:
// its packets are the function's dropped) is reported empty. Then the
// controller zeroes the half's counters and writes the drained table,
// which lets the packets clear its registers. At the end the open window
// is read and the Go half flushed.
//
// Time: the Go half's packet clock is the switch's clock in ns (a window
// of 2^k µs starts at number·2^k µs), so its windows are the switch's.

import (
	"sync"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// windowed is a function with a window on the switch, as the controller
// follows it.
type windowed struct {
	low     *Lowered
	half    *half
	w       *p4gen.Window
	drained [2]uint64 // the marks written to the drained table, per parity
	written bool      // the table's entries exist
	last    uint64    // the mark of the window open, 0 before the first
	err     error     // the first read that failed: the run ends with it
}

// windows follows the windows of the functions of the program connected;
// its worker reads them in a goroutine of its own, so that the stream
// (which gives it the digests) never waits for a read.
type windows struct {
	// The program and the connection they were started for.
	c   *controller.Client
	asm *Assembly
	out *Output
	// fail ends the run with the first read that failed.
	fail func(error)

	mu     sync.Mutex
	byName map[string]*windowed // by the window digest's name
	queue  []windowDigest
	wake   chan struct{}
	done   chan struct{}
	// handled counts the digests handled (their windows read).
	handled atomic.Int64
}

type windowDigest struct {
	f          *windowed
	mark, prev uint64
}

// startWindows follows the windows of the program connected (fs.mu is
// held); the windows of the one before are read and flushed first.
func (fs *Flowspace) startWindows() {
	fs.stopWindows()
	ws := &windows{c: fs.client, asm: fs.asm, out: fs.out, fail: func(err error) { go fs.fail(err) },
		byName: map[string]*windowed{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, l := range fs.asm.Lowered {
		if l.Builder == nil || l.Builder.Window == nil {
			continue
		}
		h := fs.halves[l.Node]
		if h == nil {
			continue
		}
		ws.byName[l.Builder.Window.Digest.Name] = &windowed{low: l, half: h, w: l.Builder.Window}
	}
	if len(ws.byName) == 0 {
		close(ws.done)
		return
	}
	fs.wins.Store(ws)
	go ws.worker()
}

// stopWindows ends the worker and reads the windows open into their Go
// halves, which flush them (their last report); the switch must still be
// connected.
func (fs *Flowspace) stopWindows() {
	ws := fs.wins.Swap(nil)
	if ws == nil {
		return
	}
	close(ws.wake)
	<-ws.done
	for _, f := range ws.byName {
		if f.last != 0 && f.err == nil {
			ws.read(f, f.last, true)
			if fl, ok := f.half.gofn.(functions.Flusher); ok {
				fl.Flush(f.end(f.last))
			}
		}
	}
}

// digest takes a digest list of a window digest; it reports whether name
// is one.
func (ws *windows) digest(name string, lists [][]uint64) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	f, ok := ws.byName[name]
	if !ok {
		return false
	}
	for _, v := range lists {
		if len(v) == 2 {
			ws.queue = append(ws.queue, windowDigest{f, v[0], v[1]})
		}
	}
	select {
	case ws.wake <- struct{}{}:
	default:
	}
	return true
}

// worker reads the windows that ended as their digests come.
func (ws *windows) worker() {
	defer close(ws.done)
	next := func() []windowDigest {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		q := ws.queue
		ws.queue = nil
		return q
	}
	for range ws.wake {
		for _, d := range next() {
			ws.began(d)
			ws.handled.Add(1)
		}
	}
	for _, d := range next() {
		ws.began(d)
		ws.handled.Add(1)
	}
}

// end is the end of the window of mark m on the Go half's clock (ns).
func (f *windowed) end(m uint64) int64 {
	return int64(m) << f.w.Shift * p4gen.TimeUnit // number+1 windows of 2^Shift µs
}

// windowBegan handles the digest of a window's first packet: the
// windows from prev up to it ended.
func (ws *windows) began(d windowDigest) {
	f := d.f
	if f.err != nil {
		return
	}
	c, _ := f.half.gofn.(functions.Clocked)
	if f.last == 0 && c != nil {
		// The first window: the Go half's starts with it.
		if start := int64(d.mark-1) << f.w.Shift * p4gen.TimeUnit; c.Deadline() <= start {
			c.Tick(start)
		}
	}
	if d.prev != 0 {
		for m := d.prev; m != d.mark && f.err == nil; m = (m + 1) & 0xffffffff {
			ws.read(f, m, false)
		}
	}
	f.last = d.mark
}

// read reads the window of mark m into the Go half, which reports it
// (unless final: the window open at the end, which the Go half flushes),
// and lets the packets clear its half.
func (ws *windows) read(f *windowed, m uint64, final bool) {
	fail := func(err error) {
		f.err = err
		ws.fail(err)
	}
	h := (m - 1) & 1
	state, err := ws.c.ReadRegister(ws.out.Printed.Name(f.w.State[h]))
	if err != nil {
		fail(err)
		return
	}
	mbuf := f.half.mbuf
	if mbuf != nil {
		clearMBuf(mbuf)
	}
	measured := len(state) == 1 && state[0] == m
	if measured && mbuf != nil {
		if err := ws.readHalf(f.low.Node.ID, []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd}[h], mbuf); err != nil {
			fail(err)
			return
		}
	}
	if final {
		return
	}
	if cl, ok := f.half.gofn.(functions.Clocked); ok && cl.Deadline() <= f.end(m) {
		cl.Tick(f.end(m)) // reports the window (empty when not measured)
	}
	if !measured {
		return
	}
	// The packets clear the half's registers; its counters are the
	// controller's to zero, before it lets the packets at the half.
	for _, ct := range ws.asm.Prog.Counters {
		if ct.Owner == f.low.Node.ID && ct.Half == []p4gen.Half{p4gen.HalfEven, p4gen.HalfOdd}[h] {
			if err := ws.c.ZeroCounter(ws.out.Printed.Name(ct)); err != nil {
				fail(err)
				return
			}
		}
	}
	f.drained[h] = m
	if err := ws.drain(f); err != nil {
		fail(err)
	}
}

// readHalf reads owner's registers and counters of half (and those of
// every window) into m.
func (ws *windows) readHalf(owner string, half p4gen.Half, m *buffers.MBuf) error {
	for _, r := range ws.asm.Prog.Registers {
		if r.Owner != owner || r.Field == "" || r.Half != p4gen.HalfAll && r.Half != half {
			continue
		}
		cells, err := ws.c.ReadRegister(ws.out.Printed.Name(r))
		if err != nil {
			return err
		}
		for i, v := range cells {
			put(m, r.Field, r.Base+i, v)
		}
	}
	for _, ct := range ws.asm.Prog.Counters {
		if ct.Owner != owner || ct.FieldPackets == "" && ct.FieldBytes == "" || ct.Half != p4gen.HalfAll && ct.Half != half {
			continue
		}
		cells, err := ws.c.ReadCounter(ws.out.Printed.Name(ct))
		if err != nil {
			return err
		}
		for i, cell := range cells {
			put(m, ct.FieldPackets, ct.Base+i, cell.Packets)
			put(m, ct.FieldBytes, ct.Base+i, cell.Bytes)
		}
	}
	return nil
}

// drain writes the drained table: for each parity, the marks the
// controller has read.
func (ws *windows) drain(f *windowed) error {
	for p := range uint64(2) {
		e, err := ws.c.TableEntry(ws.out.Printed.Name(f.w.Drained), p4gen.Entry{Match: []p4gen.Match{{Value: p}},
			Args: []uint64{f.drained[0], f.drained[1]}}, ws.out.Printed.Name(f.w.Drain))
		if err != nil {
			return err
		}
		if f.written {
			err = ws.c.Modify(e)
		} else {
			err = ws.c.Insert(e)
		}
		if err != nil {
			return err
		}
	}
	f.written = true
	return nil
}

// clearMBuf zeroes every field of m.
func clearMBuf(m *buffers.MBuf) {
	for _, f := range m.Fields() {
		for i := range max(f.Count, 1) {
			m.Put(f, i, 0)
		}
	}
}
