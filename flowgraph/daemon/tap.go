package daemon

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowgraph/daemon/client"
	"github.com/ffpf-go/ffpf/functions"
)

const tapClassName = "tap"

// Ring geometry of a read: defaults and bounds.
const (
	defaultCells  = 16
	defaultWindow = 1 << 20
	maxRingBytes  = 256 << 20
)

// tapClass is the daemon's sink: every request ends in one (fed by its
// ends), which copies what reaches it into the ring of each application
// reading the request, and passes it on.
func (d *Daemon) tapClass() *functions.Class {
	return &functions.Class{
		Name:         tapClassName,
		Summary:      "hand the packets or records that reach it to the applications reading the request, each through a ring of its own in shared memory",
		MinInputs:    1,
		MaxInputs:    -1,
		TakesRecords: true,
		Targets:      []functions.Target{functions.TargetUser},
		New: func(ctx *functions.Context) (functions.Function, error) {
			t := &tap{d: d, id: ctx.ID, link: uint32(ctx.LinkType), snaplen: ctx.Snaplen}
			d.mu.Lock()
			d.taps[ctx.ID] = t
			d.mu.Unlock()
			return t, nil
		},
	}
}

// tap is a function of class tap.
type tap struct {
	d       *Daemon
	id      string
	link    uint32
	snaplen int

	mu      sync.Mutex // Process and the changes of readers
	readers []*reader
}

// reader is one application's ring of a request's packets: the daemon
// sends, the application receives.
type reader struct {
	id   uint64
	req  *request
	tap  *tap
	conn *conn
	pid  int
	ring *shm.Ring
	send *shm.Sender
	seq  uint64
	// lost are the packets dropped since the last cell published, told
	// in the next one's Dropped.
	lost             uint32
	in, out, dropped atomic.Uint64
	closed           bool
}

// Process implements functions.Function: each reader gets a copy of the
// batch in its ring, or, when its ring is full, loses it (counted as its
// own drops); the batch passes on unchanged.
func (t *tap) Process(b *buffers.Batch) {
	t.mu.Lock()
	for _, r := range t.readers {
		r.put(b)
	}
	t.mu.Unlock()
}

// Close implements functions.Closer: the readers' rings close (they read
// what was sent, then the end).
func (t *tap) Close() error {
	t.mu.Lock()
	rds := t.readers
	t.readers = nil
	t.mu.Unlock()
	for _, r := range rds {
		r.close()
	}
	t.d.mu.Lock()
	if t.d.taps[t.id] == t {
		delete(t.d.taps, t.id)
	}
	t.d.mu.Unlock()
	return nil
}

// put copies b's packets into cells of r's ring, as many cells as they
// take; what finds the ring full is dropped. t.mu is held.
func (r *reader) put(b *buffers.Batch) {
	if r.closed {
		return
	}
	n := b.N
	r.in.Add(uint64(n))
	i := 0
	for i < n {
		c, err := r.send.Reserve()
		if err != nil || c == nil {
			r.lost += uint32(n - i)
			r.dropped.Add(uint64(n - i))
			return
		}
		r.seq++
		c.Seq, c.Now, c.Dropped = r.seq, b.Now, r.lost
		k := 0
		for ; i < n && k < buffers.MaxBatch; i++ {
			e := b.E[i]
			m := b.PBuf.Meta(e.Slot)
			if !c.Put(k, b.PBuf.Data(e.Slot), m.WireLen, m.Timestamp) {
				break // the window is full: the rest goes in the next cell
			}
			c.E[k] = buffers.Entry{Slot: uint32(k), Class: e.Class}
			k++
		}
		c.N = uint32(k)
		r.lost = 0
		r.out.Add(uint64(k))
		r.send.Publish()
		if k == 0 { // a packet larger than a window: cannot be (the window holds a slot)
			r.lost++
			r.dropped.Add(1)
			i++
		}
	}
}

func (r *reader) close() {
	if !r.closed {
		r.closed = true
		r.send.Close()
		r.ring.Close()
	}
}

func (r *reader) stats() client.Reader {
	return client.Reader{Reader: r.id, PID: r.pid, In: r.in.Load(), Out: r.out.Load(), Dropped: r.dropped.Load()}
}

// read gives who a ring of a request's packets: the descriptors go with
// the reply.
func (d *Daemon) read(a client.ReadArgs, who *identity) (any, []int, error) {
	if who.conn == nil {
		return nil, nil, &client.Error{Code: client.CodeInvalid, Msg: "read hands over shared memory: it is an operation of the control socket, not of HTTP"}
	}
	r, err := d.lookup(a.ID, who)
	if err != nil {
		return nil, nil, err
	}
	if r.sink == nil {
		return nil, nil, invalidf("request %s has no sink to read: its ends give packets of several link types", r.id)
	}
	d.ctl.Lock() // the tap is not closed meanwhile
	defer d.ctl.Unlock()
	if !d.present(r) {
		return nil, nil, &client.Error{Code: client.CodeNotFound, Msg: "no request " + a.ID}
	}
	fs := r.sink.Functions()
	d.mu.Lock()
	t := d.taps[fs[len(fs)-1].ID]
	d.mu.Unlock()
	if t == nil {
		return nil, nil, &client.Error{Code: client.CodeFailed, Msg: "request " + r.id + "'s sink is not instantiated"}
	}
	g := shm.Geometry{Cells: a.Cells, Window: a.Window}
	if g.Cells == 0 {
		g.Cells = defaultCells
	}
	if g.Window == 0 {
		g.Window = defaultWindow
	}
	g.Window = max(g.Window, t.snaplen)
	if g.Cells*g.Window > maxRingBytes {
		return nil, nil, invalidf("a ring of %d cells of %d bytes is more than the %d bytes a reader may map", g.Cells, g.Window, maxRingBytes)
	}
	ring, err := shm.New(g)
	if err != nil {
		return nil, nil, invalidf("%v", err)
	}
	send, err := ring.Sender()
	if err != nil {
		ring.Close()
		return nil, nil, err
	}
	rd := &reader{req: r, tap: t, conn: who.conn, pid: who.cred.PID, ring: ring, send: send}
	d.mu.Lock()
	d.nextRd++
	rd.id = d.nextRd
	d.readers[rd.id] = rd
	who.conn.readers = append(who.conn.readers, rd)
	d.mu.Unlock()
	t.mu.Lock()
	t.readers = append(t.readers, rd)
	t.mu.Unlock()
	// The descriptors are duplicated for the reply, which closes them once
	// sent; the ring keeps its own until the reader is dropped.
	fds, err := dupAll(ring.Files(shm.ReceiverSide))
	if err != nil {
		d.dropReader(rd)
		return nil, nil, err
	}
	return client.Stream{Reader: rd.id, Function: t.id, LinkType: t.link, Snaplen: t.snaplen,
		Cells: g.Cells, Window: g.Window}, fds, nil
}

// unread drops a ring of who's connection.
func (d *Daemon) unread(id uint64, who *identity) error {
	d.mu.Lock()
	rd := d.readers[id]
	d.mu.Unlock()
	if rd == nil || rd.conn != who.conn {
		return &client.Error{Code: client.CodeNotFound, Msg: fmt.Sprintf("no reader %d on this connection", id)}
	}
	d.dropReader(rd)
	return nil
}

// dropReader takes rd out of its tap (between two batches) and closes its
// ring: the application reads what was sent, then the end.
func (d *Daemon) dropReader(rd *reader) {
	d.mu.Lock()
	delete(d.readers, rd.id)
	if rd.conn != nil {
		for i, x := range rd.conn.readers {
			if x == rd {
				rd.conn.readers = append(rd.conn.readers[:i], rd.conn.readers[i+1:]...)
				break
			}
		}
	}
	d.mu.Unlock()
	t := rd.tap
	t.mu.Lock()
	for i, x := range t.readers {
		if x == rd {
			t.readers = append(t.readers[:i:i], t.readers[i+1:]...)
			break
		}
	}
	rd.close()
	t.mu.Unlock()
}

// dupAll duplicates fds (close-on-exec).
func dupAll(fds []int) ([]int, error) {
	out := make([]int, 0, len(fds))
	for _, fd := range fds {
		n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeFDs(out)
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
