// Package inproc is the bridge between two flowspaces of the same process
// (a simulated board and the host, or any two Go flowspaces): it carries
// batches of packets up, each packet at most once, with one of FFPF's copy
// strategies (§3.1).
//
// A Message is one source batch as it leaves the lower flowspace: the
// Region of PBuf memory that holds its packets and, per function output the
// flowspace above asked for, that function's IBuf entries (Out). With
// zero-copy the message refers to the producer's own PBuf region, which the
// producer reuses only when every flowspace above has released it; with
// copy-once the producer copies the packets once into a region of a PBuf
// that belongs to the flowspace above (a Pool, one per stream, sized for
// its packets) and the entries are renumbered into it.
//
// A producer that receives packets one at a time from across a barrier
// (the readers of the ring-buffer and AF_XDP bridges) fills its messages
// through a Stream per source, which batches the packets and sends each
// batch up when it is full or has waited FlushAfter.
//
// Back-pressure, not loss: a producer waits for a free message or region.
// Packets are lost only where they arrive (a live capture's kernel buffer,
// counted there) or when the run stops with messages in flight (counted as
// the bridge's dropped).
//
// Every message carries its stream's packet clock (Now), and a message
// with no packet (a clock-only message, Region nil) goes up when time
// moved but nothing passed: a flowspace above learns that time moved
// although everything beneath was filtered, so its windows end on time.
//
// A bridge has one lane or several: a lower flowspace that sends from
// several goroutines at once (a ring buffer per CPU, an AF_XDP socket per
// receive queue) sends each one's messages on a lane of its own, and the
// flowspace above reads each lane with a worker of its own, so that one
// interface's packets spread over the cores (DESIGN.md §15). The messages
// of one lane arrive in the order they were sent.
//
// The sharp edge: every entry of a message lies in one window of MaxBatch
// slots starting at Region.Base, as a source batch does.
package inproc

import (
	"context"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
)

// Region is a window of MaxBatch PBuf slots that a batch lives in, with a
// count of the messages that still refer to it.
type Region struct {
	PBuf *buffers.PBuf
	Base uint32
	// Stored says whether the packets sit in a PBuf the flowspaces above
	// may refer to (rather than transient memory of a flowspace that
	// processes in place).
	Stored bool

	refs  atomic.Int32
	freed chan struct{}
	pool  chan *Region // a receive region goes back here when released
}

// NewRegion returns a region of p starting at slot base.
func NewRegion(p *buffers.PBuf, base uint32, stored bool) *Region {
	return &Region{PBuf: p, Base: base, Stored: stored, freed: make(chan struct{}, 1)}
}

// Hold counts one more reference to the region.
func (r *Region) Hold() { r.refs.Add(1) }

// Release drops a reference; the last one frees the region for reuse.
func (r *Region) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.pool != nil {
		r.pool <- r
		return
	}
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// Wait blocks until nothing refers to the region any more.
func (r *Region) Wait(ctx context.Context) error {
	for r.refs.Load() != 0 {
		select {
		case <-r.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Out is the output of one function of the lower flowspace: its IBuf
// entries for the packets of the message.
type Out struct {
	Tag   any // which function: the upper flowspace's ghost looks it up
	Batch buffers.Batch
}

// Ended is the Tag of the Out that lists the packets of a message that
// reached an end of the graph beneath: counting packets at the ends (ffpf
// run -c), the flowspace above must not count them again.
var Ended any = ended{}

type ended struct{}

// EndedBit is the bit of a packet's mask (Stream.Add) that says it reached
// an end of the graph beneath; the other bits name exported functions.
const EndedBit uint64 = 1 << 63

// Message is one batch crossing the bridge.
type Message struct {
	Stream any // the source the packets came from
	// Lane is the lane it goes up on (see Bridge.Lanes), taken modulo
	// their number; 0 for a bridge of one.
	Lane   int
	Region *Region // where the packets are; nil in a clock-only message
	// Now is the stream's packet clock when the message left (ns since
	// the Unix epoch), at least the time of each of its packets.
	Now int64
	// Stored says whether the packets are in a PBuf the receiver may refer
	// to when it sends them further up (rather than in transient memory of
	// a flowspace that processes in place, or copied across a barrier into
	// such memory).
	Stored  bool
	Out     []Out
	Packets int // distinct packets referred to
	// Held is how many of them hold a unit of the run's packet limit
	// (flowspaces.Budget, counting at the ends of the graph): the
	// flowspace above counts them where they reach an end, or gives the
	// units back. The packets that reached an end beneath are in the Out
	// tagged Ended, and hold none.
	Held int
	// Copied says that the packets were copied across the barrier (into
	// a region of the flowspace above, or of the bridge), rather than
	// referred to where the lower flowspace has them.
	Copied bool
	// End says that the stream ends with this clock-only message: its
	// source read its last packet (a file's, or the last its packet limit
	// allows), and what its sender sent of the stream came before. Each
	// goroutine that sends the stream up sends one, on its lane (SendEnd:
	// one per lane); Ends says how many there are, so that the stream has
	// ended above once all have arrived.
	End  bool
	Ends int
}

// Stats are a bridge's counters: In = Out + Dropped. Of the packets that
// crossed in a message (In less those lost before they got into one),
// Copied were copied across and Referred were referred to in place: the
// strategy the bridge used, whatever its barrier declared. Messages counts
// the messages with packets, Clocks the clock-only ones (no packet: they
// count in none of the packet counters).
type Stats struct {
	In, Out, Dropped, Copied, Referred, Messages, Clocks uint64
	// Lanes are the packets received on each lane (Out, lane by lane),
	// for a bridge of several.
	Lanes []uint64
}

// Bridge is a queue of messages from one lower flowspace to its parent.
type Bridge struct {
	Name      string
	ch        []chan *Message // one per lane
	free      chan *Message
	closed    atomic.Bool
	producers atomic.Int32

	in, out, dropped, copied, referred, msgs, clocks atomic.Uint64
	laneOut                                          []atomic.Uint64
}

// Depth is how many messages a bridge holds: enough for the two sides to
// overlap, few enough that the regions stay in cache.
const Depth = 4

// New returns an empty bridge of one lane.
func New(name string) *Bridge { return NewLanes(name, 1) }

// NewLanes returns an empty bridge of lanes lanes (at least one), each
// holding Depth messages.
func NewLanes(name string, lanes int) *Bridge {
	lanes = max(1, lanes)
	b := &Bridge{Name: name, ch: make([]chan *Message, lanes), free: make(chan *Message, Depth*lanes), laneOut: make([]atomic.Uint64, lanes)}
	for i := range b.ch {
		b.ch[i] = make(chan *Message, Depth)
	}
	for range Depth * lanes {
		b.free <- &Message{}
	}
	return b
}

// Lanes returns how many lanes the bridge has.
func (b *Bridge) Lanes() int { return len(b.ch) }

// Carry adds the counters of old, a bridge this one replaces (the same
// barrier, reopened after its lower side had ended).
func (b *Bridge) Carry(old *Bridge) {
	s := old.Stats()
	for i, n := range s.Lanes {
		b.laneOut[i%len(b.laneOut)].Add(n)
	}
	b.in.Add(s.In)
	b.out.Add(s.Out)
	b.dropped.Add(s.Dropped)
	b.copied.Add(s.Copied)
	b.referred.Add(s.Referred)
	b.msgs.Add(s.Messages)
	b.clocks.Add(s.Clocks)
}

// Pool is the PBuf of the flowspace above that the copies of one stream go
// into, in regions of MaxBatch slots. Each stream has its own, sized for
// its packets, so that a stream added later never changes another's.
type Pool struct {
	free chan *Region
}

// PoolBytes bounds a pool's memory: fewer regions for long slots.
const PoolBytes = 64 << 20

// NewPool allocates a pool with slots of slot bytes: Depth regions, or as
// many as fit in PoolBytes (at least one).
func NewPool(slot int) *Pool {
	k := max(1, min(Depth, PoolBytes/(slot*buffers.MaxBatch)))
	pb := buffers.NewPBuf(k*buffers.MaxBatch, slot)
	p := &Pool{free: make(chan *Region, k)}
	for i := range k {
		r := NewRegion(pb, uint32(i*buffers.MaxBatch), true)
		r.pool = p.free
		p.free <- r
	}
	return p
}

// PoolOf makes a pool of k regions of an existing PBuf (a view of memory
// the producer owns, such as an AF_XDP UMEM), for zero-copy.
func PoolOf(pb *buffers.PBuf, k int) *Pool {
	p := &Pool{free: make(chan *Region, k)}
	for i := range k {
		r := NewRegion(pb, uint32(i*buffers.MaxBatch), true)
		r.pool = p.free
		p.free <- r
	}
	return p
}

// Take returns a free region of the pool, held once (the message that will
// refer to it), waiting for one.
func (p *Pool) Take(ctx context.Context) (*Region, error) {
	select {
	case r := <-p.free:
		r.Hold()
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryMessage returns a free message to fill, or false when all Depth are
// taken: a producer filling several streams at once then sends its
// partial batches up before it waits (Message), or it would wait for
// messages it holds itself.
func (b *Bridge) TryMessage() (*Message, bool) {
	select {
	case m := <-b.free:
		m.Out, m.Packets, m.Held, m.Region, m.Stream, m.Copied, m.Now, m.Lane = m.Out[:0], 0, 0, nil, nil, false, 0, 0
		m.End, m.Ends = false, 0
		return m, true
	default:
		return nil, false
	}
}

// TryTake returns a free region of the pool, held once, or false when none
// is free.
func (p *Pool) TryTake() (*Region, bool) {
	select {
	case r := <-p.free:
		r.Hold()
		return r, true
	default:
		return nil, false
	}
}

// Message returns a free message to fill, waiting for one.
func (b *Bridge) Message(ctx context.Context) (*Message, error) {
	select {
	case m := <-b.free:
		m.Out, m.Packets, m.Held, m.Region, m.Stream, m.Copied, m.Now, m.Lane = m.Out[:0], 0, 0, nil, nil, false, 0, 0
		m.End, m.Ends = false, 0
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Recycle gives back a message that was not sent.
func (b *Bridge) Recycle(m *Message) { b.free <- m }

// CopyUp copies the packets m's entries refer to into a region of pool
// (each once, at the same offset in the window) and renumbers the entries.
// It takes the place of m.Region, which the caller no longer needs.
func (b *Bridge) CopyUp(ctx context.Context, m *Message, pool *Pool) error {
	var r *Region
	select {
	case r = <-pool.free:
	case <-ctx.Done():
		return ctx.Err()
	}
	src := m.Region
	var done [buffers.MaxBatch]bool
	for i := range m.Out {
		o := &m.Out[i].Batch
		for j, e := range o.E[:o.N] {
			k := e.Slot - src.Base
			if !done[k] {
				done[k] = true
				md := src.PBuf.Meta(e.Slot)
				r.PBuf.Store(r.Base+k, src.PBuf.Data(e.Slot), md.WireLen, md.Timestamp, md.Source)
				*r.PBuf.Ann(r.Base + k) = *src.PBuf.Ann(e.Slot)
			}
			o.E[j].Slot = r.Base + k
		}
		o.PBuf, o.Base = r.PBuf, r.Base
	}
	r.Hold()
	m.Region, m.Stored, m.Copied = r, true, true
	return nil
}

// Send queues m; the receiver releases m.Region (which the caller has
// held) after processing. If ctx ends first the packets count as dropped.
func (b *Bridge) Send(ctx context.Context, m *Message) error {
	b.in.Add(uint64(m.Packets))
	if m.Copied {
		b.copied.Add(uint64(m.Packets))
	} else {
		b.referred.Add(uint64(m.Packets))
	}
	if ctx.Err() == nil {
		select {
		case b.ch[m.Lane%len(b.ch)] <- m:
			return nil
		case <-ctx.Done():
		}
	}
	// Stopped: a message sent now might never be read.
	b.dropped.Add(uint64(m.Packets))
	m.release()
	b.free <- m
	return ctx.Err()
}

// SendClock sends a clock-only message of stream: no packet passed since
// the last message, but its packet clock moved to now. It waits for a
// free message as Send does; false when the run stopped.
func (b *Bridge) SendClock(ctx context.Context, stream any, now int64) bool {
	return b.SendClockLane(ctx, stream, now, 0)
}

// SendClockLane is SendClock on lane lane.
func (b *Bridge) SendClockLane(ctx context.Context, stream any, now int64, lane int) bool {
	m, err := b.Message(ctx)
	if err != nil {
		return false
	}
	m.Stream, m.Now, m.Lane = stream, now, lane
	return b.Send(ctx, m) == nil
}

// SendEnd sends the end of stream (Message.End), with its packet clock
// now, on every lane, after what the caller sent of it: for a sender of
// one goroutine. A stream that several goroutines send up, each on its
// lane, ends with one end from each (SendEndLane). False when the run
// stopped.
func (b *Bridge) SendEnd(ctx context.Context, stream any, now int64) bool {
	for lane := range b.ch {
		if !b.SendEndLane(ctx, stream, now, lane, len(b.ch)) {
			return false
		}
	}
	return true
}

// SendEndLane sends one of the ends of stream on lane lane: the stream
// ends above once all of them have come.
func (b *Bridge) SendEndLane(ctx context.Context, stream any, now int64, lane, ends int) bool {
	m, err := b.Message(ctx)
	if err != nil {
		return false
	}
	m.Stream, m.Now, m.Lane, m.End, m.Ends = stream, now, lane, true, max(1, ends)
	return b.Send(ctx, m) == nil
}

// release drops the message's reference to its region, if it has one.
func (m *Message) release() {
	if m.Region != nil {
		m.Region.Release()
	}
}

// Lose counts n packets that were on their way up but never got into a
// message (the run stopped while the producer waited for one): they
// entered the bridge and were dropped.
func (b *Bridge) Lose(n int) {
	b.in.Add(uint64(n))
	b.dropped.Add(uint64(n))
}

// Share registers one more producer: a bridge that several flowspaces
// send up through (an eBPF flowspace and the one beneath it that it
// relays for) closes when the last of them closes it.
func (b *Bridge) Share() { b.producers.Add(1) }

// Close tells the receiver that nothing more will come, once every
// producer that shared the bridge has closed it.
func (b *Bridge) Close() {
	if b.producers.Load() > 0 && b.producers.Add(-1) > 0 {
		return
	}
	if b.closed.CompareAndSwap(false, true) {
		for _, ch := range b.ch {
			close(ch)
		}
	}
}

// Closed reports whether the lower side has closed the bridge.
func (b *Bridge) Closed() bool { return b.closed.Load() }

// Receive returns the next message of lane 0, or nil when the bridge is
// closed and the lane empty, or ctx is done.
func (b *Bridge) Receive(ctx context.Context) *Message { return b.ReceiveLane(ctx, 0) }

// ReceiveLane returns the next message of lane lane, or nil when the
// bridge is closed and the lane empty, or ctx is done.
func (b *Bridge) ReceiveLane(ctx context.Context, lane int) *Message {
	select {
	case m, ok := <-b.ch[lane]:
		if !ok {
			return nil
		}
		return m
	case <-ctx.Done():
		return nil
	}
}

// Done ends the receiver's use of m: its region is released and the
// message reused.
func (b *Bridge) Done(m *Message) {
	b.out.Add(uint64(m.Packets))
	if m.Packets > 0 {
		b.laneOut[m.Lane%len(b.ch)].Add(uint64(m.Packets))
	}
	if m.Region == nil {
		b.clocks.Add(1)
	} else {
		b.msgs.Add(1)
	}
	m.release()
	b.free <- m
}

// Drain counts the messages still queued as dropped and releases them; the
// receiver calls it when it stops early.
func (b *Bridge) Drain() {
	for _, ch := range b.ch {
	lane:
		for {
			select {
			case m, ok := <-ch:
				if !ok {
					break lane
				}
				b.dropped.Add(uint64(m.Packets))
				m.release()
				b.free <- m
			default:
				break lane
			}
		}
	}
}

// DrainUntilClosed counts everything still sent as dropped and releases
// it, until the lower side closes the bridge: a receiver that stops must
// not leave a producer blocked, nor a message in a queue nobody reads.
// held, when set, is given each message's Stream and Held (the units of
// a packet limit its packets hold, which go back).
func (b *Bridge) DrainUntilClosed(held func(stream any, n int)) {
	for i := range b.ch {
		b.DrainLaneUntilClosed(i, held)
	}
}

// DrainLaneUntilClosed is DrainUntilClosed for one lane, whose receiver
// stops while the others go on.
func (b *Bridge) DrainLaneUntilClosed(lane int, held func(stream any, n int)) {
	for m := range b.ch[lane] {
		if held != nil {
			held(m.Stream, m.Held)
		}
		b.dropped.Add(uint64(m.Packets))
		m.release()
		b.free <- m
	}
}

// Stats returns the counters.
func (b *Bridge) Stats() Stats {
	out, dropped, copied, referred, msgs := b.out.Load(), b.dropped.Load(), b.copied.Load(), b.referred.Load(), b.msgs.Load()
	s := Stats{In: b.in.Load(), Out: out, Dropped: dropped, Copied: copied, Referred: referred, Messages: msgs, Clocks: b.clocks.Load()}
	if len(b.laneOut) > 1 {
		for i := range b.laneOut {
			s.Lanes = append(s.Lanes, b.laneOut[i].Load())
		}
	}
	return s
}
