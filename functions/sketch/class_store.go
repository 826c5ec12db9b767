package sketch

import (
	"fmt"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
)

// store is MAFIA's store sketch: depth rows of width cells; each packet
// writes its value into its key's cell of every row, and asks, before it
// writes, whether any (or all) of those cells held the value already. A
// flow whose value changes (its path tag, MAFIA's Listing 3) finds none of
// its cells holding the new one, unless another key wrote it into one of
// them; and other keys that overwrote all of them make a change up: the
// width makes both rare.

var storeState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	{Name: "changes", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets whose value none of their key's cells held (empty cells hold 0)"},
	nokeyField,
	{Name: "missing", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets without the field value= reads: not stored"},
	{Name: "cells", Type: buffers.U64, Merge: functions.MergeShared, LenDoc: "depth×width",
		LenOf:   func(p functions.Params) int { d, w := cmsDims(p); return d * w },
		Summary: "the sketch: row r's cells at [r·width, (r+1)·width), the last value written there",
		Targets: []functions.Target{functions.TargetUser}},
	{Name: "cells", Type: buffers.U64, Merge: functions.MergeShared, LenDoc: "depth×width (width rounded up to a power of two)",
		LenOf:   func(p functions.Params) int { d, _ := cmsDims(p); w, _ := p4Width(p); return d * w },
		Summary: "the switch's sketch, a register per row: row r's cells at [r·width, (r+1)·width)",
		Targets: []functions.Target{functions.TargetP4}},
}}

var storeClass = &functions.Class{
	Name:      "store",
	Summary:   "a store sketch: each packet's value kept in its key's cells, and whether they held it (MAFIA's Sketch of alg store)",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		measure.KeyParam("5tuple"),
		{Name: "value", Type: functions.String, Required: true,
			Summary: "what a packet stores: an expression of match's language (a header field: ipv4.csum)",
			Check:   func(v functions.Value) error { return match.CheckExpr(v.Str, false) }},
		{Name: "width", Type: functions.Int, Default: "256", Summary: "cells per row", Check: intRange("width", 1, 1<<24)},
		{Name: "depth", Type: functions.Int, Default: "4", Summary: "rows", Check: intRange("depth", 1, 16)},
		{Name: "pass", Type: functions.String, Default: "all", Enum: []string{"all", "new", "old"},
			Summary: "which packets pass: all; new: none of their key's cells held their value (a change); old: one did"},
		measure.WindowParam,
		measure.ReportParam("emit a record per window (and at the end) with the changes; any K ≥ 1"),
		measure.HashParam,
	},
	State:     storeState,
	Produces:  measure.Reports,
	Annotates: 1,
	Targets:   []functions.Target{functions.TargetUser, functions.TargetP4},
	Code:      functions.P4Code(p4StoreCode),
	Readable:  func(functions.Params) []string { return []string{"any", "all", "changes"} },
	Reads:     func(p functions.Params) ([]string, error) { return match.Refs(p.Str("value")) },
	Runs: func(t functions.Target, p functions.Params) error {
		if t != functions.TargetP4 {
			if err := measure.SwitchHashRuns(t, p, nil); err != nil {
				return err
			}
		}
		return match.UserRuns(t, p, nil, "value")
	},
	Validate: measure.CheckLinkType,
	New:      func(ctx *functions.Context) (functions.Function, error) { return NewStore(ctx) },
}

func init() { functions.Register(storeClass) }

// Store is the store class.
type Store struct {
	keyed
	cells           []uint64
	depth, width    uint32
	value           *match.Expr
	pass            string
	at              int    // annotation: bit 0 any, bit 1 all
	changes, nomiss int    // offsets
	p4              *p4Key // on a switch: its hashes
	p4bits          int
	pos             []uint32
	touched         *measure.Touched
}

// NewStore instantiates a store function.
func NewStore(ctx *functions.Context) (*Store, error) {
	k, err := newKeyed(ctx, storeState)
	if err != nil {
		return nil, err
	}
	d, w := cmsDims(ctx.Params)
	bits := 0
	if measure.SwitchHashed(ctx) {
		w, bits = p4Width(ctx.Params)
	}
	s := &Store{keyed: k, cells: k.m.Uint64s(functions.FieldOf(k.m, "cells")), depth: uint32(d), width: uint32(w),
		pass: ctx.Params.Str("pass"), at: ctx.Ann,
		changes: functions.FieldOf(k.m, "changes").Offset, nomiss: functions.FieldOf(k.m, "missing").Offset}
	if s.value, err = match.NewExpr(ctx, ctx.Params.Str("value"), false); err != nil {
		return nil, err
	}
	if k.window.Interval > 0 && measure.Tracks(ctx) {
		s.touched = measure.NewTouched(len(s.cells), ctx)
	}
	if measure.SwitchHashed(ctx) {
		s.p4, s.p4bits, s.pos = &p4Key{sp: k.sp, lt: k.lt}, bits, make([]uint32, d)
	}
	return s, nil
}

// Process stores each packet's value in its key's cells and keeps the
// packets pass= asks for (a packet without a key or a value: only with
// pass=all).
func (s *Store) Process(b *buffers.Batch) {
	if s.p4 != nil {
		s.processP4(b)
		return
	}
	s.ProcessHashes(b, s.ownHashes(b))
}

// ProcessHashes implements flowkey.Keyed.
func (s *Store) ProcessHashes(b *buffers.Batch, hs *flowkey.Hashes) {
	p := b.PBuf
	n := 0
	var nokey, miss, changes uint64
	for _, e := range b.E[:b.N] {
		p.Ann(e.Slot)[s.at] = 0
		h, ok := hs.Of(e.Slot)
		var v int64
		if !ok {
			nokey++
		} else if v, ok = s.value.Int(p, e.Slot); !ok {
			miss++
		}
		if !ok {
			if s.pass == "all" {
				b.E[n] = e
				n++
			}
			continue
		}
		anyHeld, allHeld := s.Set(h, uint64(v))
		if !anyHeld {
			changes++
		}
		if s.mark(p, e.Slot, anyHeld, allHeld) {
			b.E[n] = e
			n++
		}
	}
	s.done(b, n, nokey, miss, changes)
}

// mark annotates a stored packet (bit 0: a cell already held its value,
// bit 1: every cell did) and says whether pass= keeps it.
func (s *Store) mark(p *buffers.PBuf, slot uint32, anyHeld, allHeld bool) bool {
	var ann uint64
	if anyHeld {
		ann |= 1
	}
	if allHeld {
		ann |= 2
	}
	p.Ann(slot)[s.at] = ann
	return s.pass == "all" || (s.pass == "old") == anyHeld
}

// done counts a batch's packets without a key, without a value and that
// changed a cell, and passes the n packets kept.
func (s *Store) done(b *buffers.Batch, n int, nokey, miss, changes uint64) {
	s.noKey(nokey)
	if miss > 0 {
		s.m.Add64(s.nomiss, miss)
	}
	if changes > 0 {
		s.m.Add64(s.changes, changes)
	}
	b.N = n
	s.keyed.pass(b)
}

// Set writes v into the cells of the key hashed to h (flowkey.Index of
// each row) and reports whether any, and whether all, held v before.
func (s *Store) Set(h, v uint64) (anyHeld, allHeld bool) {
	allHeld = true
	for r := range s.depth {
		j := r*s.width + flowkey.Index(h, r, s.width)
		old := atomic.SwapUint64(&s.cells[j], v)
		anyHeld = anyHeld || old == v
		allHeld = allHeld && old == v
		if s.touched != nil && old == 0 && v != 0 {
			s.touched.Add(j)
		}
	}
	return anyHeld, allHeld
}

// Tick implements functions.Clocked.
func (s *Store) Tick(now int64) { s.tick(now, s.emit, s.reset) }

// Flush implements functions.Flusher.
func (s *Store) Flush(int64) { s.flush(s.emit) }

func (s *Store) emit(start int64) {
	s.out.Start(record.Report, start, s.out.ID)
	s.out.U64("changes", s.m.Load64(s.changes))
	s.out.Commit()
	s.out.Flush()
}

func (s *Store) reset() {
	resetTouched64(s.cells, s.touched)
	s.m.Store64(s.changes, 0)
	s.m.Store64(s.nomiss, 0)
}

// Summary implements functions.Summarizer.
func (s *Store) Summary() map[string]any {
	return map[string]any{"changes": s.m.Load64(s.changes), "nokey": s.m.Load64(s.nokey),
		"missing": s.m.Load64(s.nomiss), "depth": s.depth, "width": s.width}
}

// ReadNames implements functions.Readable.
func (s *Store) ReadNames() []string { return []string{"any", "all", "changes"} }

// ReadInt implements functions.IntReadable: any and all, 1 when one (or
// every) cell of the packet's key held its value before the packet wrote
// it; changes, the window's count.
func (s *Store) ReadInt(name string) (functions.IntReader, error) {
	at := s.at
	switch name {
	case "any":
		return func(p *buffers.PBuf, slot uint32) int64 { return int64(p.Ann(slot)[at] & 1) }, nil
	case "all":
		return func(p *buffers.PBuf, slot uint32) int64 { return int64(p.Ann(slot)[at] >> 1 & 1) }, nil
	case "changes":
		return func(*buffers.PBuf, uint32) int64 { return int64(s.m.Load64(s.changes)) }, nil
	}
	return nil, fmt.Errorf("store has no %q to read (it has any, all, changes)", name)
}

// Read implements functions.Readable.
func (s *Store) Read(name string) (functions.Reader, error) {
	return functions.ReadAsFloat(s, name)
}

var (
	_ functions.Clocked     = (*Store)(nil)
	_ functions.Flusher     = (*Store)(nil)
	_ functions.Producer    = (*Store)(nil)
	_ functions.Readable    = (*Store)(nil)
	_ functions.IntReadable = (*Store)(nil)
	_ functions.Summarizer  = (*Store)(nil)
)
