package record

import (
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
)

// Out is a producer's output: a PBuf of one batch of record slots, and the
// batch it hands to its dependents when full or when the producer flushes.
// It allocates at construction only.
type Out struct {
	Builder
	pbuf    *buffers.PBuf
	b       *buffers.Batch
	emit    func(*buffers.Batch)
	ts      int64
	open    bool
	records atomic.Uint64
	lost    atomic.Uint64
}

// NewOut returns an output of records of at most slotSize bytes.
func NewOut(slotSize int) *Out {
	p := buffers.NewPBuf(buffers.MaxBatch, slotSize)
	return &Out{pbuf: p, b: buffers.NewBatch(p, 0, buffers.MaxBatch, 0)}
}

// SetEmit implements functions.Producer for the producer that embeds Out.
func (o *Out) SetEmit(emit func(*buffers.Batch)) { o.emit = emit }

// Records implements functions.Producer: records emitted so far.
func (o *Out) Records() uint64 { return o.records.Load() }

// Lost is how many records did not fit a slot (counted, never cut).
func (o *Out) Lost() uint64 { return o.lost.Load() }

// Start begins a record in the next slot; the Builder's methods add its
// fields and Commit ends it.
func (o *Out) Start(k Kind, ts int64, producer string) {
	o.Builder.Start(o.b.NextSlot(), k, ts, producer)
	o.ts, o.open = ts, true
}

// Commit ends the record Start began; a full batch goes to the dependents.
// It reports false for a record that did not fit its slot (it is lost,
// and counted).
func (o *Out) Commit() bool {
	o.open = false
	n, ok := o.Finish()
	if !ok {
		o.lost.Add(1)
		return false
	}
	o.b.Commit(uint32(n), uint32(n), o.ts)
	o.b.Now = max(o.b.Now, o.ts)
	if o.b.Room() == 0 {
		o.Flush()
	}
	return true
}

// Flush hands the records written so far to the dependents.
func (o *Out) Flush() {
	if o.b.N == 0 {
		return
	}
	o.records.Add(uint64(o.b.N))
	if o.emit != nil {
		o.emit(o.b)
	}
	o.b.Reset()
}
