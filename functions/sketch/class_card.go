package sketch

import (
	"math"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// The cardinality estimators: hll and pcsa count the distinct keys of the
// window.

var hllState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	nokeyField,
	{Name: "registers", Type: buffers.U8, Merge: functions.MergeMax, LenDoc: "2^precision",
		LenOf:   func(p functions.Params) int { return 1 << p.Int("precision") },
		Summary: "register j: the largest rank of the hashes that chose it"},
}}

var hllClass = &functions.Class{
	Name:      "hll",
	Summary:   "HyperLogLog: the number of distinct keys, per window (state: estimate)",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		measure.KeyParam("5tuple"),
		{Name: "precision", Type: functions.Int, Default: "14", Summary: "p: m = 2^p registers, standard error 1.04/√m (14: 0.81%)",
			Check: intRange("precision", 4, 18)},
		measure.WindowParam,
		measure.ReportParam("emit a record with the estimate per window (and at the end); any K ≥ 1"),
		measure.HashParam,
	},
	State:       hllState,
	Concurrency: functions.Mergeable,
	OrderedWhen: []functions.Ordering{estimateOrdering, measure.SwitchHashOrdering},
	Readable:    estimateReads,
	Targets:     []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
	Runs:        p4Runs(nil, nil),
	Code:        functions.Codes(functions.EBPFCode(ebpfHLLCode), functions.P4Code(p4HLLCode)),
	Produces:    measure.Reports,
	Validate:    measure.CheckLinkType,
	New:         func(ctx *functions.Context) (functions.Function, error) { return NewHLLFunc(ctx) },
}

// estimateOrdering: a cardinality estimator with report= reports each
// window's estimate as the window closes.
var estimateOrdering = measure.ReportOrdering("its reports give each window's estimate as the window closes")

// HLLFunc is the hll class.
type HLLFunc struct {
	keyed
	s   *HLL
	est cachedEstimate
	p4  *p4Key // on a switch: the key as the switch reads it
}

// NewHLLFunc instantiates an hll function.
func NewHLLFunc(ctx *functions.Context) (*HLLFunc, error) {
	k, err := newKeyed(ctx, hllState)
	if err != nil {
		return nil, err
	}
	mem, p := k.m.Uint8s(functions.FieldOf(k.m, "registers")), int(ctx.Params.Int("precision"))
	if measure.SwitchHashed(ctx) {
		s, err := NewHLL32(mem, p)
		return &HLLFunc{keyed: k, s: s, p4: &p4Key{sp: k.sp, lt: k.lt}}, err
	}
	s, err := NewHLL(mem, p)
	if err != nil {
		return nil, err
	}
	if k.window.Interval > 0 && measure.Tracks(ctx) {
		s.Track(measure.NewTouched(len(s.r), ctx))
	}
	return &HLLFunc{keyed: k, s: s}, nil
}

// Process offers each packet's key.
func (f *HLLFunc) Process(b *buffers.Batch) {
	if f.p4 != nil {
		f.processP4(b)
		return
	}
	f.ProcessHashes(b, f.ownHashes(b))
}

// ProcessHashes implements flowkey.Keyed.
func (f *HLLFunc) ProcessHashes(b *buffers.Batch, hs *flowkey.Hashes) {
	changed := false
	var nokey uint64
	for _, e := range b.E[:b.N] {
		h, ok := hs.Of(e.Slot)
		if !ok {
			nokey++
			continue
		}
		if f.s.Add(h) {
			changed = true
		}
	}
	f.noKey(nokey)
	if changed {
		f.est.dirty.Store(true)
	}
	f.pass(b)
}

// Tick implements functions.Clocked.
func (f *HLLFunc) Tick(now int64) { f.tick(now, f.emit, f.reset) }

// Flush implements functions.Flusher.
func (f *HLLFunc) Flush(int64) { f.flush(f.emit) }

func (f *HLLFunc) emit(start int64) { f.summary(start, f.s.TrackedEstimate()) }

func (f *HLLFunc) reset() {
	f.s.ResetTouched()
	f.est.dirty.Store(true)
}

func (f *HLLFunc) estimate() float64 { return f.est.get(f.s.Estimate) }

// Summary implements functions.Summarizer. It estimates afresh, not from
// the cache Process marks dirty: in an eBPF flowspace the registers change
// by the flowspace's sync, and Process never runs. The estimate is the
// number a report's record and a reader (LABEL.estimate) give, unrounded:
// one form everywhere.
func (f *HLLFunc) Summary() map[string]any {
	m := 1 << f.s.Precision()
	return map[string]any{"estimate": f.s.Estimate(), "nokey": f.m.Load64(f.nokey),
		"registers": m, "stderr": 1.04 / math.Sqrt(float64(m))}
}

// ReadNames implements functions.Readable.
func (f *HLLFunc) ReadNames() []string { return estimateReads(functions.Params{}) }

func estimateReads(functions.Params) []string { return []string{"estimate"} }

// Read implements functions.Readable.
func (f *HLLFunc) Read(name string) (functions.Reader, error) {
	if name == "estimate" {
		return func(*buffers.PBuf, uint32) float64 { return f.estimate() }, nil
	}
	return nil, readErr("hll", name, f.ReadNames())
}

var pcsaState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	nokeyField,
	{Name: "bitmaps", Type: buffers.U32, Merge: functions.MergeOr, LenDoc: "bitmaps",
		LenOf:   func(p functions.Params) int { return int(p.Int("bitmaps")) },
		Summary: "bitmap j: bit r set when a hash that chose it had r trailing zeros",
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP}},
	{Name: "bitmaps", Type: buffers.U32, Merge: functions.MergeOr, LenDoc: "bitmaps rounded up to a power of two",
		LenOf:   func(p functions.Params) int { n, _ := flowkey.Pow2(uint64(p.Int("bitmaps"))); return int(n) },
		Summary: "the switch's bitmaps, a register: bitmap j (crc32's top bits) with bit r set for r trailing zeros of the rest",
		Targets: []functions.Target{functions.TargetP4}},
}}

var pcsaClass = &functions.Class{
	Name:      "pcsa",
	Summary:   "PCSA (probabilistic counting with stochastic averaging): the number of distinct keys, per window (state: estimate)",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		measure.KeyParam("5tuple"),
		{Name: "bitmaps", Type: functions.Int, Default: "256", Summary: "m: 32-bit bitmaps, standard error 0.78/√m (256: 4.9%)",
			Check: intRange("bitmaps", 1, 1<<20)},
		measure.WindowParam,
		measure.ReportParam("emit a record with the estimate per window (and at the end); any K ≥ 1"),
		measure.HashParam,
	},
	State:       pcsaState,
	Concurrency: functions.Mergeable,
	OrderedWhen: []functions.Ordering{estimateOrdering, measure.SwitchHashOrdering},
	Readable:    estimateReads,
	Targets:     []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
	Runs:        p4Runs(nil, nil),
	Code:        functions.Codes(functions.EBPFCode(ebpfPCSACode), functions.P4Code(p4PCSACode)),
	Produces:    measure.Reports,
	Validate:    measure.CheckLinkType,
	New:         func(ctx *functions.Context) (functions.Function, error) { return NewPCSAFunc(ctx) },
}

// PCSAFunc is the pcsa class.
type PCSAFunc struct {
	keyed
	s   *PCSA
	mem []uint32
	est cachedEstimate
	p4  *p4Key // on a switch: the key as the switch reads it
}

// NewPCSAFunc instantiates a pcsa function.
func NewPCSAFunc(ctx *functions.Context) (*PCSAFunc, error) {
	k, err := newKeyed(ctx, pcsaState)
	if err != nil {
		return nil, err
	}
	mem := k.m.Uint32s(functions.FieldOf(k.m, "bitmaps"))
	s, err := NewPCSA(mem)
	if err != nil {
		return nil, err
	}
	f := &PCSAFunc{keyed: k, s: s, mem: mem}
	if measure.SwitchHashed(ctx) {
		f.p4 = &p4Key{sp: k.sp, lt: k.lt}
	}
	if k.window.Interval > 0 && measure.Tracks(ctx) {
		s.Track(measure.NewTouched(len(mem), ctx))
	}
	return f, nil
}

// Process offers each packet's key.
func (f *PCSAFunc) Process(b *buffers.Batch) {
	if f.p4 != nil {
		f.processP4(b)
		return
	}
	f.ProcessHashes(b, f.ownHashes(b))
}

// ProcessHashes implements flowkey.Keyed.
func (f *PCSAFunc) ProcessHashes(b *buffers.Batch, hs *flowkey.Hashes) {
	changed := false
	var nokey uint64
	for _, e := range b.E[:b.N] {
		h, ok := hs.Of(e.Slot)
		if !ok {
			nokey++
			continue
		}
		if f.s.Add(h) {
			changed = true
		}
	}
	f.noKey(nokey)
	if changed {
		f.est.dirty.Store(true)
	}
	f.pass(b)
}

// Tick implements functions.Clocked.
func (f *PCSAFunc) Tick(now int64) { f.tick(now, f.emit, f.reset) }

// Flush implements functions.Flusher.
func (f *PCSAFunc) Flush(int64) { f.flush(f.emit) }

func (f *PCSAFunc) emit(start int64) { f.summary(start, f.s.TrackedEstimate()) }

func (f *PCSAFunc) reset() {
	f.s.ResetTouched()
	f.est.dirty.Store(true)
}

func (f *PCSAFunc) estimate() float64 { return f.est.get(f.s.Estimate) }

// Summary implements functions.Summarizer.
// It estimates afresh, as HLLFunc's does.
func (f *PCSAFunc) Summary() map[string]any {
	return map[string]any{"estimate": PCSAEstimate(f.mem), "nokey": f.m.Load64(f.nokey),
		"bitmaps": len(f.mem), "stderr": 0.78 / math.Sqrt(float64(len(f.mem)))}
}

// ReadNames implements functions.Readable.
func (f *PCSAFunc) ReadNames() []string { return estimateReads(functions.Params{}) }

// Read implements functions.Readable.
func (f *PCSAFunc) Read(name string) (functions.Reader, error) {
	if name == "estimate" {
		return func(*buffers.PBuf, uint32) float64 { return f.estimate() }, nil
	}
	return nil, readErr("pcsa", name, f.ReadNames())
}

var (
	_ functions.Clocked    = (*HLLFunc)(nil)
	_ functions.Summarizer = (*PCSAFunc)(nil)
	_ functions.Readable   = (*PCSAFunc)(nil)
	_ functions.Producer   = (*HLLFunc)(nil)
)
