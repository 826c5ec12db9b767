package sketch

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/measure"
	"github.com/ffpf-go/ffpf/functions/record"
)

// The classes: cms, hll, pcsa and bloom. Each updates its structure in its
// MBuf by the hash of each packet's key (flowkey); with window= it closes a
// window on the packet clock (reporting it, with report=) and starts the
// next empty. Each is a flowkey.Keyed: a flowspace that runs several keyed
// alike on a batch hashes each packet once for all of them
// (ProcessHashes); Process, on its own, hashes the batch itself first.

func init() {
	functions.Register(cmsClass)
	functions.Register(hllClass)
	functions.Register(pcsaClass)
	functions.Register(bloomClass)
}

// seed is the hash seed of every structure: one, so that two functions
// keyed alike agree, and the eBPF side uses the same.
const seed = 0

func intRange(name string, lo, hi int64) func(functions.Value) error {
	return func(v functions.Value) error {
		if v.Int < lo || v.Int > hi {
			return fmt.Errorf("%s is %d to %d", name, lo, hi)
		}
		return nil
	}
}

var nokeyField = functions.StateField{Name: "nokey", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
	Summary: "packets without the layers the key needs (not counted in the structure)"}

// keyed is what the classes share: the key, the window and the report.
type keyed struct {
	m      *buffers.MBuf
	sp     *flowkey.Spec
	lt     functions.LinkType
	window measure.Window
	out    measure.Out
	report int
	nokey  int // offset
	key    flowkey.Key
	hs     *flowkey.Hashes // Process's own, when no flowspace shares one
	// switchHashed: it positions keys as a switch does (p4.go), by
	// hashes no flowspace shares.
	switchHashed bool
}

func newKeyed(ctx *functions.Context, st *functions.State) (keyed, error) {
	m, err := st.NewMBuf(ctx.StateTarget(), ctx.Params)
	if err != nil {
		return keyed{}, err
	}
	sp := measure.Spec(ctx.Params)
	k := keyed{m: m, sp: sp, lt: ctx.LinkType, window: measure.NewWindow(ctx.Params),
		report: int(ctx.Params.Int("report")), nokey: functions.FieldOf(m, "nokey").Offset,
		hs: flowkey.NewHashes(sp, ctx.LinkType, seed), switchHashed: measure.SwitchHashed(ctx)}
	if measure.Reports(ctx.Params) {
		k.out = measure.NewOut(ctx)
	}
	return k, nil
}

// KeyHash implements flowkey.Keyed: none when the function positions
// keys as a switch does, so that no flowspace hashes its packets for it.
func (k *keyed) KeyHash() (*flowkey.Spec, functions.LinkType, uint64) {
	if k.switchHashed {
		return nil, k.lt, seed
	}
	return k.sp, k.lt, seed
}

// ownHashes hashes the packets of b for a Process called on its own: the
// batch's slots may hold other packets than at the last call.
func (k *keyed) ownHashes(b *buffers.Batch) *flowkey.Hashes {
	k.hs.Forget()
	k.hs.Fill(b)
	return k.hs
}

// noKey counts n packets that lack the key's layers.
func (k *keyed) noKey(n uint64) {
	if n > 0 {
		k.m.Add64(k.nokey, n)
	}
}

// MBuf implements functions.Stateful.
func (k *keyed) MBuf() *buffers.MBuf { return k.m }

// Deadline implements functions.Clocked.
func (k *keyed) Deadline() int64 { return k.window.Deadline() }

// SetEmit implements functions.Producer.
func (k *keyed) SetEmit(f func(*buffers.Batch)) {
	if k.out.Out != nil {
		k.out.SetEmit(f)
	}
}

// Records implements functions.Producer.
func (k *keyed) Records() uint64 {
	if k.out.Out == nil {
		return 0
	}
	return k.out.Records()
}

// pass ends Process: a producer passes no packet (its output is reports).
func (k *keyed) pass(b *buffers.Batch) {
	if k.out.Out != nil {
		b.N = 0
	}
}

// tick closes the window due at now: report(start) then reset.
func (k *keyed) tick(now int64, report func(int64), reset func()) {
	if start, closed := k.window.Advance(now); closed {
		if k.out.Out != nil {
			report(start)
		}
		reset()
		k.m.Store64(k.nokey, 0)
	}
}

// flush reports the last window at the end of the input.
func (k *keyed) flush(report func(int64)) {
	if k.out.Out != nil && k.window.Started() {
		report(k.window.Start)
	}
}

// summary reports one number, a cardinality estimate, per window.
func (k *keyed) summary(start int64, est float64) {
	k.out.Start(record.Report, start, k.out.ID)
	k.out.F64("estimate", est)
	k.out.Commit()
	k.out.Flush()
}

// cachedEstimate keeps an estimator's last value, recomputed only after
// the structure changed: an estimate scans every register, too much per
// packet for a reader.
type cachedEstimate struct {
	dirty atomic.Bool
	bits  atomic.Uint64
}

func (c *cachedEstimate) get(f func() float64) float64 {
	if c.dirty.Swap(false) {
		c.bits.Store(math.Float64bits(f()))
	}
	return math.Float64frombits(c.bits.Load())
}

var errUnknownRead = errors.New("no such value")

func readErr(class, name string, names []string) error {
	return fmt.Errorf("%s has no %q to read (it has %v): %w", class, name, names, errUnknownRead)
}

// handlers are the handlers every sketch class exposes: summary (its
// --json state) and reset (the window's state zeroed now, without a
// report).
func handlers(summary func() map[string]any, reset func()) []functions.Handler {
	return []functions.Handler{
		{Name: "summary", Summary: "the state as --json shows it", Call: func(string) (any, error) { return summary(), nil }},
		{Name: "reset", Summary: "zero the window's state now (no report)", Call: func(string) (any, error) { reset(); return nil, nil }},
	}
}

// Handlers implements functions.Handlers.
func (c *CMS) Handlers() []functions.Handler {
	return append(handlers(c.Summary, c.resetAll), functions.Handler{Name: "top",
		Summary: "the keys with the largest estimates so far in the window (report=K tracks them), largest first",
		Call: func(string) (any, error) {
			if c.top == nil {
				return nil, errors.New("cms tracks its heaviest keys only with report=K")
			}
			var out []map[string]any
			for _, e := range c.top.Append(nil) {
				out = append(out, map[string]any{"key": json.RawMessage(c.sp.Format(&e.Key)), "estimate": e.Estimate})
			}
			return out, nil
		}})
}

func (c *CMS) resetAll() { c.reset(); c.m.Store64(c.nokey, 0) }

// Handlers implements functions.Handlers.
func (f *HLLFunc) Handlers() []functions.Handler {
	return handlers(f.Summary, func() { f.reset(); f.m.Store64(f.nokey, 0) })
}

// Handlers implements functions.Handlers.
func (f *PCSAFunc) Handlers() []functions.Handler {
	return handlers(f.Summary, func() { f.reset(); f.m.Store64(f.nokey, 0) })
}

// Handlers implements functions.Handlers.
func (f *BloomFunc) Handlers() []functions.Handler {
	return handlers(f.Summary, func() { f.reset(); f.m.Store64(f.nokey, 0) })
}
