package kernel

// Windows in eBPF (DESIGN.md §11). A function with window= keeps its state
// twice over: every counter slot and every map value once per epoch
// parity. The program computes the packet's epoch, its time divided by the
// window, on the packet clock of live packets (bpf_ktime_get_ns, read once
// per packet, plus the flowspace's one offset of CLOCK_REALTIME from
// CLOCK_MONOTONIC: the time base the ring buffer's records, clock-only
// records and timestamps are on), and writes the half of its parity.
// The Go half of the function, in this process, closes a window once the
// clock has passed its end by a grace: it reads the finished half, merging
// the CPUs' copies by the fields' merges, into the Go function's MBuf,
// ticks the Go function (which reports the window exactly as it would have
// in userspace, and resets its MBuf), and then sweeps the finished half to
// zero while the programs write the other.
//
// That sweep is MAFIA's incremental reset done beside the datapath rather
// than in it: a half is swept during the window after its own, and is
// written again only one window later still. So that a sweep that comes
// late (a process that stalled for a whole window) can never mix two
// windows, each half has a ready mark, the epoch it is clean for; a packet
// whose half is not ready for its epoch is not measured, and counts as the
// function's dropped, never silently.
//
// A function that keeps an entry per flow (ebpfgen.Drained: trumpet's
// phase 1) is double-buffered the same way, on its epoch rather than a
// window, with a hash map per parity in place of halves of its counter
// slots, which stay cumulative: once an epoch has ended (and the grace)
// its Go half (functions.Drainer) is handed the entries of the epoch's
// map, read in batches (BPF_MAP_LOOKUP_BATCH) while the programs write
// the other map; the entries no packet of the epoch wrote are deleted
// (one BPF_MAP_DELETE_BATCH), those it wrote kept for their flows' next
// packets, and the map is made ready for the epoch after next.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/ringbuf"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// stackHalf holds, while a windowed function runs, its packet's epoch
// parity (u32; the word beside stackVlan).
const stackHalf = -28

// grace is how long after a window's end its Go half reads it: long
// enough for a program that took the time just before the end to finish
// writing (programs run to completion in microseconds, without sleeping).
const grace = 2 * time.Millisecond

// Clock map values.
const (
	clockOffset = 0 // CLOCK_REALTIME − CLOCK_MONOTONIC, ns
	clockFixed  = 1 // the time a test program reads instead (testClock)
)

// newClockMap creates the clock map of a flowspace and sets its offset.
func newClockMap() (*ebpf.Map, int64, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_clock", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		return nil, 0, fmt.Errorf("cannot create its clock map: %w", err)
	}
	off := ringbuf.Offset() // the one offset: the ring buffer's records' too
	if err := m.Update(uint32(clockOffset), uint64(off), ebpf.UpdateAny); err != nil {
		m.Close()
		return nil, 0, fmt.Errorf("cannot set its clock: %w", err)
	}
	return m, off, nil
}

// monotonic returns CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns, in ns.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// epochs is the double-buffering of a function with window=.
type epochs struct {
	interval int64     // ns
	slots    int       // counter slots of one half: the function's StateSlots
	ready    *ebpf.Map // [parity]: the epoch the half is clean for
	open     int64     // the epoch the Go half reads as the window filling
	started  bool
	// A Drained function's: its flow maps by parity, and the buffers a
	// drain reads their entries into (keys and values, all CPUs').
	flow       *ebpfgen.FlowMap
	fmaps      [2]*ebpf.Map
	keys, vals []byte
	cpus       int
}

// windowOf returns the double-buffering n needs, or nil without window=
// (and not Drained).
func windowOf(n *flowspaces.Node, fn ebpfgen.Function) (*epochs, error) {
	if d, ok := fn.(ebpfgen.Drained); ok {
		return drainedOf(d)
	}
	if !windowed(n) {
		return nil, nil
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		return nil, fmt.Errorf("cannot create the epoch map of its window: %w", err)
	}
	return &epochs{interval: int64(n.Ctx.Params.Duration("window")), slots: fn.StateSlots(), ready: m}, nil
}

// drainedOf returns the double-buffering of a Drained function: its ready
// marks and its two flow maps.
func drainedOf(d ebpfgen.Drained) (*epochs, error) {
	fm := d.FlowMap()
	if fm.Epoch <= 0 || fm.KeySize <= 0 || fm.ValueSize <= 0 || fm.ValueSize%8 != 0 || fm.Entries <= 0 {
		return nil, fmt.Errorf("its flow maps are declared wrong: %+v", fm)
	}
	ready, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		return nil, fmt.Errorf("cannot create the epoch map of its flow maps: %w", err)
	}
	w := &epochs{interval: int64(fm.Epoch), slots: d.StateSlots(), ready: ready, flow: &fm, cpus: 1}
	typ := ebpf.Hash
	if fm.PerCPU {
		typ, w.cpus = ebpf.PerCPUHash, ebpf.MustPossibleCPU()
	}
	for h := range w.fmaps {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_flows", Type: typ, KeySize: uint32(fm.KeySize), ValueSize: uint32(fm.ValueSize), MaxEntries: uint32(fm.Entries)})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("cannot create its flow map (%d flows of %d+%d bytes): %w", fm.Entries, fm.KeySize, fm.ValueSize, err)
		}
		w.fmaps[h] = m
	}
	w.keys = make([]byte, fm.Entries*fm.KeySize)
	// u64 words: the values are read as words, aligned
	w.vals = words(make([]uint64, fm.Entries*w.cpus*fm.ValueSize/8))
	return w, nil
}

// drain reads the entries of flow map h, those of epoch e, and hands
// them to the Go half; then it deletes the entries no packet of e wrote
// (its flow had none in e: the entry was last written two or more epochs
// before), so that the map holds the flows that have packets.
func (w *epochs) drain(h int, e int64, d functions.Drainer) error {
	fm, m := w.flow, w.fmaps[h]
	n, err := batchLookup(m, w.keys, w.vals, fm.Entries)
	if err != nil {
		return fmt.Errorf("cannot drain its flow map: %w", err)
	}
	d.Drain(e, w.keys[:n*fm.KeySize], w.vals[:n*w.cpus*fm.ValueSize], n, w.cpus)
	idle := 0
	for i := range n {
		live := false
		for c := range w.cpus {
			live = live || int64(buffers.Native.Uint64(w.vals[(i*w.cpus+c)*fm.ValueSize:])) == e
		}
		if !live {
			copy(w.keys[idle*fm.KeySize:], w.keys[i*fm.KeySize:(i+1)*fm.KeySize])
			idle++
		}
	}
	if err := batchDelete(m, w.keys, idle); err != nil {
		return fmt.Errorf("cannot delete the idle flows of its flow map: %w", err)
	}
	return nil
}

// bpf_attr of the batch commands.
type batchAttr struct {
	inBatch, outBatch, keys, values uint64
	count, fd                       uint32
	elemFlags, flags                uint64
}

const (
	bpfMapLookupBatch = 24 // BPF_MAP_LOOKUP_BATCH
	bpfMapDeleteBatch = 27 // BPF_MAP_DELETE_BATCH
)

func bpf(cmd int, attr *batchAttr) unix.Errno {
	_, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
	return errno
}

// batchLookup reads every entry of hash map m (at most max) into keys and
// vals, in batches (BPF_MAP_LOOKUP_BATCH), and returns how many. It makes
// the system call itself: cilium/ebpf decodes a per-CPU map's values one
// by one through reflection, which took 13 ms for 16,384 flows on 2
// CPUs, longer than an epoch.
func batchLookup(m *ebpf.Map, keys, vals []byte, max int) (int, error) {
	var attr batchAttr
	var cursor [2]uint64 // in_batch and out_batch: a hash map's bucket, a u32
	ks, vs := len(keys)/max, len(vals)/max
	n := 0
	for n < max {
		attr.outBatch = uint64(uintptr(unsafe.Pointer(&cursor[1])))
		attr.keys = uint64(uintptr(unsafe.Pointer(&keys[n*ks])))
		attr.values = uint64(uintptr(unsafe.Pointer(&vals[n*vs])))
		attr.count, attr.fd = uint32(max-n), uint32(m.FD())
		errno := bpf(bpfMapLookupBatch, &attr)
		runtime.KeepAlive(&cursor)
		n += int(attr.count)
		if errno == unix.ENOENT {
			return n, nil
		}
		if errno != 0 {
			return n, errno
		}
		cursor[0] = cursor[1]
		attr.inBatch = uint64(uintptr(unsafe.Pointer(&cursor[0])))
	}
	return n, nil
}

// batchDelete deletes the n keys at the start of keys from hash map m.
func batchDelete(m *ebpf.Map, keys []byte, n int) error {
	if n == 0 {
		return nil
	}
	attr := batchAttr{keys: uint64(uintptr(unsafe.Pointer(&keys[0]))), count: uint32(n), fd: uint32(m.FD())}
	errno := bpf(bpfMapDeleteBatch, &attr)
	runtime.KeepAlive(keys)
	if errno != 0 && errno != unix.ENOENT {
		return errno
	}
	return nil
}

// windowed says n has window=, which its class declares.
func windowed(n *flowspaces.Node) bool {
	declared := slices.ContainsFunc(n.Class.Params, func(p functions.Param) bool { return p.Name == "window" })
	return declared && n.Ctx.Params.Has("window")
}

func (w *epochs) close() {
	if w != nil && w.ready != nil {
		w.ready.Close()
		w.ready = nil
	}
	if w != nil {
		for h, m := range w.fmaps {
			if m != nil {
				m.Close()
				w.fmaps[h] = nil
			}
		}
	}
}

// halves is how many copies of its state a function keeps: a Drained
// function's counter slots and state maps are not double-buffered.
func (w *epochs) halves() int {
	if w == nil || w.flow != nil {
		return 1
	}
	return 2
}

// need is how many counter slots a function with slots state slots keeps:
// in, out, its state (twice, windowed) and, windowed or drained, late:
// packets whose half was not ready.
func (w *epochs) need(slots int) int {
	if w == nil {
		return 2 + slots
	}
	return 2 + w.halves()*slots + 1
}

// lateSlot is the offset of the late slot among a windowed function's.
func (w *epochs) lateSlot() int { return 2 + w.halves()*w.slots }

// prologue is the code before a windowed function's: the packet's epoch
// e, its parity into stackHalf, and to late unless half e&1 is ready for
// e. It clobbers R0 to R5.
func (p *progSpec) prologue(w *epochs, late string) asm.Instructions {
	lookup := func(m *ebpf.Map) asm.Instructions {
		return asm.Instructions{
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackKey),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, late),
		}
	}
	var in asm.Instructions
	if p.testClock {
		in = append(in, asm.StoreImm(asm.RFP, stackKey, clockFixed, asm.Word))
		in = append(in, lookup(p.clock)...)
		in = append(in, asm.LoadMem(asm.R0, asm.R0, 0, asm.DWord))
	} else {
		in = append(in, asm.StoreImm(asm.RFP, stackKey, clockOffset, asm.Word))
		in = append(in, lookup(p.clock)...)
		// The packet's time, read once at the program's start (readsTime):
		// the nanoseconds its timestamps and records carry.
		in = append(in,
			asm.LoadMem(asm.R0, asm.R0, 0, asm.DWord),
			asm.LoadMem(asm.R1, asm.RFP, p.frame().time, asm.DWord),
			asm.Add.Reg(asm.R0, asm.R1),
		)
	}
	fr := p.frame()
	if fr.clock != 0 {
		in = append(in, asm.StoreMem(asm.RFP, fr.clock, asm.R0, asm.DWord))
	}
	in = append(in,
		asm.LoadImm(asm.R1, w.interval, asm.DWord),
		asm.Div.Reg(asm.R0, asm.R1), // the epoch (unsigned: times after 1970)
		asm.StoreMem(asm.RFP, stackValue, asm.R0, asm.DWord),
	)
	if fr.epoch != 0 {
		in = append(in, asm.StoreMem(asm.RFP, fr.epoch, asm.R0, asm.DWord))
	}
	in = append(in,
		asm.And.Imm(asm.R0, 1),
		asm.StoreMem(asm.RFP, stackHalf, asm.R0, asm.Word),
		asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.Word),
	)
	in = append(in, lookup(w.ready)...)
	return append(in,
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.LoadMem(asm.R2, asm.RFP, stackValue, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, late),
	)
}

// epochOf is the epoch of time t (ns since the Unix epoch).
func (w *epochs) epochOf(t int64) int64 { return t / w.interval }

// halfState is what the Go half of a windowed (or reporting) function
// works on: its counter slots, maps and MBuf, and the Go function that
// reports.
type halfState struct {
	counters *ebpf.Map
	slot     int // the function's first counter slot
	slots    int // its state slots (of one half)
	maps     map[string]*stateMap
	mbuf     *buffers.MBuf
	win      *epochs
	gofn     functions.Function
	mu       *sync.Mutex // the Go half's lock (node.goMu), nil for none
}

func (k *node) half(counters *ebpf.Map) *halfState {
	return &halfState{counters: counters, slot: k.slot, slots: k.slots, maps: k.maps, mbuf: k.mbuf, win: k.win, gofn: k.gofn, mu: &k.goMu}
}

// lock locks the Go half.
func (s *halfState) lock() func() {
	if s.mu == nil {
		return func() {}
	}
	s.mu.Lock()
	return s.mu.Unlock
}

// load reads half h of the state into the MBuf; it reports whether it
// could (a map closed at the end of the run cannot be read).
func (s *halfState) load(h int) bool {
	if s.mbuf == nil {
		return true
	}
	if s.win != nil && s.win.flow != nil {
		h = 0 // one copy
	}
	fields := s.mbuf.Fields()
	vals := make([]uint64, 0, s.slots)
	for i := range min(len(fields), s.slots) {
		v, err := sumSlot(s.counters, s.slot+2+h*s.slots+i)
		if err != nil {
			return false
		}
		vals = append(vals, v)
	}
	for i, v := range vals {
		s.mbuf.Store64(fields[i].Offset, v)
	}
	for _, m := range s.maps {
		if m.readHalf(s.mbuf, h) != nil {
			return false
		}
	}
	return true
}

// sweep zeroes half h: its counter slots and its maps' values. A Drained
// function's are cumulative, and its flow maps emptied by their drains.
func (s *halfState) sweep(h int) error {
	if s.win != nil && s.win.flow != nil {
		return nil
	}
	zero := make([]uint64, ebpf.MustPossibleCPU())
	for i := range s.slots {
		if err := s.counters.Update(uint32(s.slot+2+h*s.slots+i), zero, ebpf.UpdateAny); err != nil {
			return err
		}
	}
	for _, m := range s.maps {
		if err := m.sweep(h); err != nil {
			return err
		}
	}
	return nil
}

// setReady marks half e&1 clean for epoch e.
func (s *halfState) setReady(e int64) error {
	return s.win.ready.Update(uint32(e&1), uint64(e), ebpf.UpdateAny)
}

// start opens the window of time now: both halves swept and ready for
// the epoch of now and the next, and the Go function's window started.
func (s *halfState) start(now int64) error {
	defer s.lock()()
	if c, ok := s.gofn.(functions.Clocked); ok && c.Deadline() <= now {
		c.Tick(now) // the first tick starts the Go function's window (or the whole run)
	}
	w := s.win
	if w == nil || w.started {
		return nil
	}
	e := w.epochOf(now)
	for h := range 2 {
		if err := s.sweep(h); err != nil {
			return err
		}
	}
	if err := errors.Join(s.setReady(e), s.setReady(e+1)); err != nil {
		return err
	}
	w.open, w.started = e, true
	return nil
}

// advance closes the windows that ended at or before now: each is read
// into the MBuf, reported by the Go function (which then resets the
// MBuf), and its half swept and made ready for the epoch after next.
// Then the MBuf shows the window filling. After a stall of more than one
// window the epochs in between, which the programs could not write (their
// halves were not ready), are passed over in one tick, as the Go function
// passes over windows without packets.
func (s *halfState) advance(now int64) error {
	defer s.lock()()
	w := s.win
	if w == nil || !w.started {
		return nil
	}
	c, _ := s.gofn.(functions.Clocked)
	e := w.epochOf(now)
	if w.open >= e {
		return nil
	}
	for closed := 0; w.open < e && closed < 2; closed++ {
		h := int(w.open & 1)
		if w.flow != nil {
			d, ok := s.gofn.(functions.Drainer)
			if !ok {
				return errors.New("its Go half drains no flow map")
			}
			if err := w.drain(h, w.open, d); err != nil {
				return err
			}
			if err := s.setReady(w.open + 2); err != nil {
				return err
			}
			w.open++
			continue
		}
		if !s.load(h) {
			return errors.New("its state maps are closed")
		}
		end := (w.open + 1) * w.interval
		if c != nil && c.Deadline() <= end {
			c.Tick(end)
		}
		if err := s.sweep(h); err != nil {
			return err
		}
		if err := s.setReady(w.open + 2); err != nil {
			return err
		}
		w.open++
	}
	if w.open < e {
		if c != nil && w.flow == nil {
			c.Tick(e * w.interval)
		}
		if err := errors.Join(s.setReady(e), s.setReady(e+1)); err != nil {
			return err
		}
		w.open = e
	}
	return nil
}

// end is advance at the end of the run, the programs detached: the
// windows that ended by now are closed, and a Drained function's epoch of
// now, which its map holds whole since no program writes it any more, is
// drained too, so that its Go half's Flush reports the last interval on
// all its packets.
func (s *halfState) end(now int64) error {
	if err := s.advance(now); err != nil {
		return err
	}
	w := s.win
	if w == nil || w.flow == nil || !w.started {
		return nil
	}
	d, ok := s.gofn.(functions.Drainer)
	if !ok {
		return errors.New("its Go half drains no flow map")
	}
	defer s.lock()()
	if err := w.drain(int(w.open&1), w.open, d); err != nil {
		return err
	}
	w.open++
	return nil
}

// sumSlot sums counter slot over the CPUs.
func sumSlot(m *ebpf.Map, slot int) (uint64, error) {
	var per []uint64
	if err := m.Lookup(uint32(slot), &per); err != nil {
		return 0, err
	}
	var s uint64
	for _, v := range per {
		s += v
	}
	return s, nil
}
