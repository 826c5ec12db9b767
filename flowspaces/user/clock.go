package user

import (
	"math"
	"sync"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
)

// The packet clock (DESIGN.md §11): a clocked function's periodic work
// happens at the first packet of its stream whose time reaches the
// function's deadline, whatever the batch that packet arrives in. So carry
// cuts a batch there, processes the head, ticks the functions that are due
// and goes on with the rest: the result does not depend on batch size,
// goroutines or GOMAXPROCS.

const noCut = math.MaxUint32

// carry processes the stream's batch in r.vals[:len(r.inputs)], cut at
// the deadlines of the clocked functions it reaches, and packet by packet
// when a function reads the state of one before it on the route (see
// route.serial).
func (r *route) carry(w *worker) {
	for _, hs := range r.hashes { // the slots hold new packets
		hs.Forget()
	}
	if len(r.clocked) == 0 && !r.serial {
		r.process(w)
		return
	}
	n := len(r.inputs)
	copy(r.orig, r.vals[:n])
	now := int64(math.MinInt64)
	for _, b := range r.orig {
		now = max(now, b.Now)
		for _, e := range b.E[:b.N] {
			now = max(now, b.PBuf.Meta(e.Slot).Timestamp)
		}
	}
	lo := uint32(0)
	for len(r.clocked) > 0 {
		d := r.deadline()
		if d == functions.NoDeadline {
			break
		}
		cut, at := uint32(noCut), int64(0)
		for _, b := range r.orig {
			for _, e := range b.E[:b.N] {
				if e.Slot < lo || e.Slot >= cut {
					continue
				}
				if ts := b.PBuf.Meta(e.Slot).Timestamp; ts >= d {
					cut, at = e.Slot, ts
					break
				}
			}
		}
		if cut == noCut {
			break
		}
		r.part(w, lo, cut)
		r.tick(at)
		lo = cut
	}
	r.part(w, lo, noCut)
	// Time moved although no packet reached the deadline (a live source
	// that is idle): the due work happens now.
	if len(r.clocked) > 0 && now >= r.deadline() {
		r.tick(now)
	}
	copy(r.vals[:n], r.orig)
}

// part processes the entries of the stream's batch whose slots are in
// [lo, hi): at once, or one packet after the other on a serial route.
func (r *route) part(w *worker, lo, hi uint32) {
	if !r.serial {
		r.cut(lo, hi)
		r.process(w)
		return
	}
	// A cursor per input (entries ascend by slot): each packet costs one
	// step per input, not a scan of the batch.
	for i, b := range r.orig {
		k := 0
		for k < b.N && b.E[k].Slot < lo {
			k++
		}
		r.next[i] = k
	}
	for {
		slot := uint32(noCut)
		for i, b := range r.orig {
			if k := r.next[i]; k < b.N {
				slot = min(slot, b.E[k].Slot)
			}
		}
		if slot >= hi {
			return
		}
		for i, b := range r.orig {
			h := &r.head[i]
			h.PBuf, h.Base, h.Source, h.Now, h.Dropped, h.N = b.PBuf, b.Base, b.Source, b.Now, 0, 0
			if k := r.next[i]; k < b.N && b.E[k].Slot == slot {
				h.E[0], h.N = b.E[k], 1
				r.next[i]++
			}
			r.vals[i] = h
		}
		r.process(w)
	}
}

// cut makes r.vals[:len(r.inputs)] the entries of the inputs in [lo, hi).
func (r *route) cut(lo, hi uint32) {
	for i, b := range r.orig {
		if lo == 0 && hi == noCut {
			r.vals[i] = b
			continue
		}
		r.head[i].CopyRange(b, lo, hi)
		r.vals[i] = &r.head[i]
	}
}

// deadline is the earliest deadline of the clocked functions on the route.
func (r *route) deadline() int64 {
	d := functions.NoDeadline
	for _, i := range r.clocked {
		st := &r.steps[i]
		lock(st.mu)
		d = min(d, st.fn.(functions.Clocked).Deadline())
		unlock(st.mu)
	}
	return d
}

// tick runs the periodic work of the route's functions that is due at now,
// in topological order, each under its lock.
func (r *route) tick(now int64) {
	for _, i := range r.clocked {
		st := &r.steps[i]
		c := st.fn.(functions.Clocked)
		lock(st.mu)
		if c.Deadline() <= now {
			c.Tick(now)
		}
		unlock(st.mu)
	}
}

// clockOf is the packet clock of a batch a source filled: the latest time
// of its packets, never going back; a live source that delivered nothing
// moves it to wall time.
func clockOf(b *buffers.Batch, prev int64, live bool, wall func() int64) int64 {
	now := prev
	for _, e := range b.E[:b.N] {
		now = max(now, b.PBuf.Meta(e.Slot).Timestamp)
	}
	if b.N == 0 && live {
		now = max(now, wall())
	}
	return now
}

// lock and unlock take a step's lock, if it has one.
func lock(mu *sync.Mutex) {
	if mu != nil {
		mu.Lock()
	}
}

func unlock(mu *sync.Mutex) {
	if mu != nil {
		mu.Unlock()
	}
}
