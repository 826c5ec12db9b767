package shm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/buffers"
)

// Geometry is the shape of a ring.
type Geometry struct {
	// Cells is how many batches the ring holds: a power of two, 1 to
	// MaxCells.
	Cells int
	// Window is the bytes of packet data each cell has in the arena; 0
	// makes a ring of entries only (no descriptors, no arena).
	Window int
}

// Limits of a geometry.
const (
	MaxCells  = 1024
	MaxWindow = 64 << 20
)

// Header is the first 64 bytes of a cell. Its meaning beyond N and Used is
// the protocol's that uses the ring.
type Header struct {
	Seq     uint64 // a sequence number, the sender's
	Now     int64  // the stream's packet clock (ns since the Unix epoch)
	N       uint32 // valid entries
	Dropped uint32 // entries removed because of an error (see buffers.Batch)
	Status  uint32 // a protocol's own code; 0 is none
	Used    uint32 // bytes of the cell's window in use (Put)
	Aux     [4]uint64
}

// Desc describes the packet of one entry of a cell that carries packets:
// where its bytes lie, in the cell's window (Put) or in other memory both
// sides map (Ref: zero-copy), and its metadata.
type Desc struct {
	Off     uint64 // offset in the cell's window, or in the memory Ref refers to
	CapLen  uint32
	WireLen uint32
	TS      int64 // capture time, ns since the Unix epoch
}

// Cell is one batch of a ring, in shared memory. E and D (nil for a ring
// of entries only) are MaxBatch long; the first N are valid.
type Cell struct {
	*Header
	E      *[buffers.MaxBatch]buffers.Entry
	D      *[buffers.MaxBatch]Desc
	Window []byte
	// Index is the cell's place in the ring, Offset its window's in the
	// arena (Arena).
	Index, Offset int
}

// Put stores pkt as the packet of entry i: its bytes at the end of the
// window's used part, its metadata in D[i]. It reports false, storing
// nothing, when the window has no room left for it.
func (c *Cell) Put(i int, pkt []byte, wireLen uint32, ts int64) bool {
	off := int(c.Used)
	if len(pkt) > len(c.Window)-off {
		return false
	}
	copy(c.Window[off:], pkt)
	c.D[i] = Desc{Off: uint64(off), CapLen: uint32(len(pkt)), WireLen: wireLen, TS: ts}
	c.Used = uint32((off + len(pkt) + 7) &^ 7)
	return true
}

// Ref describes entry i's packet as lying at off in memory the receiver
// maps as well (a PBuf in shared memory, buffers/shared): zero-copy, no
// byte of it crosses.
func (c *Cell) Ref(i int, off uint64, capLen, wireLen uint32, ts int64) {
	c.D[i] = Desc{Off: off, CapLen: capLen, WireLen: wireLen, TS: ts}
}

// Packet returns the bytes of entry i's packet, or false when its
// descriptor lies outside the window (the sender wrote nonsense).
func (c *Cell) Packet(i int) ([]byte, bool) { return c.PacketIn(i, c.Window) }

// PacketIn returns the bytes of entry i's packet in mem, the memory its
// descriptor refers to (the window, or memory of Ref), or false when the
// descriptor lies outside it.
func (c *Cell) PacketIn(i int, mem []byte) ([]byte, bool) {
	d := &c.D[i]
	end := d.Off + uint64(d.CapLen)
	if end > uint64(len(mem)) || end < d.Off {
		return nil, false
	}
	return mem[d.Off:end:end], true
}

const (
	magic      = 0x326d6873_70666666 // "ffpfshm2", little-endian
	ctlSize    = 4096
	offHead    = 64  // the sender's index, a cache line of its own
	offTail    = 128 // the receiver's
	offWaiting = 192 // set by a receiver asleep on the eventfd
	offClosed  = 256 // set by a sender that will publish no more
	headerSize = int(unsafe.Sizeof(Header{}))
	descSize   = int(unsafe.Sizeof(Desc{}))
	entrySize  = int(unsafe.Sizeof(buffers.Entry{}))
)

// ctlHeader is the start of the control memfd: the ring's geometry, so
// that the other side needs nothing but the descriptors.
type ctlHeader struct {
	Magic       uint64
	Cells       uint32
	Window      uint32
	DataSize    uint64
	ArenaOffset uint64
}

var (
	_ [64 - headerSize]byte // a header is one cache line
	_ [headerSize - 64]byte
)

func (g Geometry) check() error {
	if g.Cells < 1 || g.Cells > MaxCells || g.Cells&(g.Cells-1) != 0 {
		return fmt.Errorf("shm: a ring holds a power of two cells, 1 to %d, not %d", MaxCells, g.Cells)
	}
	if g.Window < 0 || g.Window > MaxWindow {
		return fmt.Errorf("shm: a cell's window is 0 to %d bytes, not %d", MaxWindow, g.Window)
	}
	return nil
}

func (g Geometry) window() int { return (g.Window + 63) &^ 63 }

func (g Geometry) cellSize() int {
	n := headerSize + buffers.MaxBatch*entrySize
	if g.Window > 0 {
		n += buffers.MaxBatch * descSize
	}
	return n
}

func (g Geometry) arenaOffset() int {
	page := os.Getpagesize()
	return (g.Cells*g.cellSize() + page - 1) / page * page
}

func (g Geometry) dataSize() int { return g.arenaOffset() + g.Cells*g.window() }

// Ring is the shared memory of one direction, as its creator holds it:
// the descriptors of its two memfds and its eventfd. Its creator makes
// one end of it here (Sender or Receiver) and hands the descriptors of
// the other end (Files) to the other process, which opens them with Open.
type Ring struct {
	g                  Geometry
	ctl, data, roData  int
	event              int
	senderHere, closed bool
}

// New creates a ring's memory.
func New(g Geometry) (r *Ring, err error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	r = &Ring{g: g, ctl: -1, data: -1, roData: -1, event: -1}
	defer func() {
		if err != nil {
			r.Close()
			r = nil
		}
	}()
	if r.ctl, err = memfd("ffpf-shm-ctl", ctlSize); err != nil {
		return r, err
	}
	if r.data, err = memfd("ffpf-shm-data", g.dataSize()); err != nil {
		return r, err
	}
	// The receiver's descriptor of the data is opened read-only: it can
	// neither map the data writable nor make a read-only mapping writable.
	if r.roData, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", r.data), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return r, fmt.Errorf("shm: a read-only descriptor of the arena: %w", err)
	}
	if r.event, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return r, fmt.Errorf("shm: eventfd: %w", err)
	}
	ctl, err := unix.Mmap(r.ctl, 0, ctlSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return r, fmt.Errorf("shm: mapping the control block: %w", err)
	}
	*(*ctlHeader)(unsafe.Pointer(&ctl[0])) = ctlHeader{Magic: magic, Cells: uint32(g.Cells), Window: uint32(g.window()),
		DataSize: uint64(g.dataSize()), ArenaOffset: uint64(g.arenaOffset())}
	return r, unix.Munmap(ctl)
}

// memfd returns a memfd of size bytes, sealed against shrinking and
// growing: a peer that could truncate it would make every access of this
// process beyond the new end fault.
func memfd(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("shm: sizing a memfd of %d bytes: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("shm: sealing a memfd: %w", err)
	}
	return fd, nil
}

// Geometry returns the ring's shape.
func (r *Ring) Geometry() Geometry { return r.g }

// Side is an end of a ring.
type Side int

const (
	SenderSide Side = iota
	ReceiverSide
)

// Files returns the descriptors the other process needs to open side of
// the ring (control, data, eventfd), for SendFiles or a child's extra
// files. The receiver's data descriptor is read-only. They stay the
// ring's: Close closes them once they have crossed.
func (r *Ring) Files(side Side) []int {
	if side == ReceiverSide {
		return []int{r.ctl, r.roData, r.event}
	}
	return []int{r.ctl, r.data, r.event}
}

// Sender makes the sending end in this process. The data is sealed
// against writable mappings made after it, so that no descriptor of it
// (the receiver's is read-only already) can ever write it.
func (r *Ring) Sender() (*Sender, error) {
	e, err := open(r.ctl, r.data, r.event, true, false)
	if err != nil {
		return nil, err
	}
	// This process writes the data; from now on nobody else can map it
	// writable, whatever descriptor of it they got hold of.
	unix.FcntlInt(uintptr(r.data), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
	r.senderHere = true
	return &Sender{end: e}, nil
}

// Receiver makes the receiving end in this process, mapping the data
// read-only.
func (r *Ring) Receiver() (*Receiver, error) {
	e, err := open(r.ctl, r.roData, r.event, false, false)
	if err != nil {
		return nil, err
	}
	return newReceiver(e), nil
}

// Close closes the ring's descriptors; the ends made from it stay open
// until they are closed themselves.
func (r *Ring) Close() error {
	if r == nil || r.closed {
		return nil
	}
	r.closed = true
	for _, fd := range []int{r.ctl, r.data, r.roData, r.event} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	return nil
}

// OpenSender opens the sending end of a ring from the descriptors another
// process passed (Files(SenderSide)); the end takes them over.
func OpenSender(fds []int) (*Sender, error) {
	e, err := openFiles(fds, true)
	if err != nil {
		return nil, err
	}
	return &Sender{end: e}, nil
}

// OpenReceiver opens the receiving end of a ring from the descriptors
// another process passed (Files(ReceiverSide)); the end takes them over.
func OpenReceiver(fds []int) (*Receiver, error) {
	e, err := openFiles(fds, false)
	if err != nil {
		return nil, err
	}
	return newReceiver(e), nil
}

func openFiles(fds []int, send bool) (*end, error) {
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("shm: a ring's end takes 3 descriptors, not %d", len(fds))
	}
	return open(fds[0], fds[1], fds[2], send, true)
}

// end is what both ends share: the mappings, the indices in them, the
// eventfd and the cells.
type end struct {
	g         Geometry
	ctl, data []byte
	head      *atomic.Uint64
	tail      *atomic.Uint64
	waiting   *atomic.Uint32
	closed    *atomic.Uint32
	event     int
	cells     []Cell
	buf       [8]byte
	down      atomic.Bool
}

// open maps a ring's memory. own says that the descriptors are the end's
// (received from another process): it keeps the eventfd and closes the
// others once mapped; otherwise it keeps a duplicate of the eventfd.
func open(ctlFD, dataFD, eventFD int, send, own bool) (e *end, err error) {
	defer func() {
		if own {
			unix.Close(ctlFD)
			unix.Close(dataFD)
			if err != nil {
				unix.Close(eventFD)
			}
		}
	}()
	if !own {
		if eventFD, err = unix.FcntlInt(uintptr(eventFD), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("shm: %w", err)
		}
		defer func() {
			if err != nil {
				unix.Close(eventFD)
			}
		}()
	}
	var st unix.Stat_t
	if err := unix.Fstat(ctlFD, &st); err != nil || st.Size < ctlSize {
		return nil, errors.New("shm: the control descriptor is not a ring's")
	}
	ctl, err := unix.Mmap(ctlFD, 0, ctlSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mapping the control block: %w", err)
	}
	h := *(*ctlHeader)(unsafe.Pointer(&ctl[0]))
	g := Geometry{Cells: int(h.Cells), Window: int(h.Window)}
	if h.Magic != magic || g.check() != nil || h.DataSize != uint64(g.dataSize()) || h.ArenaOffset != uint64(g.arenaOffset()) {
		unix.Munmap(ctl)
		return nil, errors.New("shm: the control block describes no ring of this version")
	}
	if err := unix.Fstat(dataFD, &st); err != nil || st.Size != int64(h.DataSize) {
		unix.Munmap(ctl)
		return nil, fmt.Errorf("shm: the data descriptor does not hold the ring's %d bytes", h.DataSize)
	}
	prot := unix.PROT_READ
	if send {
		prot |= unix.PROT_WRITE
	}
	data, err := unix.Mmap(dataFD, 0, int(h.DataSize), prot, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(ctl)
		return nil, fmt.Errorf("shm: mapping the ring's data: %w", err)
	}
	e = &end{g: g, ctl: ctl, data: data, event: eventFD,
		head:    (*atomic.Uint64)(unsafe.Pointer(&ctl[offHead])),
		tail:    (*atomic.Uint64)(unsafe.Pointer(&ctl[offTail])),
		waiting: (*atomic.Uint32)(unsafe.Pointer(&ctl[offWaiting])),
		closed:  (*atomic.Uint32)(unsafe.Pointer(&ctl[offClosed])),
		cells:   make([]Cell, g.Cells)}
	for i := range e.cells {
		c := &e.cells[i]
		c.Index, c.Offset = i, i*g.window()
		base := i * g.cellSize()
		c.Header = (*Header)(unsafe.Pointer(&data[base]))
		c.E = (*[buffers.MaxBatch]buffers.Entry)(unsafe.Pointer(&data[base+headerSize]))
		if g.Window > 0 {
			c.D = (*[buffers.MaxBatch]Desc)(unsafe.Pointer(&data[base+headerSize+buffers.MaxBatch*entrySize]))
			off := g.arenaOffset() + i*g.window()
			c.Window = data[off : off+g.window() : off+g.window()]
		}
	}
	return e, nil
}

// close unmaps the ring, once.
func (e *end) close() {
	if e.down.CompareAndSwap(false, true) {
		e.unmap()
	}
}

func (e *end) unmap() {
	unix.Munmap(e.data)
	unix.Munmap(e.ctl)
	unix.Close(e.event)
}

// Geometry returns the ring's shape.
func (e *end) Geometry() Geometry { return e.g }

// Arena returns the packet arena, every cell's window one after the other
// (a cell's at its Offset), for a PBuf that views it.
func (e *end) Arena() []byte { return e.data[e.g.arenaOffset():] }

// ErrCorrupt is what an end returns when the other side wrote indices no
// ring can have.
var ErrCorrupt = errors.New("shm: the peer corrupted the ring's indices")

// Sender is the end of a ring that fills cells and publishes them.
type Sender struct {
	*end
	reserved bool
	// Wakes counts the cells after which the receiver slept and was woken
	// through the eventfd (a system call each); a receiver that spins is
	// never woken.
	Wakes uint64
}

// Reserve returns the next cell to fill, emptied (N, Dropped, Used 0), or
// nil when the ring is full: the receiver has not released the cells
// sent before. It returns ErrCorrupt when the receiver's index is past the
// sender's.
func (s *Sender) Reserve() (*Cell, error) {
	h, t := s.head.Load(), s.tail.Load()
	if t > h {
		return nil, ErrCorrupt
	}
	if h-t >= uint64(s.g.Cells) {
		return nil, nil
	}
	c := &s.cells[h&uint64(s.g.Cells-1)]
	c.N, c.Dropped, c.Used, c.Status = 0, 0, 0, 0
	s.reserved = true
	return c, nil
}

// Publish hands the reserved cell to the receiver and wakes it if it
// sleeps.
func (s *Sender) Publish() {
	if !s.reserved {
		panic("shm: Publish without Reserve")
	}
	s.reserved = false
	s.head.Add(1)
	if s.waiting.Load() != 0 {
		s.Wakes++
		s.wake()
	}
}

// Pending returns how many published cells the receiver has not released.
func (s *Sender) Pending() int { return int(s.head.Load() - s.tail.Load()) }

func (s *Sender) wake() {
	s.buf = [8]byte{1}
	unix.Write(s.event, s.buf[:]) // EAGAIN: the counter is already set
}

// Close tells the receiver that nothing more will come (it reads what was
// published first) and unmaps the ring here.
func (s *Sender) Close() error {
	if s.down.CompareAndSwap(false, true) {
		s.closed.Store(1)
		s.wake()
		s.unmap()
	}
	return nil
}
