package inproc

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/buffers"
)

// FlushAfter is how long a packet may wait in a Stream's batch that is not
// full before the batch goes up.
const FlushAfter = time.Millisecond

// A Stream is the batch being filled for one source by a producer that
// receives packets one at a time from across a barrier (the reader of a
// BPF ring buffer, of an AF_XDP socket): it stores each packet once, in a
// region of a PBuf of the flowspace above (Pool), or refers to it where it
// already is (Frames), and adds an IBuf entry for it to the output of each
// function whose bit the packet's mask sets. A full batch goes up as one
// Message; Flush sends a partial one. Each message carries the stream's
// packet clock; Clock moves it when no packet came (a clock-only message).
// One goroutine fills a stream.
type Stream struct {
	Up     *Bridge
	Source any    // the messages' Stream: the source the packets came from
	Mask   uint64 // the outputs its packets may reach: bit b is Tags[b]
	Tags   []any  // by bit, the Out tags: the functions the flowspace above asked for
	Snap   int    // bytes of each packet kept: the capture's snap length
	// Pool takes the copies of the packets; Frames, when set instead,
	// is memory the packets already lie in, which messages refer to.
	Pool   *Pool
	Frames Frames
	// Peers are the streams the same goroutine fills, this one among
	// them: their partial batches go up before it waits for a message.
	Peers []*Stream
	// Taken, when set, counts the packets the stream sent up.
	Taken *atomic.Uint64
	// Lane is the lane of the bridge its messages go up on: the
	// goroutine's that fills it (a ring buffer's, a socket's).
	Lane int
	// Ann are the annotation words (buffers.AnnWords) each packet brings
	// from beneath, in the order Add's ann holds them: the words that
	// functions above read, written by functions beneath.
	Ann []int
	// Holds says that each packet holds a unit of the run's packet limit
	// (counting at the ends of the graph) unless its mask has EndedBit:
	// the messages say how many (Message.Held).
	Holds bool

	out  map[int]*buffers.Batch
	msg  *Message
	reg  *Region
	n    int
	held int
	now  int64 // the stream's packet clock
	sent int64 // the clock the last message carried
}

// Frames is producer-owned memory that packets arrive in (an AF_XDP UMEM
// seen as a PBuf), lent to the flowspace above region by region.
type Frames interface {
	// TryTake returns a free region, held once, or false when none is.
	TryTake() (*Region, bool)
	// Take waits for a free region, held once.
	Take(ctx context.Context) (*Region, error)
	// Hold records that r refers to the frame at addr: the frame is not
	// reused until r is released.
	Hold(r *Region, addr uint64)
}

// Add copies one packet into s's batch, or, with Frames, refers to it at
// addr, the frame it lies in; mask selects the outputs that keep it, and
// EndedBit in it says that it reached an end of the graph beneath; ann
// holds the packet's annotation words s.Ann names, 8 bytes each in native
// byte order (nil without). It returns false when the run stopped (the
// packet counts as dropped).
func (s *Stream) Add(ctx context.Context, mask uint64, pkt []byte, wire uint32, ts int64, addr uint64, ann []byte) bool {
	if s.msg == nil && !s.begin(ctx) {
		return false
	}
	slot := s.reg.Base + uint32(s.n)
	if s.Frames != nil {
		// Refer to the frame where it is: the slot describes it.
		*s.reg.PBuf.Meta(slot) = buffers.Meta{Timestamp: ts, Offset: addr, CapLen: uint32(len(pkt)), WireLen: wire}
		s.Frames.Hold(s.reg, addr)
	} else {
		s.reg.PBuf.Store(slot, pkt, wire, ts, 0)
	}
	if len(ann) >= 8*len(s.Ann) {
		a := s.reg.PBuf.Ann(slot)
		for i, w := range s.Ann {
			a[w] = binary.NativeEndian.Uint64(ann[8*i:])
		}
	}
	s.now = max(s.now, ts)
	if mask&EndedBit != 0 {
		mask &^= EndedBit
		s.put(63, Ended, slot)
	} else if s.Holds {
		s.held++
	}
	for b := 0; mask != 0; b++ {
		if mask&1 != 0 {
			s.put(b, s.Tags[b], slot)
		}
		mask >>= 1
	}
	s.n++
	if s.n == buffers.MaxBatch {
		s.Flush(ctx)
	}
	return true
}

// put adds slot to the output of bit b (63: Ended), tagged tag.
func (s *Stream) put(b int, tag any, slot uint32) {
	o := s.out[b]
	if o == nil {
		s.msg.Out = append(s.msg.Out, Out{Tag: tag})
		o = &s.msg.Out[len(s.msg.Out)-1].Batch
		o.PBuf, o.Base = s.reg.PBuf, s.reg.Base
		s.out[b] = o
	}
	o.E[o.N] = buffers.Entry{Slot: slot}
	o.N++
}

// begin takes a message and a region for s's next batch.
func (s *Stream) begin(ctx context.Context) bool {
	m, ok := s.Up.TryMessage()
	if !ok {
		// The partial batches of this goroutine's streams may hold every
		// message: send them up, then wait for the flowspace above to
		// free one. (Other producers flush theirs when they are idle.)
		FlushAll(ctx, s.Peers)
		var err error
		if m, err = s.Up.Message(ctx); err != nil {
			s.Up.Lose(1)
			return false
		}
	}
	reg, err := s.region(ctx)
	if err != nil {
		s.Up.Recycle(m)
		s.Up.Lose(1)
		return false
	}
	m.Stream, m.Region, m.Stored, m.Lane = s.Source, reg, true, s.Lane
	if cap(m.Out) < len(s.Tags)+1 {
		// Once per message: the batches are referred to below, so the
		// slice must not move while it grows.
		m.Out = make([]Out, 0, len(s.Tags)+1) // and Ended
	}
	if s.out == nil {
		s.out = map[int]*buffers.Batch{}
	}
	s.msg, s.reg, s.n, s.held = m, reg, 0, 0
	clear(s.out)
	return true
}

// region returns a region for s's next batch. When Frames has none free,
// the partial batches of s's peers go up first: the flowspace above may
// be waiting for them before it releases one.
func (s *Stream) region(ctx context.Context) (*Region, error) {
	if s.Frames == nil {
		return s.Pool.Take(ctx)
	}
	if r, ok := s.Frames.TryTake(); ok {
		return r, nil
	}
	FlushAll(ctx, s.Peers)
	return s.Frames.Take(ctx)
}

// Pending reports whether s holds a partial batch.
func (s *Stream) Pending() bool { return s.msg != nil }

// Flush sends s's batch up.
func (s *Stream) Flush(ctx context.Context) {
	if s.msg == nil {
		return
	}
	s.msg.Packets, s.msg.Held = s.n, s.held
	s.msg.Now, s.sent = s.now, s.now
	s.msg.Copied = s.Frames == nil // into the pool, or referred to in the frames
	if s.Taken != nil {
		s.Taken.Add(uint64(s.n))
	}
	s.Up.Send(ctx, s.msg)
	s.msg, s.reg, s.n = nil, nil, 0
}

// Clock moves s's packet clock to now (ns since the Unix epoch) where no
// packet of s arrived: everything was filtered beneath, or nothing came.
// Unless a partial batch will carry it, a clock-only message goes up when
// the clock moved past what the last message carried. It returns false
// when the run stopped.
func (s *Stream) Clock(ctx context.Context, now int64) bool {
	s.now = max(s.now, now)
	if s.msg != nil || s.now <= s.sent {
		return true
	}
	m, ok := s.Up.TryMessage()
	if !ok {
		// As in begin: this goroutine's partial batches may hold every
		// message.
		FlushAll(ctx, s.Peers)
		var err error
		if m, err = s.Up.Message(ctx); err != nil {
			return false
		}
	}
	m.Stream, m.Now, m.Lane, s.sent = s.Source, s.now, s.Lane, s.now
	return s.Up.Send(ctx, m) == nil
}

// FlushAll sends the batches of streams up.
func FlushAll(ctx context.Context, streams []*Stream) {
	for _, s := range streams {
		s.Flush(ctx)
	}
}
