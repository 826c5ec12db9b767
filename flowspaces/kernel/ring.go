package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asavie/xdp"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// The kernel → user bridge. The programs copy each packet that an exported
// function passed into the BPF ring buffer, once, with the mask of those
// functions, in a record of 128, 512 or snap-length bytes (a record's size
// must be a constant for the verifier; three sizes let small packets take
// little of the ring); a goroutine reads the records, stores the packets in a PBuf
// of the flowspace above and sends them up as in-process messages, one
// per source and batch, with each exported function's IBuf entries.
//
// Notification adapts to the rate on its own: the kernel wakes the reader
// only for a record committed while the reader had caught up (an empty
// ring). At high rates the reader is always behind, so it drains batch
// after batch without a wake-up — polling; at low rates each packet wakes
// it. A batch that is not full goes up after flushAfter.

// flushAfter is how long a packet may wait in a batch that is not full.
const flushAfter = time.Millisecond

// ringReader reads one flowspace's ring buffer, or its AF_XDP sockets.
type ringReader struct {
	rd     *ringbuf.Reader
	x      *xskSet // AF_XDP, instead of rd: a goroutine per socket
	quit   chan struct{}
	up     *inproc.Bridge
	ports  [][]*stream // per port (per socket for AF_XDP), the sources that capture there
	wg     sync.WaitGroup
	offset int64 // CLOCK_REALTIME - CLOCK_MONOTONIC, in ns
}

// stream is the batch being filled for one source.
type stream struct {
	zc   *zeroCopy // set when the batch refers to AF_XDP frames in place
	src  *flowspaces.Node
	mask uint64             // the exported functions it reaches
	tags []*flowspaces.Node // by bit
	snap int                // bytes of each packet kept: the capture's snap length
	pool *inproc.Pool
	reg  *inproc.Region
	out  map[int]*buffers.Batch
	msg  *inproc.Message
	n    int

	peers []*stream      // the streams the same goroutine fills, s among them
	got   *atomic.Uint64 // AF_XDP: frames of its source taken, by all its streams
}

// restartReader starts reading the ring buffer (or the AF_XDP sockets)
// for the current exports, replacing the reader of an earlier Connect;
// fs.mu is held.
func (fs *Flowspace) restartReader(nodes []*node) {
	if !fs.active || fs.up == nil || len(fs.want) == 0 || fs.ring == nil {
		return
	}
	if fs.reader != nil {
		fs.reader.stop()
		fs.reader = nil
	}
	var exports []*flowspaces.Node
	for _, w := range fs.want {
		for _, k := range nodes {
			if k.Node == w {
				exports = append(exports, w)
			}
		}
	}
	var reach flowspaces.Reach // which sources reach which exported functions
	r := &ringReader{up: fs.up, offset: time.Now().UnixNano() - monotonic()}
	for _, iface := range ifaces(nodes) {
		var port []*stream
		for _, k := range nodes {
			if k.iface != iface {
				continue
			}
			s := &stream{src: k.Node, out: map[int]*buffers.Batch{}, snap: bridgeSnap}
			if sl := int(k.Ctx.Params.Int("snaplen")); sl > 0 {
				s.snap = min(s.snap, sl)
			}
			for b, e := range exports {
				if reach.Reaches(k.Node, e) {
					s.mask |= 1 << b
				}
			}
			s.tags = exports
			port = append(port, s)
		}
		r.ports = append(r.ports, port)
	}
	if x := fs.xsk; x != nil && steals(nodes) && len(r.ports) == 1 {
		r.useSockets(x)
		for q := range x.socks {
			r.wg.Add(1)
			go r.runXSK(context.Background(), q)
		}
		fs.reader = r
		return
	}
	var all []*stream // one goroutine reads the ring buffer for every port
	for _, port := range r.ports {
		all = append(all, port...)
	}
	for _, s := range all {
		s.peers, s.pool = all, inproc.NewPool(bridgeSnap)
	}
	rd, err := ringbuf.NewReader(fs.ring)
	if err != nil {
		return
	}
	r.rd = rd
	r.wg.Add(1)
	// Not the run's context: at the end, what the ring holds still goes
	// up (the flowspace above reads its bridge until it is closed).
	go r.run(context.Background())
	fs.reader = r
}

// useSockets gives each of x's sockets its own streams, one per source:
// their batches refer to (or copy from) that socket's frames.
func (r *ringReader) useSockets(x *xskSet) {
	r.x, r.quit = x, make(chan struct{})
	sources := r.ports[0]
	r.ports = make([][]*stream, len(x.socks))
	for q := range x.socks {
		for _, src := range sources {
			c := *src
			c.out, c.zc, c.got = map[int]*buffers.Batch{}, x.zcs[q], x.counter(src.src)
			if c.zc == nil {
				c.pool = inproc.NewPool(bridgeSnap)
			}
			r.ports[q] = append(r.ports[q], &c)
		}
		for _, c := range r.ports[q] {
			c.peers = r.ports[q]
		}
	}
}

// stop sends up what the ring buffer (or the AF_XDP sockets) hold, then
// stops reading. The sockets stay open (Close closes them).
func (r *ringReader) stop() {
	if r.x != nil {
		close(r.quit)
		r.wg.Wait()
		return
	}
	r.rd.Flush()
	r.wg.Wait()
	r.rd.Close()
}

func (r *ringReader) run(ctx context.Context) {
	defer r.wg.Done()
	var rec ringbuf.Record
	pending := 0
	for {
		if pending > 0 {
			r.rd.SetDeadline(time.Now().Add(flushAfter))
		} else {
			r.rd.SetDeadline(time.Time{})
		}
		err := r.rd.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			r.flushAll(ctx)
			pending = 0
			continue
		case err != nil: // flushed (or closed): the run stops
			r.flushAll(ctx)
			return
		}
		raw := rec.RawSample
		if len(raw) < recData {
			continue
		}
		mask := binary.NativeEndian.Uint64(raw[recMask:])
		wire := binary.NativeEndian.Uint32(raw[recWireLen:])
		capLen := min(int(binary.NativeEndian.Uint32(raw[recCapLen:])), len(raw)-recData)
		ts := int64(binary.NativeEndian.Uint64(raw[recTime:])) + r.offset
		port := int(binary.NativeEndian.Uint32(raw[recPort:]))
		if port >= len(r.ports) {
			continue
		}
		for _, s := range r.ports[port] {
			if m := mask & s.mask; m != 0 {
				if r.add(ctx, s, m, raw[recData:recData+capLen], wire, ts, nil) {
					pending++
				}
			}
		}
	}
}

// add puts one packet into s's batch; it returns false when the run stops.
// frame is set for a packet in an AF_XDP frame.
func (r *ringReader) add(ctx context.Context, s *stream, mask uint64, pkt []byte, wire uint32, ts int64, frame *umemFrame) bool {
	if s.msg == nil {
		m, ok := r.up.TryMessage()
		if !ok {
			// The partial batches of this reader's streams may hold every
			// message: send them up, then wait for the flowspace above to
			// free one. (Other readers flush theirs when they are idle.)
			r.flushStreams(ctx, s.peers)
			var err error
			if m, err = r.up.Message(ctx); err != nil {
				r.up.Lose(1)
				return false
			}
		}
		reg, err := r.region(ctx, s)
		if err != nil {
			r.up.Recycle(m)
			r.up.Lose(1)
			return false
		}
		m.Stream, m.Region, m.Stored = s.src, reg, true
		if cap(m.Out) < len(s.tags) {
			// Once per message: the batches are referred to below, so
			// the slice must not move while it grows.
			m.Out = make([]inproc.Out, 0, len(s.tags))
		}
		s.msg, s.reg, s.n = m, reg, 0
		clear(s.out)
	}
	slot := s.reg.Base + uint32(s.n)
	if s.zc != nil && frame != nil {
		// Refer to the frame where it is: the slot describes it.
		*s.reg.PBuf.Meta(slot) = buffers.Meta{Timestamp: ts, Offset: frame.addr, CapLen: uint32(len(pkt)), WireLen: wire}
		s.zc.hold(s.reg, frame.addr)
	} else {
		s.reg.PBuf.Store(slot, pkt, wire, ts, 0)
	}
	for b := 0; mask != 0; b++ {
		if mask&1 != 0 {
			o := s.out[b]
			if o == nil {
				s.msg.Out = append(s.msg.Out, inproc.Out{Tag: s.tags[b]})
				o = &s.msg.Out[len(s.msg.Out)-1].Batch
				o.PBuf, o.Base = s.reg.PBuf, s.reg.Base
				s.out[b] = o
			}
			o.E[o.N] = buffers.Entry{Slot: slot}
			o.N++
		}
		mask >>= 1
	}
	s.n++
	if s.n == buffers.MaxBatch {
		r.flush(ctx, s)
	}
	return true
}

// monotonic returns CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns, in ns.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// umemFrame is a received AF_XDP frame.
type umemFrame struct {
	addr uint64
}

// region returns a region for s's next batch.
func (r *ringReader) region(ctx context.Context, s *stream) (*inproc.Region, error) {
	if s.zc != nil {
		return s.zc.take(ctx, func() { r.flushStreams(ctx, s.peers) })
	}
	return s.pool.Take(ctx)
}

// flush sends s's batch up.
func (r *ringReader) flush(ctx context.Context, s *stream) {
	if s.msg == nil {
		return
	}
	s.msg.Packets = s.n
	if s.zc == nil {
		r.up.Copied(s.n)
	}
	if s.got != nil { // an AF_XDP stream: every packet was a frame taken
		s.got.Add(uint64(s.n))
	}
	r.up.Send(ctx, s.msg)
	s.msg, s.reg, s.n = nil, nil, 0
}

func (r *ringReader) flushAll(ctx context.Context) {
	for _, port := range r.ports {
		r.flushStreams(ctx, port)
	}
}

func (r *ringReader) flushStreams(ctx context.Context, streams []*stream) {
	for _, s := range streams {
		r.flush(ctx, s)
	}
}

// runXSK carries the frames of socket q up until stop: one goroutine per
// socket, each with batches of its own, so that a quiet queue never holds
// up a busy one.
func (r *ringReader) runXSK(ctx context.Context, q int) {
	defer r.wg.Done()
	s, z, streams := r.x.socks[q], r.x.zcs[q], r.ports[q]
	checked := time.Now()
	for {
		// Wait at most flushAfter while a batch is not full, so that its
		// packets go up soon; a quiet link costs a wake-up per 50 ms (and
		// stop waits as long); a busy one never waits.
		wait := 50
		for _, st := range streams {
			if st.msg != nil {
				wait = int(flushAfter / time.Millisecond)
			}
		}
		n, _, err := s.Poll(wait)
		if err != nil {
			n = 0
		}
		now := time.Now().UnixNano()
		for _, d := range s.Receive(n) {
			f := umemFrame{addr: d.Addr}
			if z != nil {
				z.pin(d.Addr)
			}
			if d.Addr >= 8 {
				meta := s.GetFrame(xdp.Desc{Addr: d.Addr - 8, Len: 8})
				mask := binary.NativeEndian.Uint64(meta)
				pkt := s.GetFrame(d)
				for _, st := range streams {
					if m := mask & st.mask; m != 0 {
						r.add(ctx, st, m, pkt[:min(len(pkt), st.snap)], uint32(len(pkt)), now, &f)
					}
				}
			}
			if z != nil {
				z.unpin(d.Addr) // back to the kernel unless a batch refers to it
			}
		}
		if z != nil {
			z.refill()
		} else {
			s.Fill(s.GetDescs(s.NumFreeFillSlots()))
		}
		if time.Since(checked) >= 100*time.Millisecond {
			r.kernelLosses(q)
			checked = time.Now()
		}
		if n == 0 && s.NumFilled() == 0 {
			// The kernel has no frame to receive into: the flowspace
			// above holds them all. Poll would return at once.
			time.Sleep(100 * time.Microsecond)
		}
		if n == 0 {
			r.flushStreams(ctx, streams)
			select {
			case <-r.quit:
				r.kernelLosses(q)
				return
			default:
			}
		}
	}
}

// kernelLosses counts, as the bridge's dropped, the packets the kernel
// redirected to socket q but could not deliver: its receive ring was full,
// or the fill ring had no frame for it (userspace holds them all). The
// statistics are the socket's since it opened; x.seen[q] is what was
// counted before, by this reader or an earlier one.
func (r *ringReader) kernelLosses(q int) {
	st, err := r.x.socks[q].Stats()
	if err != nil {
		return
	}
	k := st.KernelStats
	if n := k.Rx_dropped + k.Rx_ring_full + k.Rx_invalid_descs; n > r.x.seen[q] {
		// A lost frame counts once here, though it may have belonged to
		// several sources' streams: the flowspace settles the rest at
		// the end, from the program's per-source counts (lostXSK).
		r.up.Lose(int(n - r.x.seen[q]))
		r.x.live.Add(n - r.x.seen[q])
		r.x.seen[q] = n
	}
}
