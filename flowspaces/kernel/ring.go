package kernel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/asavie/xdp"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// The kernel → user bridge. The programs copy each packet that an exported
// function passed into the BPF ring buffer, once, with the mask of those
// functions; a goroutine reads the records, stores the packets in a PBuf
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

// ringReader reads one flowspace's ring buffer.
type ringReader struct {
	rd     *ringbuf.Reader
	socks  []*xdp.Socket // AF_XDP, one per receive queue, instead of rd
	zcs    []*zeroCopy   // per socket, set when its frames are referred to in place
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
	pool *inproc.Pool
	reg  *inproc.Region
	out  map[int]*buffers.Batch
	msg  *inproc.Message
	n    int

	peers []*stream // the streams the same goroutine fills, s among them
}

// restartReader starts reading the ring buffer for the current exports,
// replacing the reader of an earlier Connect; fs.mu is held.
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
	// Which sources reach which exported functions.
	reach := map[*flowspaces.Node]map[*flowspaces.Node]bool{}
	var of func(n *flowspaces.Node) map[*flowspaces.Node]bool
	of = func(n *flowspaces.Node) map[*flowspaces.Node]bool {
		if r, ok := reach[n]; ok {
			return r
		}
		r := map[*flowspaces.Node]bool{}
		if n.Class.IsSource() {
			r[n] = true
		}
		for _, in := range n.Inputs {
			for s := range of(in) {
				r[s] = true
			}
		}
		reach[n] = r
		return r
	}
	r := &ringReader{up: fs.up, offset: time.Now().UnixNano() - monotonic()}
	for _, iface := range ifaces(nodes) {
		var port []*stream
		for _, k := range nodes {
			if k.iface != iface {
				continue
			}
			s := &stream{src: k.Node, pool: inproc.NewPool(bridgeSnap), out: map[int]*buffers.Batch{}}
			for b, e := range exports {
				if of(e)[k.Node] {
					s.mask |= 1 << b
				}
			}
			s.tags = exports
			port = append(port, s)
		}
		r.ports = append(r.ports, port)
	}
	var all []*stream // one goroutine reads the ring buffer for every port
	for _, port := range r.ports {
		all = append(all, port...)
	}
	for _, s := range all {
		s.peers = all
	}
	if fs.xsks != nil && steals(nodes) && len(r.ports) == 1 {
		zc := false
		if s := flowspaces.StubOf(fs); s != nil && s.Strategy == flowspaces.ZeroCopy {
			zc = true
		}
		if err := r.openSockets(fs.opts.Interface, fs.xsks, zc); err == nil {
			for q := range r.socks {
				r.wg.Add(1)
				go r.runXSK(context.Background(), q)
			}
			fs.reader = r
			how := "copy-once"
			if zc {
				how = "zero-copy"
			}
			fs.sockets = fmt.Sprintf("%s: %d AF_XDP socket(s), one per receive queue, %s", fs.opts.Interface, len(r.socks), how)
			return
		}
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

// stop sends up what the ring buffer (or the AF_XDP sockets) hold, then
// stops reading.
func (r *ringReader) stop() {
	if r.socks != nil {
		close(r.quit)
		r.wg.Wait()
		for _, s := range r.socks {
			s.Close()
		}
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
// frame, for a packet in an AF_XDP frame, is its UMEM address.
func (r *ringReader) add(ctx context.Context, s *stream, mask uint64, pkt []byte, wire uint32, ts int64, frame *uint64) bool {
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
		reg, err := s.region(ctx)
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
		*s.reg.PBuf.Meta(slot) = buffers.Meta{Timestamp: ts, Offset: *frame, CapLen: uint32(len(pkt)), WireLen: wire}
		s.zc.hold(s.reg, *frame)
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

func (s *stream) region(ctx context.Context) (*inproc.Region, error) {
	if s.zc != nil {
		return s.zc.take(ctx)
	}
	return s.pool.Take(ctx)
}

// zeroCopy lets the flowspace above refer to packets where they are, in
// the UMEM of an AF_XDP socket: a region of a PBuf view of the UMEM holds
// a batch's frames, which go back to the kernel's fill ring only when the
// flowspace above has released every region that refers to them. Each
// socket has its own UMEM, so each has its own view and regions; the
// sources capturing on the interface share the frames (a frame two
// sources keep is referred to twice, and counted).
type zeroCopy struct {
	sock  *xdp.Socket
	pool  *inproc.Pool
	held  map[*inproc.Region][]uint64 // frames each region refers to
	refs  []int32                     // per frame, the regions that refer to it
	spare []uint64                    // frames in neither the kernel's rings nor a region
	descs []xdp.Desc                  // refill's buffer, reused
}

// newZeroCopy gives each of the socket's streams Depth regions.
func newZeroCopy(s *xdp.Socket, filled []xdp.Desc, streams int) *zeroCopy {
	n, size := xskOptions.NumFrames, xskOptions.FrameSize
	k := inproc.Depth * max(1, streams)
	view := buffers.NewPBufView(s.GetFrame(xdp.Desc{Addr: 0, Len: uint32(n * size)}), k*buffers.MaxBatch)
	z := &zeroCopy{sock: s, pool: inproc.PoolOf(view, k), held: map[*inproc.Region][]uint64{}, refs: make([]int32, n)}
	inKernel := map[uint64]bool{}
	for _, d := range filled {
		inKernel[d.Addr] = true
	}
	for i := range n {
		if a := uint64(i * size); !inKernel[a] {
			z.spare = append(z.spare, a)
		}
	}
	return z
}

// take returns a free region; the frames it referred to are free again.
func (z *zeroCopy) take(ctx context.Context) (*inproc.Region, error) {
	r, err := z.pool.Take(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range z.held[r] {
		if i := a / uint64(xskOptions.FrameSize); z.refs[i] > 0 {
			z.refs[i]--
			if z.refs[i] == 0 {
				z.spare = append(z.spare, a)
			}
		}
	}
	z.held[r] = z.held[r][:0]
	return r, nil
}

// hold records that reg refers to the frame at addr.
func (z *zeroCopy) hold(reg *inproc.Region, addr uint64) {
	a := addr - addr%uint64(xskOptions.FrameSize)
	z.refs[a/uint64(xskOptions.FrameSize)]++
	z.held[reg] = append(z.held[reg], a)
}

// release gives back a frame no region referred to.
func (z *zeroCopy) release(addr uint64) {
	a := addr - addr%uint64(xskOptions.FrameSize)
	if z.refs[a/uint64(xskOptions.FrameSize)] == 0 {
		z.spare = append(z.spare, a)
	}
}

// refill gives the kernel spare frames to receive into.
func (z *zeroCopy) refill() {
	n := min(len(z.spare), z.sock.NumFreeFillSlots())
	if n == 0 {
		return
	}
	descs := z.descs[:0]
	for i := range n {
		descs = append(descs, xdp.Desc{Addr: z.spare[len(z.spare)-1-i], Len: uint32(xskOptions.FrameSize)})
	}
	z.spare = z.spare[:len(z.spare)-n]
	z.sock.Fill(descs)
	z.descs = descs
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

// AF_XDP. With dev's steal parameter the XDP program redirects the
// packets an exported function passed to the AF_XDP socket of their
// receive queue, with the export mask in the 8 bytes of metadata before
// the frame; they leave the kernel stack. The reader copies each frame
// once into the parent's PBuf and gives the UMEM frame back to the kernel
// at once. Notification is the same adaptive scheme as the ring buffer's:
// poll(2) blocks only while the receive ring is empty.

// xskOptions sizes the rings for bursts at line rate (the defaults are
// tiny): 4096 frames of 2 KB, half of them lent to the kernel at a time.
var xskOptions = xdp.SocketOptions{NumFrames: 4096, FrameSize: 2048,
	FillRingNumDescs: 2048, CompletionRingNumDescs: 64, RxRingNumDescs: 2048, TxRingNumDescs: 64}

// openSockets binds one AF_XDP socket per receive queue of iface and
// registers it in the program's socket map.
func (r *ringReader) openSockets(iface string, xsks *ebpf.Map, inPlace bool) error {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return err
	}
	queues, _ := filepath.Glob("/sys/class/net/" + iface + "/queues/rx-*")
	n := max(1, min(len(queues), maxQueues))
	// Each socket fills batches of its own for the sources: its frames
	// are in its own UMEM.
	sources := r.ports[0]
	fail := func(err error) error {
		for _, o := range r.socks {
			o.Close()
		}
		r.socks, r.zcs, r.ports = nil, nil, [][]*stream{sources}
		return err
	}
	r.ports = make([][]*stream, n)
	for q := range n {
		for _, src := range sources {
			c := *src
			if q > 0 {
				c.out = map[int]*buffers.Batch{}
				if !inPlace {
					c.pool = inproc.NewPool(bridgeSnap)
				}
			}
			r.ports[q] = append(r.ports[q], &c)
		}
		for _, c := range r.ports[q] {
			c.peers = r.ports[q]
		}
	}
	for q := range n {
		opts := xskOptions
		s, err := xdp.NewSocket(ifc.Index, q, &opts)
		if err != nil {
			return fail(fmt.Errorf("cannot open an AF_XDP socket on %s queue %d: %w", iface, q, err))
		}
		if err := xsks.Put(uint32(q), uint32(s.FD())); err != nil {
			s.Close()
			return fail(err)
		}
		filled := append([]xdp.Desc(nil), s.GetDescs(s.NumFreeFillSlots())...)
		s.Fill(filled)
		r.socks = append(r.socks, s)
		var z *zeroCopy
		if inPlace {
			z = newZeroCopy(s, filled, len(r.ports[q]))
			for _, st := range r.ports[q] {
				st.zc = z
			}
		}
		r.zcs = append(r.zcs, z)
	}
	r.quit = make(chan struct{})
	return nil
}

// runXSK carries the frames of socket q up until stop: one goroutine per
// socket, each with batches of its own, so that a quiet queue never holds
// up a busy one.
func (r *ringReader) runXSK(ctx context.Context, q int) {
	defer r.wg.Done()
	s, z, streams := r.socks[q], r.zcs[q], r.ports[q]
	var lost uint64
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
			addr := d.Addr
			if d.Addr >= 8 {
				meta := s.GetFrame(xdp.Desc{Addr: d.Addr - 8, Len: 8})
				mask := binary.NativeEndian.Uint64(meta)
				pkt := s.GetFrame(d)
				capLen := min(len(pkt), bridgeSnap)
				for _, st := range streams {
					if m := mask & st.mask; m != 0 {
						r.add(ctx, st, m, pkt[:capLen], uint32(len(pkt)), now, &addr)
					}
				}
			}
			if z != nil { // not referred to: straight back
				z.release(d.Addr)
			}
		}
		if z != nil {
			z.refill()
		} else {
			s.Fill(s.GetDescs(s.NumFreeFillSlots()))
		}
		if time.Since(checked) >= 100*time.Millisecond {
			lost, checked = r.kernelLosses(s, lost), time.Now()
		}
		if n == 0 {
			r.flushStreams(ctx, streams)
			select {
			case <-r.quit:
				r.kernelLosses(s, lost)
				return
			default:
			}
		}
	}
}

// kernelLosses counts, as the bridge's dropped, the packets the kernel
// redirected to socket s but could not deliver: its receive ring was full,
// or the fill ring had no frame for it (userspace holds them all). counted
// is what was counted before; it returns the new total.
func (r *ringReader) kernelLosses(s *xdp.Socket, counted uint64) uint64 {
	st, err := s.Stats()
	if err != nil {
		return counted
	}
	k := st.KernelStats
	if n := k.Rx_dropped + k.Rx_ring_full + k.Rx_invalid_descs; n > counted {
		r.up.Lose(int(n - counted))
		return n
	}
	return counted
}
