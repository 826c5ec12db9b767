package sketch

import (
	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
)

func counting(p functions.Params) bool { return p.Bool("counting") }

// countingValue is value=, which only a counting filter adds.
var countingValue = func() functions.Param {
	v := measure.ValueParam
	v.With = "counting"
	return v
}()

var bloomState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	{Name: "inserted", Type: buffers.U64, Merge: functions.MergeSum, Summary: "keys inserted that were not in the set (membership), or packets counted (counting)"},
	nokeyField,
	{Name: "bits", Type: buffers.U64, Merge: functions.MergeOr, LenDoc: "⌈bits/64⌉ (1 when counting)",
		LenOf: func(p functions.Params) int {
			if counting(p) {
				return 1
			}
			return BloomWords(int(p.Int("bits")))
		},
		Summary: "the membership filter: bit b is bit b%64 of word b/64",
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP}},
	{Name: "counters", Type: buffers.U64, Merge: functions.MergeSum, LenDoc: "bits when counting (else 1)",
		LenOf: func(p functions.Params) int {
			if counting(p) {
				return int(p.Int("bits"))
			}
			return 1
		},
		Summary: "the counting filter: one counter per position",
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP}},
	{Name: "cells", Type: buffers.U8, Merge: functions.MergeOr, LenDoc: "hashes×(bits/hashes rounded up to a power of two)",
		LenOf:   func(p functions.Params) int { n, _ := p4BloomBits(p); return int(p.Int("hashes")) * n },
		Summary: "the switch's filter, a register of one-bit cells per hash: partition i's cells at [i·n, (i+1)·n)",
		Targets: []functions.Target{functions.TargetP4}},
}}

var bloomClass = &functions.Class{
	Name:      "bloom",
	Summary:   "Bloom filter of the packets' keys (membership: pass the first packet of each key, or all, or the known; counting: values per key)",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		measure.KeyParam("5tuple"),
		{Name: "bits", Type: functions.Int, Default: "64K", Summary: "m: bits of the filter (counters, when counting)",
			Check: intRange("bits", 1, 1<<32-1)},
		{Name: "hashes", Type: functions.Int, Default: "4", Summary: "k: positions per key", Check: intRange("hashes", 1, 32)},
		{Name: "pass", Type: functions.String, Default: "new", Enum: []string{"new", "all", "member"},
			Summary: "new: the packets whose key was not yet in the set (one alarm per key, MAFIA's insert); member: those whose key was; all: every packet"},
		{Name: "counting", Type: functions.Bool, Summary: "a counting Bloom filter: add value= per packet; reads min, max, sum, avg"},
		countingValue,
		measure.WindowParam,
		measure.ReportParam("emit a record per window (and at the end) with the keys inserted; any K ≥ 1"),
		measure.HashParam,
	},
	State:       bloomState,
	Concurrency: functions.Mergeable,
	OrderedWhen: []functions.Ordering{
		{When: "counting unset", If: func(p functions.Params) bool { return !counting(p) },
			Why: "a membership filter counts the keys new to the one set; each worker's copy would count them again"},
		{When: "pass=new or member", If: func(p functions.Params) bool { return p.Str("pass") != "all" },
			Why: "its verdicts test the filter as every packet before left it"},
		measure.ReportOrdering("its reports are made as each window closes"),
		measure.SwitchHashOrdering,
	},
	Readable: func(p functions.Params) []string { return bloomReads(counting(p)) },
	Targets:  []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
	Runs:     p4Runs(bloomRuns, bloomP4Runs),
	Code:     functions.Codes(functions.EBPFCode(ebpfBloomCode), functions.P4Code(p4BloomCode)),
	Produces: measure.Reports,
	Validate: measure.CheckLinkType,
	New:      func(ctx *functions.Context) (functions.Function, error) { return NewBloomFunc(ctx) },
}

// BloomFunc is the bloom class: a membership filter that inserts each
// packet's key, or a counting one that adds value= to it.
type BloomFunc struct {
	keyed
	b        *Bloom
	cb       *CountingBloom
	mem      []uint64
	inserted int // offset
	pass     string
	bytes    bool
	// On a switch: the key as the switch reads it, and the filter.
	p4 *p4Key
	pb *p4Bloom
}

// NewBloomFunc instantiates a bloom function.
func NewBloomFunc(ctx *functions.Context) (*BloomFunc, error) {
	k, err := newKeyed(ctx, bloomState)
	if err != nil {
		return nil, err
	}
	f := &BloomFunc{keyed: k, inserted: functions.FieldOf(k.m, "inserted").Offset, pass: ctx.Params.Str("pass"), bytes: measure.Bytes(ctx.Params)}
	hashes := int(ctx.Params.Int("hashes"))
	if measure.SwitchHashed(ctx) {
		_, bits := p4BloomBits(ctx.Params)
		f.p4 = &p4Key{sp: k.sp, lt: k.lt}
		f.pb = &p4Bloom{cells: k.m.Uint8s(functions.FieldOf(k.m, "cells")), k: hashes, bits: bits}
		return f, nil
	}
	field := "bits"
	if counting(ctx.Params) {
		field = "counters"
	}
	f.mem = k.m.Uint64s(functions.FieldOf(k.m, field))
	if counting(ctx.Params) {
		f.cb, err = NewCountingBloom(f.mem, hashes, Shared)
	} else {
		f.b, err = NewBloom(f.mem, int(ctx.Params.Int("bits")), hashes)
	}
	if err == nil && k.window.Interval > 0 && measure.Tracks(ctx) {
		if t := measure.NewTouched(len(f.mem), ctx); f.cb != nil {
			f.cb.Track(t)
		} else {
			f.b.Track(t)
		}
	}
	return f, err
}

// Process inserts (or counts) each packet's key and keeps the packets
// pass= asks for; a packet without a key passes only with pass=all.
func (f *BloomFunc) Process(b *buffers.Batch) {
	if f.p4 != nil {
		f.processP4(b)
		return
	}
	f.ProcessHashes(b, f.ownHashes(b))
}

// ProcessHashes implements flowkey.Keyed.
func (f *BloomFunc) ProcessHashes(b *buffers.Batch, hs *flowkey.Hashes) {
	p := b.PBuf
	n := 0
	var ins, nokey uint64
	for _, e := range b.E[:b.N] {
		h, ok := hs.Of(e.Slot)
		present := false
		if !ok {
			nokey++
		} else {
			if f.cb != nil {
				present = f.cb.Min(h) > 0
				f.cb.Add(h, measure.ValueOf(p.Meta(e.Slot), f.bytes))
				ins++
			} else if present = f.b.Add(h); !present {
				ins++
			}
		}
		keep := f.pass == "all" || ok && (f.pass == "new") != present
		if keep {
			b.E[n] = e
			n++
		}
	}
	f.noKey(nokey)
	f.m.Add64(f.inserted, ins)
	b.N = n
	f.keyed.pass(b)
}

// Tick implements functions.Clocked.
func (f *BloomFunc) Tick(now int64) { f.tick(now, f.emit, f.reset) }

// Flush implements functions.Flusher.
func (f *BloomFunc) Flush(int64) { f.flush(f.emit) }

func (f *BloomFunc) emit(start int64) {
	f.out.Start(record.Report, start, f.out.ID)
	f.out.U64("inserted", f.m.Load64(f.inserted))
	f.out.Commit()
	f.out.Flush()
}

func (f *BloomFunc) reset() {
	switch {
	case f.pb != nil:
		clear(f.pb.cells)
	case f.cb != nil:
		f.cb.ResetTouched()
	default:
		f.b.ResetTouched()
	}
	f.m.Store64(f.inserted, 0)
}

// Summary implements functions.Summarizer.
func (f *BloomFunc) Summary() map[string]any {
	return map[string]any{"inserted": f.m.Load64(f.inserted), "nokey": f.m.Load64(f.nokey)}
}

// ReadNames implements functions.Readable.
func (f *BloomFunc) ReadNames() []string { return bloomReads(f.cb != nil) }

func bloomReads(counting bool) []string {
	if counting {
		return []string{"min", "max", "sum", "avg", "inserted"}
	}
	return []string{"member", "inserted"}
}

// Read implements functions.Readable: member (1 when the packet's key is
// in the set), inserted; a counting filter's aggregate reads over the
// key's counters: min, max, sum, avg.
func (f *BloomFunc) Read(name string) (functions.Reader, error) {
	if name == "inserted" {
		return func(*buffers.PBuf, uint32) float64 { return float64(f.m.Load64(f.inserted)) }, nil
	}
	if f.pb != nil && name == "member" {
		key := &p4Key{sp: f.sp, lt: f.lt}
		return func(p *buffers.PBuf, slot uint32) float64 {
			h1, h2, ok := key.hashes(p.Data(slot))
			if ok && f.pb.test(h1, h2) {
				return 1
			}
			return 0
		}, nil
	}
	var agg func(h uint64) float64
	switch {
	case name == "member" && f.b != nil:
		agg = func(h uint64) float64 {
			if f.b.Test(h) {
				return 1
			}
			return 0
		}
	case name == "min" && f.cb != nil:
		agg = func(h uint64) float64 { return float64(f.cb.Min(h)) }
	case name == "max" && f.cb != nil:
		agg = func(h uint64) float64 { return float64(f.cb.Max(h)) }
	case name == "sum" && f.cb != nil:
		agg = func(h uint64) float64 { return float64(f.cb.Sum(h)) }
	case name == "avg" && f.cb != nil:
		agg = func(h uint64) float64 { return float64(f.cb.Avg(h)) }
	default:
		return nil, readErr("bloom", name, f.ReadNames())
	}
	var k flowkey.Key
	return func(p *buffers.PBuf, slot uint32) float64 {
		if !f.sp.Extract(f.lt, p.Data(slot), &k) {
			return 0
		}
		return agg(f.sp.Hash(&k, seed))
	}, nil
}

var (
	_ functions.Clocked    = (*BloomFunc)(nil)
	_ functions.Summarizer = (*BloomFunc)(nil)
	_ functions.Readable   = (*BloomFunc)(nil)
)
