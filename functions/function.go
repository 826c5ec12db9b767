package functions

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
)

// Function is an instantiated function in the userspace flowspace.
type Function interface {
	// Process keeps the entries of the packets that pass (in order, setting
	// each entry's class result as the function defines it) and sets b.N to
	// their number. Entries removed because of an error rather than by the
	// function's choice are counted in b.Dropped.
	Process(b *buffers.Batch)
}

// Stateful is a function with persistent state readable from above.
type Stateful interface {
	MBuf() *buffers.MBuf
}

// Closer is a function that holds resources (files, handles) to release
// when the flowgraph is torn down. Close reports an error that happened on
// the datapath (e.g. a write that failed) if there was one.
type Closer interface {
	Close() error
}

// Source is an instantiated source function: it brings packets into the
// flowgraph by filling batches.
type Source interface {
	// Info describes the packets the source produces; it is known from
	// instantiation on.
	Info() SourceInfo
	// Fill appends up to b.Room() packets to b. It returns io.EOF when the
	// input is exhausted (b may still hold the last packets), or another
	// error after which nothing more will come. A live source returns within
	// about 100 ms even when no packet arrives, so that stop is prompt.
	Fill(b *buffers.Batch) error
	// Close releases the source. It may be called while Fill runs in another
	// goroutine and must make that Fill return promptly.
	Close() error
}

// SourceInfo describes a source's packets.
type SourceInfo struct {
	Name      string   // the file or interface, for messages
	LinkType  LinkType // link-layer header type of every packet
	MaxCapLen int      // the longest capture it can deliver (sizes PBuf slots)
	Size      int64    // input size in bytes when known (files), for progress; 0 otherwise
	// Live is set for a capture from an interface: while nothing arrives,
	// its packet clock follows wall time (a file's stands still).
	Live bool
}

// PBufOwner is a source whose packets already sit in memory it owns (a
// trace held in memory, later AF_XDP UMEM frames): it exposes that memory as
// the PBuf, and its Fill refers to packets with Batch.AppendRef (or to slots
// it filled before with Batch.AppendSlot) instead of
// copying packets (zero-copy). The flowspace then allocates no PBuf for it.
// PBuf returns nil when the source copies after all (a file it could not
// map, say).
type PBufOwner interface {
	PBuf() *buffers.PBuf
}

// SharedReader is a function that reads its packets in another process
// (a plugin's class, functions/plugin): in place when they lie in memory
// that process maps (buffers/shared, zero-copy), copied once otherwise.
// ReadsShared reports whether it reads them in place; the flowspace then
// puts the packets of the sources that reach it in shared memory (Sharer),
// which it does for no other function.
type SharedReader interface {
	ReadsShared() bool
}

// Sharer is a source that owns its packets' memory (PBufOwner) and can
// take it from the flowspace's shared memory (buffers/shared) instead, for
// a SharedReader it reaches. The flowspace calls Share once, before the
// first Fill and before it asks for the PBuf; alloc returns size bytes of
// shared memory (nil when there is none to be had), which the flowspace
// releases after the source's Close. Share reports whether the packets
// will lie there (a source that refers to memory it cannot move, a mapped
// file say, says no and goes on as before).
type Sharer interface {
	Share(alloc func(size int) []byte) bool
}

// Interrupter is a source whose Fill can block on its input (a pipe that
// stays open but sends nothing): Interrupt makes a running Fill return
// promptly and later ones return io.EOF, without releasing memory that a
// batch being processed may still refer to (that is Close's job, later).
type Interrupter interface {
	Interrupt()
}

// Progresser is a source that can say how far through its input it is.
type Progresser interface {
	Progress() (done, total int64)
}

// Dropper is a source that knows of packets lost before they reached it
// (e.g. the kernel's capture drops).
type Dropper interface {
	Drops() uint64
}

// PathReason strips the operation and path from an *fs.PathError, so that
// a class's message can name the file once: "cannot open t.pcap: no such
// file or directory", not "cannot open t.pcap: open t.pcap: no such ...".
func PathReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Counters is the accounting every function and bridge keeps:
// In = Out + Filtered + Dropped, always. A function that several workers
// run at once (Stateless, Mergeable) counts in a shard of its counters
// per worker, so that the workers never write the same cache line;
// Snapshot adds the shards up.
type Counters struct {
	In, Out, Filtered, Dropped atomic.Uint64
	shards                     atomic.Pointer[[]*Counters]
}

// padded keeps a shard of counters on cache lines of its own.
type padded struct {
	_ [64]byte
	c Counters
	_ [64]byte
}

// Shard returns new counters for one more worker, counted in c's
// Snapshot. It is control-plane code: a flowspace calls it when a worker
// first reaches the function.
func (c *Counters) Shard() *Counters {
	s := &new(padded).c
	for {
		old := c.shards.Load()
		var next []*Counters
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, s)
		if c.shards.CompareAndSwap(old, &next) {
			return s
		}
	}
}

// Add accounts for one batch: in entries arrived, out left, dropped were
// lost to errors; the rest were filtered.
func (c *Counters) Add(in, out, dropped int) {
	c.In.Add(uint64(in))
	c.Out.Add(uint64(out))
	if f := in - out - dropped; f != 0 {
		c.Filtered.Add(uint64(f))
	}
	if dropped != 0 {
		c.Dropped.Add(uint64(dropped))
	}
}

// Snapshot returns the four counters, its shards' included. Each shard
// holds In = Out + Filtered + Dropped, and so does their sum.
func (c *Counters) Snapshot() (in, out, filtered, dropped uint64) {
	in, out, filtered, dropped = c.own()
	if sh := c.shards.Load(); sh != nil {
		for _, s := range *sh {
			i, o, f, d := s.own()
			in, out, filtered, dropped = in+i, out+o, filtered+f, dropped+d
		}
	}
	return in, out, filtered, dropped
}

func (c *Counters) own() (in, out, filtered, dropped uint64) {
	// Read out before in so that a concurrent reader never sees out > in.
	out, filtered, dropped = c.Out.Load(), c.Filtered.Load(), c.Dropped.Load()
	return c.In.Load(), out, filtered, dropped
}
