package user

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/functions"
)

// producer carries the records of a producer here to its dependents: a
// stream of its own, whose route Connect keeps current.
type producer struct {
	route atomic.Pointer[route]
	w     worker // stands in for the worker that runs the producer, whose lock it holds
}

// emit is the producer's functions.Producer emit: it runs in the goroutine
// that called the producer (under the producer's lock, so one at a time).
func (p *producer) emit(b *buffers.Batch) {
	r := p.route.Load()
	if r == nil || b.N == 0 {
		return
	}
	r.vals[0] = b
	r.carry(&p.w)
	r.vals[0] = nil
}

// ending is what endStreams needs of the flowspace, kept apart from fs.mu:
// a bridge reader that ends may not wait for fs.mu, which Connect holds
// while it waits for such a reader to see its bridge closed.
type ending struct {
	mu      sync.Mutex
	reach   *flowspaces.Reach  // of the last Connect
	nodes   []*flowspaces.Node // the functions here, in topological order
	runs    []*runner
	ended   map[*flowspaces.Node]int64 // streams that ended, and when
	flushed map[*flowspaces.Node]bool  // functions flushed at their streams' end
}

// set is Connect's: the functions that now run here.
func (e *ending) set(reach *flowspaces.Reach, nodes []*flowspaces.Node, runs map[*flowspaces.Node]*runner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reach, e.nodes, e.runs = reach, nodes, make([]*runner, len(nodes))
	for i, n := range nodes {
		e.runs[i] = runs[n]
	}
	if e.ended == nil {
		e.ended, e.flushed = map[*flowspaces.Node]int64{}, map[*flowspaces.Node]bool{}
	}
}

// keepOnly drops what is known of streams and functions other than those
// of present (the functions here and the streams from beneath): a service
// that adds and removes requests for ever would otherwise keep every
// removed source (and its buffers) in these maps.
func (e *ending) keepOnly(present []*flowspaces.Node) {
	e.mu.Lock()
	defer e.mu.Unlock()
	keep := map[*flowspaces.Node]bool{}
	for _, n := range present {
		keep[n] = true
	}
	for n := range e.ended {
		if !keep[n] {
			delete(e.ended, n)
		}
	}
	for n := range e.flushed {
		if !keep[n] {
			delete(e.flushed, n)
		}
	}
}

// endUp takes the end of stream, a source's, on from here, where it ended
// at time now and route r carried it: to the flowspace above when r sends
// packets of it up (after them: inproc.Bridge.SendEnd), or, when none go
// up, it has ended where it ends highest (flowspaces.Node.EndStream).
// Nothing is taken on once the run is stopped.
func (fs *Flowspace) endUp(ctx context.Context, r *route, stream *flowspaces.Node, now int64) {
	if ctx.Err() != nil {
		return
	}
	if r != nil && len(r.exports) > 0 && r.up != nil {
		r.up.SendEnd(ctx, stream, now)
		return
	}
	stream.EndStream()
}

// endStreams records that streams ended at time now, and flushes, in
// topological order, the functions here that no running stream reaches
// any more: the last window's report, the report of a whole run. A
// producer that has flushed ends its own stream in turn. The shards of a
// mergeable function are brought to that time and merged (see shard.go),
// so that its last window is the serial one.
func (fs *Flowspace) endStreams(now int64, streams ...*flowspaces.Node) {
	e := &fs.ending
	e.mu.Lock()
	if e.ended == nil {
		e.mu.Unlock()
		return
	}
	for _, s := range streams {
		e.ended[s] = max(e.ended[s], now)
	}
	type job struct {
		n  *flowspaces.Node
		r  *runner
		at int64
	}
	var due []job
	for i, n := range e.nodes {
		if n.Source != nil || e.flushed[n] {
			continue
		}
		_, fl := n.Function.(functions.Flusher)
		_, clocked := n.Function.(functions.Clocked)
		if !fl && !clocked && !n.Producer() {
			continue
		}
		at, all := int64(0), true
		for _, s := range e.reach.Sources(n) {
			t, ok := e.ended[s]
			if !ok {
				all = false
				break
			}
			at = max(at, t)
		}
		if all {
			e.flushed[n] = true
			due = append(due, job{n, e.runs[i], at})
		}
	}
	e.mu.Unlock()
	for _, j := range due {
		f, fl := j.n.Function.(functions.Flusher)
		if !j.r.merged(func() {
			j.r.tickAll(j.at)
			j.r.fold()
			if fl {
				f.Flush(j.at)
			}
		}) && fl {
			unlock := j.r.lock()
			f.Flush(j.at)
			unlock()
		}
		if j.n.Producer() {
			fs.endStreams(j.at, j.n)
		}
	}
}
