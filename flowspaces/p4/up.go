package p4

// The way up. A packet that a function the parent asked for passed leaves
// the switch through its uplink, once:
//
//   - through the CPU port, to this process as a P4Runtime PacketIn whose
//     packet_in header says the port it entered at (its stream) and which
//     of the outputs passed it (the mask); or
//   - out of the port cabled to the parent's NIC, unchanged: this process
//     reads that NIC (libpcap, received packets only). A packet on a wire
//     carries no tag, so a network uplink carries the outputs of one
//     stream to one function above.
//
// Either way the packets go up through the in-process bridge the parent
// gave (SetWant), in a Stream per source, as the eBPF flowspaces' readers
// send theirs. Records (digests) go up as streams of their own.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/p4/controller"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/p4gen"
)

// wayUp is the way up of one connected program.
type wayUp struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	streams map[uint16]*inproc.Stream // by the port the packets entered at
	all     []*inproc.Stream
	done    sync.WaitGroup
	capture functions.Source // the uplink NIC's, over a network link
	got     atomic.Uint64    // packets that came up
	closed  bool             // stopped: what comes now is lost (lostUp)
}

// checkWayUp refuses what the uplink cannot carry; fs.mu is held.
func (fs *Flowspace) checkWayUp() error {
	if fs.opts.UplinkCPU {
		return nil
	}
	want := packetsOf(fs.want)
	if len(want) > 1 {
		return fmt.Errorf("switch %s sends up the outputs of %d functions over its network link to %s, where a packet carries no tag saying which: connect it through its CPU port (uplink: cpu)",
			fs.Name(), len(want), fs.opts.UplinkIface)
	}
	var reach flowspaces.Reach
	for _, w := range want {
		if srcs := reach.Sources(w); len(srcs) > 1 {
			return fmt.Errorf("switch %s sends up packets of %d ports over its network link to %s, where a packet carries no tag saying which: connect it through its CPU port (uplink: cpu)",
				fs.Name(), len(srcs), fs.opts.UplinkIface)
		}
	}
	return nil
}

// restartWayUp replaces the way up with one for the program connected;
// fs.mu is held.
func (fs *Flowspace) restartWayUp() {
	if w := fs.way.Swap(nil); w != nil {
		w.stop()
	}
	if fs.up != nil && fs.shared != fs.up && len(fs.want) > 0 {
		// One more producer sends through the bridge (the eBPF
		// flowspaces above relay it): it closes when each has closed it.
		fs.up.Share()
		fs.shared = fs.up
	}
	for _, h := range fs.halves {
		if h.recs != nil {
			fs.startRecords(h.recs)
		}
	}
	if fs.up == nil || len(fs.sent) == 0 {
		return
	}
	w := &wayUp{streams: map[uint16]*inproc.Stream{}}
	// The parent reads its bridge until it is closed (stopWayUp).
	w.ctx, w.cancel = context.WithCancel(context.Background())
	var reach flowspaces.Reach
	tags := make([]any, len(fs.sent))
	for i, s := range fs.sent {
		tags[i] = s
	}
	for _, n := range fs.nodes {
		h := fs.halves[n]
		if h == nil || !n.Class.IsSource() {
			continue
		}
		s := &inproc.Stream{Up: fs.up, Source: n, Tags: tags, Snap: 65535, Pool: inproc.NewPool(65535)}
		for b, e := range fs.sent {
			if reach.Reaches(n, e) {
				s.Mask |= 1 << b
			}
		}
		if s.Mask == 0 {
			continue
		}
		w.streams[h.port] = s
		w.all = append(w.all, s)
	}
	for _, s := range w.all {
		s.Peers = w.all
	}
	w.done.Add(1)
	go w.flusher()
	if !fs.opts.UplinkCPU && len(w.all) == 1 {
		if err := w.listen(fs.opts.UplinkIface, w.all[0]); err != nil {
			fs.err = fmt.Errorf("switch %s: cannot read its uplink at %s: %w", fs.Name(), fs.opts.UplinkIface, err)
			if fs.cancel != nil {
				fs.cancel()
			}
		}
	}
	fs.way.Store(w)
}

// stopWayUp ends the way up, its partial batches sent first, and closes
// the bridge up; fs.mu is held.
func (fs *Flowspace) stopWayUp() {
	if w := fs.way.Swap(nil); w != nil {
		w.stop()
		if fs.shared != nil {
			fs.shared.Lose(int(fs.lostUp(w.got.Load())))
		}
	}
	if fs.shared != nil {
		fs.shared.Close()
		fs.shared = nil
	}
}

// flusher sends partial batches up after inproc.FlushAfter, and moves
// the streams' clocks while nothing comes.
func (w *wayUp) flusher() {
	defer w.done.Done()
	t := time.NewTicker(inproc.FlushAfter)
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			// The partial batches go up; a parent that no longer reads
			// (the run failed before it started) counts them dropped.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w.mu.Lock()
			inproc.FlushAll(ctx, w.all)
			w.mu.Unlock()
			cancel()
			return
		case <-t.C:
			w.mu.Lock()
			now := time.Now().UnixNano()
			for _, s := range w.all {
				if s.Pending() {
					s.Flush(w.ctx)
				} else {
					s.Clock(w.ctx, now)
				}
			}
			w.mu.Unlock()
		}
	}
}

// add sends one packet up in the stream of port.
func (w *wayUp) add(port uint16, mask uint64, pkt []byte, wire uint32, ts int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.got.Add(1)
	s := w.streams[port]
	if s == nil || mask&s.Mask == 0 {
		return
	}
	s.Add(w.ctx, mask&s.Mask, pkt, wire, ts, 0, nil)
}

// listen reads the packets arriving at the host NIC the uplink is cabled
// to, all of them the one stream's.
func (w *wayUp) listen(iface string, s *inproc.Stream) error {
	c, ok := functions.Default.Lookup("dev")
	if !ok {
		return errors.New("no capture class (dev) is registered")
	}
	p, err := c.Bind([]functions.Arg{
		{Key: "expr", Value: functions.Raw{Kind: functions.RawString, Text: iface}},
		{Key: "direction", Value: functions.Raw{Kind: functions.RawWord, Text: "in"}},
	})
	if err != nil {
		return err
	}
	src, err := c.NewSource(&functions.Context{ID: "uplink", Params: p, LinkType: functions.LinkEthernet, Snaplen: 65535, Flowspace: "user"})
	if err != nil {
		return err
	}
	w.capture = src
	pb := buffers.NewPBuf(buffers.MaxBatch, 65535)
	port := uint16(0)
	for p, st := range w.streams {
		if st == s {
			port = p
		}
	}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		b := &buffers.Batch{PBuf: pb, Cap: buffers.MaxBatch}
		for w.ctx.Err() == nil {
			b.Reset()
			err := src.Fill(b)
			for _, e := range b.E[:b.N] {
				md := pb.Meta(e.Slot)
				w.add(port, s.Mask, pb.Data(e.Slot), md.WireLen, md.Timestamp)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && w.ctx.Err() == nil {
					w.cancel()
				}
				return
			}
		}
	}()
	return nil
}

// stop ends the way up; the partial batches go up first.
func (w *wayUp) stop() {
	w.cancel()
	if w.capture != nil {
		w.capture.Close()
	}
	w.done.Wait()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// lostUp is how many of the packets the switch sent up (its counter
// ffpf_up) did not come up (got did): dropped by the switch's CPU path or
// the link, or in flight when the run stopped; the bridge's dropped.
func (fs *Flowspace) lostUp(got uint64) uint64 {
	if fs.client == nil || fs.asm == nil || fs.out == nil {
		return 0
	}
	for _, c := range fs.asm.Prog.Counters {
		if c.Name == upCounter {
			cells, err := fs.client.ReadCounter(fs.out.Printed.Name(c))
			if err != nil || len(cells) == 0 || cells[0].Packets <= got {
				return 0
			}
			return cells[0].Packets - got
		}
	}
	return 0
}

// packetIn is the controller's OnPacket: a packet from the CPU port,
// with the port it entered at and the outputs that passed it.
func (fs *Flowspace) packetIn(p controller.PacketIn) {
	// Not under fs.mu: the controller's stream goroutine calls this, and
	// Connect and Close wait for that goroutine while they hold fs.mu.
	w := fs.way.Load()
	if w == nil {
		return
	}
	w.add(uint16(p.Metadata["ingress_port"]), p.Metadata["mask"], p.Payload, uint32(len(p.Payload)), time.Now().UnixNano())
}

// Digester is the Go half of a function whose P4 code sends digests
// (records going up): it writes the record a digest of type t with these
// values stands for, as its Go code would, through the emit its flowspace
// gave it (functions.Producer), at now (ns).
type Digester interface {
	Digest(t *p4gen.DigestType, values []uint64, now int64)
}

// digest is the controller's OnDigest: each digest goes to the Go half of
// the function that declared its type.
func (fs *Flowspace) digest(d controller.DigestList) {
	// Not under fs.mu (see packetIn): the digests' owners are a snapshot
	// Connect stores.
	if ws := fs.wins.Load(); ws != nil && ws.digest(d.Name, d.Values) {
		return
	}
	owners := fs.digests.Load()
	if owners == nil {
		return
	}
	o, ok := (*owners)[d.Name]
	if !ok {
		return
	}
	dg, ok := o.half.gofn.(Digester)
	if !ok {
		return
	}
	now := time.Now().UnixNano()
	for _, v := range d.Values {
		dg.Digest(o.typ, v, now)
	}
}

// digestOwner is the function a digest type is sent by.
type digestOwner struct {
	typ  *p4gen.DigestType
	half *half
}

// storeDigests records which function each digest of the program
// connected belongs to; fs.mu is held.
func (fs *Flowspace) storeDigests() {
	owners := map[string]digestOwner{}
	if fs.asm != nil {
		for _, t := range fs.asm.Prog.Digests {
			for n, h := range fs.halves {
				if n.ID == t.Owner {
					owners[t.Name] = digestOwner{t, h}
				}
			}
		}
	}
	fs.digests.Store(&owners)
}

// records is a producer's way up: its records in a stream of their own,
// whose source is the producer, as the eBPF flowspaces send theirs.
type records struct {
	node *flowspaces.Node
	mu   sync.Mutex
	up   *inproc.Stream // nil while nothing above reads them
}

// recordSlot is the PBuf slot size of records going up.
const recordSlot = 2048

// startRecords gives the producer's records a stream up when the parent
// asked for them; fs.mu is held.
func (fs *Flowspace) startRecords(r *records) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up = nil
	if fs.up == nil {
		return
	}
	for _, w := range fs.want {
		if w == r.node {
			r.up = &inproc.Stream{Up: fs.up, Source: r.node, Mask: 1, Tags: []any{r.node}, Snap: recordSlot, Pool: inproc.NewPool(recordSlot)}
			r.up.Peers = []*inproc.Stream{r.up}
		}
	}
}

// emit is the Go half's functions.Producer emit.
func (r *records) emit(b *buffers.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up == nil {
		return // no function reads the records: they end here, as in Go
	}
	ctx := context.Background() // the flowspace above reads its bridge until it is closed
	for _, e := range b.E[:b.N] {
		md := b.PBuf.Meta(e.Slot)
		r.up.Add(ctx, 1, b.PBuf.Data(e.Slot), md.WireLen, md.Timestamp, 0, nil)
	}
	r.up.Flush(ctx)
}
