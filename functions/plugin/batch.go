package plugin

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ffpf-go/ffpf/bridges/shm"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/buffers/shared"
	"github.com/ffpf-go/ffpf/functions"
)

// The batch protocol on a function's two rings. A cell down is a part of
// a batch (Status 0) or a request to map packet memory (statusMap); the
// cell up with the same Seq answers it. In a part, Aux[0] names the
// memory its descriptors refer to: 0 is the cell's own window (the
// packets were copied once into the ring), k ≥ 1 the k-th memory the
// function mapped into the plugin (zero-copy). An answer carries, in Aux,
// how the plugin found its cells so far (its down ring's WaitStats:
// Spun, Slept, Waited) and how often it woke ffpf (its up ring's Wakes).
const (
	statusMap     = 1 // down: map the memory whose descriptor crossed the socket tagged Aux[1]: Aux[0] its number, Aux[2] its offset, Aux[3] its size
	statusRefused = 2 // up: the plugin could not map it
	statusBad     = 3 // up: the part named memory the plugin has not mapped
	maxArenas     = 8 // memories a function maps; beyond them its packets are copied
)

// Geometry of a function's rings: up to cells parts in flight, each in a
// cell whose window holds a part of packets of 4 KB, or one of the
// longest the inputs deliver, when they are copied.
const (
	cells     = 8
	maxWindow = buffers.MaxBatch * 4096
)

// partSize is the most entries of a batch one cell carries: a batch of
// more crosses as several parts in flight at once, so that the plugin
// filters the first while ffpf fills the next (pipelining within a
// batch, as Process's contract allows: the batch is compacted when
// Process returns). A part whose packets are copied may end early, when
// its window is full.
var partSize = buffers.MaxBatch

var _ functions.SharedReader = (*function)(nil)

func windowFor(snaplen int) int {
	if snaplen <= 0 {
		snaplen = 65535
	}
	return min(max(snaplen, maxWindow), shm.MaxWindow)
}

// function is a function of a plugin's class as ffpf runs it: Process
// sends its batch down a ring in parts, each entry a descriptor of its
// packet in memory the plugin maps (zero-copy) or of a copy in the ring's
// window (copy-once), and takes the plugin's answers from the ring up, in
// order; its state is the plugin's, read in shared memory.
type function struct {
	p          *proc
	instance   uint64
	down       *shm.Sender
	up         *shm.Receiver
	mbuf       *buffers.MBuf
	handlers   []functions.Handler
	seq        uint64
	rpcBatches bool
	copyOnce   bool
	rpcReq     rpcBatch
	closed     bool

	// The memories mapped into the plugin (arena k is arenas[k-1]), those
	// it could not map, and the PBuf last seen with its arena and the
	// offset of the PBuf's memory in it.
	arenas    [maxArenas]*shared.Memory
	refused   []*shared.Memory
	lastPBuf  *buffers.PBuf
	lastArena int
	lastDelta uint64

	// The parts in flight, oldest first (a ring of cells entries).
	flight       [cells]part
	first, count int

	stats Stats
}

// part is a part of a batch in flight: its entries' place in the batch.
type part struct {
	seq      uint64
	from, n  int
	arena    int
	received bool
}

// ReadsShared implements functions.SharedReader: the plugin reads
// packets in shared memory in place, unless every batch goes over gRPC or
// is copied (Options).
func (f *function) ReadsShared() bool { return !f.rpcBatches && !f.copyOnce }

// Process implements functions.Function. Once the plugin has failed,
// every packet counts as dropped; a batch that was in flight when it
// failed counts what had not come back as dropped too.
func (f *function) Process(b *buffers.Batch) {
	if f.p.failed.Load() != nil {
		b.Dropped += b.N
		b.N = 0
		return
	}
	if f.rpcBatches {
		f.processRPC(b)
		return
	}
	arena, delta, err := f.arenaOf(b.PBuf)
	if err != nil {
		b.Dropped += b.N
		b.N = 0
		return
	}
	out, dropped, sent, done := 0, 0, 0, 0
	for done < b.N {
		// Send what the ring has room for, then take the oldest answer.
		for sent < b.N && f.count < cells {
			n, err := f.send(b, sent, arena, delta)
			if err != nil {
				b.N, b.Dropped = out, b.Dropped+dropped+b.N-done
				return
			}
			sent += n
		}
		pt, err := f.take(b, &out, &dropped)
		if err != nil {
			// What was in flight and what had not gone yet is lost.
			b.N, b.Dropped = out, b.Dropped+dropped+b.N-done
			return
		}
		done += pt.n
	}
	b.N, b.Dropped = out, b.Dropped+dropped
}

// send puts the entries of b from from on into a cell, as many as a part
// takes (or, copied, as fit its window), and publishes it; it returns how
// many went.
func (f *function) send(b *buffers.Batch, from, arena int, delta uint64) (int, error) {
	c, err := f.down.Reserve()
	if err != nil || c == nil {
		f.p.fail("broke its ring (it took no batch, or wrote nonsense into the indices)", true)
		return 0, errors.New("ring")
	}
	f.seq++
	c.Seq, c.Now, c.Aux[0] = f.seq, b.Now, uint64(arena)
	end := min(b.N, from+partSize)
	n := 0
	if arena > 0 {
		for i := from; i < end; i++ {
			e := b.E[i]
			m := b.PBuf.Meta(e.Slot)
			c.Ref(n, delta+m.Offset, m.CapLen, m.WireLen, m.Timestamp)
			c.E[n] = buffers.Entry{Slot: uint32(n), Class: e.Class}
			n++
		}
		f.stats.Referred += uint64(n)
	} else {
		for i := from; i < end; i++ {
			e := b.E[i]
			m := b.PBuf.Meta(e.Slot)
			if !c.Put(n, b.PBuf.Data(e.Slot), m.WireLen, m.Timestamp) {
				break
			}
			c.E[n] = buffers.Entry{Slot: uint32(n), Class: e.Class}
			n++
		}
		if n == 0 { // a packet longer than a window: cannot happen, the window holds the snap length
			f.p.fail("was sent a packet longer than its window", false)
			return 0, errors.New("window")
		}
		f.stats.Copied += uint64(n)
	}
	c.N = uint32(n)
	f.down.Publish()
	f.flight[(f.first+f.count)%cells] = part{seq: f.seq, from: from, n: n, arena: arena}
	f.count++
	f.stats.Parts++
	return n, nil
}

// answer waits for the answer to the oldest cell in flight, within the
// plugin's deadline, and checks that it answers that cell. The caller
// releases it.
func (f *function) answer() (*shm.Cell, part, error) {
	pt := f.flight[f.first]
	f.first, f.count = (f.first+1)%cells, f.count-1
	r, err := f.up.Next(f.p.deadline)
	switch {
	case errors.Is(err, shm.ErrTimeout):
		f.p.fail(fmt.Sprintf("did not answer a batch within %v", f.p.deadline), true)
		return nil, pt, err
	case errors.Is(err, shm.ErrPeerGone):
		f.p.fail("exited during a batch", false)
		return nil, pt, err
	case err != nil:
		f.p.fail(fmt.Sprintf("broke its ring: %v", err), true)
		return nil, pt, err
	}
	if r.Seq != pt.seq {
		f.up.Release()
		f.p.fail(fmt.Sprintf("answered batch %d with batch %d", pt.seq, r.Seq), true)
		return nil, pt, errors.New("seq")
	}
	f.stats.plugin = [4]uint64(r.Aux)
	return r, pt, nil
}

// take takes the answer to the oldest part in flight and appends the
// entries that passed at b.E[*out], in order. The answer keeps a
// subsequence of the part: indices ascending, each one a packet that was
// sent; anything else is an entry of no batch.
func (f *function) take(b *buffers.Batch, out, dropped *int) (part, error) {
	r, pt, err := f.answer()
	if err != nil {
		return pt, err
	}
	defer f.up.Release()
	kept := int(r.N)
	if r.Status == statusBad {
		f.p.fail(fmt.Sprintf("could not read the packet memory of batch %d", pt.seq), true)
		return pt, errors.New("memory")
	}
	if kept > pt.n || int(r.Dropped) > pt.n-kept {
		f.p.fail(fmt.Sprintf("answered a batch of %d packets with %d passed and %d dropped", pt.n, kept, r.Dropped), true)
		return pt, errors.New("count")
	}
	prev := -1
	for j := range kept {
		idx := int(r.E[j].Slot)
		if idx <= prev || idx >= pt.n {
			f.p.fail(fmt.Sprintf("returned an entry that was not in its batch (packet %d of %d, after %d)", idx, pt.n, prev), true)
			return pt, errors.New("foreign")
		}
		prev = idx
		b.E[*out] = buffers.Entry{Slot: b.E[pt.from+idx].Slot, Class: r.E[j].Class}
		*out++
	}
	*dropped += int(r.Dropped)
	return pt, nil
}

// arenaOf returns the memory the packets of p lie in as the plugin maps
// it: k ≥ 1 and the offset of p's memory in it, or 0 when they are to be
// copied (p is not in shared memory, or the plugin could not map it). It
// maps the memory into the plugin the first time it is seen.
func (f *function) arenaOf(p *buffers.PBuf) (int, uint64, error) {
	if p == f.lastPBuf {
		return f.lastArena, f.lastDelta, nil
	}
	k, delta, err := f.find(p)
	if err != nil {
		return 0, 0, err
	}
	f.lastPBuf, f.lastArena, f.lastDelta = p, k, delta
	return k, delta, nil
}

func (f *function) find(p *buffers.PBuf) (int, uint64, error) {
	if f.copyOnce {
		return 0, 0, nil
	}
	mem := p.Memory()
	m, off := shared.Find(mem)
	if m == nil || off+len(mem) > len(m.Bytes()) {
		return 0, 0, nil
	}
	free := 0
	for i, a := range f.arenas {
		if a == m {
			return i + 1, uint64(off), nil
		}
		if a == nil && free == 0 {
			free = i + 1
		}
	}
	for _, r := range f.refused {
		if r == m {
			return 0, 0, nil
		}
	}
	if free == 0 { // as many as a function maps: copy
		return 0, 0, nil
	}
	ok, err := f.mapArena(free, m)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		f.refused = append(f.refused, m)
		return 0, 0, nil
	}
	f.arenas[free-1] = m
	return free, uint64(off), nil
}

// mapArena maps m into the plugin as arena k: its descriptor crosses the
// socket, then a cell asks the plugin to map it. It reports whether the
// plugin did; an error means that the plugin failed.
func (f *function) mapArena(k int, m *shared.Memory) (bool, error) {
	fd, off := m.File()
	p := f.p
	p.mu.Lock()
	p.token++
	token := p.token
	var tag [8]byte
	binary.LittleEndian.PutUint64(tag[:], token)
	err := shm.SendFiles(p.sock, tag[:], []int{fd})
	p.mu.Unlock()
	if err != nil {
		p.fail(fmt.Sprintf("could not be sent packet memory: %v", err), true)
		return false, err
	}
	c, err := f.down.Reserve()
	if err != nil || c == nil {
		p.fail("broke its ring (it took no batch, or wrote nonsense into the indices)", true)
		return false, errors.New("ring")
	}
	f.seq++
	c.Seq, c.N, c.Status = f.seq, 0, statusMap
	c.Aux = [4]uint64{uint64(k), token, uint64(off), uint64(len(m.Bytes()))}
	f.down.Publish()
	f.flight[(f.first+f.count)%cells] = part{seq: f.seq}
	f.count++
	r, _, err := f.answer()
	if err != nil {
		return false, err
	}
	ok := r.Status == 0
	f.up.Release()
	return ok, nil
}

// Stats say how a function's batches crossed to its plugin.
type Stats struct {
	// Referred and Copied count the packets sent as descriptors of memory
	// the plugin maps (zero-copy) and those copied into the ring
	// (copy-once); Parts the cells they went in.
	Referred, Copied, Parts uint64
	// Waits is how ffpf found the plugin's answers, PluginWaits how the
	// plugin found ffpf's cells: already there, while spinning, or after
	// sleeping on the eventfd; Wakes and PluginWakes count the eventfd
	// writes each side made to wake the other.
	Waits, PluginWaits shm.WaitStats
	Wakes, PluginWakes uint64

	plugin [4]uint64 // the last answer's Aux
}

// stats returns the function's counts so far.
func (f *function) statsNow() Stats {
	s := f.stats
	s.Waits, s.Wakes = f.up.Stats, f.down.Wakes
	s.PluginWaits = shm.WaitStats{Spun: s.plugin[0], Slept: s.plugin[1], Waited: s.plugin[2]}
	s.PluginWaits.Polled = s.Parts - min(s.Parts, s.PluginWaits.Spun+s.PluginWaits.Slept)
	s.PluginWakes = s.plugin[3]
	return s
}

func (p *proc) addStats(s Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := &p.stats
	t.Referred += s.Referred
	t.Copied += s.Copied
	t.Parts += s.Parts
	t.Wakes += s.Wakes
	t.PluginWakes += s.PluginWakes
	for _, w := range [][2]*shm.WaitStats{{&t.Waits, &s.Waits}, {&t.PluginWaits, &s.PluginWaits}} {
		w[0].Polled += w[1].Polled
		w[0].Spun += w[1].Spun
		w[0].Slept += w[1].Slept
		w[0].Waited += w[1].Waited
	}
}

// Stats returns how the batches of the functions of class that were
// closed crossed to its plugin, summed.
func (h *Host) Stats(class string) Stats {
	for _, p := range h.procs {
		if p.class != nil && p.class.Name == class {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.stats
		}
	}
	return Stats{}
}
