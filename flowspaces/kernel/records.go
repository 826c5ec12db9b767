package kernel

// Records. A producer placed here (a counter, hll, pcsa or bloom with
// report=) writes its records in its Go half, in this process, when a
// window closes or the run ends (window.go); they go up to its dependents
// in the flowspace above through the same in-process bridge as the
// packets, as a stream of their own whose source is the producer, in a
// PBuf of the flowspace above: records cross the barrier like packets.

import (
	"context"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// recordSlot is the PBuf slot size of records going up: measure.Out's.
const recordSlot = 2048

// records is a producer's way up.
type records struct {
	node *flowspaces.Node
	up   atomic.Pointer[inproc.Stream] // nil while nothing above reads them
}

// emit is the Go half's functions.Producer emit: it runs in the goroutine
// that ticks the windows (the sync's), one batch at a time.
func (r *records) emit(b *buffers.Batch) {
	s := r.up.Load()
	if s == nil {
		return // no function reads the records: they end here, as in Go
	}
	ctx := context.Background() // the flowspace above reads its bridge until it is closed
	for _, e := range b.E[:b.N] {
		md := b.PBuf.Meta(e.Slot)
		s.Add(ctx, 1, b.PBuf.Data(e.Slot), md.WireLen, md.Timestamp, 0, nil)
	}
	s.Flush(ctx)
}

// restartRecords gives each producer here whose records the flowspace
// above asked for a stream up through its bridge; fs.mu is held.
func (fs *Flowspace) restartRecords(nodes []*node) {
	for _, k := range nodes {
		if k.recs == nil {
			continue
		}
		var s *inproc.Stream
		if fs.up != nil && wanted(fs.want, k.Node) {
			s = &inproc.Stream{Up: fs.up, Source: k.Node, Mask: 1, Tags: []any{k.Node}, Snap: recordSlot,
				Pool: inproc.NewPool(recordSlot)}
			s.Peers = []*inproc.Stream{s}
		}
		if old := k.recs.up.Load(); old != nil && s != nil && old.Up == s.Up {
			continue // the same bridge: keep the pool
		}
		k.recs.up.Store(s)
	}
}

func wanted(want []*flowspaces.Node, n *flowspaces.Node) bool {
	for _, w := range want {
		if w == n {
			return true
		}
	}
	return false
}

// packetsOf returns the functions of want whose outputs are packets: a
// producer's records go up by restartRecords, not through the ring.
func packetsOf(want []*flowspaces.Node) []*flowspaces.Node {
	var out []*flowspaces.Node
	for _, w := range want {
		if !w.Producer() {
			out = append(out, w)
		}
	}
	return out
}

// producing is a function that runs in eBPF and produces records in its
// Go half: its state as summarized shows it, and the records it emitted.
type producing struct {
	summarized
	pr functions.Producer
}

func (p producing) Records() uint64              { return p.pr.Records() }
func (p producing) SetEmit(func(*buffers.Batch)) {} // its Go half's emit is the flowspace's (records.emit)
