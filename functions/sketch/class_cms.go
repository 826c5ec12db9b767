package sketch

import (
	"fmt"
	"math"
	"sync"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
)

func cmsDims(p functions.Params) (depth, width int) {
	return int(p.Int("depth")), int(p.Int("width"))
}

var cmsState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	{Name: "total", Type: buffers.U64, Merge: functions.MergeSum, Summary: "N: the sum of the values added in the window (packets or bytes)"},
	nokeyField,
	{Name: "counters", Type: buffers.U64, Merge: functions.MergeSum, LenDoc: "depth×width",
		LenOf:   func(p functions.Params) int { d, w := cmsDims(p); return d * w },
		Summary: "the sketch: row r's counters at [r·width, (r+1)·width)",
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP}},
	{Name: "counters", Type: buffers.U64, Merge: functions.MergeSum, LenDoc: "depth×width (width rounded up to a power of two)",
		LenOf:   func(p functions.Params) int { d, _ := cmsDims(p); w, _ := p4Width(p); return d * w },
		Summary: "the switch's sketch, a register per row: row r's counters at [r·width, (r+1)·width)",
		Targets: []functions.Target{functions.TargetP4}},
}}

var cmsClass = &functions.Class{
	Name:      "cms",
	Summary:   "count-min sketch of packets or bytes per key, per window, with reports of the heaviest keys",
	MinInputs: 1, MaxInputs: -1,
	Params: []functions.Param{
		measure.KeyParam("5tuple"),
		cmsValueParam,
		{Name: "width", Type: functions.Int, Default: "2719", Summary: "counters per row: ε = e/width (2719: ε ≈ 0.001)",
			Check: intRange("width", 1, 1<<24)},
		{Name: "depth", Type: functions.Int, Default: "5", Summary: "rows: δ = e^-depth (5: δ ≈ 0.0067)",
			Check: intRange("depth", 1, 16)},
		measure.WindowParam,
		measure.ReportParam("emit a record per key for the K keys with the largest estimates, per window (and at the end)"),
		measure.HashParam,
	},
	State:       cmsState,
	Concurrency: functions.Mergeable,
	OrderedWhen: []functions.Ordering{measure.ReportOrdering("its reports list each window's heaviest keys, tracked as their estimates grow packet by packet"), measure.SwitchHashOrdering},
	Readable:    cmsReads,
	Targets:     []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
	Runs:        p4Runs(cmsRuns, cmsP4Runs),
	Code:        functions.Codes(functions.EBPFCode(ebpfCMSCode), functions.P4Code(p4CMSCode)),
	Produces:    measure.Reports,
	Validate:    measure.CheckLinkType,
	New:         func(ctx *functions.Context) (functions.Function, error) { return NewCMS(ctx) },
}

// cmsValueParam is cms's value=: measure's packets or bytes, or a number
// of each packet (an expression of match's language: a header field,
// ipv4.id, that hops sum into, MAFIA's top-k congested flows).
var cmsValueParam = functions.Param{Name: "value", Type: functions.String, Default: "packets",
	Summary: "what a packet adds: 1 (packets), its wire length (bytes), or a number of its own (an expression of match's language: ipv4.id); a packet without the fields it reads adds 0",
	Check: func(v functions.Value) error {
		if v.Str == "packets" || v.Str == "bytes" {
			return nil
		}
		return match.CheckExpr(v.Str, false)
	}}

// valueExpr reports whether value= is an expression (not packets or bytes).
func valueExpr(p functions.Params) bool {
	v := p.Str("value")
	return v != "packets" && v != "bytes"
}

// CMS is the cms class: a count-min sketch over the packets' keys. With
// report=K it tracks the K keys with the largest estimates as they are
// updated (a key's estimate only grows within a window), and reports them
// at the window's end.
//
// The counters are written by Process alone, under the function's lock,
// and read concurrently only by the readers Read hands out (match's
// nbytes.min): until then the sketch adds with plain writes (Exclusive),
// several times cheaper than atomic ones; Read switches it to atomic adds
// (Shared) for good. mode makes the switch wait for a batch being
// processed, so that no plain write is under way once a reader exists.
type CMS struct {
	keyed
	mode    sync.Mutex
	s       *CountMin
	bytes   bool
	value   *match.Expr // value= an expression
	total   int         // offset
	top     *TopK[flowkey.Key]
	entries []Entry[flowkey.Key]
	// On a switch: the key as the switch reads it, and its positions.
	p4     *p4Key
	p4bits int
	pos    []uint32
}

// NewCMS instantiates a cms function.
func NewCMS(ctx *functions.Context) (*CMS, error) {
	k, err := newKeyed(ctx, cmsState)
	if err != nil {
		return nil, err
	}
	d, w := cmsDims(ctx.Params)
	bits := 0
	if measure.SwitchHashed(ctx) {
		w, bits = p4Width(ctx.Params)
	}
	s, err := NewCountMin(k.m.Uint64s(functions.FieldOf(k.m, "counters")), d, w, Exclusive)
	if err != nil {
		return nil, err
	}
	if k.window.Interval > 0 && measure.Tracks(ctx) {
		s.Track(measure.NewTouched(s.Len(), ctx))
	}
	c := &CMS{keyed: k, s: s, bytes: measure.Bytes(ctx.Params), total: functions.FieldOf(k.m, "total").Offset}
	if valueExpr(ctx.Params) {
		if c.value, err = match.NewExpr(ctx, ctx.Params.Str("value"), false); err != nil {
			return nil, err
		}
	}
	if measure.SwitchHashed(ctx) {
		c.p4, c.p4bits, c.pos = &p4Key{sp: k.sp, lt: k.lt}, bits, make([]uint32, d)
	}
	if k.report > 0 {
		c.top = NewTopK[flowkey.Key](k.report)
		c.entries = make([]Entry[flowkey.Key], 0, k.report)
	}
	return c, nil
}

// Process adds each packet's value to its key.
func (c *CMS) Process(b *buffers.Batch) {
	if c.p4 != nil {
		c.processP4(b)
		return
	}
	c.ProcessHashes(b, c.ownHashes(b))
}

// ProcessHashes implements flowkey.Keyed. A key is extracted again only
// when its estimate may enter the report's top K.
func (c *CMS) ProcessHashes(b *buffers.Batch, hs *flowkey.Hashes) {
	c.mode.Lock()
	defer c.mode.Unlock()
	p := b.PBuf
	var sum, nokey uint64
	for _, e := range b.E[:b.N] {
		h, ok := hs.Of(e.Slot)
		if !ok {
			nokey++
			continue
		}
		v := measure.ValueOf(p.Meta(e.Slot), c.bytes)
		if c.value != nil {
			x, _ := c.value.Int(p, e.Slot)
			v = uint64(x)
		}
		sum += v
		est := c.s.Add(h, v)
		if c.top != nil && est >= c.top.Threshold() { // below, Offer would do nothing
			c.sp.Extract(c.lt, p.Data(e.Slot), &c.key)
			c.top.Offer(&c.key, h, est)
		}
	}
	c.noKey(nokey)
	c.m.Add64(c.total, sum)
	c.pass(b)
}

// Tick implements functions.Clocked.
func (c *CMS) Tick(now int64) { c.tick(now, c.emit, c.reset) }

// Flush implements functions.Flusher.
func (c *CMS) Flush(int64) { c.flush(c.emit) }

func (c *CMS) reset() {
	c.s.ResetTouched()
	c.m.Store64(c.total, 0)
	if c.top != nil {
		c.top.Reset()
	}
}

func (c *CMS) emit(start int64) {
	c.entries = c.top.Append(c.entries[:0])
	for i := range c.entries {
		e := &c.entries[i]
		c.out.Start(record.Report, start, c.out.ID)
		c.out.Key(c.sp, &e.Key)
		c.out.U64("estimate", e.Estimate)
		c.out.U64("rank", uint64(i+1))
		c.out.Commit()
	}
	c.out.Flush()
}

// Summary implements functions.Summarizer.
func (c *CMS) Summary() map[string]any {
	return map[string]any{"total": c.m.Load64(c.total), "nokey": c.m.Load64(c.nokey),
		"depth": c.s.Depth(), "width": c.s.Width(), "epsilon": math.E / float64(c.s.Width()),
		"delta": math.Exp(-float64(c.s.Depth()))}
}

// ReadNames implements functions.Readable.
func (c *CMS) ReadNames() []string { return cmsReads(functions.Params{}) }

func cmsReads(functions.Params) []string { return []string{"min", "max", "sum", "avg", "total"} }

// Read implements functions.Readable: min, the estimate for the packet's
// key (0 for a packet without one); max, sum and avg, the other
// aggregates over the key's counters (MAFIA's); total, N.
func (c *CMS) Read(name string) (functions.Reader, error) {
	switch name {
	case "max", "sum", "avg":
		if c.p4 != nil {
			return nil, fmt.Errorf("cms on a switch keeps min of a key's counters for its readers, not %s", name)
		}
		c.mode.Lock()
		c.s.SetWrites(Shared)
		c.mode.Unlock()
		var k flowkey.Key
		cells := make([]uint64, c.s.Depth())
		return func(p *buffers.PBuf, slot uint32) float64 {
			if !c.sp.Extract(c.lt, p.Data(slot), &k) {
				return 0
			}
			c.s.Cells(c.sp.Hash(&k, seed), cells)
			var mx, sum uint64
			for _, x := range cells {
				mx, sum = max(mx, x), sum+x
			}
			switch name {
			case "max":
				return float64(mx)
			case "sum":
				return float64(sum)
			}
			return float64(sum) / float64(len(cells))
		}, nil
	case "min":
		c.mode.Lock()
		c.s.SetWrites(Shared)
		c.mode.Unlock()
		if c.p4 != nil {
			key, pos := &p4Key{sp: c.sp, lt: c.lt}, make([]uint32, c.s.Depth())
			return func(p *buffers.PBuf, slot uint32) float64 {
				h1, h2, ok := key.hashes(p.Data(slot))
				if !ok {
					return 0
				}
				positions(pos, h1, h2, c.p4bits)
				return float64(c.s.EstimateRows(pos))
			}, nil
		}
		var k flowkey.Key
		return func(p *buffers.PBuf, slot uint32) float64 {
			if !c.sp.Extract(c.lt, p.Data(slot), &k) {
				return 0
			}
			return float64(c.s.Estimate(c.sp.Hash(&k, seed)))
		}, nil
	case "total":
		return func(*buffers.PBuf, uint32) float64 { return float64(c.m.Load64(c.total)) }, nil
	}
	return nil, readErr("cms", name, c.ReadNames())
}

var (
	_ functions.Clocked    = (*CMS)(nil)
	_ functions.Flusher    = (*CMS)(nil)
	_ functions.Producer   = (*CMS)(nil)
	_ functions.Readable   = (*CMS)(nil)
	_ functions.Summarizer = (*CMS)(nil)
)
