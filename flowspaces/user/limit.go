package user

import (
	"github.com/ffpf-go/ffpf/bridges/inproc"
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
)

// The packet limit counted at the ends of the graph (ffpf run -c, or a
// request's own: flowspaces.Budget.AtEnds), in the budget of the stream
// (route.budget). Each packet a batch brings holds a unit of the budget: a
// source claimed it before reading the packet, or the
// packet came up from beneath holding it (inproc.Message.Held). Once the
// batch is carried, the packets that reached an end here spend theirs
// (each once, however many ends it reached), those that went up keep
// theirs for the flowspace above, and the others give theirs back. An end
// is a function that feeds none (and that the parent does not ask for),
// or a producer, whose input packets end there: route.count.

// begin starts counting the packets of a batch whose slots start at base.
func (r *route) begin(base uint32) {
	if !r.count {
		return
	}
	r.base = base
	clear(r.ended[:])
	clear(r.below[:])
}

// beneath marks the packets of m that reached an end beneath: they hold
// no unit, and count nowhere else.
func (r *route) beneath(m *inproc.Message) {
	if !r.count {
		return
	}
	for i := range m.Out {
		if o := &m.Out[i]; o.Tag == inproc.Ended {
			for _, e := range o.Batch.E[:o.Batch.N] {
				r.below[e.Slot-r.base] = true
			}
		}
	}
}

// mark records that the packets of b reached an end.
func (r *route) mark(b *buffers.Batch) {
	for _, e := range b.E[:b.N] {
		r.ended[e.Slot-r.base] = true
	}
}

// hold records that the batch w carries on r holds held units of r's
// budget (none when the limit is not counted at the ends), for a fault to
// give back.
func (w *worker) hold(r *route, held int) {
	if r.count {
		w.holding, w.holdingOf = held, r.budget
	}
}

// settle ends the batch's units of r's budget, of which held came with it
// and up went up with packets that did not reach an end here: the packets
// that reached an end here spend theirs, the others give theirs back.
func (r *route) settle(held, up int) {
	if !r.count {
		return
	}
	b := r.budget
	spent := 0
	for k, e := range r.ended {
		if e && !r.below[k] {
			spent++
		}
	}
	b.Spend(spent)
	b.Return(held - spent - up)
}

// endedUp returns the entries among the seen slots (by slot from r.base)
// that reached an end here or beneath, into o.
func (r *route) endedUp(seen *[buffers.MaxBatch]bool, o *buffers.Batch) {
	for k, s := range seen {
		if s && (r.ended[k] || r.below[k]) {
			o.E[o.N] = buffers.Entry{Slot: r.base + uint32(k)}
			o.N++
		}
	}
}

// giveBack returns n units of the budget that stream (a source's node)
// counts in: their packets arrived and nothing here takes them.
func (fs *Flowspace) giveBack(stream any, n int) {
	if s, ok := stream.(*flowspaces.Node); ok && n > 0 {
		s.BudgetOr(fs.opts.Budget).Return(n)
	}
}
