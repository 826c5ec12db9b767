// Package ringbuf is the bridge from an eBPF flowspace (the kernel's tc
// hook, XDP) up to the Go flowspace of the process: the programs copy each
// packet that a function the flowspace above asked for passed into a BPF
// ring buffer, once, with the mask of those functions, in a record of the
// smallest of a few sizes (128 bytes up to the capture's snap length) that
// holds it: a record's size must be a constant for the verifier, and
// several sizes let small packets take little of the ring. A Reader reads
// the records, stores the packets in a PBuf of the flowspace above and
// sends them up through an in-process bridge, one message per source and
// batch, with each function's IBuf entries (inproc.Stream).
//
// Notification adapts to the rate on its own: the kernel wakes the reader
// only for a record committed while the reader had caught up (an empty
// ring). At high rates the reader is always behind, so it drains batch
// after batch without a wake-up — polling; at low rates each packet wakes
// it. A batch that is not full goes up after inproc.FlushAfter.
//
// Time crosses too. A program that filters a packet sends a clock-only
// record (mask 0, no bytes) when its CPU's last one is older than
// ClockEvery, and an idle ring makes the reader move its streams' clocks
// by wall time every IdleTick (on the programs' time base): a flowspace
// above knows that time moved although everything beneath was filtered.
// Annotation words that functions above read, written by functions
// beneath, follow the header (Header): they go into the slot's annotation
// area.
//
// A flowspace may keep a ring buffer per CPU (NewRings): the programs
// write into their CPU's, and a goroutine per ring reads it and sends up
// on a lane of the bridge of its own, so that the packets of one
// interface spread over the cores above (DESIGN.md §15).
//
// The sharp edge: the record layout (Off*, HeaderLen) is a contract with
// the program that writes it, which the flowspace generates; a packet the
// ring has no room for is lost in the kernel, and only the program can
// count it.
package ringbuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	cring "github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/ffpf-go/ffpf/bridges/inproc"
)

// The layout of a record: a mask of the exported functions that passed
// the packet (0 in a clock-only record; inproc.EndedBit set when it
// reached an end of the graph beneath), its wire and captured length, a
// CLOCK_MONOTONIC timestamp, the port (which of the flowspace's
// interfaces it came in on), the annotation words carried up (OffAnn),
// then the captured bytes, in native byte order.
const (
	OffMask    = 0
	OffWireLen = 8
	OffCapLen  = 12
	OffTime    = 16
	OffPort    = 24
	OffAnn     = 32
	HeaderLen  = 32 // without annotation words
)

// Header is the length of a record's header that carries words
// annotation words.
func Header(words int) int { return HeaderLen + 8*words }

// ClockEvery bounds how long a program that filters every packet stays
// silent: each CPU sends a clock-only record when its last is older.
const ClockEvery = time.Millisecond

// IdleTick is how often the reader of an idle ring moves the streams'
// clocks by wall time.
const IdleTick = 50 * time.Millisecond

// Snap is the most bytes of a packet the ring buffer carries up: libpcap's
// largest snap length, so that a capture keeps what its snap length
// allows (a GRO'd or jumbo frame whole). Longer packets arrive truncated,
// their wire length intact, as with a capture's snap length.
const Snap = 262144

// Bytes is the ring buffer's size: about 5,000 records of a 1,514-byte
// frame (each in a record of 4 KB less the header), 31 of Snap bytes.
const Bytes = 8 << 20

// NewMap creates a ring buffer for a flowspace's programs to write into.
func NewMap() (*ebpf.Map, error) { return newMap(Bytes) }

func newMap(size int) (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_ring", Type: ebpf.RingBuf, MaxEntries: uint32(size)})
}

// AllRings bounds the memory of a flowspace's ring buffers together:
// rings of Bytes each up to four, smaller ones beyond (RingBytes).
const AllRings = 4 * Bytes

// RingBytes is the size of each of n ring buffers: Bytes, or less when
// n of them would take more than AllRings, down to 1 MB (a power of two,
// as the kernel wants).
func RingBytes(n int) int {
	size := Bytes
	for size > 1<<20 && size*n > AllRings {
		size /= 2
	}
	return size
}

// NewRings creates n ring buffers (at least one) and, for more than one,
// the map that gives each possible CPU its ring (ring cpu mod n), for
// the programs to look theirs up in; byCPU is nil for one ring.
func NewRings(n int) (rings []*ebpf.Map, byCPU *ebpf.Map, err error) {
	fail := func(err error) ([]*ebpf.Map, *ebpf.Map, error) {
		for _, r := range rings {
			r.Close()
		}
		if byCPU != nil {
			byCPU.Close()
		}
		return nil, nil, err
	}
	size := RingBytes(max(1, n))
	for range max(1, n) {
		r, err := newMap(size)
		if err != nil {
			return fail(err)
		}
		rings = append(rings, r)
	}
	if len(rings) == 1 {
		return rings, nil, nil
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return fail(err)
	}
	byCPU, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ffpf_rings", Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4,
		MaxEntries: uint32(cpus), InnerMap: &ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: uint32(size)}})
	if err != nil {
		return fail(err)
	}
	for cpu := range cpus {
		if err := byCPU.Put(uint32(cpu), uint32(rings[cpu%len(rings)].FD())); err != nil {
			return fail(err)
		}
	}
	return rings, byCPU, nil
}

// Reader reads one flowspace's ring buffers.
type Reader struct {
	rings  []ring
	wg     sync.WaitGroup
	offset int64 // CLOCK_REALTIME - CLOCK_MONOTONIC, in ns
	header int   // the records' header length (Header)
}

// ring is one ring buffer and the streams its goroutine fills.
type ring struct {
	rd    *cring.Reader
	ports [][]*inproc.Stream // per port, the sources that capture there
}

// Offset returns CLOCK_REALTIME − CLOCK_MONOTONIC in ns: added to a
// program's bpf_ktime_get_ns, it gives the time since the Unix epoch on the
// packet clock's time base. A flowspace takes it once, so that the times
// its programs write (a timestamp annotation) and the records' times the
// reader converts agree to the nanosecond.
func Offset() int64 { return time.Now().UnixNano() - monotonic() }

// Start reads rings until Stop, handing each record to the streams of its
// port whose mask it shares. A goroutine per ring fills streams of its
// own, which are each other's peers and go up on the ring's lane of the
// bridge: ring 0 fills ports' streams, ring i copies of them (each with a
// pool of its own). The records' headers carry words annotation words
// (the streams' Ann); offset is the flowspace's Offset.
func Start(rings []*ebpf.Map, ports [][]*inproc.Stream, words int, offset int64) (*Reader, error) {
	r := &Reader{offset: offset, header: Header(words)}
	for i, m := range rings {
		rg := ring{ports: ports}
		if i > 0 {
			rg.ports = make([][]*inproc.Stream, len(ports))
			for p, port := range ports {
				for _, s := range port {
					c := &inproc.Stream{Up: s.Up, Source: s.Source, Mask: s.Mask, Tags: s.Tags, Snap: s.Snap,
						Taken: s.Taken, Ann: s.Ann, Holds: s.Holds, Lane: i, Pool: inproc.NewPool(s.Snap)}
					rg.ports[p] = append(rg.ports[p], c)
				}
			}
		}
		var all []*inproc.Stream
		for _, port := range rg.ports {
			all = append(all, port...)
		}
		for _, s := range all {
			s.Peers = all
		}
		rd, err := cring.NewReader(m)
		if err != nil {
			for _, g := range r.rings {
				g.rd.Close()
			}
			return nil, fmt.Errorf("cannot read the ring buffer: %w", err)
		}
		rg.rd = rd
		r.rings = append(r.rings, rg)
	}
	for i := range r.rings {
		r.wg.Add(1)
		// Not the run's context: at the end, what the ring holds still
		// goes up (the flowspace above reads its bridge until it is
		// closed).
		go r.run(context.Background(), &r.rings[i])
	}
	return r, nil
}

// Stop sends up what the ring buffers hold, then stops reading. It waits
// for the flowspace above to take those messages, so that flowspace must
// read its bridge until it is closed, even when the run was cancelled
// before it started: flowgraph.Runtime.Activate makes sure it does, by
// cancelling the run only once every flowspace is active.
func (r *Reader) Stop() {
	for _, g := range r.rings {
		g.rd.Flush()
	}
	r.wg.Wait()
	for _, g := range r.rings {
		g.rd.Close()
	}
}

func (r *Reader) run(ctx context.Context, g *ring) {
	defer r.wg.Done()
	var rec cring.Record
	pending := 0
	for {
		if pending > 0 {
			g.rd.SetDeadline(time.Now().Add(inproc.FlushAfter))
		} else {
			g.rd.SetDeadline(time.Now().Add(IdleTick))
		}
		err := g.rd.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			r.flushAll(ctx, g)
			if pending == 0 {
				// Nothing came: time moved all the same.
				now := monotonic() + r.offset
				for _, port := range g.ports {
					for _, s := range port {
						s.Clock(ctx, now)
					}
				}
			}
			pending = 0
			continue
		case err != nil: // flushed (or closed): the run stops
			r.flushAll(ctx, g)
			return
		}
		raw := rec.RawSample
		if len(raw) < HeaderLen {
			continue
		}
		mask := binary.NativeEndian.Uint64(raw[OffMask:])
		ts := int64(binary.NativeEndian.Uint64(raw[OffTime:])) + r.offset
		port := int(binary.NativeEndian.Uint32(raw[OffPort:]))
		if port >= len(g.ports) {
			continue
		}
		if mask == 0 { // a clock-only record
			for _, s := range g.ports[port] {
				s.Clock(ctx, ts)
			}
			continue
		}
		if len(raw) < r.header {
			continue
		}
		wire := binary.NativeEndian.Uint32(raw[OffWireLen:])
		capLen := min(int(binary.NativeEndian.Uint32(raw[OffCapLen:])), len(raw)-r.header)
		ann := raw[OffAnn:r.header]
		for _, s := range g.ports[port] {
			if m := mask & s.Mask; m != 0 {
				// The record holds what the capture with the longest snap
				// length on the port keeps; each keeps its own.
				if s.Add(ctx, m|mask&inproc.EndedBit, raw[r.header:r.header+min(capLen, s.Snap)], wire, ts, 0, ann) {
					pending++
				}
			}
		}
	}
}

func (r *Reader) flushAll(ctx context.Context, g *ring) {
	for _, port := range g.ports {
		inproc.FlushAll(ctx, port)
	}
}

// monotonic returns CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns, in ns.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
