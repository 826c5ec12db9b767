package counters

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/flowkey"
	"github.com/ffpf-go/ffpf/functions/match"
	"github.com/ffpf-go/ffpf/functions/measure"
)

// A register is a cell, or a cell per key, that each packet reads and
// writes once, as a switch's stateful ALU does (a read-modify-write):
// set= computes the cell's new value from its old one (the word old) and
// the packet, if= decides whether it is written. It holds what a counter
// does not: MAFIA's Counter.set(EXPR) and its HashMap of timestamps
// (set=pkt.ts: a flow's last time; with if="old == 0": its first).

// registerNames are the bare words set= and if= may use.
var registerNames = []string{"old"}

var registerState = &functions.State{As: measure.SwitchLayout, Fields: []functions.StateField{
	{Name: "updates", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets whose update was written (if= held, set= had its fields)"},
	{Name: "missing", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets for which set= or if= read a field the packet lacks: the cell is left as it was"},
	{Name: "keys", Type: buffers.U64, Merge: functions.MergeShared, Summary: "keys stored (keyed)"},
	{Name: "dropped", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets whose key found no room in the table: not written (keyed)"},
	{Name: "nokey", Type: buffers.U64, Unit: "packets", Merge: functions.MergeSum,
		Summary: "packets without the layers the key needs: not written, old is 0 (keyed)"},
	{Name: "cell", Type: buffers.U64, Merge: functions.MergeShared, Summary: "the register (without key)"},
	{Name: "table", Type: buffers.U64, Merge: functions.MergeShared,
		LenOf: func(p functions.Params) int {
			if !p.Has("key") {
				return 1
			}
			return int(p.Int("size")) * entryWords(measure.Spec(p))
		},
		LenDoc:  "size×(key words+2)",
		Summary: "the hash table: per entry the key's words, its cell, and a used mark (keyed)",
		Targets: []functions.Target{functions.TargetUser}},
	{Name: "slots", Type: buffers.U64, Merge: functions.MergeShared,
		LenOf: func(p functions.Params) int {
			if !p.Has("key") {
				return 1
			}
			return p4Size(p) * entryWords(measure.Spec(p))
		},
		LenDoc:  "(key words+2)×size (size rounded up to a power of two)",
		Summary: "the switch's table, a column per register: the key's words, the cells, the used marks (keyed)",
		Targets: []functions.Target{functions.TargetP4}},
}}

func init() {
	functions.Register(&functions.Class{
		Name:      "register",
		Summary:   "a cell, or one per key, that each packet reads and rewrites by an expression (a switch's read-modify-write; MAFIA's Counter.set and HashMap of timestamps)",
		MinInputs: 1, MaxInputs: -1,
		Params: []functions.Param{
			{Name: "set", Type: functions.String, Required: true,
				Summary: "the cell's new value: an expression of match's language over old (the cell before the packet), the packet's fields, annotations and named state",
				Check:   func(v functions.Value) error { return match.CheckExpr(v.Str, false, registerNames...) }},
			{Name: "if", Type: functions.String,
				Summary: "write the cell only for the packets for which this condition (over old and the packet) holds",
				Check:   func(v functions.Value) error { return match.CheckExpr(v.Str, true, registerNames...) }},
			{Name: "key", Type: functions.String, Summary: "a cell per key: comma-separated key fields (srcip/24, dstport, 5tuple, …); unset: one cell",
				Check: func(v functions.Value) error { _, err := flowkey.Parse(v.Str); return err }},
			{Name: "size", Type: functions.Int, Default: "64K", With: "key", Summary: "keys the table holds (keyed)",
				Check: func(v functions.Value) error {
					if v.Int < 1 || v.Int > 1<<24 {
						return errors.New("size is 1 to 16M keys")
					}
					return nil
				}},
			keyedHash,
		},
		State:     registerState,
		Annotates: 1,
		Targets:   []functions.Target{functions.TargetUser, functions.TargetP4},
		Code:      functions.P4Code(p4RegisterCode),
		Readable:  func(functions.Params) []string { return []string{"value", "old"} },
		Reads: func(p functions.Params) ([]string, error) {
			refs, err := match.Refs(p.Str("set"), registerNames...)
			if err != nil || !p.Has("if") {
				return refs, err
			}
			more, err := match.Refs(p.Str("if"), registerNames...)
			return append(refs, more...), err
		},
		Runs: func(t functions.Target, p functions.Params) error {
			if err := measure.SwitchHashRuns(t, p, nil); err != nil {
				return err
			}
			return match.UserRuns(t, p, registerNames, "set", "if")
		},
		Validate: measure.CheckKeyedLinkType,
		New:      func(ctx *functions.Context) (functions.Function, error) { return NewRegister(ctx) },
	})
}

// Register is the register class.
type Register struct {
	m    *buffers.MBuf
	set  *match.Expr
	cond *match.Expr // nil: always
	at   int         // the annotation word of old
	lt   functions.LinkType

	sp                                     *flowkey.Spec
	tab                                    table
	key                                    flowkey.Key
	cell                                   *uint64 // unkeyed
	updates, missing, keys, dropped, noKey int     // offsets
	switchClock                            bool    // pkt.ts is the switch's (the Go half of one on a switch)
}

// NewRegister instantiates a register.
func NewRegister(ctx *functions.Context) (*Register, error) {
	m, err := registerState.NewMBuf(ctx.StateTarget(), ctx.Params)
	if err != nil {
		return nil, err
	}
	r := &Register{m: m, at: ctx.Ann, lt: ctx.LinkType}
	names := registerNames
	if ctx.Target == functions.TargetP4 {
		// The Go half of a register on a switch computes with the
		// switch's clock (µs, 48 bits, as bmv2 keeps it) where set= and
		// if= read pkt.ts.
		names, r.switchClock = []string{"old", "pkt.ts"}, true
	}
	if r.set, err = match.NewExpr(ctx, ctx.Params.Str("set"), false, names...); err != nil {
		return nil, err
	}
	if ctx.Params.Has("if") {
		if r.cond, err = match.NewExpr(ctx, ctx.Params.Str("if"), true, names...); err != nil {
			return nil, err
		}
	}
	for name, off := range map[string]*int{"updates": &r.updates, "missing": &r.missing, "keys": &r.keys,
		"dropped": &r.dropped, "nokey": &r.noKey} {
		*off = functions.FieldOf(m, name).Offset
	}
	r.cell = &m.Uint64s(functions.FieldOf(m, "cell"))[0]
	if ctx.Params.Has("key") {
		r.sp = measure.Spec(ctx.Params)
		if measure.SwitchHashed(ctx) {
			r.tab = newP4Table(r.sp, p4Size(ctx.Params), m.Uint64s(functions.FieldOf(m, "slots")))
		} else {
			r.tab = newProbeTable(r.sp, uint32(ctx.Params.Int("size")), m.Uint64s(functions.FieldOf(m, "table")), nil)
		}
	}
	return r, nil
}

// Process reads and rewrites each packet's cell, writes what it read into
// the packet's annotation (old), and passes every packet on.
func (r *Register) Process(b *buffers.Batch) {
	p := b.PBuf
	var upd, miss, keys, drop, nokey uint64
	for _, e := range b.E[:b.N] {
		var cell *uint64
		if r.sp == nil {
			cell = r.cell
		} else if !r.sp.Extract(r.lt, p.Data(e.Slot), &r.key) {
			nokey++
			p.Ann(e.Slot)[r.at] = 0
			continue
		} else {
			cell, _ = r.tab.find(&r.key, false)
		}
		var old uint64
		if cell != nil {
			old = atomic.LoadUint64(cell)
		}
		p.Ann(e.Slot)[r.at] = old
		r.set.Set(0, int64(old))
		if r.switchClock {
			ts := switchNanos(p.Meta(e.Slot).Timestamp)
			r.set.Set(1, ts)
			if r.cond != nil {
				r.cond.Set(1, ts)
			}
		}
		if r.cond != nil {
			r.cond.Set(0, int64(old))
			if !r.cond.Bool(p, e.Slot) {
				continue
			}
		}
		v, ok := r.set.Int(p, e.Slot)
		if !ok {
			miss++
			continue
		}
		if cell == nil {
			var claimed bool
			if cell, claimed = r.tab.find(&r.key, true); cell == nil {
				drop++
				continue
			} else if claimed {
				keys++
			}
		}
		atomic.StoreUint64(cell, uint64(v))
		upd++
	}
	r.add(r.updates, upd)
	r.add(r.missing, miss)
	r.add(r.keys, keys)
	r.add(r.dropped, drop)
	r.add(r.noKey, nokey)
}

func (r *Register) add(off int, n uint64) {
	if n > 0 {
		r.m.Add64(off, n)
	}
}

// switchNanos is a packet's time on a switch's clock, in ns: the µs of
// ingress_global_timestamp (48 bits, as bmv2 keeps it) times 1000.
func switchNanos(ts int64) int64 { return (ts / 1000 & (1<<48 - 1)) * 1000 }

// MBuf implements functions.Stateful.
func (r *Register) MBuf() *buffers.MBuf { return r.m }

// Summary implements functions.Summarizer: the counts, and the cell
// without a key (a keyed table is left out).
func (r *Register) Summary() map[string]any {
	s := map[string]any{"updates": r.m.Load64(r.updates), "missing": r.m.Load64(r.missing)}
	if r.sp == nil {
		s["cell"] = atomic.LoadUint64(r.cell)
	} else {
		s["keys"], s["dropped"], s["nokey"] = r.m.Load64(r.keys), r.m.Load64(r.dropped), r.m.Load64(r.noKey)
	}
	return s
}

// Each calls f with every key the table holds and its cell (keyed), for
// readers of the whole table (tests, the controller's reports).
func (r *Register) Each(f func(k *flowkey.Key, v uint64)) {
	if r.tab != nil {
		r.tab.each(f)
	}
}

// Spec is the register's key (nil without one).
func (r *Register) Spec() *flowkey.Spec { return r.sp }

// ReadNames implements functions.Readable.
func (r *Register) ReadNames() []string { return []string{"value", "old"} }

// ReadInt implements functions.IntReadable: value, the packet's cell as
// it is (0 for a key the table does not hold), and old, the cell as the
// packet found it.
func (r *Register) ReadInt(name string) (functions.IntReader, error) {
	switch name {
	case "old":
		at := r.at
		return func(p *buffers.PBuf, slot uint32) int64 { return int64(p.Ann(slot)[at]) }, nil
	case "value":
		if r.sp == nil {
			return func(*buffers.PBuf, uint32) int64 { return int64(atomic.LoadUint64(r.cell)) }, nil
		}
		get := keyedReader(r.tab, r.sp, r.lt)
		return func(p *buffers.PBuf, slot uint32) int64 { return int64(get(p, slot)) }, nil
	}
	return nil, fmt.Errorf("register has no %q to read (it has value, old)", name)
}

// Read implements functions.Readable.
func (r *Register) Read(name string) (functions.Reader, error) {
	return functions.ReadAsFloat(r, name)
}

var (
	_ functions.Readable    = (*Register)(nil)
	_ functions.IntReadable = (*Register)(nil)
	_ functions.Summarizer  = (*Register)(nil)
)
