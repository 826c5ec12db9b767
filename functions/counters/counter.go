package counters

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
	"github.com/ffpf-go/ffpf/functions/sketch"
)

// maxProbe bounds a lookup in the keyed table: a key that finds no room
// within it is counted as dropped, never stored elsewhere (the bound an
// eBPF program needs, and a full table's cost kept flat).
const maxProbe = 32

var counterState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	{Name: "packets", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets of the window"},
	{Name: "bytes", Type: buffers.U64, Unit: "bytes", Merge: functions.MergeSum, Summary: "their wire bytes"},
	{Name: "keys", Type: buffers.U64, Merge: functions.MergeShared, Summary: "keys stored in the window (keyed)"},
	{Name: "dropped", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets whose key found no room in the table (keyed)"},
	{Name: "nokey", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum, Summary: "packets without the layers the key needs (keyed)"},
	{Name: "table", Type: buffers.U64, Merge: functions.MergeShared,
		LenOf: func(p functions.Params) int {
			if !p.Has("key") {
				return 1
			}
			return int(p.Int("size")) * entryWords(measure.Spec(p))
		},
		LenDoc:  "size×(key words+2)",
		Summary: "the hash table: per entry the key's words, its value, and a used mark (keyed)",
		Targets: []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP}},
	{Name: "slots", Type: buffers.U64, Merge: functions.MergeShared,
		LenOf: func(p functions.Params) int {
			if !p.Has("key") {
				return 1
			}
			return p4Size(p) * entryWords(measure.Spec(p))
		},
		LenDoc:  "(key words+2)×size (size rounded up to a power of two)",
		Summary: "the switch's table, a column per register: the key's words, the values, the used marks (keyed)",
		Targets: []functions.Target{functions.TargetP4}},
}}

func entryWords(sp *flowkey.Spec) int { return sp.Words() + 2 }

// keyedHash is hash= of a keyed counter or register: with hash=switch its
// table is a switch's (one slot per key's position), in userspace too.
var keyedHash = func() functions.Param {
	p := measure.HashParam
	p.With = "key"
	return p
}()

func init() {
	functions.Register(&functions.Class{
		Name:      "counter",
		Summary:   "count packets and bytes, in total or per key (MAFIA's counter and HashMap), per window, with reports of the largest keys",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "key", Type: functions.String, Summary: "count per key: comma-separated key fields (srcip/24, dstport, 5tuple, …); unset: one total",
				Check: func(v functions.Value) error { _, err := flowkey.Parse(v.Str); return err }},
			measure.ValueParam,
			measure.WindowParam,
			measure.ReportParam("emit a record per window (and at the end): the total, or, with key=, the K keys with the largest values"),
			{Name: "size", Type: functions.Int, Default: "64K", With: "key", Summary: "keys the table holds (keyed)",
				Check: func(v functions.Value) error {
					if v.Int < 1 || v.Int > 1<<24 {
						return errors.New("size is 1 to 16M keys")
					}
					return nil
				}},
			keyedHash,
		},
		State:       counterState,
		Concurrency: functions.Mergeable,
		OrderedWhen: []functions.Ordering{
			{When: "key=", If: func(p functions.Params) bool { return p.Has("key") },
				Why: "its keys share one hash table, which the workers would fill in different orders"},
			measure.ReportOrdering("its reports are made from the whole window's counts, as its packets came"),
			measure.SwitchHashOrdering,
		},
		Readable: counterReads,
		Targets:  []functions.Target{functions.TargetUser, functions.TargetKernel, functions.TargetXDP, functions.TargetP4},
		Runs:     counterRuns,
		Code:     functions.Codes(functions.EBPFCode(ebpfCounterCode), functions.P4Code(p4CounterCode)),
		Produces: measure.Reports,
		Validate: measure.CheckKeyedLinkType,
		New:      func(ctx *functions.Context) (functions.Function, error) { return NewCounter(ctx) },
	})
}

// Counter counts packets and bytes of the window, in total or per key in
// an open-addressing hash table held in its MBuf (linear probing, at most
// maxProbe slots), MAFIA's HashMap. A report lists the K keys with the
// largest values at the window's end.
type Counter struct {
	m      *buffers.MBuf
	window measure.Window
	out    measure.Out
	report int
	bytes  bool
	lt     functions.LinkType

	sp      *flowkey.Spec
	tab     table
	packets int // offsets of the scalar fields
	byteOff int
	keysOff int
	dropOff int
	noKey   int
	top     *sketch.TopK[flowkey.Key]
	entries []sketch.Entry[flowkey.Key]
	key     flowkey.Key
}

// NewCounter instantiates a counter.
func NewCounter(ctx *functions.Context) (*Counter, error) {
	m, err := counterState.NewMBuf(ctx.StateTarget(), ctx.Params)
	if err != nil {
		return nil, err
	}
	c := &Counter{m: m, window: measure.NewWindow(ctx.Params), bytes: measure.Bytes(ctx.Params),
		lt: ctx.LinkType, report: int(ctx.Params.Int("report"))}
	c.packets = functions.FieldOf(m, "packets").Offset
	c.byteOff = functions.FieldOf(m, "bytes").Offset
	c.keysOff = functions.FieldOf(m, "keys").Offset
	c.dropOff = functions.FieldOf(m, "dropped").Offset
	c.noKey = functions.FieldOf(m, "nokey").Offset
	if measure.Reports(ctx.Params) {
		c.out = measure.NewOut(ctx)
	}
	if ctx.Params.Has("key") {
		c.sp = measure.Spec(ctx.Params)
		if measure.SwitchHashed(ctx) {
			c.tab = newP4Table(c.sp, p4Size(ctx.Params), m.Uint64s(functions.FieldOf(m, "slots")))
		} else {
			var touched *measure.Touched
			if c.window.Interval > 0 {
				touched = measure.NewTouched(int(ctx.Params.Int("size")), ctx)
			}
			c.tab = newProbeTable(c.sp, uint32(ctx.Params.Int("size")), m.Uint64s(functions.FieldOf(m, "table")), touched)
		}
		if c.report > 0 {
			c.top = sketch.NewTopK[flowkey.Key](c.report)
			c.entries = make([]sketch.Entry[flowkey.Key], 0, c.report)
		}
	}
	return c, nil
}

// Process counts the batch and passes it on (a producer passes nothing:
// its output is its reports).
func (c *Counter) Process(b *buffers.Batch) {
	var pk, by uint64
	p := b.PBuf
	for _, e := range b.E[:b.N] {
		md := p.Meta(e.Slot)
		pk++
		by += uint64(md.WireLen)
		if c.sp != nil {
			c.count(p.Data(e.Slot), md)
		}
	}
	c.m.Add64(c.packets, pk)
	c.m.Add64(c.byteOff, by)
	if c.out.Out != nil {
		b.N = 0
	}
}

// count adds the packet to its key's entry.
func (c *Counter) count(pkt []byte, md *buffers.Meta) {
	if !c.sp.Extract(c.lt, pkt, &c.key) {
		c.m.Add64(c.noKey, 1)
		return
	}
	v := measure.ValueOf(md, c.bytes)
	value, claimed := c.tab.find(&c.key, true)
	if value == nil {
		c.m.Add64(c.dropOff, 1)
		return
	}
	if claimed {
		c.m.Add64(c.keysOff, 1)
	}
	atomic.AddUint64(value, v)
}

// Deadline implements functions.Clocked.
func (c *Counter) Deadline() int64 { return c.window.Deadline() }

// Tick implements functions.Clocked: the window closes (with its report)
// and the next starts empty.
func (c *Counter) Tick(now int64) {
	if start, closed := c.window.Advance(now); closed {
		c.emit(start)
		c.reset()
	}
}

// Flush implements functions.Flusher: the report of the last window.
func (c *Counter) Flush(int64) {
	if c.window.Started() {
		c.emit(c.window.Start)
	}
}

func (c *Counter) reset() {
	for _, off := range []int{c.packets, c.byteOff, c.keysOff, c.dropOff, c.noKey} {
		c.m.Store64(off, 0)
	}
	if c.tab != nil {
		c.tab.clear()
	}
}

func (c *Counter) emit(start int64) {
	if c.out.Out == nil {
		return
	}
	if c.sp == nil {
		c.out.Start(record.Report, start, c.out.ID)
		c.out.U64("packets", c.m.Load64(c.packets))
		c.out.U64("bytes", c.m.Load64(c.byteOff))
		c.out.Commit()
		c.out.Flush()
		return
	}
	c.top.Reset()
	c.tab.each(func(k *flowkey.Key, v uint64) { c.top.Offer(k, c.sp.Hash(k, 0), v) })
	c.entries = c.top.Append(c.entries[:0])
	for i := range c.entries {
		e := &c.entries[i]
		c.out.Start(record.Report, start, c.out.ID)
		c.out.Key(c.sp, &e.Key)
		c.out.U64("value", e.Estimate)
		c.out.U64("rank", uint64(i+1))
		c.out.Commit()
	}
	c.out.Flush()
}

// MBuf implements functions.Stateful.
func (c *Counter) MBuf() *buffers.MBuf { return c.m }

// Summary implements functions.Summarizer: the totals (and, keyed, the
// table's use) of the window filling.
func (c *Counter) Summary() map[string]any {
	s := map[string]any{"packets": c.m.Load64(c.packets), "bytes": c.m.Load64(c.byteOff)}
	if c.sp != nil {
		s["keys"] = c.m.Load64(c.keysOff)
		s["dropped"] = c.m.Load64(c.dropOff)
		s["nokey"] = c.m.Load64(c.noKey)
	}
	return s
}

// SetEmit implements functions.Producer.
func (c *Counter) SetEmit(f func(*buffers.Batch)) {
	if c.out.Out != nil {
		c.out.SetEmit(f)
	}
}

// Records implements functions.Producer.
func (c *Counter) Records() uint64 {
	if c.out.Out == nil {
		return 0
	}
	return c.out.Records()
}

// ReadNames implements functions.Readable.
func (c *Counter) ReadNames() []string { return counterReads(functions.Params{}) }

func counterReads(functions.Params) []string { return []string{"packets", "bytes", "value"} }

// Read implements functions.Readable: the window's packets or bytes, and
// value: the total that value= counts, or, keyed, the count of the
// packet's key.
func (c *Counter) Read(name string) (functions.Reader, error) {
	switch name {
	case "packets":
		return func(*buffers.PBuf, uint32) float64 { return float64(c.m.Load64(c.packets)) }, nil
	case "bytes":
		return func(*buffers.PBuf, uint32) float64 { return float64(c.m.Load64(c.byteOff)) }, nil
	case "value":
		if c.sp == nil {
			off := c.packets
			if c.bytes {
				off = c.byteOff
			}
			return func(*buffers.PBuf, uint32) float64 { return float64(c.m.Load64(off)) }, nil
		}
		get := keyedReader(c.tab, c.sp, c.lt)
		return func(p *buffers.PBuf, slot uint32) float64 { return float64(get(p, slot)) }, nil
	}
	return nil, fmt.Errorf("counter has no %q to read (it has packets, bytes, value)", name)
}

var (
	_ functions.Clocked  = (*Counter)(nil)
	_ functions.Flusher  = (*Counter)(nil)
	_ functions.Producer = (*Counter)(nil)
	_ functions.Readable = (*Counter)(nil)
)

// Handlers implements functions.Handlers: summary (the --json state), reset
// (the window's counts zeroed now, without a report) and, keyed, top K:
// the K keys with the largest values so far in the window.
func (c *Counter) Handlers() []functions.Handler {
	return []functions.Handler{
		{Name: "summary", Summary: "the state as --json shows it", Call: func(string) (any, error) { return c.Summary(), nil }},
		{Name: "reset", Summary: "zero the window's counts now (no report)", Call: func(string) (any, error) { c.reset(); return nil, nil }},
		{Name: "top", Summary: "top K: the K keys with the largest values so far in the window, largest first", Call: c.topHandler},
	}
}

func (c *Counter) topHandler(arg string) (any, error) {
	if c.sp == nil {
		return nil, errors.New("a counter without key= has no keys")
	}
	k, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || k < 1 || k > 1<<16 {
		return nil, fmt.Errorf("top takes a number of keys, 1 to 65536, not %q", arg)
	}
	top := sketch.NewTopK[flowkey.Key](k)
	c.tab.each(func(key *flowkey.Key, v uint64) { top.Offer(key, c.sp.Hash(key, 0), v) })
	var out []map[string]any
	for _, e := range top.Append(nil) {
		out = append(out, map[string]any{"key": json.RawMessage(c.sp.Format(&e.Key)), "value": e.Estimate})
	}
	return out, nil
}
